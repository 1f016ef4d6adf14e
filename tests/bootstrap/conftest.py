"""Fixtures for the bootstrap tests: a fake ECS metadata service (with tokens) and a fake ECS
API on 127.0.0.1, a way to write a plan's rendered files to a directory, what `pulumi up` writes to
the stack bucket (the job settings, the node programs), and the node programs as importable modules."""

from __future__ import annotations

import importlib
import json
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

import pytest

from plan_factory import single_gpu_lora_plan

from trainstack.bootstrap import render_files

SECRET = "fake-secret-for-tests"
TOKEN_TTL_HEADER = "X-aliyun-ecs-metadata-token-ttl-seconds"
TOKEN_HEADER = "X-aliyun-ecs-metadata-token"


class FakeCloud:
    """Metadata service at /latest/... and the ECS and KMS RPC APIs at /?Action=..., one server.

    ``routes`` maps a metadata path to a list of (status, body) answers, used in order; the
    last one repeats. GETs without a valid token get 401, as with http_tokens=required."""

    def __init__(self) -> None:
        self.tokens: set[str] = set()
        self.token_requests: list[dict[str, str]] = []
        self.gets: list[tuple[str, str | None]] = []
        self.ecs_calls: list[dict[str, str]] = []
        self.kms_calls: list[dict[str, str]] = []
        self.tag_calls: list[dict[str, str]] = []
        self.tags: dict[str, str] = {}  # this instance's tags (ListTagResources)
        self.secrets: dict[str, str] = {}  # KMS secret name -> value (GetSecretValue)
        self.routes: dict[str, list[tuple[int, str]]] = {
            "meta-data/instance-id": [(200, "i-wz9testinstance")],
            "meta-data/region-id": [(200, "cn-shenzhen")],
            "meta-data/ram/security-credentials/": [(200, "TrainstackNodeRole")],
            "meta-data/ram/security-credentials/TrainstackNodeRole": [(200, json.dumps({
                "AccessKeyId": "STS.fakeid", "AccessKeySecret": SECRET, "SecurityToken": "sts-token/+=",
                "Expiration": "2099-01-01T00:00:00Z", "Code": "Success"}))],
        }
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def revoke_tokens(self) -> None:
        with self.lock:
            self.tokens.clear()

    def _answer(self, path: str) -> tuple[int, str]:
        with self.lock:
            answers = self.routes.get(path)
            if not answers:
                return 404, ""
            return answers.pop(0) if len(answers) > 1 else answers[0]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        cloud = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _send(self, status: int, body: str) -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_PUT(self) -> None:  # noqa: N802
                if self.path != "/latest/api/token" or not self.headers.get(TOKEN_TTL_HEADER):
                    return self._send(400, "")
                with cloud.lock:
                    token = f"token-{len(cloud.token_requests)}"
                    cloud.token_requests.append({"ttl": self.headers[TOKEN_TTL_HEADER]})
                    cloud.tokens.add(token)
                self._send(200, token)

            def do_GET(self) -> None:  # noqa: N802
                if self.path.startswith("/?"):
                    return self._ecs()
                token = self.headers.get(TOKEN_HEADER)
                path = self.path.removeprefix("/latest/")
                with cloud.lock:
                    cloud.gets.append((path, token))
                    valid = token in cloud.tokens
                if not valid:
                    return self._send(401, "")
                self._send(*cloud._answer(path))

            def _ecs(self) -> None:
                from alibabacloud_tea_openapi.utils import Utils  # Alibaba's own signer, as a check

                query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
                signature = query.pop("Signature", "")
                with cloud.lock:
                    if query.get("Action") == "ListTagResources":
                        cloud.tag_calls.append(dict(query, Signature=signature))
                    elif query.get("Action") != "GetSecretValue":
                        cloud.ecs_calls.append(dict(query, Signature=signature))
                if signature != Utils.get_rpcsignature(query, "GET", SECRET):
                    return self._send(400, json.dumps({"Code": "SignatureDoesNotMatch", "Message": "bad"}))
                if query.get("Action") == "GetSecretValue":
                    with cloud.lock:
                        cloud.kms_calls.append(query)
                    if query.get("Version") != "2016-01-20" or query["SecretName"] not in cloud.secrets:
                        return self._send(404, json.dumps({"Code": "Forbidden.ResourceNotFound", "Message": "no"}))
                    return self._send(200, json.dumps({"RequestId": "REQ-K", "SecretName": query["SecretName"],
                                                       "SecretData": cloud.secrets[query["SecretName"]],
                                                       "SecretDataType": "text"}))
                if query.get("Action") == "ListTagResources":
                    with cloud.lock:
                        items = [{"ResourceType": "instance", "ResourceId": query.get("ResourceId.1"), "TagKey": k,
                                  "TagValue": v} for k, v in cloud.tags.items() if k == query.get("Tag.1.Key")]
                    return self._send(200, json.dumps({"RequestId": "REQ-T", "TagResources": {"TagResource": items}}))
                self._send(200, json.dumps({"RequestId": "REQ-1"}))

        return Handler


@pytest.fixture
def fake_cloud():
    cloud = FakeCloud()
    cloud.thread.start()
    try:
        yield cloud
    finally:
        cloud.server.shutdown()
        cloud.server.server_close()


def publish_settings(plan, cloud: "FakeCloud", store_root: Path, **kwargs) -> str:
    """What `pulumi up` does for the job settings channel: the document into the stack bucket (a
    DirStore root) and its digest into this instance's tag. Returns the digest."""
    from fake_oss import DirStore

    from trainstack.bootstrap.render import JOB_SETTINGS_TAG, render_job_settings

    from trainstack.bootstrap.node import GENERATIONS_DIR
    settings = render_job_settings(plan, **kwargs)
    oss = plan.storage.oss
    DirStore(store_root).write(oss.bucket, oss.job_settings_key, settings.document.encode())
    if plan.elastic:  # each generation at its content-addressed key too (components/job_settings.py)
        DirStore(store_root).write(oss.bucket, f"{oss.job_prefix}{GENERATIONS_DIR}{settings.digest}.json",
                                   settings.document.encode())
    cloud.tags[JOB_SETTINGS_TAG] = settings.digest
    return settings.digest


def publish_programs(plan, store_root: Path) -> str:
    """What `pulumi up` writes for the node programs (components/job_settings.py): each program and
    the manifest at their content-addressed keys. Returns the set's digest."""
    from fake_oss import DirStore

    from trainstack.bootstrap.programs import program_objects, program_set

    for obj in program_objects(plan):
        DirStore(store_root).write(plan.storage.oss.bucket, obj.key, obj.content.encode())
    return program_set().digest


def write_rendered(plan, directory: Path, node_rank: int = 0, **kwargs) -> dict[str, Path]:
    """Write each rendered file as ``directory/<name>``; returns name -> path."""
    directory.mkdir(parents=True, exist_ok=True)
    out = {}
    for f in render_files(plan, node_rank, **kwargs):
        path = directory / f.name
        path.write_text(f.content, encoding="utf-8")
        path.chmod(int(f.permissions, 8))
        out[f.name] = path
    return out


@pytest.fixture
def rendered() -> Callable[..., dict[str, Path]]:
    return write_rendered


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    """Poll ``predicate`` until it holds; fail after ``timeout`` seconds (never a fixed sleep)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


@pytest.fixture
def waiter() -> Callable[..., None]:
    return wait_for


class NodePrograms:
    """The node programs exactly as rendered, in one program directory (``lib``), importable by duty:
    ``programs.metadata`` is trainstack_metadata.py, ``programs.path("trainstack_agent.py")`` a file."""

    def __init__(self, lib: Path) -> None:
        self.lib = lib

    def path(self, name: str) -> Path:
        return self.lib / name

    def __getattr__(self, duty: str):
        if not (self.lib / f"trainstack_{duty}.py").is_file():
            raise AttributeError(duty)
        return importlib.import_module(f"trainstack_{duty}")


def _forget_programs() -> None:
    for name in [m for m in sys.modules if m.startswith("trainstack_")]:
        del sys.modules[name]


@pytest.fixture
def programs(tmp_path, monkeypatch):
    lib = tmp_path / "lib"
    lib.mkdir()
    for f in render_files(single_gpu_lora_plan(), 0):
        if f.program:
            (lib / f.name).write_text(f.content)
    _forget_programs()
    monkeypatch.syspath_prepend(str(lib))
    yield NodePrograms(lib)
    _forget_programs()
