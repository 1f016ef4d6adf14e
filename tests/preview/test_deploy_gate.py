"""The deploy gate (trainstack/preview/deploy_gate.py) and the workflow steps that run it: the
deployed plan in the state bucket (Alibaba's OSS SDK against a local fake OSS server), the diff
before `pulumi up` that stops on an impossible update, the record after it. The workflow's own
step scripts are run, as GitHub runs them, with the runner's variables set."""

from __future__ import annotations

import copy
import json
import os
import pathlib
import subprocess
import sys

import pytest
import yaml

from test_day_two import plan, sample
from trainstack.errors import InputError
from trainstack.preview.deploy_gate import PREFIX, PlanStore, Store, gate, record, store_from_backend
from trainstack.preview.sources import find_project

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "bootstrap"))
from fake_oss import DirStore, FakeOssServer  # noqa: E402

STATE = "my-pulumi-state"
STACK = "llama3-8b-lora"
KEY = f"{PREFIX}/trainstack/{STACK}/plan.json"


def test_the_store_is_the_state_bucket_of_the_s3_backend_url():
    store = store_from_backend(f"s3://{STATE}?endpoint=oss-cn-shenzhen.aliyuncs.com&region=cn-shenzhen")
    assert store == Store(bucket=STATE, region="cn-shenzhen", endpoint="oss-cn-shenzhen.aliyuncs.com")
    assert store.key("trainstack", STACK) == KEY


@pytest.mark.parametrize("url", [None, "", "file:///tmp/state", "s3://bucket-only", "https://user:pw@x.invalid/?region=a"])
def test_a_bad_backend_url_is_exit_2_without_echoing_it(url):
    with pytest.raises(InputError) as err:
        store_from_backend(url)
    assert err.value.exit_code == 2 and "PULUMI_BACKEND_URL" in err.value.message
    assert "pw" not in err.value.message + (err.value.hint or "")


@pytest.fixture
def keys(monkeypatch):
    from alibabacloud_credentials.utils import auth_util

    for name, attr, value in (("ALIBABA_CLOUD_ACCESS_KEY_ID", "environment_access_key_id", "LTAI-deploy"),
                              ("ALIBABA_CLOUD_ACCESS_KEY_SECRET", "environment_access_key_secret", "deploy-secret")):
        monkeypatch.setenv(name, value)
        monkeypatch.setattr(auth_util, attr, value)
    monkeypatch.delenv("ALIBABA_CLOUD_SECURITY_TOKEN", raising=False)
    monkeypatch.setattr(auth_util, "environment_security_token", None)


@pytest.fixture
def oss_server(tmp_path):
    backing = DirStore(tmp_path / "oss")
    with FakeOssServer(backing) as server:
        yield server, backing


def plans_at(server) -> PlanStore:
    return PlanStore(Store(bucket=STATE, region="cn-shenzhen", endpoint=server.endpoint), sleep=lambda s: None)


def test_no_record_passes_with_a_note_and_a_record_round_trips(keys, oss_server, tmp_path):
    server, backing = oss_server
    project, plans = find_project(ROOT), plans_at(server)
    text, code = gate(STACK, project, plans, tmp_path / "plan.json")
    assert code == 0 and "No deployed plan is recorded" in text and f"oss://{STATE}/{KEY}" in text
    where = record(STACK, project, plans, tmp_path / "plan.json")
    assert where == f"oss://{STATE}/{KEY}"
    assert json.loads(backing.read(STATE, KEY))["stack"] == STACK
    text, code = gate(STACK, project, plans, tmp_path / "again.json")
    assert code == 0 and "Resources: **0 to add, 0 to change" in text
    assert all("LTAI-deploy" in r["headers"].get("Authorization", "") for r in server.requests)


def test_a_shrink_against_the_deployed_plan_stops_the_deploy(keys, oss_server, tmp_path):
    """Deployed with twice the dataset; the push halves it: the data disk would shrink, ResizeDisk
    refuses, so the gate exits 2 with the impossible update first in the summary."""
    server, backing = oss_server
    bigger = copy.deepcopy(sample(STACK))
    bigger["storage"]["dataset_gib"] *= 2
    deployed = dict(plan(bigger), stack=STACK)
    backing.write(STATE, KEY, json.dumps(deployed).encode())
    text, code = gate(STACK, find_project(ROOT), plans_at(server), tmp_path / "plan.json")
    assert code == 2
    first = text.split("**Total cost", 1)[0]
    assert "impossible update" in first and "llama3-8b-lora-storage-data-disk-0" in first and "ResizeDisk" in first


def test_an_unreadable_record_stops_the_deploy_with_what_to_do(keys, oss_server, tmp_path):
    server, backing = oss_server
    backing.write(STATE, KEY, b'{"schema_version": 99}')
    with pytest.raises(InputError) as err:
        gate(STACK, find_project(ROOT), plans_at(server), tmp_path / "plan.json")
    assert err.value.exit_code == 2 and KEY in err.value.message and "delete the object" in (err.value.hint or "")


def test_only_the_plan_of_that_stack_is_recorded(keys, oss_server, tmp_path):
    server, _ = oss_server
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"kind": "trainstack-plan", "stack": "qwen-7b-spot"}), encoding="utf-8")
    with pytest.raises(InputError, match="not the trainstack plan of stack"):
        record(STACK, find_project(ROOT), plans_at(server), other)


# ---- the workflow's steps, run as the runner runs them -------------------------------------------

def _steps() -> dict[str, dict]:
    doc = yaml.safe_load((ROOT / ".github" / "workflows" / "trainstack-deploy.yml").read_text(encoding="utf-8"))
    return {s["name"]: s for s in doc["jobs"]["up"]["steps"] if "name" in s}


def test_the_gate_runs_before_pulumi_up_and_the_record_only_after_it():
    names = list(_steps())
    gate_step = next(n for n in names if n.startswith("Diff against the last deployed plan"))
    up = next(n for n in names if n.startswith("pulumi up"))
    rec = next(n for n in names if n.startswith("Record the deployed plan"))
    assert names.index(gate_step) < names.index(up) < names.index(rec)
    assert "if" not in _steps()[rec]  # default success(): never after a failed or cancelled `pulumi up`
    for name in (gate_step, rec):
        env = _steps()[name]["env"]
        assert env["PULUMI_BACKEND_URL"] == "${{ secrets.PULUMI_BACKEND_URL }}"
        assert "PULUMI_CONFIG_PASSPHRASE" not in env  # the gate never decrypts the stack's secrets


def _run_step(name: str, server, tmp_path, stack: str = STACK) -> subprocess.CompletedProcess:
    step = next(s for n, s in _steps().items() if n.startswith(name))
    script = step["run"].replace(".venv/bin/python", sys.executable)
    env = dict(os.environ, STACK=stack, RUNNER_TEMP=str(tmp_path), GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"),
               PULUMI_BACKEND_URL=f"s3://{STATE}?endpoint={server.endpoint}&region=cn-shenzhen",
               ALIBABA_CLOUD_ACCESS_KEY_ID="LTAI-deploy", ALIBABA_CLOUD_ACCESS_KEY_SECRET="deploy-secret")
    env.pop("ALIBABA_CLOUD_SECURITY_TOKEN", None)
    return subprocess.run(["bash", "-eo", "pipefail", "-c", script], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)


def test_the_workflow_steps_gate_record_and_gate_again(oss_server, tmp_path):
    server, backing = oss_server
    first = _run_step("Diff against the last deployed plan", server, tmp_path)
    assert first.returncode == 0, first.stderr
    assert "No deployed plan is recorded" in (tmp_path / "summary.md").read_text(encoding="utf-8")
    rec = _run_step("Record the deployed plan", server, tmp_path)
    assert rec.returncode == 0, rec.stderr
    assert json.loads(backing.read(STATE, KEY))["stack"] == STACK
    bigger = copy.deepcopy(sample(STACK))  # what was deployed had a bigger dataset disk
    bigger["storage"]["dataset_gib"] *= 2
    backing.write(STATE, KEY, json.dumps(dict(plan(bigger), stack=STACK)).encode())
    stopped = _run_step("Diff against the last deployed plan", server, tmp_path)
    assert stopped.returncode == 2, stopped.stderr
    assert "stops before `pulumi up` (exit 2)" in stopped.stderr
    assert "impossible update" in (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert "deploy-secret" not in stopped.stdout + stopped.stderr
