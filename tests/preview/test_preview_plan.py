"""`trainstack plan` end to end on the real Pulumi program and the real resolver.

These tests pin the engine, planner, policy run and rendering on the sample stacks; the Plans they
compare with come from tests/plan_factory.py, which resolves the same profiles.
"""

from __future__ import annotations

import contextlib
import json
import pathlib

import pytest

import plan_factory as F
import trainstack.placement as placement
import trainstack.preview.planner as planner
from trainstack.cli import main
from trainstack.errors import InfeasibleError
from trainstack.plan import PLAN_SCHEMA_VERSION
from trainstack.preview.planner import plan_source
from trainstack.preview.render import render
from trainstack.preview.sources import Project, Source, find_project
from trainstack.secrets import REDACTED

ROOT = pathlib.Path(__file__).resolve().parents[2]
INSTANCE = "alicloud:ecs/instance:Instance"
PLANS = {"llama3-8b-lora": F.single_gpu_lora_plan, "qwen-7b-dlc": F.dlc_plan, "qwen-7b-spot": F.spot_plan}


@pytest.fixture
def factory_plans(monkeypatch):
    monkeypatch.chdir(ROOT)


@pytest.fixture
def project() -> Project:
    return find_project(ROOT)


def plan_stack(project, stack):
    return plan_source(Source("stack", stack, project.stack_file(stack), stack=stack), project)


def of_type(doc, type_):
    return [r for r in doc["resources"] if r["type"] == type_]


def test_plan_document_holds_plan_resources_policy_and_exports(factory_plans, project):
    doc = plan_stack(project, "llama3-8b-lora")
    assert doc["schema_version"] == PLAN_SCHEMA_VERSION == 3 and doc["kind"] == "trainstack-plan"
    assert doc["plan"] == F.single_gpu_lora_plan().model_dump(mode="json")
    assert doc["stack"] == "llama3-8b-lora" and doc["source"]["path"] == "stacks/Pulumi.llama3-8b-lora.yaml"
    types = {r["type"] for r in doc["resources"]}
    assert {"alicloud:vpc/network:Network", "alicloud:vpc/switch:Switch", "alicloud:ecs/securityGroup:SecurityGroup",
            INSTANCE, "alicloud:oss/bucket:Bucket", "trainstack:index:TrainingStack"} <= types
    (node,) = of_type(doc, INSTANCE)
    assert node["parent"] == "llama3-8b-lora-cluster" and node["inputs"]["instanceType"] == "ecs.gn7i-c8g1.2xlarge"
    assert node["inputs"]["tags"]["trainstack:role"] == "training"
    assert node["inputs"]["tags"]["trainstack:zone"] == doc["plan"]["zone"]
    assert node["inputs"]["userData"].endswith(")") and "sha256:" in node["inputs"]["userData"]  # shortened
    (bucket,) = of_type(doc, "alicloud:oss/bucket:Bucket")
    assert bucket["protect"] and bucket["retain_on_delete"]
    assert doc["exports"]["instance_type"] == "ecs.gn7i-c8g1.2xlarge"
    assert doc["exports"]["node_private_ips"] == ["10.0.0.10"]
    summary = {k: v for k, v in F.single_gpu_lora_plan().summary().items() if v is not None}  # Pulumi drops None
    assert doc["exports"]["plan_summary"] == summary
    assert doc["policy"] == []
    plan = F.single_gpu_lora_plan()
    assert doc["cost"]["on_demand"]["total_cny"] == plan.total_cost_cny
    assert doc["cost"]["spot"]["compute_hourly_cny"] == plan.estimate.spot_hourly_cny
    # all-in: the other pricing keeps the plan's storage and network lines
    assert doc["cost"]["spot"]["hourly_cny"] == round(plan.estimate.spot_hourly_cny + plan.cost.other_hourly_cny, 4)
    assert doc["cost"]["breakdown"] == [i.model_dump(mode="json") for i in plan.cost.items]
    assert (doc["cost"]["hourly_cny"], doc["cost"]["total_cny"]) == (plan.hourly_cost_cny, plan.total_cost_cny)
    assert doc["cost"]["compute_total_cny"] == plan.cost.compute_total_cny < plan.total_cost_cny
    assert any("m-offline-preview" in n for n in doc["notes"])
    json.dumps(doc)  # plain JSON all the way down


def test_resources_come_parents_first_in_a_stable_order(factory_plans, project):
    a, b = plan_stack(project, "llama3-8b-lora"), plan_stack(project, "llama3-8b-lora")
    assert a == b
    seen = set()
    for r in a["resources"]:
        assert r["parent_urn"] is None or r["parent_urn"] in seen
        seen.add(r["urn"])


def test_dlc_plan_shows_the_request_body_and_mandatory_verdicts(factory_plans, project):
    doc = plan_stack(project, "qwen-7b-dlc")
    assert of_type(doc, INSTANCE) == []
    body = doc["dlc_request"]["body"]
    plan = F.dlc_plan()
    assert body["JobSpecs"][0]["PodCount"] == plan.dlc.pod_count and body["JobSpecs"][0]["EcsSpec"] == plan.dlc.ecs_spec
    assert body["UserVpc"]["VpcId"].startswith("vpc-offline")
    assert all(v["level"] != "mandatory" for v in doc["policy"])  # the resolver's plan passes the pack


def test_several_plans_in_one_process_do_not_leak(factory_plans, project):
    first = plan_stack(project, "llama3-8b-lora")
    dlc = plan_stack(project, "qwen-7b-dlc")
    spot = plan_stack(project, "qwen-7b-spot")
    again = plan_stack(project, "llama3-8b-lora")
    assert again == first
    assert not any("qwen" in r["name"] for r in first["resources"])
    assert not any("llama3" in r["name"] for r in dlc["resources"] + spot["resources"])
    (node,) = of_type(spot, INSTANCE)
    limit = F.spot_plan().spot_price_limit
    assert node["inputs"]["spotStrategy"] == "SpotWithPriceLimit" and node["inputs"]["spotPriceLimit"] == limit


def test_text_and_markdown_show_summary_tree_policies_and_topology(factory_plans, project):
    doc = plan_stack(project, "qwen-7b-spot")
    limit = F.spot_plan().spot_price_limit
    text = render(doc, "text")
    for expected in ("instance type  ecs.gn7e-c16g1.16xlarge (A100-80G)", f"pricing        spot (price limit {limit} CNY/h)",
                     "Resources (", "└─ trainstack:index:TrainingStack  qwen-7b-spot", "Topology", "VPC "):
        assert expected in text
    md = render(doc, "markdown")
    assert md.startswith("## trainstack plan: `qwen-7b-spot`")
    assert "```mermaid\nflowchart LR\n" in md and "vswitch0 --> cluster0" in md
    assert f"subgraph cluster0[\"1 x ecs.gn7e-c16g1.16xlarge<br/>spot ≤ {limit} CNY/h\"]" in md
    assert f"| pricing | spot (price limit {limit} CNY/h) |" in md


def test_cli_exits_4_on_a_mandatory_violation_and_still_prints(factory_plans, capsys, tmp_path):
    config = tmp_path / "policy.json"  # a team's budget, stricter than the profile's
    config.write_text('{"gpu-hourly-budget": {"enforcementLevel": "mandatory", "max_hourly_cost_cny": 5}}')
    code = main(["plan", "--stack", "qwen-7b-spot", "--format", "json", "--policy-config", str(config)])
    out, err = capsys.readouterr()
    assert code == 4
    assert json.loads(out)["policy"][0]["level"] == "mandatory"
    assert "mandatory policy violation" in err


def test_cli_plan_of_a_profile_path(factory_plans, capsys):
    assert main(["plan", "stacks/profiles/llama3-8b-lora.yaml", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["source"] == {"kind": "profile", "name": "stacks/profiles/llama3-8b-lora.yaml",
                             "path": "stacks/profiles/llama3-8b-lora.yaml"}
    assert doc["stack"] == "llama3-8b-lora"


def test_cli_out_writes_the_same_text_atomically(factory_plans, capsys, tmp_path):
    out = tmp_path / "plan.md"
    assert main(["plan", "--stack", "llama3-8b-lora", "--format", "markdown", "--out", str(out)]) == 0
    assert capsys.readouterr().out == ""
    assert out.read_text().startswith("## trainstack plan: `llama3-8b-lora`")
    assert [p.name for p in tmp_path.iterdir()] == ["plan.md"]


def test_unknown_stack_is_exit_2_with_the_stack_list(factory_plans, capsys):
    assert main(["plan", "--stack", "llama3-8b-lroa"]) == 2
    err = capsys.readouterr().err
    assert "unknown stack 'llama3-8b-lroa'" in err and "did you mean 'llama3-8b-lora'" in err


def test_profile_and_stack_together_is_exit_2(factory_plans, capsys):
    assert main(["plan", "stacks/profiles/llama3-8b-lora.yaml", "--stack", "llama3-8b-lora"]) == 2


def test_infeasible_inside_the_program_is_exit_3_not_a_traceback(monkeypatch, capsys, tmp_path):
    """The planner's own resolve succeeds; the program's raises. The error crosses the Pulumi
    runtime (``__main__`` re-raises it as a pulumi.RunError) and still exits 3 with suggestions,
    and ``--out`` leaves no file behind. The planner shares its Plan with the recorded program
    (rules.reusing_plans); switched off here, the program plans itself, as under ``pulumi up``."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(planner, "reusing_plans", contextlib.nullcontext)
    calls = []

    def resolve(profile, catalog=None):
        calls.append(profile.name)
        if len(calls) > 1:
            raise InfeasibleError("nothing fits (test)", suggestions=["raise resources.max_nodes"])
        return F.single_gpu_lora_plan()

    monkeypatch.setattr(placement, "resolve", resolve)
    out = tmp_path / "plan.json"
    assert main(["plan", "--stack", "llama3-8b-lora", "--format", "json", "--out", str(out)]) == 3
    captured = capsys.readouterr()
    assert json.loads(captured.out)["suggestions"] == ["raise resources.max_nodes"]
    assert "nothing fits (test)" in captured.err and "Traceback" not in captured.err
    assert len(calls) == 2 and not out.exists() and list(tmp_path.iterdir()) == []


def test_stack_secrets_never_reach_the_output(factory_plans, tmp_path):
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    profile = ROOT / "stacks" / "profiles" / "llama3-8b-lora.yaml"
    (stacks / "Pulumi.secretive.yaml").write_text(
        f"config:\n  trainstack:profile: {profile}\n  alicloud:accessKey:\n    secure: v1:AAAA:BBBB\n")
    proj = Project(root=ROOT, name="trainstack", program=ROOT / "__main__.py", stacks_dir=stacks)
    doc = plan_source(Source("stack", "secretive", stacks / "Pulumi.secretive.yaml", stack="secretive"), proj)
    (provider,) = of_type(doc, "pulumi:providers:alicloud")
    assert provider["inputs"]["accessKey"] == REDACTED
    for fmt in ("json", "text", "markdown"):
        assert "offline-preview-secret" not in render(doc, fmt)


def test_a_bad_policy_config_is_exit_2(factory_plans, capsys, tmp_path):
    config = tmp_path / "policy.json"
    config.write_text('{"no-such-policy": "mandatory"}')
    assert main(["plan", "--stack", "llama3-8b-lora", "--policy-config", str(config)]) == 2
    assert "unknown policy 'no-such-policy'" in capsys.readouterr().err
    config.write_text("[1, 2]")
    assert main(["plan", "--stack", "llama3-8b-lora", "--policy-config", str(config)]) == 2


def test_a_policy_config_can_make_a_plan_fail(factory_plans, capsys, tmp_path):
    config = tmp_path / "policy.json"
    config.write_text('{"gpu-hourly-budget": {"enforcementLevel": "mandatory", "max_hourly_cost_cny": 5}}')
    assert main(["plan", "--stack", "llama3-8b-lora", "--format", "json", "--policy-config", str(config)]) == 4
    (verdict,) = json.loads(capsys.readouterr().out)["policy"]
    assert verdict["policy"] == "gpu-hourly-budget" and verdict["level"] == "mandatory"
