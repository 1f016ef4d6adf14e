"""`trainstack catalog refresh`: GPU facts, stock and prices from Alibaba's ECS API, as overlays.

Per region, with the official SDK (``alibabacloud-ecs20140526``) through an injected client:

1. ``DescribeInstanceTypes``: once per curated family (``InstanceTypeFamily=ecs.<family>``) and
   once with ``MinimumGPUAmount=1`` to catch GPU families the catalog lacks; paged with
   ``MaxResults``/``NextToken``. Facts: GPU count, ``GPUSpec``, GPU memory, vCPU, memory,
   ``EriQuantity``, network cards, bandwidth.
2. ``DescribeAvailableResource`` (``DestinationResource=InstanceType``) twice: on-demand
   (``NoSpot``) and spot (``SpotAsPriceGo``): which zones have each type in stock.
3. ``DescribePrice`` per offered GPU type (``ResourceType=instance``, ``PriceUnit=Hour``): list
   (``OriginalPrice``) and trade (``TradePrice``) price of the instance part.
4. ``DescribeSpotPriceHistory`` per offered type and spot zone: the latest price.

Throttling and server errors are retried with capped exponential backoff; anything else stops
the refresh with a :class:`CloudApiError` (exit 5) naming the call and the fix. Every response is
checked (a malformed one is rejected), the overlays are validated and merged into a trial
catalog, and only when every region succeeded are the files written, each atomically. The
decisions are pure functions over plain data; only :func:`make_client` touches the network.
"""

from __future__ import annotations

import datetime as _dt
import logging
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Protocol, TextIO

from alibabacloud_ecs20140526 import models as ecs

from ..errors import CloudApiError, InputError, Problem, did_you_mean
from ..fsutil import atomic_write_text
from . import overlay as ov
from .loader import Catalog, CatalogError, build_catalog

Sleep = Callable[[float], None]

# ---- the client ---------------------------------------------------------------------------


class EcsClient(Protocol):
    """The four calls refresh and preflight make: the real SDK client's method names."""

    def describe_instance_types(self, request: ecs.DescribeInstanceTypesRequest) -> Any: ...

    def describe_available_resource(self, request: ecs.DescribeAvailableResourceRequest) -> Any: ...

    def describe_price(self, request: ecs.DescribePriceRequest) -> Any: ...

    def describe_spot_price_history(self, request: ecs.DescribeSpotPriceHistoryRequest) -> Any: ...


CREDENTIALS_FIX = (
    "configure Alibaba Cloud credentials (the standard chain, first match wins): set "
    "ALIBABA_CLOUD_ACCESS_KEY_ID and ALIBABA_CLOUD_ACCESS_KEY_SECRET (plus ALIBABA_CLOUD_SECURITY_TOKEN "
    "for STS); or `aliyun configure` (~/.aliyun/config.json); or a profile in "
    "~/.alibabacloud/credentials.ini (ALIBABA_CLOUD_PROFILE selects one); or run on ECS with a RAM role "
    "(ALIBABA_CLOUD_ECS_METADATA=<role name>)")


def make_client(region: str) -> EcsClient:
    """The real SDK client for ``region``, with credentials from the standard chain.

    The SDK derives the endpoint from the region (``ecs.<region>.aliyuncs.com``; a few regions
    such as cn-hangzhou use ``ecs-cn-hangzhou.aliyuncs.com``), so none is passed. Building the
    client does no network I/O; credentials are resolved at the first call.
    """
    try:
        from alibabacloud_credentials.client import Client as CredentialClient
        from alibabacloud_ecs20140526.client import Client
        from alibabacloud_tea_openapi import models as open_api_models

        # alibabacloud-credentials attaches its own stderr handlers to the "credentials" logger
        # (at import) and logs each provider's failure with a traceback, several times over; the
        # CloudApiError raised here carries the chain's messages once, so those records are muted
        logging.getLogger("credentials").setLevel(logging.CRITICAL)
        return Client(open_api_models.Config(credential=CredentialClient(), region_id=region))
    except Exception as exc:  # the credential chain can fail while it is being built
        raise CloudApiError(f"cannot create the ECS API client for {region}: {_describe(exc)}",
                            hint=CREDENTIALS_FIX) from None


# ---- calls with retries and error mapping -------------------------------------------------

RETRY_CODES = frozenset({
    "Throttling", "Throttling.User", "Throttling.Api", "Throttling.Resource", "Throttling.Tps",
    "ServiceUnavailable", "InternalError", "UnknownError", "ServiceBusy", "RequestTimeout",
})
RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
CREDENTIAL_CODES = frozenset({
    "InvalidAccessKeyId.NotFound", "InvalidAccessKeyId", "InvalidAccessKeyId.Inactive",
    "SignatureDoesNotMatch", "IncompleteSignature", "InvalidSecurityToken.Expired",
    "InvalidSecurityToken.Malformed", "InvalidSecurityToken.MismatchWithAccessKey",
})
PERMISSION_CODES = frozenset({"NoPermission", "Forbidden", "Forbidden.RAM", "Forbidden.NoPermission",
                              "Forbidden.AccessDenied", "Forbidden.RiskControl", "Forbidden.Unauthorized"})
REGION_CODES = frozenset({"InvalidRegionId", "InvalidRegionId.NotFound", "InvalidRegionId.MalFormed",
                          "InvalidRegion.NotExist", "InvalidZoneId.NotFound"})
#: DescribePrice answers for one type that has no pay-as-you-go price: recorded as unknown.
NO_PRICE_CODES = frozenset({"InvalidInstanceType.ValueNotSupported", "InvalidInstanceType.NotFound",
                            "PricePlanResultNotFound", "Price.PricePlanResultNotFound"})


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 5
    base_s: float = 0.5
    cap_s: float = 8.0

    def delay(self, attempt: int, retry_after: Optional[float] = None) -> float:
        wait = min(self.cap_s, self.base_s * 2 ** (attempt - 1))
        if retry_after:
            wait = min(self.cap_s, max(wait, float(retry_after)))
        return wait


DEFAULT_RETRY = RetryPolicy()


def _sleep(seconds: float) -> None:  # a seam: tests replace it, nothing really sleeps there
    time.sleep(seconds)


def _unwrap(exc: BaseException) -> BaseException:
    """The error inside the SDK's ``UnretryableException`` (credentials, connection failures)."""
    seen = 0
    while getattr(exc, "inner_exception", None) is not None and seen < 5:
        exc = exc.inner_exception  # type: ignore[attr-defined]
        seen += 1
    return exc


def _is_network_failure(exc: BaseException) -> bool:
    exc = _unwrap(exc)
    if isinstance(exc, (ConnectionError, TimeoutError, OSError)):
        return True
    return type(exc).__name__ in ("RetryError", "ConnectionError", "ConnectTimeout", "ReadTimeout", "Timeout",
                                  "UnretryableException") and not _error_code(exc)


def _error_code(exc: BaseException) -> Optional[str]:
    code = getattr(exc, "code", None)
    return str(code) if code not in (None, "", "None") else None


def _status(exc: BaseException) -> Optional[int]:
    for attr in ("status_code", "statusCode"):
        v = getattr(exc, attr, None)
        if isinstance(v, int):
            return v
    data = getattr(exc, "data", None)
    if isinstance(data, dict) and isinstance(data.get("statusCode"), int):
        return data["statusCode"]
    return None


def _describe(exc: BaseException) -> str:
    code = _error_code(exc)
    msg = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return f"{code}: {msg}" if code and code not in str(msg) else str(msg)


def _is_credential_failure(exc: BaseException) -> bool:
    exc = _unwrap(exc)
    return type(exc).__name__ == "CredentialException" or (_error_code(exc) or "") in CREDENTIAL_CODES


def _is_retryable(exc: BaseException) -> bool:
    if _is_credential_failure(exc):
        return False
    exc = _unwrap(exc)
    code = _error_code(exc) or ""
    if code in RETRY_CODES or code.startswith("Throttling") or type(exc).__name__ == "ThrottlingException":
        return True
    if _status(exc) in RETRY_STATUS:
        return True
    return _is_network_failure(exc)  # connection failures carry no code


def cloud_error(api: str, region: str, exc: BaseException, *, what: str = "", attempts: int = 1) -> CloudApiError:
    """The user-facing error for a failed call: the call, what went wrong, and the fix."""
    exc = _unwrap(exc)
    code = _error_code(exc) or ""
    status = _status(exc)
    where = f"{api} ({region}{', ' + what if what else ''})"
    detail = _describe(exc)
    if _is_credential_failure(exc):
        return CloudApiError(f"{where} failed: credentials were rejected or not found: {detail}",
                             hint=CREDENTIALS_FIX)
    if code in PERMISSION_CODES or code.startswith("Forbidden") or status == 403:
        return CloudApiError(
            f"{where} failed: permission denied: {detail}",
            hint=f"grant the RAM user or role ecs:{api} (the system policy AliyunECSReadOnlyAccess covers "
                 "every call trainstack makes), then retry")
    if code in REGION_CODES or code.startswith("InvalidRegionId"):
        return CloudApiError(f"{where} failed: the region is not valid for ECS: {detail}",
                             hint="check the region id (`trainstack catalog` lists the known regions)")
    if _is_network_failure(exc):
        return CloudApiError(f"{where} failed after {attempts} attempts: cannot reach the ECS API: {detail}",
                             hint=f"check network access (and any proxy) to the ECS endpoint of {region}, "
                                  "then retry")
    if _is_retryable(exc):
        return CloudApiError(f"{where} failed after {attempts} attempts: {detail}",
                             hint="the API is throttling or unavailable; retry later, or refresh fewer "
                                  "regions at once")
    return CloudApiError(f"{where} failed: {detail}",
                         hint="check the request and the account (the error code is explained in "
                              "Alibaba Cloud's API error center)")


class Tolerated(Exception):
    """A call failed with an error code the caller said it can live with."""

    def __init__(self, code: str, detail: str):
        super().__init__(detail)
        self.code = code
        self.detail = detail


def call_api(api: str, fn: Callable[[Any], Any], request: Any, *, region: str, what: str = "",
             sleep: Optional[Sleep] = None, policy: RetryPolicy = DEFAULT_RETRY,
             tolerate: frozenset[str] = frozenset()) -> Any:
    """``fn(request)`` with retries on throttling and server errors; other errors map to exit 5.

    An error whose code is in ``tolerate`` raises :class:`Tolerated` instead.
    """
    sleep = sleep or _sleep
    for attempt in range(1, policy.attempts + 1):
        try:
            return fn(request)
        except Exception as exc:  # the SDK raises Tea/Dara exceptions, credentials its own
            if (_error_code(exc) or "") in tolerate:
                raise Tolerated(_error_code(exc) or "", _describe(exc)) from None
            if _is_retryable(exc) and attempt < policy.attempts:
                sleep(policy.delay(attempt, getattr(exc, "retry_after", None)))
                continue
            raise cloud_error(api, region, exc, what=what, attempts=attempt) from None
    raise AssertionError("unreachable")  # pragma: no cover


# ---- response parsing (pure) --------------------------------------------------------------


class MalformedResponse(Exception):
    """A response that does not have the shape or values the API documents."""

    def __init__(self, api: str, message: str):
        super().__init__(f"{api}: {message}")
        self.api = api
        self.message = message


def _body(api: str, response: Any) -> Any:
    body = getattr(response, "body", response)  # a Response or its body
    if body is None:
        raise MalformedResponse(api, "the response has no body")
    return body


def _num(api: str, where: str, v: Any, *, integer: bool = False, optional: bool = True,
         low: float = 0) -> Optional[float]:
    if v is None:
        if optional:
            return None
        raise MalformedResponse(api, f"{where} is missing")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (integer and float(v) != int(v)):
        raise MalformedResponse(api, f"{where} is {v!r}, not a {'whole ' if integer else ''}number")
    if v < low:
        raise MalformedResponse(api, f"{where} is {v!r} (negative)" if v < 0 else f"{where} is {v!r}")
    return int(v) if integer else float(v)


def parse_instance_types(response: Any) -> tuple[list[dict[str, Any]], Optional[str]]:
    """(facts per type, next token) from a DescribeInstanceTypes response."""
    api = "DescribeInstanceTypes"
    body = _body(api, response)
    holder = getattr(body, "instance_types", None)
    items = getattr(holder, "instance_type", None) if holder is not None else None
    if holder is None or not isinstance(items, list):
        raise MalformedResponse(api, "InstanceTypes.InstanceType is missing")
    out = []
    for item in items:
        name = getattr(item, "instance_type_id", None)
        fam = getattr(item, "instance_type_family", None)
        if not isinstance(name, str) or not name.startswith("ecs."):
            raise MalformedResponse(api, f"InstanceTypeId {name!r} is not an ECS type id")
        if not isinstance(fam, str) or not fam.startswith("ecs.") or not name.startswith(fam):
            raise MalformedResponse(api, f"{name}: InstanceTypeFamily {fam!r} does not match the type")
        gpus = _num(api, f"{name}: GPUAmount", getattr(item, "gpuamount", None), integer=True, optional=False)
        if gpus < 1:
            raise MalformedResponse(api, f"{name}: GPUAmount is {gpus}: GPU count mismatch for a GPU type")
        cards = getattr(getattr(item, "network_cards", None), "network_card_info", None)
        card_count = _num(api, f"{name}: NetworkCardQuantity", getattr(item, "network_card_quantity", None),
                          integer=True)
        if card_count is None and isinstance(cards, list) and cards:
            card_count = len(cards)
        rx = _num(api, f"{name}: InstanceBandwidthRx", getattr(item, "instance_bandwidth_rx", None))
        spec = getattr(item, "gpuspec", None)
        memory = _num(api, f"{name}: MemorySize", getattr(item, "memory_size", None))
        out.append({
            "name": name,
            "family": fam.removeprefix("ecs."),
            "gpu_count": int(gpus),
            "gpu_spec": spec if isinstance(spec, str) and spec else None,
            "gpu_memory_gib": _num(api, f"{name}: GPUMemorySize", getattr(item, "gpumemory_size", None)) or None,
            "vcpu": _num(api, f"{name}: CpuCoreCount", getattr(item, "cpu_core_count", None), integer=True,
                         low=1),
            "memory_gib": memory or None,
            "eri_count": _num(api, f"{name}: EriQuantity", getattr(item, "eri_quantity", None), integer=True),
            "network_card_count": card_count,
            # InstanceBandwidthRx is Kbit/s with 1 Gbit/s = 1,024,000 (ecs.g6.large: 1024000)
            "network_bandwidth_gbps": round(rx / 1_024_000, 3) if rx else None,
        })
    token = getattr(body, "next_token", None)
    return out, token or None


#: StatusCategory values that mean "can be bought now" (ClosedWithStock = low supply).
IN_STOCK = ("WithStock", "ClosedWithStock")


def parse_available(response: Any) -> dict[str, dict[str, str]]:
    """``{instance_type: {zone: status}}`` from DescribeAvailableResource (InstanceType level).

    ``status`` is the StatusCategory (``WithStock``, ``ClosedWithStock``, ``WithoutStock``,
    ``ClosedWithoutStock``), or ``Available``/``SoldOut`` when the category is absent.
    """
    api = "DescribeAvailableResource"
    body = _body(api, response)
    holder = getattr(body, "available_zones", None)
    if holder is None:
        return {}  # the API omits AvailableZones when nothing matches
    zones = getattr(holder, "available_zone", None)
    if not isinstance(zones, list):
        raise MalformedResponse(api, "AvailableZones.AvailableZone is not a list")
    out: dict[str, dict[str, str]] = {}
    for z in zones:
        zone = getattr(z, "zone_id", None)
        if not isinstance(zone, str) or not zone:
            raise MalformedResponse(api, "an AvailableZone has no ZoneId")
        resources = getattr(getattr(z, "available_resources", None), "available_resource", None) or []
        for res in resources:
            if getattr(res, "type", None) not in (None, "InstanceType"):
                continue
            for sr in getattr(getattr(res, "supported_resources", None), "supported_resource", None) or []:
                value = getattr(sr, "value", None)
                if not isinstance(value, str) or not value:
                    raise MalformedResponse(api, f"{zone}: a SupportedResource has no Value")
                status = getattr(sr, "status_category", None) or getattr(sr, "status", None) or "unknown"
                out.setdefault(value, {})[zone] = str(status)
    return out


def in_stock(status: Optional[str]) -> bool:
    return status in IN_STOCK or status == "Available"


def parse_price(response: Any, instance_type: str) -> tuple[str, float, Optional[float]]:
    """(currency, list price, trade price) per hour of the instance part of a DescribePrice answer."""
    api = "DescribePrice"
    body = _body(api, response)
    price = getattr(getattr(body, "price_info", None), "price", None)
    if price is None:
        raise MalformedResponse(api, f"{instance_type}: PriceInfo.Price is missing")
    currency = getattr(price, "currency", None)
    if currency not in ov.CURRENCIES:
        raise MalformedResponse(api, f"{instance_type}: Currency is {currency!r}, not CNY or USD")
    source = price
    for d in getattr(getattr(price, "detail_infos", None), "detail_info", None) or []:
        if str(getattr(d, "resource", "")).lower() == "instancetype":
            source = d  # the instance alone, without the system disk priced alongside
            break
    original = _num(api, f"{instance_type}: OriginalPrice", getattr(source, "original_price", None),
                    optional=False)
    trade = _num(api, f"{instance_type}: TradePrice", getattr(source, "trade_price", None))
    if original <= 0:
        raise MalformedResponse(api, f"{instance_type}: OriginalPrice is {original}: a price is never 0")
    return currency, original, trade


def parse_spot_history(response: Any, instance_type: str, zone: str
                       ) -> tuple[Optional[str], Optional[float], Optional[str], Optional[int]]:
    """(currency, latest price, its timestamp, next offset) of one DescribeSpotPriceHistory page."""
    api = "DescribeSpotPriceHistory"
    body = _body(api, response)
    holder = getattr(body, "spot_prices", None)
    items = getattr(holder, "spot_price_type", None) if holder is not None else []
    if not isinstance(items, list):
        raise MalformedResponse(api, f"{instance_type} in {zone}: SpotPrices.SpotPriceType is not a list")
    currency = getattr(body, "currency", None)
    if items and currency not in ov.CURRENCIES:
        raise MalformedResponse(api, f"{instance_type} in {zone}: Currency is {currency!r}, not CNY or USD")
    best: tuple[str, float] | None = None
    for it in items:
        if getattr(it, "zone_id", zone) not in (zone, None):
            continue
        if getattr(it, "instance_type", instance_type) not in (instance_type, None):
            continue
        stamp = getattr(it, "timestamp", None)
        if not isinstance(stamp, str) or not stamp:
            raise MalformedResponse(api, f"{instance_type} in {zone}: an entry has no Timestamp")
        value = _num(api, f"{instance_type} in {zone}: SpotPrice", getattr(it, "spot_price", None),
                     optional=False)
        if value <= 0:
            raise MalformedResponse(api, f"{instance_type} in {zone}: SpotPrice is {value}")
        if best is None or stamp > best[0]:
            best = (stamp, value)
    offset = getattr(body, "next_offset", None)
    return (currency if currency in ov.CURRENCIES else None, best[1] if best else None,
            best[0] if best else None,
            offset if isinstance(offset, int) and not isinstance(offset, bool) else None)


# ---- progress -----------------------------------------------------------------------------


class Progress:
    """A one-line ``\\r`` counter on stderr when it is a terminal; silent otherwise."""

    def __init__(self, stream: Optional[TextIO] = None, enabled: Optional[bool] = None):
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self._width = 0

    def update(self, text: str) -> None:
        if not self.enabled:
            return
        pad = max(0, self._width - len(text))
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()
        self._width = len(text)

    def done(self) -> None:
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0


# ---- fetching one region ------------------------------------------------------------------


@dataclass
class RegionFetch:
    region: str
    record: dict[str, Any]
    #: curated types DescribeInstanceTypes did not report (kept in the catalog)
    not_reported: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


MAX_PAGES = 200


def _paged_types(client: EcsClient, region: str, request_kw: dict[str, Any], *, sleep: Optional[Sleep],
                 tick: Callable[[], None]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    token: Optional[str] = None
    seen: set[str] = set()
    what = ", ".join(f"{k}={v}" for k, v in request_kw.items())
    for _ in range(MAX_PAGES):
        req = ecs.DescribeInstanceTypesRequest(max_results=100, next_token=token, **request_kw)
        resp = call_api("DescribeInstanceTypes", client.describe_instance_types, req, region=region,
                        what=what, sleep=sleep)
        tick()
        items, token = parse_instance_types(resp)
        out.extend(items)
        if not token:
            return out
        if token in seen:
            raise MalformedResponse("DescribeInstanceTypes", f"NextToken {token!r} repeats ({what})")
        seen.add(token)
    raise MalformedResponse("DescribeInstanceTypes", f"paging did not end after {MAX_PAGES} pages ({what})")


def _latest_spot(client: EcsClient, region: str, instance_type: str, zone: str, now: _dt.datetime, *,
                 sleep: Optional[Sleep]) -> tuple[Optional[str], Optional[float]]:
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    start = (now - _dt.timedelta(days=1)).strftime(fmt)
    end = now.strftime(fmt)
    offset: Optional[int] = None
    currency: Optional[str] = None
    best: tuple[str, float] | None = None
    for _ in range(MAX_PAGES):
        req = ecs.DescribeSpotPriceHistoryRequest(
            region_id=region, zone_id=zone, instance_type=instance_type, network_type="vpc",
            start_time=start, end_time=end, offset=offset)
        resp = call_api("DescribeSpotPriceHistory", client.describe_spot_price_history, req, region=region,
                        what=f"{instance_type} in {zone}", sleep=sleep)
        cur, price, stamp, nxt = parse_spot_history(resp, instance_type, zone)
        if cur is not None:
            if currency is not None and cur != currency:
                raise MalformedResponse("DescribeSpotPriceHistory", f"{instance_type}: currency changes "
                                        f"between pages ({currency} then {cur})")
            currency = cur
        if price is not None and stamp is not None and (best is None or stamp > best[0]):
            best = (stamp, price)
        if price is None or not nxt or nxt == offset:
            break  # an empty page, or no further offset: done
        offset = nxt
    return currency, best[1] if best else None


def fetch_region(client: EcsClient, region: str, curated: Catalog, *, now: _dt.datetime,
                 usd_rate: Optional[float] = None, sleep: Optional[Sleep] = None,
                 progress: Optional[Progress] = None) -> RegionFetch:
    """Every API fact for ``region`` as an overlay record (not yet validated or written)."""
    progress = progress or Progress(enabled=False)
    excluded = curated.excluded_families
    families = sorted(f for f in curated.families if f not in excluded)
    pages = [0]

    def tick() -> None:
        pages[0] += 1
        progress.update(f"{region}: DescribeInstanceTypes, {pages[0]} pages")

    by_name: dict[str, dict[str, Any]] = {}
    queries = [{"instance_type_family": f"ecs.{f}"} for f in families] + [{"minimum_gpuamount": 1}]
    for kw in queries:
        for item in _paged_types(client, region, kw, sleep=sleep, tick=tick):
            by_name.setdefault(item["name"], item)
    mismatches = []
    facts: list[dict[str, Any]] = []
    for name, item in sorted(by_name.items()):
        if item["family"] in excluded or (item["family"].startswith(ov.SLICE_PREFIXES)
                                          and item["family"] not in curated.families):
            continue  # vGPU slices are not training hardware (families.yaml excluded_families)
        known = curated.instance_types.get(name)
        if known is not None and known.gpu_count != item["gpu_count"]:
            mismatches.append(f"{name}: GPUAmount {item['gpu_count']}, curated catalog {known.gpu_count}")
        if known is None:
            item["gpu"] = ov.match_gpu(item["gpu_spec"], item["gpu_memory_gib"], curated.gpus.values())
        else:
            fam = curated.families[known.family]
            item["gpu"] = fam.gpu
        facts.append(item)
    if mismatches:
        raise MalformedResponse("DescribeInstanceTypes", "GPU count mismatch with the curated catalog ("
                                + "; ".join(mismatches) + "); review data/instance_types.yaml")
    gpu_types = {f["name"] for f in facts}
    reported = set(by_name)
    not_reported = sorted(n for n, t in curated.instance_types.items()
                          if n not in reported and t.family in families)

    progress.update(f"{region}: DescribeAvailableResource")
    stock: dict[str, dict[str, dict[str, str]]] = {}
    for label, strategy in (("on-demand", "NoSpot"), ("spot", "SpotAsPriceGo")):
        req = ecs.DescribeAvailableResourceRequest(
            region_id=region, destination_resource="InstanceType", resource_type="instance",
            instance_charge_type="PostPaid", spot_strategy=strategy)
        resp = call_api("DescribeAvailableResource", client.describe_available_resource, req, region=region,
                        what=label, sleep=sleep)
        stock[label] = {t: z for t, z in parse_available(resp).items() if t in gpu_types}
    offered = sorted(set(stock["on-demand"]) | set(stock["spot"]))

    currencies: set[str] = set()
    notes: list[str] = []
    prices: dict[str, dict[str, Any]] = {}
    for i, name in enumerate(offered, 1):
        progress.update(f"{region}: DescribePrice {i}/{len(offered)}")
        req = ecs.DescribePriceRequest(
            region_id=region, resource_type="instance", instance_type=name, price_unit="Hour", period=1,
            amount=1, instance_network_type="vpc",
            system_disk=ecs.DescribePriceRequestSystemDisk(category="cloud_essd"))
        on_demand = trade = None
        try:
            resp = call_api("DescribePrice", client.describe_price, req, region=region, what=name, sleep=sleep,
                            tolerate=NO_PRICE_CODES)
        except Tolerated as why:
            notes.append(f"{name}: DescribePrice gives no pay-as-you-go price ({why.detail}); recorded as unknown")
        else:
            cur, on_demand, trade = parse_price(resp, name)
            currencies.add(cur)
        zones = sorted(z for z, s in stock["on-demand"].get(name, {}).items() if in_stock(s))
        spot_zones = sorted(z for z, s in stock["spot"].get(name, {}).items() if in_stock(s))
        prices[name] = {"on_demand": on_demand, "trade": trade, "zones": zones, "spot_zones": spot_zones,
                        "spot_by_zone": {}}
    spot_jobs = [(n, z) for n in offered for z in prices[n]["spot_zones"]]
    for i, (name, zone) in enumerate(spot_jobs, 1):
        progress.update(f"{region}: DescribeSpotPriceHistory {i}/{len(spot_jobs)}")
        cur, price = _latest_spot(client, region, name, zone, now, sleep=sleep)
        if cur is not None:
            currencies.add(cur)
        if price is not None:
            prices[name]["spot_by_zone"][zone] = price
    if len(currencies) > 1:
        raise MalformedResponse("DescribePrice", f"{region} answers in several currencies: "
                                f"{', '.join(sorted(currencies))}")
    currency = next(iter(currencies)) if currencies else None
    if usd_rate is not None and currency != "USD":
        notes.append(f"--usd-rate ignored: {region} prices are in {currency or 'no currency'}")
        usd_rate = None
    record = {
        "schema_version": ov.SCHEMA_VERSION,
        "region": region,
        "source": ov.SOURCE,
        "source_tag": ov.API_SOURCE_TAG,
        "fetched_at": now.astimezone(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "currency": currency,
        "usd_to_cny_rate": usd_rate,
        "instance_types": facts,
        "prices": prices,
    }
    return RegionFetch(region=region, record=record, not_reported=not_reported, notes=notes)


# ---- what changed (pure) ------------------------------------------------------------------


@dataclass
class PriceMove:
    instance_type: str
    kind: str  # on-demand | spot | trade
    old: Optional[float]
    new: Optional[float]

    @property
    def percent(self) -> Optional[float]:
        if not self.old or self.new is None:
            return None
        return round((self.new - self.old) / self.old * 100, 1)


@dataclass
class RegionChanges:
    region: str
    currency: Optional[str]
    prices_used: bool
    reported: int
    offered_now: list[str] = field(default_factory=list)
    no_longer_offered: list[str] = field(default_factory=list)
    price_moves: list[PriceMove] = field(default_factory=list)
    zones_added: dict[str, list[str]] = field(default_factory=dict)
    zones_removed: dict[str, list[str]] = field(default_factory=dict)
    not_reported: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    path: Optional[str] = None


@dataclass
class Summary:
    types_added: list[str]
    types_removed: list[str]
    facts_changed: dict[str, dict[str, tuple[Any, Any]]]
    regions: list[RegionChanges]
    written: bool = False

    def to_dict(self, after: Optional[Catalog] = None) -> dict[str, Any]:
        def added(name: str) -> dict[str, Any]:
            row: dict[str, Any] = {"instance_type": name}
            if after is not None and after.knows(name):
                r = after.instance(name)
                row.update(family=r.family.name, gpu=r.family.gpu, gpu_count=r.gpu_count,
                           interconnect=r.interconnect)
            return row

        return {
            "written": self.written,
            "types_added": [added(n) for n in self.types_added],
            "types_removed": self.types_removed,
            "facts_changed": {n: {k: {"old": o, "new": v} for k, (o, v) in ch.items()}
                              for n, ch in self.facts_changed.items()},
            "regions": [{
                "region": r.region, "currency": r.currency, "prices_used": r.prices_used,
                "types_reported": r.reported, "offered_now": r.offered_now,
                "no_longer_offered": r.no_longer_offered,
                "price_moves": [{"instance_type": m.instance_type, "kind": m.kind, "old": m.old,
                                 "new": m.new, "percent": m.percent} for m in r.price_moves],
                "zones_added": r.zones_added, "zones_removed": r.zones_removed,
                "not_reported": r.not_reported, "notes": r.notes, "file": r.path,
            } for r in self.regions],
        }


_FACTS = ("vcpu", "memory_gib", "gpu_count", "eri_count", "network_bandwidth_gbps")


def diff(before: Catalog, after: Catalog, fetches: Iterable[RegionFetch]) -> Summary:
    """What a refresh changes: types added/removed, facts, and per region offers, prices, zones."""
    facts: dict[str, dict[str, tuple[Any, Any]]] = {}
    for name in sorted(set(before.instance_types) & set(after.instance_types)):
        b, a = before.instance_types[name], after.instance_types[name]
        ch = {k: (getattr(b, k), getattr(a, k)) for k in _FACTS if getattr(b, k) != getattr(a, k)}
        if ch:
            facts[name] = ch
    regions = []
    for f in fetches:
        rec = f.record
        old = before.prices.get(f.region, {})
        new = after.prices.get(f.region, {})
        used = ov.prices_usable(rec)
        rc = RegionChanges(region=f.region, currency=rec.get("currency"), prices_used=used,
                           reported=len(rec["instance_types"]), not_reported=list(f.not_reported),
                           notes=list(f.notes))
        rc.offered_now = sorted(set(new) - set(old))
        rc.no_longer_offered = sorted(set(old) - set(new))
        for name in sorted(set(old) & set(new)):
            o, n = old[name], new[name]
            for kind, attr in (("on-demand", "on_demand_cny_per_hour"), ("spot", "spot_cny_per_hour"),
                               ("trade", "trade_cny_per_hour")):
                ov_, nv = getattr(o, attr), getattr(n, attr)
                if kind == "trade" and ov_ is None:
                    continue  # the snapshot has list prices only: a first trade price is no move
                if nv is not None and (ov_ is None or abs(ov_ - nv) > 1e-9):
                    rc.price_moves.append(PriceMove(name, kind, ov_, nv))
            plus = sorted(set(n.zones) - set(o.zones))
            minus = sorted(set(o.zones) - set(n.zones))
            if plus:
                rc.zones_added[name] = plus
            if minus:
                rc.zones_removed[name] = minus
        if not used and rec.get("prices"):
            rc.notes.append(f"prices are in {rec.get('currency')} and no --usd-rate was given: recorded in the "
                            "overlay but not used; the region keeps its snapshot prices")
        regions.append(rc)
    return Summary(types_added=sorted(set(after.instance_types) - set(before.instance_types)),
                   types_removed=sorted(set(before.instance_types) - set(after.instance_types)),
                   facts_changed=facts, regions=regions)


def _short(names: list[str], limit: int = 8) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" ... and {len(names) - limit} more" if len(names) > limit else "")


def render_summary(summary: Summary, after: Catalog, *, dry_run: bool) -> str:
    lines: list[str] = []
    for name in summary.types_added:
        r = after.instance(name)
        gpu = r.family.gpu or "GPU unverified"
        lines.append(f"+ {name}: new type ({r.gpu_count} x {gpu}, family {r.family.name}, "
                     f"interconnect {r.interconnect}: no multi-GPU training until curated)")
    for name in summary.types_removed:
        lines.append(f"- {name}: no longer reported by DescribeInstanceTypes (removed)")
    for name, ch in summary.facts_changed.items():
        parts = ", ".join(f"{k} {o} -> {n}" for k, (o, n) in ch.items())
        lines.append(f"~ {name}: {parts} (API value)")
    for r in summary.regions:
        offered = len(after.prices.get(r.region, {})) if r.prices_used else None
        head = f"{r.region}: {r.reported} GPU types reported"
        if offered is not None:
            head += f", {offered} offered, prices in {r.currency or '-'} (list and trade)"
        lines.append(head)
        if r.offered_now:
            lines.append(f"  offered now: {_short(r.offered_now)}")
        if r.no_longer_offered:
            lines.append(f"  no longer offered: {_short(r.no_longer_offered)}")
        for m in r.price_moves:
            if m.old is None:
                was = "observed; was an estimate" if m.kind == "spot" else "was unknown"
                lines.append(f"  price {m.instance_type}: {m.kind} {m.new:g} CNY/h ({was})")
                continue
            pct = "" if m.percent is None else f" ({m.percent:+.1f}%)"
            lines.append(f"  price {m.instance_type}: {m.kind} {m.old:g} -> {m.new:g} CNY/h{pct}")
        for name in sorted(set(r.zones_added) | set(r.zones_removed)):
            z = [f"+{x}" for x in r.zones_added.get(name, [])] + [f"-{x}" for x in r.zones_removed.get(name, [])]
            lines.append(f"  zones {name}: {' '.join(z)}")
        if r.not_reported:
            lines.append(f"  curated but not reported by the API (kept): {_short(r.not_reported)}")
        for note in r.notes:
            lines.append(f"  note: {note}")
        if r.path:
            lines.append(f"  {'would write' if dry_run else 'wrote'} {r.path}")
    if dry_run:
        lines.append("dry run: nothing was written")
    return "\n".join(lines)


# ---- the whole refresh --------------------------------------------------------------------


def _utcnow() -> _dt.datetime:  # a seam for tests
    return _dt.datetime.now(_dt.timezone.utc)


@dataclass
class RefreshResult:
    summary: Summary
    after: Catalog
    records: dict[str, dict[str, Any]]
    written: list[Path]


def check_regions(regions: Iterable[str], catalog: Catalog) -> list[str]:
    out: list[str] = []
    for raw in regions:
        for region in (r.strip() for r in raw.split(",")):
            if not region:
                continue
            if region not in catalog.regions():
                raise InputError(
                    f"unknown region {region!r}",
                    problems=[Problem(path="--region", message="unknown region", given=region, has_given=True,
                                      allowed=", ".join(catalog.regions()),
                                      suggestions=did_you_mean(region, catalog.regions()))],
                    hint="a region Alibaba added since: list it under `regions` in "
                         "trainstack/catalog/data/settings.yaml")
            if region not in out:
                out.append(region)
    if not out:
        raise InputError("--region is required", problems=[Problem(path="--region", message="give a region")])
    return out


def refresh(regions: Iterable[str], *, out_dir: Path, dry_run: bool = False, usd_rate: Optional[float] = None,
            client_factory: Optional[Callable[[str], EcsClient]] = None, sleep: Optional[Sleep] = None,
            now: Optional[_dt.datetime] = None, progress: Optional[Progress] = None) -> RefreshResult:
    """Fetch every region, validate and merge, then (unless ``dry_run``) write one file per region.

    Nothing is written unless every call for every region succeeded and the merged catalog
    validates; each file is replaced atomically. Errors: :class:`CloudApiError` (exit 5).
    """
    if usd_rate is not None and not usd_rate > 0:
        raise InputError("--usd-rate must be a positive number (CNY per USD)",
                         problems=[Problem(path="--usd-rate", message="must be > 0", given=usd_rate,
                                           has_given=True)])
    out_dir = Path(out_dir)
    try:
        existing = ov.read_overlays(out_dir)
    except ov.OverlayError as exc:
        raise InputError(str(exc), hint="fix or delete the file, then refresh again") from None
    curated = build_catalog(overlays=[])
    before = build_catalog(overlays=existing) if existing else curated
    regions = check_regions(regions, before)
    factory = client_factory or make_client
    now = now or _utcnow()
    progress = progress or Progress()
    fetches: list[RegionFetch] = []
    try:
        for region in regions:
            client = factory(region)
            try:
                fetches.append(fetch_region(client, region, curated, now=now, usd_rate=usd_rate, sleep=sleep,
                                            progress=progress))
            except MalformedResponse as exc:
                raise CloudApiError(
                    f"{exc.api} ({region}) returned a malformed response: {exc.message}; rejected, nothing was "
                    "written (the previous catalog is unchanged)",
                    hint="retry later; if it persists the API or SDK changed: update trainstack") from None
    except CloudApiError as err:
        if "nothing was written" in err.message:
            raise
        raise CloudApiError(err.message + " (nothing was written; the previous catalog is unchanged)",
                            hint=err.hint) from None
    finally:
        progress.done()

    records = {f.region: f.record for f in fetches}
    for region, rec in records.items():
        problems = ov.validate_overlay(rec)
        if problems:
            raise CloudApiError(f"the API answers for {region} do not form a valid catalog overlay; rejected, "
                                "nothing was written:\n  " + "\n  ".join(problems),
                                hint="retry later; if it persists the API or SDK changed: update trainstack")
    kept = [r for r in existing if r.get("region") not in records]
    try:
        after = build_catalog(overlays=kept + list(records.values()))
    except CatalogError as exc:
        raise CloudApiError(f"the refreshed data would make the catalog inconsistent; rejected, nothing was "
                            f"written: {exc}",
                            hint="review the curated data files against the API answer") from None
    summary = diff(before, after, fetches)
    written: list[Path] = []
    for rc in summary.regions:
        rc.path = str(ov.overlay_path(out_dir, rc.region))
    if not dry_run:
        for region, rec in records.items():
            path = ov.overlay_path(out_dir, region)
            atomic_write_text(path, ov.dumps(rec))
            written.append(path)
        summary.written = True
        from . import loader

        loader._cached.cache_clear()
    return RefreshResult(summary=summary, after=after, records=records, written=written)


# ---- stock checks (preflight) -------------------------------------------------------------


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
