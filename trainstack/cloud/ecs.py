"""The ECS OpenAPI calls trainstack makes (catalog refresh, preflight, status), through the official SDK.

``make_client`` is the only place a real client is built (credentials from the default chain);
``call_api`` runs one call under the shared retry policy and maps a failure to exit 5 with its fix;
``describe_stock`` is the stock check preflight uses. Tests inject a client and replace ``_sleep``.
"""

from __future__ import annotations

import calendar
import time
from typing import TYPE_CHECKING, Any, Callable, Optional, Protocol

from alibabacloud_ecs20140526 import models as ecs

from ..errors import CloudApiError
from ..lazy import LazyModule
from ..tags import NAME, ROLE, ROLE_TRAINING
from .credentials import CREDENTIALS_FIX, sdk_config
from .ecs_parse import MalformedResponse, parse_available
from .errors import ApiErrorInfo, cloud_error
from .retry import ECS_READS, GaveUp, RetryPolicy, Sleep, with_retries

if TYPE_CHECKING:
    from alibabacloud_ecs20140526 import client as ecs_client
else:  # the client and its OpenAPI core (~2 s) only when one is built
    ecs_client = LazyModule("alibabacloud_ecs20140526.client")


class EcsClient(Protocol):
    """The four calls refresh and preflight make: the real SDK client's method names."""

    def describe_instance_types(self, request: ecs.DescribeInstanceTypesRequest) -> Any: ...

    def describe_available_resource(self, request: ecs.DescribeAvailableResourceRequest) -> Any: ...

    def describe_price(self, request: ecs.DescribePriceRequest) -> Any: ...

    def describe_spot_price_history(self, request: ecs.DescribeSpotPriceHistoryRequest) -> Any: ...

    def describe_instances(self, request: ecs.DescribeInstancesRequest) -> Any: ...


def make_client(region: str) -> EcsClient:
    """The real SDK client for ``region``. The SDK derives the endpoint from the region
    (``ecs.<region>.aliyuncs.com``; a few regions such as cn-hangzhou use ``ecs-cn-hangzhou``)."""
    try:
        return ecs_client.Client(sdk_config(region))
    except Exception as exc:  # the credential chain can fail while it is being built
        raise CloudApiError(f"cannot create the ECS API client for {region}: {ApiErrorInfo.from_exception(exc).detail}",
                            hint=CREDENTIALS_FIX) from None


#: DescribePrice answers for one type that has no pay-as-you-go price: recorded as unknown.
NO_PRICE_CODES = frozenset({"InvalidInstanceType.ValueNotSupported", "InvalidInstanceType.NotFound",
                            "PricePlanResultNotFound", "Price.PricePlanResultNotFound"})


def _sleep(seconds: float) -> None:  # a seam: tests replace it, nothing really sleeps there
    time.sleep(seconds)


class Tolerated(Exception):
    """A call failed with an error code the caller said it can live with."""

    def __init__(self, code: str, detail: str):
        super().__init__(detail)
        self.code = code
        self.detail = detail


def call_api(api: str, fn: Callable[[Any], Any], request: Any, *, region: str, what: str = "",
             sleep: Optional[Sleep] = None, policy: RetryPolicy = ECS_READS,
             tolerate: frozenset[str] = frozenset()) -> Any:
    """``fn(request)`` with retries on throttling and server errors; other errors map to exit 5.
    An error whose code is in ``tolerate`` raises :class:`Tolerated` instead."""
    try:
        return with_retries(lambda: fn(request), policy=policy, sleep=sleep or _sleep,
                            stop=lambda info: (info.code or "") in tolerate)
    except GaveUp as failed:
        if (failed.info.code or "") in tolerate:
            raise Tolerated(failed.info.code or "", failed.info.detail) from None
        raise cloud_error("ecs", api, region, failed.cause, what=what, attempts=failed.attempts) from None


def describe_stock(client: EcsClient, region: str, *, instance_type: Optional[str] = None,
                   zone: Optional[str] = None, spot_strategy: str = "NoSpot",
                   spot_duration: Optional[int] = None, sleep: Optional[Sleep] = None
                   ) -> dict[str, dict[str, str]]:
    """``{type: {zone: status}}`` for pay-as-you-go instances (one DescribeAvailableResource call)."""
    req = ecs.DescribeAvailableResourceRequest(
        region_id=region, zone_id=zone, destination_resource="InstanceType", resource_type="instance",
        instance_charge_type="PostPaid", spot_strategy=spot_strategy, instance_type=instance_type,
        spot_duration=spot_duration if spot_strategy != "NoSpot" else None)
    what = ", ".join(x for x in (instance_type, zone, spot_strategy) if x)
    resp = call_api("DescribeAvailableResource", client.describe_available_resource, req, region=region,
                    what=what, sleep=sleep)
    try:
        return parse_available(resp)
    except MalformedResponse as exc:
        raise CloudApiError(f"DescribeAvailableResource ({region}) returned a malformed response: {exc.message}",
                            hint="retry later; if it persists the API or SDK changed: update trainstack") from None


#: ECS DescribeInstances answers at most this many instances a page (MaxResults 10..100).
INSTANCES_PAGE = 100


def _ecs_time(value: Any) -> Optional[float]:
    """ECS times (``2025-01-02T03:04Z``, sometimes with seconds) as epoch seconds; None when absent."""
    text = str(value or "").strip()
    for fmt in ("%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%MZ"):
        try:
            return float(calendar.timegm(time.strptime(text, fmt)))
        except ValueError:
            continue
    return None


def describe_stack_instances(client: EcsClient, region: str, stack: str, *,
                             sleep: Optional[Sleep] = None) -> list:
    """The training nodes of ``stack`` (tags ``trainstack:name`` and ``trainstack:role=training``,
    which every node carries: trainstack/tags.py), every page, as InstanceObservation."""
    # status/ loads only when a run is observed
    from ..status.record import InstanceObservation

    out, token = [], None
    while True:
        req = ecs.DescribeInstancesRequest(
            region_id=region, max_results=INSTANCES_PAGE, next_token=token,
            tag=[ecs.DescribeInstancesRequestTag(key=NAME, value=stack),
                 ecs.DescribeInstancesRequestTag(key=ROLE, value=ROLE_TRAINING)])
        body = call_api("DescribeInstances", client.describe_instances, req, region=region, what=stack,
                        sleep=sleep).body
        for i in (getattr(body.instances, "instance", None) or []) if body.instances else []:
            tags = {t.tag_key: t.tag_value for t in (i.tags.tag or [])} if i.tags else {}
            rank = tags.get("trainstack:node-rank")
            out.append(InstanceObservation(
                instance_id=i.instance_id, name=i.instance_name, status=i.status or "unknown",
                node_rank=int(rank) if rank and rank.isdigit() else None,
                spot=(i.spot_strategy or "NoSpot") != "NoSpot", stopped_mode=i.stopped_mode,
                instance_type=i.instance_type, zone=i.zone_id, created_at=_ecs_time(i.creation_time),
                started_at=_ecs_time(i.start_time)))
        token = body.next_token
        if not token:
            return out
