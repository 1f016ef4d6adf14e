"""What a refresh overlay may hold: the record `trainstack catalog refresh` writes per region, and
its validation (every problem listed; limits far above any real type or price).

One JSON file per region (``data/overlays/<region>.json``, or ``$TRAINSTACK_CATALOG_OVERLAYS``)::

    {
      "schema_version": 1,
      "region": "cn-shenzhen",
      "source": "alibabacloud-ecs20140526 DescribeInstanceTypes/DescribeAvailableResource/...",
      "source_tag": "ECS-API",
      "fetched_at": "2025-01-02T03:04:05Z",          # ISO 8601, UTC
      "currency": "CNY",                              # what DescribePrice answered: CNY or USD
      "usd_to_cny_rate": null,                        # only with --usd-rate, only for USD
      "instance_types": [                             # DescribeInstanceTypes facts per GPU type
        {"name": "ecs.gn7i-c8g1.2xlarge", "family": "gn7i", "gpu_count": 1,
         "gpu_spec": "NVIDIA A10", "gpu_memory_gib": 24.0, "gpu": "A10",
         "vcpu": 8, "memory_gib": 30.0, "eri_count": 0, "network_card_count": 1,
         "network_bandwidth_gbps": 16.0}
      ],
      "prices": {                                     # types offered in the region
        "ecs.gn7i-c8g1.2xlarge": {"on_demand": 9.53, "trade": 9.53,
                                  "zones": ["cn-shenzhen-e"], "spot_zones": ["cn-shenzhen-e"],
                                  "spot_by_zone": {"cn-shenzhen-e": 2.1}}
      }
    }

How a valid overlay merges with the curated catalog: ``overlay.py``.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from typing import Any, Optional

SCHEMA_VERSION = 1
#: Source tag of every fact an overlay contributes (defined in data/sources.yaml).
API_SOURCE_TAG = "ECS-API"
SOURCE = ("alibabacloud-ecs20140526 DescribeInstanceTypes/DescribeAvailableResource/"
          "DescribePrice/DescribeSpotPriceHistory")
CURRENCIES = ("CNY", "USD")

_TYPE_KEYS = {"name", "family", "gpu_count", "gpu_spec", "gpu_memory_gib", "gpu", "vcpu", "memory_gib",
              "eri_count", "network_card_count", "network_bandwidth_gbps"}
_PRICE_KEYS = {"on_demand", "trade", "zones", "spot_zones", "spot_by_zone"}
_TOP_KEYS = {"schema_version", "region", "source", "source_tag", "fetched_at", "currency",
             "usd_to_cny_rate", "instance_types", "prices"}
_REGION_RE = re.compile(r"[a-z]{2,}(-[a-z0-9]+)+")
#: an overlay is at most this large (a region's GPU types and prices are a few hundred KB)
MAX_OVERLAY_BYTES = 16 << 20
MAX_OVERLAY_DEPTH = 8
#: sane maxima: far above any real ECS type or price, far below what would break arithmetic
#: (the largest ECS GPU types have 8 or 16 GPUs; the dearest list prices are hundreds of CNY/h)
MAX_PRICE = 100_000.0          # per hour, CNY or USD
MAX_USD_TO_CNY = 100.0
MAX_TYPE_VALUES = {"gpu_count": 64, "vcpu": 4096, "memory_gib": 65_536, "eri_count": 64,
                   "network_card_count": 64, "network_bandwidth_gbps": 100_000, "gpu_memory_gib": 4096}
#: an overlay dated later than this past the clock is refused (it would hide staleness)
MAX_CLOCK_SKEW = _dt.timedelta(days=1)
EARLIEST_FETCH = _dt.datetime(2015, 1, 1, tzinfo=_dt.timezone.utc)


class OverlayError(Exception):
    """An overlay that fails validation; ``problems`` lists every reason."""

    def __init__(self, problems: list[str], where: str = "overlay"):
        super().__init__(f"{where} is invalid:\n  " + "\n  ".join(problems))
        self.problems = problems
        self.where = where


# ---- validation ---------------------------------------------------------------------------

def _is_num(v: Any) -> bool:
    """A finite number (NaN and Infinity are never a price or a count)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _shown(v: Any) -> str:
    """A value for a message: short, and never a NaN that reads like a number."""
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def validate_overlay(rec: Any, now: Optional[_dt.datetime] = None) -> list[str]:
    """Every problem of one overlay record (empty when it is valid). Pure but for the clock
    (``now``, default the current UTC time: an overlay from the future is refused)."""
    if not isinstance(rec, dict):
        return ["an overlay must be a JSON object"]
    p: list[str] = []
    unknown = sorted(set(rec) - _TOP_KEYS - {"_file"})
    if unknown:
        p.append(f"unknown keys: {', '.join(unknown)}")
    if rec.get("schema_version") != SCHEMA_VERSION:
        p.append(f"schema_version must be {SCHEMA_VERSION}, got {rec.get('schema_version')!r}")
    region = rec.get("region")
    if not isinstance(region, str) or not _REGION_RE.fullmatch(region):
        p.append(f"region must be a region id like 'cn-shenzhen', got {_shown(region)}")
        region = None
    if not isinstance(rec.get("source"), str) or not rec.get("source"):
        p.append("source must name the APIs the data came from")
    if rec.get("source_tag", API_SOURCE_TAG) != API_SOURCE_TAG:
        p.append(f"source_tag must be {API_SOURCE_TAG!r}")
    fetched = rec.get("fetched_at")
    try:
        if not isinstance(fetched, str):
            raise ValueError(fetched)
        when = _dt.datetime.fromisoformat(fetched.replace("Z", "+00:00"))
        if when.utcoffset() != _dt.timedelta(0):
            p.append(f"fetched_at must be in UTC, got {_shown(fetched)}")
        elif when > (now or _dt.datetime.now(_dt.timezone.utc)) + MAX_CLOCK_SKEW:
            p.append(f"fetched_at {fetched} is in the future; an overlay dated ahead of its fetch would hide "
                     "that its prices are stale")
        elif when < EARLIEST_FETCH:
            p.append(f"fetched_at {fetched} is before {EARLIEST_FETCH.year}; not a refresh date")
    except (ValueError, TypeError, OverflowError):
        p.append(f"fetched_at must be an ISO 8601 UTC timestamp, got {_shown(fetched)}")
    types = rec.get("instance_types")
    prices = rec.get("prices")
    currency = rec.get("currency")
    if currency not in CURRENCIES and not (currency is None and not prices):
        p.append(f"currency must be one of {', '.join(CURRENCIES)}, got {currency!r}")
    rate = rec.get("usd_to_cny_rate")
    if rate is not None:
        if not _is_num(rate) or not 0 < rate <= MAX_USD_TO_CNY:
            p.append(f"usd_to_cny_rate must be a positive number up to {MAX_USD_TO_CNY:g} or null, got {_shown(rate)}")
        elif currency != "USD":
            p.append("usd_to_cny_rate is only meaningful for USD prices")

    names: set[str] = set()
    if not isinstance(types, list):
        p.append("instance_types must be a list")
        types = []
    for i, t in enumerate(types):
        where = f"instance_types[{i}]"
        if not isinstance(t, dict):
            p.append(f"{where} must be an object")
            continue
        name = t.get("name")
        where = f"instance_types[{i}] ({name})"
        extra = sorted(set(t) - _TYPE_KEYS)
        if extra:
            p.append(f"{where}: unknown keys {', '.join(extra)}")
        fam = t.get("family")
        if not isinstance(name, str) or not name.startswith("ecs."):
            p.append(f"{where}: name must be an ECS type id like 'ecs.gn7i-c8g1.2xlarge'")
        elif name in names:
            p.append(f"{where}: listed twice")
        else:
            names.add(name)
        if not isinstance(fam, str) or not fam or (isinstance(name, str) and not name.startswith(f"ecs.{fam}")):
            p.append(f"{where}: family {fam!r} does not match the type name")
        if not _is_int(t.get("gpu_count")) or not 1 <= t["gpu_count"] <= MAX_TYPE_VALUES["gpu_count"]:
            p.append(f"{where}: gpu_count must be a whole number >= 1 and <= {MAX_TYPE_VALUES['gpu_count']}, "
                     f"got {_shown(t.get('gpu_count'))}")
        for key, low, integer in (("vcpu", 1, True), ("memory_gib", 0, False), ("eri_count", 0, True),
                                  ("network_card_count", 0, True), ("network_bandwidth_gbps", 0, False),
                                  ("gpu_memory_gib", 0, False)):
            v = t.get(key)
            if v is None:
                continue
            if not (_is_int(v) if integer else _is_num(v)) or v < low or (key == "memory_gib" and v == 0) \
                    or v > MAX_TYPE_VALUES[key]:
                p.append(f"{where}: {key} must be {'a whole number' if integer else 'a number'} "
                         f">{'=' if key != 'memory_gib' else ''} {low} and <= {MAX_TYPE_VALUES[key]:,}, "
                         f"got {_shown(v)}")
        for key in ("gpu_spec", "gpu"):
            if t.get(key) is not None and not isinstance(t.get(key), str):
                p.append(f"{where}: {key} must be a string or null")

    if not isinstance(prices, dict):
        p.append("prices must be an object keyed by instance type")
        prices = {}
    for name, row in prices.items():
        where = f"prices[{name}]"
        if name not in names:
            p.append(f"{where}: type is not listed in instance_types")
        if not isinstance(row, dict):
            p.append(f"{where} must be an object")
            continue
        extra = sorted(set(row) - _PRICE_KEYS)
        if extra:
            p.append(f"{where}: unknown keys {', '.join(extra)}")
        od, trade = row.get("on_demand"), row.get("trade")
        if od is not None and (not _is_num(od) or not 0 < od <= MAX_PRICE):
            p.append(f"{where}: on_demand must be a positive price up to {MAX_PRICE:,.0f} or null (unknown), "
                     f"got {_shown(od)}")
        if trade is not None and (not _is_num(trade) or not 0 <= trade <= MAX_PRICE):
            p.append(f"{where}: trade must be a price >= 0 (at most {MAX_PRICE:,.0f}) or null, got {_shown(trade)}")
        zone_lists = {}
        for key in ("zones", "spot_zones"):
            zs = row.get(key, [])
            if not isinstance(zs, list) or not all(isinstance(z, str) for z in zs):
                p.append(f"{where}: {key} must be a list of zone ids")
                zs = []
            bad = [z for z in zs if region and not z.startswith(region)]
            if bad:
                p.append(f"{where}: {key} {bad} are not zones of {region}")
            if len(set(zs)) != len(zs):
                p.append(f"{where}: {key} lists a zone twice")
            zone_lists[key] = set(zs)
        spot = row.get("spot_by_zone", {})
        if not isinstance(spot, dict):
            p.append(f"{where}: spot_by_zone must be an object zone -> price")
            spot = {}
        for z, v in spot.items():
            if z not in zone_lists["spot_zones"]:
                p.append(f"{where}: spot price for {z}, which is not in spot_zones")
            if not _is_num(v) or not 0 < v <= MAX_PRICE:
                p.append(f"{where}: spot price in {z} must be positive and at most {MAX_PRICE:,.0f}, got {_shown(v)}")
    return p


def check_overlay(rec: Any, where: Optional[str] = None) -> None:
    """Raise :class:`OverlayError` listing every problem of ``rec``."""
    problems = validate_overlay(rec)
    if problems:
        label = where or (rec.get("_file") if isinstance(rec, dict) else None) or (
            f"overlay for {rec.get('region')}" if isinstance(rec, dict) else "overlay")
        raise OverlayError(problems, label)
