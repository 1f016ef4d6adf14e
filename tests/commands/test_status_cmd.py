"""`trainstack status`: the whole command over injected fakes of ECS (DescribeInstances), PAI-DLC
(ListJobs, GetJob) and OSS (the stack bucket as files on disk), with the recorded heartbeats; the
--json contract against its committed JSON schema; exit 5 without credentials; --watch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import jsonschema
import pytest
from alibabacloud_ecs20140526 import models as ecs
from alibabacloud_pai_dlc20201203 import models as dlc_models
from alibabacloud_tea_openapi import exceptions as sdk_errors
from plan_factory import resolved

from trainstack import cli
from trainstack.commands import status
from trainstack.status.view import status_json_schema

ROOT = Path(__file__).resolve().parents[2]
HEARTBEATS = ROOT / "tests" / "data" / "heartbeats"
SCHEMA = ROOT / "docs" / "status.schema.json"


class DiskOss:
    """The stack bucket on disk: ``root/<bucket>/<key>`` (what the adapter's OssReader offers)."""

    def __init__(self, root: Path):
        self.root, self.calls = root, []

    def put(self, bucket: str, key: str, data: bytes) -> None:
        path = self.root / bucket / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    def list_keys(self, bucket: str, prefix: str) -> list[str]:
        self.calls.append(("list", bucket, prefix))
        base = self.root / bucket
        keys = [p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_file()] if base.is_dir() else []
        return sorted(k for k in keys if k.startswith(prefix))

    def get_bytes(self, bucket: str, key: str) -> bytes:
        self.calls.append(("get", bucket, key))
        return (self.root / bucket / key).read_bytes()


class FakeEcs:
    def __init__(self, instances: list[dict], error: Exception | None = None):
        self.instances, self.error, self.requests = instances, error, []

    def describe_instances(self, req: ecs.DescribeInstancesRequest):
        self.requests.append(req)
        if self.error:
            raise self.error
        return ecs.DescribeInstancesResponse().from_map({"statusCode": 200, "headers": {}, "body": {
            "RequestId": "r", "Instances": {"Instance": self.instances}, "NextToken": ""}})


def instance(plan, rank: int, status_: str = "Running") -> dict:
    return {"InstanceId": f"i-wz9node{rank}", "InstanceName": plan.node_names()[rank], "Status": status_,
            "SpotStrategy": "SpotWithPriceLimit" if plan.spot else "NoSpot", "StoppedMode": "Not-applicable",
            "InstanceType": plan.instance_type, "ZoneId": plan.zone, "CreationTime": "2025-06-15T10:00Z",
            "StartTime": "2025-06-15T13:00Z",
            "Tags": {"Tag": [{"TagKey": "trainstack:name", "TagValue": plan.name},
                             {"TagKey": "trainstack:node-rank", "TagValue": str(rank)}]}}


class FakeDlc:
    def __init__(self, jobs: list[dict], detail: dict):
        self.jobs, self.detail, self.list_requests, self.get_requests = jobs, detail, [], []

    def list_jobs(self, req):
        self.list_requests.append(req)
        return dlc_models.ListJobsResponse().from_map({"statusCode": 200, "headers": {}, "body": {
            "Jobs": self.jobs, "TotalCount": len(self.jobs), "RequestId": "r"}})

    def get_job(self, job_id, req):
        self.get_requests.append(job_id)
        return dlc_models.GetJobResponse().from_map({"statusCode": 200, "headers": {}, "body": {
            "JobId": job_id, **self.detail}})


@pytest.fixture
def cloud(tmp_path, monkeypatch):
    """The fakes `trainstack status` reads through (credentials present)."""
    fakes = SimpleNamespace(ecs_client=FakeEcs([]), dlc_client=None, oss=DiskOss(tmp_path / "oss"))
    monkeypatch.setattr(status, "CLOUD", status.Cloud(
        credentials=lambda: None, ecs=lambda region: fakes.ecs_client, dlc=lambda region: fakes.dlc_client,
        oss=lambda region: fakes.oss, sleep=lambda s: None))
    return fakes


def upload(oss: DiskOss, plan, *names: str) -> None:
    for name in names:
        beat = json.loads((HEARTBEATS / name).read_text())
        oss.put(plan.storage.oss.bucket, f"status/{beat['node']}/heartbeat.json", (HEARTBEATS / name).read_bytes())


def run(capsys, *args):
    rc = cli.main(["status", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_status_json_is_the_documented_contract_and_matches_its_schema(cloud, capsys):
    plan = resolved("llama3-8b-lora")
    upload(cloud.oss, plan, "llama3-8b-lora-node-0.json")
    cloud.ecs_client = FakeEcs([instance(plan, 0)])
    rc, out, _ = run(capsys, "--stack", "llama3-8b-lora", "--json")
    assert rc == 0
    doc = json.loads(out)
    committed = json.loads(SCHEMA.read_text())
    assert committed == status_json_schema(), ("docs/status.schema.json is out of date: the --json contract changed; "
                                               "bump schema_version if a field was removed or renamed")
    jsonschema.Draft202012Validator(committed).validate(doc)
    assert doc["schema_version"] == 1 and doc["stack"] == "llama3-8b-lora" and doc["job"]["state"] == "training"
    assert doc["nodes"][0]["instance_id"] == "i-wz9node0" and doc["spend"]["estimate"] is True
    # the nodes were found by the stack's tags; the heartbeats read from the status prefix
    (req,) = cloud.ecs_client.requests
    assert {(t.key, t.value) for t in req.tag} == {("trainstack:name", "llama3-8b-lora"),
                                                   ("trainstack:role", "training")}
    assert ("list", plan.storage.oss.bucket, "status/") in cloud.oss.calls


def test_status_text_for_a_three_node_run_with_a_stale_node(cloud, capsys):
    plan = resolved("llama3-70b-full")  # checkpoints on CPFS: the bucket holds the heartbeats
    upload(cloud.oss, plan, *[f"llama3-70b-full-node-{r}.json" for r in range(3)])
    cloud.ecs_client = FakeEcs([instance(plan, r) for r in range(3)])
    rc, out, _ = run(capsys, "stacks/profiles/llama3-70b-full.yaml")
    assert rc == 0
    assert out.startswith("llama3-70b-full (ecs: 3 x ecs.ebmgn7ex.32xlarge, on-demand)")
    assert "llama3-70b-full-node-2" in out and "(stale)" in out and "deadline" in out


def test_a_malformed_heartbeat_in_the_bucket_is_refused_and_named_the_rest_still_shown(cloud, capsys):
    plan = resolved("llama3-70b-full")
    upload(cloud.oss, plan, "llama3-70b-full-node-0.json")
    cloud.oss.put(plan.storage.oss.bucket, "status/llama3-70b-full-node-1/heartbeat.json", b'{"schema": "x"}')
    rc, out, _ = run(capsys, "--stack", "llama3-70b-full", "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["nodes"][0]["job_state"] == "training" and doc["nodes"][1]["job_state"] is None
    assert any("refused:" in label and "node-1/heartbeat.json" in label for label in doc["labels"])


def test_a_dlc_job_is_found_by_its_name_and_read_with_getjob(cloud, capsys):
    cloud.dlc_client = FakeDlc(
        jobs=[{"JobId": "dlc-old", "DisplayName": "qwen-7b-dlc", "GmtCreateTime": "2025-06-01T00:00:00Z"},
              {"JobId": "dlc-new", "DisplayName": "qwen-7b-dlc", "GmtCreateTime": "2025-06-15T00:00:00Z"},
              {"JobId": "dlc-gone", "DisplayName": "qwen-7b-dlc", "GmtCreateTime": "2025-06-16T00:00:00Z",
               "IsDeleted": True}],
        detail={"DisplayName": "qwen-7b-dlc", "Status": "Running", "Duration": 3600,
                "GmtCreateTime": "2025-06-15T00:00:00Z", "GmtRunningTime": "2025-06-15T00:05:00Z",
                "Pods": [{"PodId": "a"}, {"PodId": "b"}]})
    rc, out, _ = run(capsys, "--stack", "qwen-7b-dlc", "--json")
    doc = json.loads(out)
    assert rc == 0 and cloud.dlc_client.get_requests == ["dlc-new"]
    assert (doc["job"]["state"], doc["job"]["dlc_status"], doc["job"]["started_at"]) == (
        "training", "Running", "2025-06-15T00:05:00Z")
    assert cloud.dlc_client.list_requests[0].display_name == "qwen-7b-dlc"
    rc, out, _ = run(capsys, "--stack", "qwen-7b-dlc", "--dlc-job-id", "dlc-old", "--json")
    assert rc == 0 and cloud.dlc_client.get_requests[-1] == "dlc-old"


def test_watch_repeats_until_the_run_is_over(cloud, capsys, monkeypatch):
    plan = resolved("qwen-7b-spot")
    upload(cloud.oss, plan, "qwen-7b-spot-node-0.json")
    cloud.ecs_client = FakeEcs([instance(plan, 0)])
    sleeps = []

    def sleep(seconds):  # between two refreshes the guard stops the job and the node
        sleeps.append(seconds)
        upload(cloud.oss, plan, "qwen-7b-spot-stopped.json")
        cloud.ecs_client.instances = [dict(instance(plan, 0, "Stopped"), StoppedMode="StopCharging")]

    monkeypatch.setattr(status.time, "sleep", sleep)
    rc = status.run(cli.build_parser().parse_args(["status", "--stack", "qwen-7b-spot", "--json", "--watch", "30"]),
                    sleep=sleep)
    lines = capsys.readouterr().out.splitlines()
    assert rc == 0 and sleeps == [30.0] and len(lines) == 2
    first, last = (json.loads(line) for line in lines)
    assert first["job"]["state"] == "training" and last["job"]["state"] == "stopped"
    assert last["job"]["stop"]["reason"] == "budget" and last["nodes"][0]["stopped_mode"] == "StopCharging"


@pytest.mark.parametrize("value", ["1", "nan", "7200"])
def test_watch_intervals_out_of_range_are_refused(cloud, capsys, value):
    rc, _, err = run(capsys, "--stack", "qwen-7b-spot", "--watch", value)
    assert rc == 2 and "--watch" in err


def test_api_errors_exit_5_with_the_fix(cloud, capsys):
    cloud.ecs_client = FakeEcs([], error=sdk_errors.ClientException(
        status_code=403, code="Forbidden.RAM", message="not authorized", request_id="req-9", data={}))
    rc, _, err = run(capsys, "--stack", "llama3-8b-lora")
    assert rc == 5 and "DescribeInstances" in err and "permission denied" in err and "ecs:DescribeInstances" in err


def test_bad_input_exits_2(cloud, capsys):
    assert run(capsys)[0] == 2
    assert run(capsys, "--stack", "nope")[0] == 2
    rc, _, err = run(capsys, "--stack", "llama3-8b-lora", "--dlc-job-id", "dlc-1")
    assert rc == 2 and "DLC plans" in err


def test_without_credentials_status_exits_5_with_how_to_configure_them(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ALIBABA_CLOUD")}
    env.update(HOME=str(tmp_path), ALIBABA_CLOUD_ECS_METADATA_DISABLED="true")
    for args in (["--stack", "llama3-8b-lora"], ["--stack", "llama3-8b-lora", "--json"]):
        proc = subprocess.run([sys.executable, "-m", "trainstack", "status", *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 5 and "Traceback" not in proc.stderr
        assert "no Alibaba Cloud credentials" in proc.stderr and "ALIBABA_CLOUD_ACCESS_KEY_ID" in proc.stderr
    assert json.loads(proc.stdout)["exit_code"] == 5
