"""Plans for tests of code that only reads a Plan (components, bootstrap, policies, DLC).

Every plan here is the resolver's own output (through the rule book, ``trainstack.rules.planned``)
for a sample stack's profile, optionally with profile changes (``profile={...}``, deep-merged into
the sample profile), so tests see the states production reaches. ``**over`` edits the resolved Plan
by hand (``hand_edited``): only for tests of how components react to a plan the resolver would not
make; such a test says so.
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any, Optional

from trainstack.layout import ERDMA_NCCL_ENV
from trainstack.plan import Plan
from trainstack.profile import TrainingProfile, parse_profile, read_yaml_document
from trainstack.rules import planned

PROFILES = Path(__file__).resolve().parents[1] / "stacks" / "profiles"
ERDMA_NCCL = dict(ERDMA_NCCL_ENV)


def merged(base: dict, changes: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


@functools.lru_cache(maxsize=64)
def _resolved(stack: str, changes_json: str) -> Plan:
    path = PROFILES / f"{stack}.yaml"
    doc = merged(read_yaml_document(path), json.loads(changes_json))
    return planned(parse_profile(doc, file=str(path)), file=str(path))


def profile_for(stack: str, profile: Optional[dict] = None) -> TrainingProfile:
    """The sample stack's profile with ``profile`` changes (what :func:`resolved` plans)."""
    path = PROFILES / f"{stack}.yaml"
    return parse_profile(merged(read_yaml_document(path), profile or {}), file=str(path))


def resolved(stack: str, profile: Optional[dict] = None) -> Plan:
    """The checked Plan of sample stack ``stack`` with ``profile`` changes."""
    return _resolved(stack, json.dumps(profile or {}, sort_keys=True))


def hand_edited(plan: Plan, **over: Any) -> Plan:
    """``plan`` with fields replaced, validated again as a Plan (not by the rule book)."""
    return Plan(**{**dict(plan), **over}) if over else plan


def single_gpu_lora_plan(profile: Optional[dict] = None, **over: Any) -> Plan:
    """The default sample: Llama-3-8B LoRA on one A10 (gn7i), on demand, OSS checkpoints."""
    return hand_edited(resolved("llama3-8b-lora", profile), **over)


def multi_node_erdma_plan(nodes: int = 3, profile: Optional[dict] = None, **over: Any) -> Plan:
    """Llama-3-70B full fine-tune on ``nodes`` eRDMA nodes of 8 A100-80G (ZeRO-3, CPFS checkpoints)."""
    changes = merged({"resources": {"gpus": 8 * nodes, "max_nodes": max(8, nodes), "deadline_hours": None}},
                     profile or {})
    return hand_edited(resolved("llama3-70b-full", changes), **over)


def spot_plan(profile: Optional[dict] = None, **over: Any) -> Plan:
    """Qwen2.5-7B full fine-tune on one 4-GPU A100-80G spot node, OSS checkpoints."""
    return hand_edited(resolved("qwen-7b-spot", profile), **over)


def spot_pool_plan(profile: Optional[dict] = None, **over: Any) -> Plan:
    """``spot_plan`` with a self-healing spot pool (profile ``resources.self_healing: true``)."""
    return hand_edited(resolved("qwen-7b-spot", merged({"resources": {"self_healing": True}}, profile or {})),
                       **over)


def dlc_plan(profile: Optional[dict] = None, **over: Any) -> Plan:
    """Qwen2.5-7B LoRA as a PAI-DLC job on public resources (team image)."""
    return hand_edited(resolved("qwen-7b-dlc", profile), **over)


#: A 32-GPU full fine-tune on a general-computing quota of ebmgn7ex nodes (4 pods x 8 A100-80G, eRDMA).
QUOTA_JOB = {"resources": {"gpus": 32, "max_nodes": 8},
             "dlc": {"workspace_id": "ws-123", "resource_id": "quotaabc123", "quota_spec": "ecs.ebmgn7ex.32xlarge"},
             "job": {"env": {"WANDB_PROJECT": "llama3"}, "command": "torchrun --nnodes 4 --nproc-per-node 8 train.py"},
             "training": {"method": "full", "precision": "bf16-mixed", "zero_stage": 3, "lora": None}}


def dlc_quota_plan(profile: Optional[dict] = None, **over: Any) -> Plan:
    """``dlc_plan`` as a quota job: 4 pods x 8 A100-80G on ``ecs.ebmgn7ex.32xlarge`` nodes, RDMA, the
    pod CPU and memory the GPU share of the node (the resolver's defaults)."""
    return hand_edited(resolved("qwen-7b-dlc", merged(QUOTA_JOB, profile or {})), **over)
