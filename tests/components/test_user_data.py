"""The user-data bound (issue 30 item 6): every node and every scaling configuration the program
declares, for every ECS sample stack and the largest plan the bootstrap serves, carries at most
USER_DATA_BOUND bytes of user data (half of ECS's 32 KiB), and only the files that boot the node:
the node programs travel through the stack bucket, so later node-side work does not grow it."""

from __future__ import annotations

import base64
import io
import tarfile
from pathlib import Path

import pytest
import yaml
from plan_factory import multi_node_erdma_plan, resolved, spot_pool_plan

from trainstack.bootstrap import USER_DATA_LIMIT
from trainstack.bootstrap.cloud_config import BOOT_ARCHIVE
from trainstack.bootstrap.programs import BOOT_PROGRAMS, LIB

#: The budget user data lives in; ECS accepts USER_DATA_LIMIT (32 KiB, data/service_limits.yaml).
USER_DATA_BOUND = 16 * 1024
ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted(p.stem for p in (ROOT / "stacks" / "profiles").glob("*.yaml"))
#: What user data may hold, and nothing else: the node's own settings, the units, the boot script and
#: the boot programs (what installs the others, and stops billing when that fails).
UNITS = {f"/etc/systemd/system/trainstack-{u}.service"
         for u in ("programs", "setup", "setup-failed", "job", "ckpt-sync", "spot-watcher", "heartbeat")}
ALLOWED = ({"/etc/trainstack/node.env", "/etc/trainstack/nccl.env", "/etc/profile.d/trainstack-nccl.sh",
            "/usr/local/sbin/trainstack-boot"} | UNITS | {f"{LIB}/{name}" for name in BOOT_PROGRAMS})


def files_in(user_data: str) -> set[str]:
    doc = yaml.safe_load(user_data)
    out = set()
    for entry in doc["write_files"]:
        if entry["path"] == BOOT_ARCHIVE:
            with tarfile.open(fileobj=io.BytesIO(base64.b64decode(entry["content"])), mode="r:gz") as tar:
                out |= {"/" + name for name in tar.getnames()}
        else:
            out.add(entry["path"])
    return out


def user_data_of(engine) -> dict[str, str]:
    """resource name -> decoded user data of every node and scaling configuration declared."""
    found = engine.of_type("ecs/instance:Instance") + engine.of_type("kind:ess-scaling-configuration")
    assert found
    return {r.name: base64.b64decode(r.inputs["userData"]).decode() for r in found}


def stress_plan():
    """The largest plan the bootstrap serves: 512 spot nodes on eRDMA, code and checkpoints on OSS."""
    return multi_node_erdma_plan(nodes=512, profile={
        "resources": {"spot": "require"}, "storage": {"checkpoint": "oss"},
        "job": {"command": "torchrun train.py --zero 3 --config conf/70b.yaml", "max_runtime_hours": 24,
                "env": {"WANDB_MODE": "offline", "HF_HOME": "/mnt/data/hf"}}})


def ecs_plans():
    plans = {name: resolved(name) for name in SAMPLES}
    plans = {name: plan for name, plan in plans.items() if plan.target == "ecs"}
    assert {"llama3-8b-lora", "llama3-70b-full", "qwen-7b-spot", "llama3-70b-spot-heal"} <= set(plans)
    return {**plans, "one-node-spot-pool": spot_pool_plan(), "stress-512-nodes": stress_plan()}


@pytest.mark.parametrize("name, plan", sorted(ecs_plans().items()), ids=lambda v: v if isinstance(v, str) else "")
def test_every_nodes_user_data_is_within_the_bound_and_holds_only_what_boots_it(engine, name, plan):
    engine.declare(plan)
    for resource, text in user_data_of(engine).items():
        size = len(text.encode())
        assert size <= USER_DATA_BOUND < USER_DATA_LIMIT, f"{name} {resource}: {size} bytes of user data"
        files = files_in(text)
        assert files <= ALLOWED, f"{name} {resource}: {sorted(files - ALLOWED)} do not boot the node"
        assert {"/etc/trainstack/node.env", "/usr/local/sbin/trainstack-boot"} <= files
        assert {f"{LIB}/{p}" for p in BOOT_PROGRAMS} <= files
