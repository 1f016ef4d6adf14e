"""Issue 35 item 2: the policy config's PCIe exception reaches the resolver everywhere it runs.

A stacks-style project (tests/data/pcie_exception: a stack, its L20 data-parallel LoRA profile, the
team's price for ebmgn8is and a policy config listing it) is planned only when the config allows the
type: by ``--policy-config FILE`` or the stack's ``trainstack:policyConfig``, the file ``pulumi up
--policy-pack-config`` reads. validate, resolve, plan and the recorded program agree, and the plan
names the exception (policy, setting, file)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from trainstack.cli import main

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "data" / "pcie_exception"
TYPE = "ecs.ebmgn8is.32xlarge"
INSTANCE = "alicloud:ecs/instance:Instance"


@pytest.fixture
def project(tmp_path, monkeypatch):
    """The project: stacks/Pulumi.l20-lora.yaml names the allowing config; Pulumi.l20-plain.yaml none."""
    # the real program (components.program.run_program), rooted at this project as a team's own would be
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text() + "main: program\n")
    (tmp_path / "program").mkdir()
    (tmp_path / "program" / "__main__.py").write_text(
        f"import sys\nfrom pathlib import Path\nsys.path.insert(0, {str(ROOT)!r})\n"
        "from components.program import run_program\nrun_program(root=Path(__file__).resolve().parents[1])\n")
    stacks = tmp_path / "stacks"
    (stacks / "profiles").mkdir(parents=True)
    for name in ("l20-lora.yaml", "prices.yaml"):
        shutil.copy(FIXTURE / name, stacks / "profiles" / name)
    shutil.copy(FIXTURE / "policy-allow.json", stacks / "policy-allow.json")
    shutil.copy(FIXTURE / "Pulumi.l20-lora.yaml", stacks / "Pulumi.l20-lora.yaml")
    (stacks / "Pulumi.l20-plain.yaml").write_text("config:\n  trainstack:profile: profiles/l20-lora.yaml\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _json(capsys, argv: list[str]) -> tuple[int, dict]:
    rc = main(argv)
    out = capsys.readouterr().out
    return rc, json.loads(out) if out.strip() else {}


def _config(tmp_path: Path, doc: dict, name: str = "flag.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def test_without_an_exception_the_type_is_refused_and_the_fix_is_offered(project, capsys):
    profile = "stacks/profiles/l20-lora.yaml"
    rc, doc = _json(capsys, ["resolve", profile, "--json"])
    assert rc == 3 and "multi-gpu-without-nvlink" in {c for r in doc["rejected"] for c in r["reason_codes"]}
    fix = [s for s in doc["suggestions"] if "allowed_types" in s]
    # tested: the suggestion quotes the plan the exception would give (its nodes and total cost)
    rc, allowed = _json(capsys, ["resolve", profile, "--json", "--policy-config", "stacks/policy-allow.json"])
    assert rc == 0 and len(fix) == 1
    assert f"{allowed['nodes']} x {TYPE}, {allowed['total_cost_cny']:,.0f} CNY" in fix[0]
    assert _json(capsys, ["plan", "--stack", "l20-plain", "--format", "json"])[0] == 3
    rc, doc = _json(capsys, ["validate", "--stack", "l20-plain", "--json"])
    assert rc == 0 and doc["feasible"] is False


def test_the_stacks_policy_config_plans_the_type_in_validate_resolve_plan_and_the_program(project, capsys):
    rc, doc = _json(capsys, ["plan", "--stack", "l20-lora", "--format", "json"])
    assert rc == 0 and doc["policy"] == []  # the pack, under the same file, lets it through
    plan = doc["plan"]
    assert plan["instance_type"] == TYPE and plan["gpus_per_node"] == 8
    assert plan["parallelism"]["layout"]["tensor_parallel"] == 1  # tensor parallelism still needs NVLink
    assert plan["policy_exceptions"] == [{"policy": "no-pcie-multi-gpu-training", "instance_type": TYPE,
                                          "setting": "allowed_types", "source": "stacks/policy-allow.json"}]
    assert any("PCIe exception" in label and "stacks/policy-allow.json" in label for label in plan["labels"])
    # the recorded program resolved it too (from trainstack:policyConfig): the node it declares is that type
    assert {r["inputs"]["instanceType"] for r in doc["resources"] if r["type"] == INSTANCE} == {TYPE}
    rc, v = _json(capsys, ["validate", "--stack", "l20-lora", "--json"])
    assert rc == 0 and v["feasible"] and v["plan"]["instance_type"] == TYPE and v["policy"] == []
    main(["plan", "--stack", "l20-lora", "--format", "markdown"])
    assert f"| policy exception | {TYPE} allowed by no-pcie-multi-gpu-training (allowed_types)" in capsys.readouterr().out


def test_a_flag_config_replaces_the_stacks_for_the_resolver_as_for_the_verdicts(project, capsys, tmp_path):
    empty = _config(tmp_path, {"no-pcie-multi-gpu-training": {"allowed_types": []}})
    assert _json(capsys, ["plan", "--stack", "l20-lora", "--format", "json", "--policy-config", empty])[0] == 3
    assert _json(capsys, ["validate", "--stack", "l20-lora", "--json", "--policy-config", empty])[1]["feasible"] is False
    allow = str(project / "stacks" / "policy-allow.json")
    rc, doc = _json(capsys, ["plan", "--stack", "l20-plain", "--format", "json", "--policy-config", allow])
    assert rc == 0 and doc["plan"]["instance_type"] == TYPE
    assert {r["inputs"]["instanceType"] for r in doc["resources"] if r["type"] == INSTANCE} == {TYPE}
    rc, doc = _json(capsys, ["resolve", "stacks/profiles/l20-lora.yaml", "--json", "--policy-config", allow])
    assert rc == 0 and doc["instance_type"] == TYPE and doc["policy_exceptions"][0]["setting"] == "allowed_types"


@pytest.mark.parametrize("level, planned", [("disabled", True), ("advisory", False), ("mandatory", False)])
def test_the_enforcement_level_disabled_allows_every_pcie_type_and_advisory_none(project, capsys, tmp_path,
                                                                                 level, planned):
    flag = _config(tmp_path, {"no-pcie-multi-gpu-training": level})
    rc, doc = _json(capsys, ["plan", "stacks/profiles/l20-lora.yaml", "--format", "json", "--policy-config", flag])
    assert rc == (0 if planned else 3)
    if planned:
        (exception,) = doc["plan"]["policy_exceptions"]
        assert exception["setting"] == "enforcementLevel" and exception["instance_type"] == doc["plan"]["instance_type"]
        assert doc["policy"] == []


def test_resolve_text_names_the_exception(project, capsys):
    assert main(["resolve", "stacks/profiles/l20-lora.yaml", "--policy-config", "stacks/policy-allow.json"]) == 0
    out = capsys.readouterr().out
    assert "Allowed by the policy config" in out and f"{TYPE}: no-pcie-multi-gpu-training allowed_types lists it" in out


def test_up_refuses_a_flag_config_whose_plan_the_program_would_not_make(project, capsys, tmp_path, monkeypatch):
    """`trainstack up --policy-config FILE` hands FILE to the pack only; the program resolves under the
    stack's trainstack:policyConfig, so a FILE under which the resolver plans otherwise is exit 2 before
    anything runs; a FILE that grants other exceptions but plans the same goes on."""
    from trainstack.commands import up as up_cmd

    monkeypatch.setattr(up_cmd, "_confirm", lambda args, stack: (_ for _ in ()).throw(AssertionError("reached")))
    empty = _config(tmp_path, {"no-pcie-multi-gpu-training": {"allowed_types": []}})
    assert main(["up", "--stack", "l20-lora", "--yes", "--policy-config", empty]) == 2
    err = capsys.readouterr().err
    assert (f"its PCIe exceptions plan nothing (infeasible), the stack's trainstack:policyConfig "
            f"(stacks/policy-allow.json) plans 1 x {TYPE}") in err
    assert main(["up", "--stack", "l20-plain", "--yes", "--policy-config", "stacks/policy-allow.json"]) == 2
    assert f"plan 1 x {TYPE}, the stack's config (no trainstack:policyConfig) plans nothing" in capsys.readouterr().err
    # the same grants through another file and level, and other grants that plan the same, go on to deploy
    same = _config(tmp_path, {"no-pcie-multi-gpu-training": {"allowed_types": [TYPE]}, "all": "advisory"})
    disabled = _config(tmp_path, {"no-pcie-multi-gpu-training": "disabled"}, "disabled.json")
    for flag in (same, disabled):
        with pytest.raises(AssertionError, match="reached"):
            main(["up", "--stack", "l20-lora", "--yes", "--policy-config", flag])
