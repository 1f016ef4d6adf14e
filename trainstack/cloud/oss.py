"""OSS for ``trainstack status`` and ``calibrate`` (the nodes' heartbeats) and the deploy gate (the
deployed plan, trainstack.preview.deploy_gate), with Alibaba's SDK.

``alibabacloud-oss-v2`` (the SDK the nodes use too), credentials from the one chain of
:mod:`trainstack.cloud.credentials`, the shared retry policy and error-to-fix table. The CLI runs
outside the VPC, so the endpoint is the SDK's public one for the region unless given. Tests inject
a client (or point it at a local fake OSS server).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from ..lazy import LazyModule
from .credentials import credential_client
from .errors import cloud_error
from .retry import ECS_READS, GaveUp, RetryPolicy, Sleep, with_retries

if TYPE_CHECKING:
    import alibabacloud_oss_v2 as oss
else:  # the SDK (~2 s) only when a client is built or a request made
    oss = LazyModule("alibabacloud_oss_v2")

#: ``<status prefix><node>/heartbeat.json``
HEARTBEAT_OBJECT = "heartbeat.json"


def _unwrap(exc: BaseException) -> BaseException:
    """The SDK wraps a service or network error in OperationError; the classifier wants the inner one."""
    seen = 0
    while hasattr(exc, "unwrap") and seen < 5:
        inner = exc.unwrap()
        if inner is None or inner is exc:
            break
        exc, seen = inner, seen + 1
    return exc


def make_client(region: str, endpoint: Optional[str] = None) -> Any:
    """The real SDK client: the default credentials chain, read fresh by the SDK when it signs."""
    chain = credential_client()

    def provide() -> Any:
        c = chain.get_credential()
        return oss.Credentials(c.access_key_id, c.access_key_secret, c.security_token or None)

    cfg = oss.config.load_default()
    cfg.region = region
    if endpoint:
        cfg.endpoint = endpoint
    cfg.credentials_provider = oss.credentials.CredentialsProviderFunc(provide)
    cfg.retry_max_attempts = 1  # the shared policy retries
    return oss.Client(cfg)


class OssReader:
    """List and read small objects, each call under the shared retry policy (exit 5 on failure)."""

    def __init__(self, client: Any, region: str, *, sleep: Optional[Sleep] = None, policy: RetryPolicy = ECS_READS):
        self.client, self.region, self.sleep, self.policy = client, region, sleep, policy

    def _call(self, api: str, fn: Any, what: str, absent: tuple[str, ...] = ()) -> Any:
        """``fn()`` under the retry policy; None when the service answers one of the ``absent`` codes."""
        def attempt() -> Any:
            try:
                return fn()
            except Exception as exc:  # noqa: BLE001 - classified below
                raise _unwrap(exc) from exc
        try:
            return with_retries(attempt, policy=self.policy, sleep=self.sleep, stop=lambda info: info.code in absent)
        except GaveUp as failed:
            if failed.info.code in absent:
                return None
            raise cloud_error("oss", api, self.region, failed.cause, what=what, attempts=failed.attempts) from None

    def list_keys(self, bucket: str, prefix: str) -> list[str]:
        def pages() -> list[str]:
            paginator = self.client.list_objects_v2_paginator()
            return [o.key for page in paginator.iter_page(oss.ListObjectsV2Request(bucket=bucket, prefix=prefix))
                    for o in page.contents or ()]
        return self._call("ListObjectsV2", pages, f"oss://{bucket}/{prefix}")

    def get_bytes(self, bucket: str, key: str) -> bytes:
        def get() -> bytes:
            result = self.client.get_object(oss.GetObjectRequest(bucket=bucket, key=key))
            with result.body as body:
                return body.read()
        return self._call("GetObject", get, f"oss://{bucket}/{key}")


    def get_optional(self, bucket: str, key: str) -> Optional[bytes]:
        """An object's bytes, or None when there is no such object (NoSuchKey)."""
        def get() -> bytes:
            result = self.client.get_object(oss.GetObjectRequest(bucket=bucket, key=key))
            with result.body as body:
                return body.read()
        return self._call("GetObject", get, f"oss://{bucket}/{key}", absent=("NoSuchKey",))

    def put_bytes(self, bucket: str, key: str, data: bytes, content_type: str = "application/json") -> None:
        """Write one small object (a retried PutObject of the same bytes is idempotent)."""
        request = oss.PutObjectRequest(bucket=bucket, key=key, body=data, content_type=content_type)
        self._call("PutObject", lambda: self.client.put_object(request), f"oss://{bucket}/{key}")


def read_heartbeats(reader: Any, bucket: str, prefix: str, pooled: tuple[str, ...] = ()) -> dict[str, bytes]:
    """``{key: bytes}`` of every node heartbeat under ``prefix`` (``status/``): ``<node>/heartbeat.json``,
    and ``<pool>/<instance id>/heartbeat.json`` for each name in ``pooled`` (a multi-node self-healing
    plan's pool nodes share one name and report under their instance ids)."""
    depth = prefix.count("/")

    def wanted(key: str) -> bool:
        if not key.endswith("/" + HEARTBEAT_OBJECT):
            return False
        parts = key[len(prefix):].split("/")
        return key.count("/") == depth + 1 or (len(parts) == 3 and parts[0] in pooled)

    keys = [k for k in reader.list_keys(bucket, prefix) if wanted(k)]
    return {key: reader.get_bytes(bucket, key) for key in sorted(keys)}
