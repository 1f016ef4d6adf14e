"""Fetching one region: instance types, stock, list and trade prices, latest spot prices."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from alibabacloud_ecs20140526 import models as ecs

from ..catalog import overlay as ov
from ..catalog.loader import Catalog
from ..cloud.ecs import NO_PRICE_CODES, EcsClient, Tolerated, call_api
from ..cloud.retry import Sleep
from ..progress import Progress  # the one progress meter (trainstack/progress.py); refresh.fetch.Progress
from .parse import MalformedResponse, in_stock, parse_available, parse_instance_types, parse_price, parse_spot_history


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
