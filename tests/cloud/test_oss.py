"""The OSS adapter `status` and `calibrate` read heartbeats through: Alibaba's SDK against a local
fake OSS server (ListObjectsV2 pages, GetObject), credentials from the one chain, and failures
classified by the one error table (exit 5 with the fix)."""

from __future__ import annotations

import sys
from pathlib import Path

import alibabacloud_oss_v2 as oss
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bootstrap"))
from fake_oss import DirStore, FakeOssServer  # noqa: E402

from trainstack.cloud.oss import OssReader, make_client, read_heartbeats  # noqa: E402
from trainstack.errors import CloudApiError  # noqa: E402

BUCKET = "llama3-8b-lora-ckpt-7e5d8a"


def _env_keys(monkeypatch) -> None:
    """Keys in the environment, as a user sets them before running trainstack. alibabacloud-credentials
    copies the variables when it is first imported (utils.auth_util), so an earlier test's import
    would hide them: the copy is patched too."""
    from alibabacloud_credentials.utils import auth_util

    for name, attr, value in (("ALIBABA_CLOUD_ACCESS_KEY_ID", "environment_access_key_id", "LTAI-test"),
                              ("ALIBABA_CLOUD_ACCESS_KEY_SECRET", "environment_access_key_secret", "test-secret")):
        monkeypatch.setenv(name, value)
        monkeypatch.setattr(auth_util, attr, value)
    monkeypatch.delenv("ALIBABA_CLOUD_SECURITY_TOKEN", raising=False)
    monkeypatch.setattr(auth_util, "environment_security_token", None)


def test_heartbeats_are_listed_page_by_page_and_read_with_the_sdk(tmp_path, monkeypatch):
    _env_keys(monkeypatch)
    backing = DirStore(tmp_path / "oss")
    for node in range(3):
        backing.write(BUCKET, f"status/llama3-8b-lora-node-{node}/heartbeat.json", b'{"node": %d}' % node)
    backing.write(BUCKET, "status/llama3-8b-lora-node-0/old/heartbeat.json", b"{}")  # not a node's record
    backing.write(BUCKET, "checkpoints/step-1/model.pt", b"weights")
    with FakeOssServer(backing, page_size=2) as server:
        reader = OssReader(make_client("cn-shenzhen", server.endpoint), "cn-shenzhen", sleep=lambda s: None)
        found = read_heartbeats(reader, BUCKET, "status/")
        requests = list(server.requests)
    assert found == {f"status/llama3-8b-lora-node-{n}/heartbeat.json": b'{"node": %d}' % n for n in range(3)}
    lists = [r for r in requests if r["query"].get("list-type") == "2"]
    assert len(lists) >= 2, "the paginator followed the continuation token"
    assert all(r["query"].get("prefix") == "status/" for r in lists)
    assert all("LTAI-test" in r["headers"].get("Authorization", "") for r in requests), "signed with the chain's key"
    assert not any(r["key"].startswith("checkpoints/") for r in requests), "only the status prefix is read"


class Refusing:
    def __init__(self, error: Exception):
        self.error, self.calls = error, 0

    def list_objects_v2_paginator(self):
        self.calls += 1
        raise self.error


def service_error(status: int, code: str) -> Exception:
    inner = oss.exceptions.ServiceError(status_code=status, code=code, message=f"{code} says no", request_id="req-7",
                                        ec="0003-00000001", timestamp="", request_target="")
    return oss.exceptions.OperationError(name="ListObjectsV2", error=inner)


@pytest.mark.parametrize("status,code,fix,calls", [
    (403, "AccessDenied", "oss:ListObjects and oss:GetObject", 1),
    (404, "NoSuchBucket", "deploy the stack with `pulumi up`", 1),
    (503, "ServiceUnavailable", "troubleshoot", 5),  # retried under the shared policy, then given up
])
def test_failures_exit_5_with_the_fix(status, code, fix, calls):
    client = Refusing(service_error(status, code))
    with pytest.raises(CloudApiError) as err:
        read_heartbeats(OssReader(client, "cn-shenzhen", sleep=lambda s: None), BUCKET, "status/")
    assert err.value.exit_code == 5 and code in err.value.message and "req-7" in err.value.message
    assert fix in (err.value.hint or "") and client.calls == calls
