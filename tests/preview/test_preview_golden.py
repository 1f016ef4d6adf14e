"""`trainstack diff` of two profiles (LoRA on 1 GPU -> full fine-tune on 2 nodes), against a
golden markdown file. Regenerate after an intended change with
``UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/preview/test_preview_golden.py`` and review the
file's diff like code (it moves whenever the catalog, resolver, components or policies do)."""

from __future__ import annotations

import json
import os
import pathlib

import pytest

from trainstack.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "preview" / "golden" / "diff_lora_to_2node.md"
ARGS = ["tests/preview/fixtures/finetune-lora.yaml", "tests/preview/fixtures/finetune-full-2node.yaml",
        "--policy-config", "tests/preview/fixtures/policy-config.json"]
INSTANCE = "alicloud:ecs/instance:Instance"


@pytest.fixture(autouse=True)
def at_root(monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("TRAINSTACK_TODAY", "2026-01-15")  # the prices' age in the comment is pinned


def test_diff_markdown_matches_the_golden_file(capsys):
    code = main(["diff", *ARGS, "--format", "markdown"])
    out = capsys.readouterr().out
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(out, encoding="utf-8")
    assert code == 4  # the head breaks the configured hourly budget (mandatory)
    assert out == GOLDEN.read_text(encoding="utf-8")


def test_diff_shows_added_nodes_cost_delta_and_policy_changes(capsys):
    assert main(["diff", *ARGS, "--format", "json"]) == 4
    d = json.loads(capsys.readouterr().out)
    added = {(r["type"], r["name"]) for r in d["resources"]["added"]}
    assert (INSTANCE, "demo-finetune-cluster-node-1") in added
    (node0,) = [c for c in d["resources"]["changed"] if c["name"] == "demo-finetune-cluster-node-0"]
    by_path = {c["path"]: c for c in node0["changes"]}
    # eRDMA needs the primary ENI in HighPerformance mode: ForceNew, so the node is replaced, deleted
    # first (its fixed private IP is free for the new one) ...
    assert node0["replace"] and node0["node"] and node0["delete_before_replace"] is True
    assert by_path["networkInterfaceTrafficMode"]["replace"]
    # ... which supersedes the stop-and-resize the type change alone would have been
    assert by_path["instanceType"]["action"] == "update" and not by_path["instanceType"]["disruptive"]
    # the dataset disk is its own resource: it follows the node into the new zone (zone_id is ForceNew);
    # its bigger size alone would be grown online
    (disk0,) = [c for c in d["resources"]["changed"] if c["name"] == "demo-finetune-storage-data-disk-0"]
    by_disk = {c["path"]: c for c in disk0["changes"]}
    assert disk0["replace"] and by_disk["zoneId"]["replace"] and not by_disk["size"]["replace"]
    assert by_disk["size"]["takes_effect"] == "disk_grown"
    assert {"path": "resources.gpus", "before": 1, "after": 16} in d["profile_changes"]
    for key in ("hourly", "total", "on_demand_hourly", "on_demand_total", "spot_hourly", "spot_total"):
        assert d["cost"][key]["delta"] > 0, key
    assert d["head"]["summary"]["nodes"] == 2 and d["base"]["summary"]["nodes"] == 1
    assert [(v["policy"], v["level"]) for v in d["policy"]["new"]] == [("gpu-hourly-budget", "mandatory")]
    assert d["policy"]["resolved"] == []


def test_a_saved_base_plan_diffs_like_a_fresh_one(capsys, tmp_path):
    saved = tmp_path / "base.json"
    assert main(["plan", ARGS[0], "--format", "json", "--out", str(saved),
                 "--policy-config", "tests/preview/fixtures/policy-config.json"]) == 0
    assert main(["diff", str(saved), *ARGS[1:], "--format", "json"]) == 4
    from_saved = json.loads(capsys.readouterr().out)
    assert main(["diff", *ARGS, "--format", "json"]) == 4
    fresh = json.loads(capsys.readouterr().out)
    for key in ("resources", "cost", "policy", "summary", "counts", "profile_changes"):
        assert from_saved[key] == fresh[key], key
    assert from_saved["unknown"] == []


def test_a_base_plan_saved_by_an_older_version_reports_what_it_lacks(capsys, tmp_path):
    saved = tmp_path / "base-v1.json"
    assert main(["plan", ARGS[0], "--format", "json", "--out", str(saved)]) == 0
    old = json.loads(saved.read_text(encoding="utf-8"))
    old["schema_version"] = 1  # what trainstack wrote before lifecycle options and the profile
    del old["profile"]
    for r in old["resources"]:
        for key in ("ignore_changes", "delete_before_replace", "provider_urn"):
            del r[key]
        if not r["replace_on_changes"]:
            del r["replace_on_changes"]
    saved.write_text(json.dumps(old), encoding="utf-8")
    assert main(["diff", str(saved), ARGS[1], "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["profile_changes"] is None
    assert {"side": "base", "field": "profile"} in d["unknown"]
    (node0,) = [c for c in d["resources"]["changed"] if c["name"] == "demo-finetune-cluster-node-0"]
    assert node0["replace"]  # the verdicts come from the head's options, which are known
    assert main(["diff", str(saved), ARGS[1]]) == 0
    md = capsys.readouterr().out
    assert "Profile changes: **unknown**" in md and "> [!NOTE]" in md
    assert "does not record `profile`, `resources[].ignore_changes`" in md


PR_GOLDEN = ROOT / "tests" / "preview" / "golden" / "diff_70b_pr.md"
PR_ARGS = ["stacks/profiles/llama3-70b-full.yaml", "tests/preview/fixtures/llama3-70b-full-pr.yaml"]
DOC = ROOT / "docs" / "preview.md"  # "A pull request's comment" shows this diff between the markers
DOC_START, DOC_END = "<!-- pr-diff-example:start -->", "<!-- pr-diff-example:end -->"


def test_the_preview_docs_show_the_tools_own_pr_comment_with_a_replacement_and_a_disruptive_update(capsys):
    """A new learning rate (job command -> the job settings channel: the next job start, no node
    disrupted) and a new SSH CIDR (a security group rule replaced) on the 70B sample."""
    assert main(["diff", *PR_ARGS]) == 0
    out = capsys.readouterr().out
    if os.environ.get("UPDATE_GOLDEN") == "1":
        PR_GOLDEN.write_text(out, encoding="utf-8")
        doc = DOC.read_text(encoding="utf-8")
        head, rest = doc.split(DOC_START, 1)
        DOC.write_text(f"{head}{DOC_START}\n{out}{DOC_END}{rest.split(DOC_END, 1)[1]}", encoding="utf-8")
    assert out == PR_GOLDEN.read_text(encoding="utf-8")
    assert "⚠ disrupt" not in out and "± replace" in out and "takes effect at the next job start" in out
    assert "0 disruptive updates" in out and "GPU nodes replaced" not in out
    block = DOC.read_text(encoding="utf-8").split(DOC_START, 1)[1].split(DOC_END, 1)[0]
    assert block == "\n" + out
