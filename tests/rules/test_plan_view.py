"""The plan view (what validate and resolve judge) is the view the policy pack builds from what the real
program declares, resource by resource, so the two cannot drift apart unseen.

Each case plans a profile offline (the recorded program), builds the pack's view from the resources
the runner gets (policies/_view.full_view) and the rule book's from the Plan (rules.plan_view), and
compares them after replacing the deploy-time stand-ins (zone, bucket name, job-settings digest,
instance and deployment-set ids, custom policy names) on both sides.
"""

from __future__ import annotations

import json
import pathlib
import re

import pytest

from policies._view import full_view
from policies.runner import stack_resources
from trainstack.plan import Plan
from trainstack.preview import planner
from trainstack.preview.sources import Source, find_project
from trainstack.rules.plan_view import DEPLOY_ZONE, plan_view

ROOT = pathlib.Path(__file__).resolve().parents[2]
SAMPLES = sorted([*ROOT.glob("stacks/profiles/*.yaml"), *ROOT.glob("tests/preview/fixtures/*.yaml")])
BASE = {"name": "view", "region": "cn-shenzhen", "model": {"preset": "qwen2.5-7b"},
        "training": {"method": "lora", "precision": "bf16", "gradient_checkpointing": True, "tokens": 1e8},
        "job": {"command": "torchrun train.py"}}
#: plans the samples do not reach: spot on each checkpoint backend, a 1-node pool, egress and SSH,
#: secrets and OSS URIs in the RAM documents, unprotected checkpoints, a DLC quota with a price
VARIANTS = {
    "spot-essd": {"resources": {"target": "ecs", "spot": "require"}, "storage": {"checkpoint": "essd"}},
    "spot-cpfs": {"resources": {"target": "ecs", "spot": "allow"}, "storage": {"checkpoint": "cpfs"}},
    "pool-1": {"resources": {"target": "ecs", "spot": "allow", "self_healing": True}},
    "egress-ssh": {"resources": {"target": "ecs"}, "network": {"internet_egress": True},
                   "access": {"ssh_cidrs": ["203.0.113.0/24", "198.51.100.7/32"]}},
    "uris-secrets": {"resources": {"target": "ecs"},
                     "storage": {"dataset_uri": "oss://team-data/ds/", "retain_on_destroy": False},
                     "job": {"command": "python train.py", "code_uri": "oss://team-code/c.tar.gz",
                             "secrets": {"HF_TOKEN": {"kms_secret": "team-hf"}}}},
    "dlc-quota": {"region": "cn-wulanchabu", "price_book": "prices.yaml",
                  "resources": {"target": "dlc", "gpus": 16, "gpu_models": ["A100-80G"]},
                  "dlc": {"workspace_id": "ws-1", "resource_id": "quota-abc"},
                  "job": {"command": "python train.py", "image": "registry-vpc.cn-wulanchabu.aliyuncs.com/t/x:v1"}},
}
PRICES = ('prices:\n  - {region: cn-wulanchabu, resource_id: quota-abc, on_demand_cny_per_hour: 20.0, '
          'as_of: "2026-01-01", source: t}\n')


def _views(path: pathlib.Path):
    captured: dict = {}

    def runner(resources, config):
        captured["resources"] = resources
        return []

    doc = planner.plan_source(Source("profile", str(path), path), find_project(), policy_runner=runner)
    plan = Plan.model_validate(doc["plan"])
    return plan, doc["exports"], plan_view(plan), full_view(stack_resources(captured["resources"]))


def _normal(view, plan: Plan, exports: dict) -> dict:
    """The view as sorted JSON rows per part, deploy-time stand-ins replaced."""
    text = json.dumps(view.model_dump(mode="json")).replace(DEPLOY_ZONE, exports.get("zone") or "")
    for bucket in {plan.storage.oss.bucket if plan.storage.oss else None, exports.get("oss_bucket")} - {None}:
        text = text.replace(bucket, "BUCKET")
    d = json.loads(text)
    for n in d["nodes"]:
        n.pop("urn")
    for t in d["tagged"]:
        if "trainstack:job-settings" in t["tags"]:
            t["tags"]["trainstack:job-settings"] = "DIGEST"
    for a in d["ram_attachments"]:
        a["policy_name"] = None if a["policy_type"] == "Custom" else a["policy_name"]
    for p in d["ram_policies"]:
        for s in p["statements"]:
            s["resources"] = [re.sub(r"(instance|scalinggroup)/.*$", r"\1/ID", r) for r in s["resources"]]
    for i in d["instances"]:
        i["deployment_set"] = "SET" if i["deployment_set"] else None
    return {k: sorted(json.dumps(x, sort_keys=True) for x in v) if isinstance(v, list) else v for k, v in d.items()}


def _assert_same(path: pathlib.Path) -> Plan:
    plan, exports, ours, packs = _views(path)
    a, b = _normal(ours, plan, exports), _normal(packs, plan, exports)
    for part in a:
        assert a[part] == b[part], part
    return plan


@pytest.mark.parametrize("profile", SAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_plan_view_is_what_the_program_declares(profile, monkeypatch):
    monkeypatch.chdir(ROOT)
    _assert_same(profile)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_variants_the_samples_do_not_reach(variant, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    (tmp_path / "prices.yaml").write_text(PRICES)
    doc = {**BASE, **VARIANTS[variant], "name": variant}
    path = tmp_path / f"{variant}.yaml"
    path.write_text(json.dumps(doc))
    plan = _assert_same(path)
    view = plan_view(plan)
    assert view.nodes and all(n.training for n in view.nodes)
    if variant == "dlc-quota":  # the job carries the planned price per pod (per-GPU price x 8 GPUs)
        (job,) = view.nodes
        assert job.planned_price is not None and job.planned_price.cny_per_hour == 20.0 * job.gpus_per_pod
