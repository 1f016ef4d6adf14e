"""validate, resolve, plan and diff under one policy config: ``--policy-config FILE`` or the stack's
``trainstack:policyConfig`` (confined to stacks/), each verdict printed with its policy and level,
exit 4 on a mandatory one, exit 2 (bad input) first."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from trainstack.cli import main
from trainstack.preview.ci import changed_stacks, main as ci_main
from trainstack.preview.diff import diff_documents
from trainstack.preview.planner import plan_source
from trainstack.preview.sources import Project, Source, find_project

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "stacks" / "profiles" / "llama3-8b-lora.yaml"
TIGHT = {"gpu-hourly-budget": {"enforcementLevel": "mandatory", "max_hourly_cost_cny": 5}}


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project whose stack ``demo`` names its policy config (stacks/policy.json: a 5 CNY/h budget)."""
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text() + f"main: {ROOT}\n")
    stacks = tmp_path / "stacks"
    (stacks / "profiles").mkdir(parents=True)
    shutil.copy(SAMPLE, stacks / "profiles" / "demo.yaml")
    (stacks / "policy.json").write_text(json.dumps(TIGHT))
    (stacks / "Pulumi.demo.yaml").write_text("config:\n  trainstack:profile: profiles/demo.yaml\n"
                                              "  trainstack:policyConfig: policy.json\n")
    (stacks / "Pulumi.plain.yaml").write_text("config:\n  trainstack:profile: profiles/demo.yaml\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _config(tmp_path, doc) -> str:
    path = tmp_path / "flag.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_validate_prints_each_verdict_and_exits_4_on_a_mandatory_one(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["validate", str(SAMPLE), "--policy-config", _config(tmp_path, TIGHT)]) == 4
    out, err = capsys.readouterr()
    assert "refused by a mandatory policy" in out
    assert "policy gpu-hourly-budget (mandatory): GPU nodes cost 9.53 CNY/h, above max_hourly_cost_cny 5.00" in err
    assert "1 mandatory policy violation(s)" in err
    advisory = {"required-tags": {"required_tags": ["owner"]}}
    assert main(["validate", str(SAMPLE), "--json", "--policy-config", _config(tmp_path, advisory)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["valid"] and {v["policy"] for v in doc["policy"]} == {"required-tags"}
    assert all(v["level"] == "advisory" and v["message"].startswith(v["resource"]) for v in doc["policy"])


def test_resolve_lists_the_verdicts_and_still_prints_the_plan(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["resolve", str(SAMPLE), "--json", "--policy-config", _config(tmp_path, TIGHT)]) == 4
    doc = json.loads(capsys.readouterr().out)
    assert doc["instance_type"] == "ecs.gn7i-c8g1.2xlarge"
    assert [(v["policy"], v["level"]) for v in doc["policy"]] == [("gpu-hourly-budget", "mandatory")]
    assert main(["resolve", str(SAMPLE), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["policy"] == []


def test_bad_input_wins_over_a_mandatory_policy(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    bad = tmp_path / "bad.yaml"
    bad.write_text(SAMPLE.read_text().replace("tags: {team: nlp", "tags: {" + ", ".join(f"t{i}: v" for i in range(14))
                                               + ", team: nlp"))
    for command in ("validate", "resolve"):
        assert main([command, str(bad), "--policy-config", _config(tmp_path, TIGHT)]) == 2
        assert "at most 20 tags" in capsys.readouterr().err


def test_a_bad_config_is_exit_2_naming_the_file_and_key(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    path = _config(tmp_path, {"gpu-hourly-budget": {"max_hourly_cost_cny": "lots"}})
    for argv in (["validate", str(SAMPLE)], ["resolve", str(SAMPLE)], ["plan", str(SAMPLE)],
                 ["diff", str(SAMPLE), str(SAMPLE)]):
        assert main([*argv, "--policy-config", path]) == 2
        err = capsys.readouterr().err
        assert path in err and "gpu-hourly-budget.max_hourly_cost_cny" in err and "Traceback" not in err


def test_a_stack_brings_its_own_policy_config_and_the_flag_replaces_it(project, capsys, tmp_path):
    assert main(["validate", "--stack", "demo"]) == 4
    assert "policy gpu-hourly-budget (mandatory)" in capsys.readouterr().err
    assert main(["validate", "--stack", "plain"]) == 0
    loose = _config(tmp_path, {"gpu-hourly-budget": {"max_hourly_cost_cny": 50}})
    assert main(["validate", "--stack", "demo", "--policy-config", loose]) == 0


def _plan_project(tmp_path) -> tuple[Project, Path]:
    """The recorded program reads the repository's stacks/: stack files elsewhere name files there."""
    stacks = tmp_path / "plan-stacks"
    stacks.mkdir()
    profile = ROOT / "stacks" / "profiles" / "llama3-70b-full.yaml"  # 3 x 270.83 CNY/h
    (stacks / "Pulumi.big.yaml").write_text(f"config:\n  trainstack:profile: {profile}\n"
                                             "  trainstack:policyConfig: policy-config.example.json\n")
    (stacks / "Pulumi.free.yaml").write_text(f"config:\n  trainstack:profile: {profile}\n")
    return Project(root=ROOT, name="trainstack", program=ROOT / "__main__.py", stacks_dir=stacks), stacks


def test_plan_and_diff_run_each_stack_under_its_own_config(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    proj, stacks = _plan_project(tmp_path)

    def mandatory(doc):
        return [v["policy"] for v in doc["policy"] if v["level"] == "mandatory"]

    big = plan_source(Source("stack", "big", stacks / "Pulumi.big.yaml", stack="big"), proj)
    assert mandatory(big) == ["gpu-hourly-budget"]  # the example config's 500 CNY/h
    free = plan_source(Source("stack", "free", stacks / "Pulumi.free.yaml", stack="free"), proj)
    assert mandatory(free) == []
    loose = {"gpu-hourly-budget": {"max_hourly_cost_cny": 5000}}
    assert mandatory(plan_source(Source("stack", "big", stacks / "Pulumi.big.yaml", stack="big"), proj,
                                 policy_config=loose)) == []  # the flag's config replaces the stack's
    d = diff_documents(free, big)
    assert d["policy"]["mandatory_after"] == 1


@pytest.mark.parametrize("value", ["../outside.json", "/etc/passwd", "missing.json"])
def test_the_stack_setting_is_confined_to_stacks_and_must_exist(project, capsys, value):
    (project / "outside.json").write_text("{}")
    (project / "stacks" / "Pulumi.demo.yaml").write_text(
        f"config:\n  trainstack:profile: profiles/demo.yaml\n  trainstack:policyConfig: {value}\n")
    for argv in (["validate", "--stack", "demo"], ["plan", "--stack", "demo"], ["diff", "demo", "plain"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert ("outside stacks/" in err or "missing.json" in err) and "Traceback" not in err
        assert "root:" not in err  # the file's content is never echoed


def test_the_workflows_get_the_stacks_file_and_its_changes_replan_the_stack(project, capsys):
    assert ci_main(["policy-config", "demo"]) == 0
    assert capsys.readouterr().out.strip() == "stacks/policy.json"
    assert ci_main(["policy-config", "plain"]) == 0
    assert capsys.readouterr().out.strip() == ""
    assert changed_stacks(["stacks/policy.json"], find_project(project)) == ["demo"]
    (project / "stacks" / "policy.json").write_text('{"no-such-policy": "mandatory"}')
    assert ci_main(["policy-config", "demo"]) == 2  # a bad config stops the workflow before pulumi up
    assert "unknown policy 'no-such-policy'" in capsys.readouterr().err
