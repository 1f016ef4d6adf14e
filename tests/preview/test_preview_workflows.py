"""The GitHub workflows: valid against GitHub's workflow schema (offline, vendored in
check-jsonschema), shell steps clean under shellcheck, and wired the way docs/preview.md says."""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
import sys

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
FILES = sorted(WORKFLOWS.glob("trainstack-*.yml"))
MARKER = "<!-- trainstack-diff -->"


def load(name: str) -> dict:
    return yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))


def on(doc: dict) -> dict:
    return doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on` key as True


def test_the_four_workflows_exist():
    assert {f.name for f in FILES} == {"trainstack-deploy.yml", "trainstack-pr-comment.yml",
                                       "trainstack-preview-live.yml", "trainstack-pr.yml"}


def test_workflows_validate_against_the_github_workflow_schema():
    proc = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows",
                           *map(str, FILES)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _run_blocks():
    for f in FILES:
        for job_name, job in load(f.name)["jobs"].items():
            for i, step in enumerate(job.get("steps", [])):
                if "run" in step:
                    yield f"{f.name}:{job_name}:{step.get('name', i)}", step["run"]


@pytest.mark.skipif(shutil.which("shellcheck", path=str(pathlib.Path(sys.executable).parent)) is None
                    and shutil.which("shellcheck") is None, reason="shellcheck not installed")
@pytest.mark.parametrize("where,script", list(_run_blocks()), ids=lambda v: v if ":" in str(v) else "")
def test_run_steps_pass_shellcheck(where, script, tmp_path):
    exe = shutil.which("shellcheck", path=str(pathlib.Path(sys.executable).parent)) or shutil.which("shellcheck")
    body = re.sub(r"\$\{\{[^}]*\}\}", "expr", script)  # GitHub expressions are substituted before bash runs
    path = tmp_path / "step.sh"
    path.write_text("#!/usr/bin/env bash\nset -eo pipefail\n" + body, encoding="utf-8")
    proc = subprocess.run([exe, "-S", "warning", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"{where}\n{proc.stdout}"


def test_pr_workflow_diffs_changed_stacks_against_the_base_and_posts_one_marked_comment():
    doc = load("trainstack-pr.yml")
    paths = on(doc)["pull_request"]["paths"]
    for p in ("stacks/**", "components/**", "policies/**", "trainstack/**"):
        assert p in paths
    steps = doc["jobs"]["diff"]["steps"]
    text = yaml.safe_dump(steps)
    assert "git worktree add" in text and "trainstack.preview.ci changed-stacks" in text
    assert "trainstack.preview.ci comment" in text and MARKER in text
    post = next(s for s in steps if s.get("uses", "").startswith("actions/github-script"))
    assert post["if"] == "github.event.pull_request.head.repo.full_name == github.repository"
    assert any(s.get("uses", "").startswith("actions/upload-artifact") for s in steps)
    assert doc["permissions"] == {"contents": "read", "pull-requests": "write"}


def test_fork_follow_up_runs_after_the_pr_workflow_and_never_checks_out_code():
    pr, follow = load("trainstack-pr.yml"), load("trainstack-pr-comment.yml")
    trigger = on(follow)["workflow_run"]
    assert trigger["workflows"] == [pr["name"]] and trigger["types"] == ["completed"]
    job = follow["jobs"]["comment"]
    assert "head_repository.full_name != github.repository" in job["if"]
    uses = [s.get("uses", "") for s in job["steps"]]
    assert not any(u.startswith("actions/checkout") for u in uses)
    script = job["steps"][-1]["with"]["script"]
    assert MARKER in script and "workflow_run.head_sha" in script


def test_live_preview_only_with_secrets_and_with_the_policy_pack():
    doc = load("trainstack-preview-live.yml")
    for job in doc["jobs"].values():
        assert "secrets." not in str(job.get("if", ""))  # not allowed at job level
    gate = doc["jobs"]["changes"]["steps"][0]
    assert gate["id"] == "gate" and "secrets.PULUMI_CONFIG_PASSPHRASE" in str(gate["env"])
    preview = doc["jobs"]["preview"]
    assert "needs.changes.outputs.enabled == 'true'" in preview["if"]
    action = next(s for s in preview["steps"] if s.get("uses", "").startswith("pulumi/actions@"))
    assert action["with"]["command"] == "preview" and action["with"]["policyPacks"] == "policies"
    assert action["with"]["secrets-provider"] == "passphrase" and action["with"]["comment-on-pr"] is True
    assert "PULUMI_BACKEND_URL" in action["with"]["cloud-url"]


def test_deploy_runs_pulumi_up_per_changed_stack_behind_the_production_environment():
    doc = load("trainstack-deploy.yml")
    assert on(doc)["push"]["branches"] == ["main"]
    up = doc["jobs"]["up"]
    assert up["environment"] == "production"
    assert up["strategy"]["matrix"]["stack"] == "${{ fromJSON(needs.changes.outputs.stacks) }}"
    action = next(s for s in up["steps"] if s.get("uses", "").startswith("pulumi/actions@"))
    assert action["with"]["command"] == "up" and action["with"]["policyPacks"] == "policies"
    assert up["concurrency"]["cancel-in-progress"] is False
