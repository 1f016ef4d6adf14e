"""Project, stack config and diff-side detection; which stacks a change affects (CI)."""

from __future__ import annotations

import json
import pathlib

import pytest

from trainstack.errors import InputError
from trainstack.preview.ci import changed_stacks
from trainstack.preview.sources import (
    SECRET_PLACEHOLDER, Project, classify, find_project, load_saved_plan, stack_config,
)

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def project() -> Project:
    return find_project(ROOT)


@pytest.fixture
def tmp_project(tmp_path) -> Project:
    (tmp_path / "Pulumi.yaml").write_text("name: demo\nruntime: python\nstackConfigDir: stacks\n"
                                          "config:\n  demo:region:\n    type: string\n    default: cn-shenzhen\n")
    stacks = tmp_path / "stacks"
    (stacks / "profiles").mkdir(parents=True)
    (stacks / "profiles" / "a.yaml").write_text("name: a\nmodel: {preset: llama-3-8b}\n")
    (stacks / "profiles" / "b.yaml").write_text("name: b\nmodel: {preset: llama-3-8b}\n")
    (stacks / "Pulumi.alpha.yaml").write_text(
        "config:\n  demo:profile: profiles/a.yaml\n  nodes: 3\n  flag: true\n"
        "  alicloud:secretKey:\n    secure: v1:abc:def\n  demo:tags: {team: nlp}\n")
    (stacks / "Pulumi.beta.yaml").write_text("config:\n  demo:profile: profiles/b.yaml\n")
    (stacks / "Pulumi.gamma.yaml").write_text("config:\n  demo:profile: profiles/a.yaml\n")
    return find_project(tmp_path)


def test_the_repository_project(project):
    assert project.name == "trainstack" and project.program == ROOT / "__main__.py"
    assert project.stacks_dir == ROOT / "stacks"
    assert {"llama3-8b-lora", "llama3-70b-full", "qwen-7b-dlc", "qwen-7b-spot"} <= set(project.stacks())


def test_stack_config_as_the_cli_hands_it_to_the_program(tmp_project):
    config, secret_keys = stack_config(tmp_project, "alpha")
    assert config == {"demo:region": "cn-shenzhen", "demo:profile": "profiles/a.yaml", "demo:nodes": "3",
                      "demo:flag": "true", "alicloud:secretKey": SECRET_PLACEHOLDER,
                      "demo:tags": json.dumps({"team": "nlp"})}
    assert secret_keys == ("alicloud:secretKey",)


def test_unknown_stack_lists_stacks_and_suggests(tmp_project):
    with pytest.raises(InputError) as info:
        stack_config(tmp_project, "alpah")
    assert info.value.exit_code == 2
    assert "alpha, beta, gamma" in info.value.message and "'alpha'" in info.value.hint


def test_classify_diff_sides(tmp_project, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    saved = tmp_path / "base.json"
    saved.write_text(json.dumps({"schema_version": 1, "resources": []}))
    assert classify("beta", tmp_project).kind == "stack"
    assert classify("stacks/Pulumi.beta.yaml", tmp_project).stack == "beta"
    assert classify("stacks/profiles/a.yaml", tmp_project).kind == "profile"
    assert classify(str(saved), tmp_project).kind == "saved"
    with pytest.raises(InputError, match="unknown stack 'delta'"):
        classify("delta", tmp_project)
    with pytest.raises(InputError, match="no such file"):
        classify("missing.json", tmp_project)


def test_saved_plans_need_a_known_schema_version(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema_version": 99}))
    with pytest.raises(InputError, match="schema_version 99"):
        load_saved_plan(bad)
    bad.write_text("{not json")
    with pytest.raises(InputError, match="is not valid JSON at line 1"):
        load_saved_plan(bad)
    bad.write_text(json.dumps({"resources": []}))
    with pytest.raises(InputError, match="no schema_version"):
        load_saved_plan(bad)


@pytest.mark.parametrize("part, value, where, what", [
    ("capacity", " ", "plan.capacity", "must be an object or null, not a string"),
    ("capacity", {"candidates": " "}, "plan.capacity.candidates", "must be a list of candidates, not a string"),
    ("capacity", {"candidates": [3]}, "plan.capacity.candidates[0]", "must be an object, not a number"),
    ("capacity", {"candidates": [{"hourly_cost_cny": "LTAI5tSecretLookingValue"}]},
     "plan.capacity.candidates[0].hourly_cost_cny", "must be a finite number or null"),
    ("capacity", {"reservation": {"hourly_cny": [1]}}, "plan.capacity.reservation.hourly_cny",
     "must be a finite number or null"),
    ("breakdown", [{"name": "disk", "unpriced": [1]}], "cost.breakdown[0].unpriced",
     "must be a string or null, not a list"),
    ("breakdown", [{"name": "disk", "contingent": "yes"}], "cost.breakdown[0].contingent",
     "must be true or false, not a string"),
])
def test_saved_plan_parts_a_renderer_formats_are_shape_checked(tmp_path, part, value, where, what):
    """A part of the wrong kind is refused by path and JSON kind, never by its value (it may be a credential)."""
    doc = {"schema_version": 3, "kind": "trainstack-plan", "resources": [], "plan": {}, "cost": {}}
    if part == "capacity":
        doc["plan"]["capacity"] = value
    else:
        doc["cost"]["breakdown"] = value
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(InputError) as err:
        load_saved_plan(bad)
    assert [(p.path, p.message) for p in err.value.problems] == [(where, what)]
    assert "LTAI5t" not in str(err.value) + repr(err.value.problems)


def test_changed_stacks_from_stack_files_and_profiles(tmp_project):
    assert changed_stacks(["stacks/Pulumi.beta.yaml"], tmp_project) == ["beta"]
    assert changed_stacks(["stacks/profiles/a.yaml"], tmp_project) == ["alpha", "gamma"]
    assert changed_stacks(["README.md", "docs/x.md"], tmp_project) == []
    assert changed_stacks(["stacks/Pulumi.removed.yaml"], tmp_project) == []


@pytest.mark.parametrize("path", ["components/cluster.py", "policies/rules.py", "trainstack/catalog/data/gpus.yaml",
                                  "__main__.py", "requirements.txt"])
def test_changes_to_shared_code_affect_every_stack(tmp_project, path):
    assert changed_stacks([path], tmp_project) == ["alpha", "beta", "gamma"]


def test_changed_stacks_in_this_repository(project):
    assert changed_stacks(["stacks/profiles/qwen-7b-spot.yaml"], project) == ["qwen-7b-spot"]


def test_pr_comment_has_the_marker_and_one_diff_per_stack(project, tmp_path, monkeypatch, capsys):
    """The workflow's comment: a saved base plan for one stack, none (a new stack) for another."""
    from trainstack.preview.ci import MARKER, comment, main as ci_main

    monkeypatch.chdir(ROOT)
    base = tmp_path / "base-plans"
    base.mkdir()
    from trainstack.cli import main

    assert main(["plan", "--stack", "llama3-8b-lora", "--format", "json", "--out", str(base / "llama3-8b-lora.json")]) == 0
    text, code = comment(["llama3-8b-lora", "qwen-7b-spot"], base, project)
    assert code == 0 and text.startswith(MARKER + "\n## trainstack plan diff")
    assert "### trainstack diff: `llama3-8b-lora (base)` → `llama3-8b-lora (this PR)`" in text
    assert "**Total cost (all-in) unchanged" in text and "0 to add, 0 to change (0 replacements, 0 disruptive updates), 0 to destroy" in text
    assert "`qwen-7b-spot` has no plan on the base branch" in text
    out = tmp_path / "comment.md"
    assert ci_main(["comment", "--base-plans", str(base), "--out", str(out), "llama3-8b-lora"]) == 0
    assert out.read_text().startswith(MARKER)
    changed = tmp_path / "changed.txt"
    changed.write_text("stacks/profiles/qwen-7b-spot.yaml\nREADME.md\n")
    capsys.readouterr()
    assert ci_main(["changed-stacks", "--json", str(changed)]) == 0
    assert json.loads(capsys.readouterr().out) == ["qwen-7b-spot"]
