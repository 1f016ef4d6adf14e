"""Refresh overlays: what `trainstack catalog refresh` learnt from Alibaba's APIs, per region.

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

How an overlay merges with the curated catalog (:func:`apply_overlays`):

* **Types the curated data has**: the API wins for what the API knows (vCPU, memory, GPU count,
  ERI count, network bandwidth); the curated facts the API lacks (family, interconnect, RDMA
  bandwidth, the GPU model and its TFLOPS) stay. ``ECS-API`` joins the type's sources.
* **Types the curated data lacks**: added with interconnect ``unverified`` (so the resolver never
  places multi-GPU training on them) in a synthetic family: the API family (``gn9x``) when the
  whole family is new, or a family of one named after the type when it is a new size of a
  curated family (it keeps that family's GPU, RDMA and flags, but not its interconnect). The GPU
  is the catalog GPU whose name matches the API's ``GPUSpec`` (and ``GPUMemorySize``) without
  ambiguity, else ``None`` (never trained on).
* **Prices**: the overlay's rows replace the price snapshot's rows for that region (source
  ``ECS-API``, dated ``fetched_at``). ``on_demand`` is the list price (``OriginalPrice``),
  ``trade`` what the account pays (``TradePrice``); the resolver plans with the list price. Spot
  is stored per zone in the file; ``RegionPrice.spot_cny_per_hour`` is the lowest zone's.
* **Currency**: prices in CNY are used as they are. USD prices (international accounts) are
  converted only with the rate stated in the file (``usd_to_cny_rate``, from ``--usd-rate``);
  without a rate they are recorded but **not used**: that region keeps its snapshot prices and
  zones, and only the type facts are merged.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
from pathlib import Path
from typing import Any, Iterable, Optional

from .errors import CatalogError
from .models import GpuModel, InstanceFamily, InstanceType, RegionPrice

SCHEMA_VERSION = 1
#: Source tag of every fact an overlay contributes (defined in data/sources.yaml).
API_SOURCE_TAG = "ECS-API"
SOURCE = ("alibabacloud-ecs20140526 DescribeInstanceTypes/DescribeAvailableResource/"
          "DescribePrice/DescribeSpotPriceHistory")
CURRENCIES = ("CNY", "USD")
#: Families that are vGPU slices by Alibaba's naming (never training hardware).
SLICE_PREFIXES = ("vgn", "sgn")

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


# ---- reading and writing ------------------------------------------------------------------

def overlay_path(directory: Path, region: str) -> Path:
    return Path(directory) / f"{region}.json"


def dumps(rec: dict[str, Any]) -> str:
    """The file text of an overlay: stable key order, one trailing newline."""
    clean = {k: v for k, v in rec.items() if not k.startswith("_")}
    return json.dumps(clean, indent=2, ensure_ascii=False) + "\n"


def read_overlays(directory: Path) -> list[dict[str, Any]]:
    """Every ``*.json`` overlay of ``directory`` (validated); [] when the directory is absent."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    from ..errors import InputError
    from ..fsutil import read_json_file

    out = []
    try:
        paths = sorted(directory.glob("*.json"))
    except OSError as exc:
        raise OverlayError([f"cannot list it: {exc.strerror or exc}"], str(directory)) from None
    for path in paths:
        try:
            data = read_json_file(path, what="catalog overlay", limit=MAX_OVERLAY_BYTES, max_depth=MAX_OVERLAY_DEPTH)
        except InputError as exc:
            raise OverlayError([exc.problems[0].message if exc.problems else exc.message], str(path)) from None
        if isinstance(data, dict):
            data["_file"] = str(path)
        check_overlay(data, str(path))
        out.append(data)
    return out


# ---- GPU matching -------------------------------------------------------------------------

_VENDOR_WORDS = ("nvidia", "tesla", "geforce")


def _spec_tokens(spec: str) -> list[str]:
    words = [w for w in re.split(r"[\s\-_/]+", spec.lower()) if w]
    return [w for w in words if w not in _VENDOR_WORDS]


def match_gpu(spec: Optional[str], memory_gib: Optional[float], gpus: Iterable[GpuModel]) -> Optional[str]:
    """The catalog GPU an API ``GPUSpec`` names, or None when no single GPU fits.

    ``NVIDIA A10`` -> ``A10``; ``NVIDIA A100`` with 80 GiB -> ``A100-80G`` (the memory decides
    between variants); ``NVIDIA H100`` with no memory -> None (H100 or H100-PCIe: ambiguous).
    """
    if not spec:
        return None
    tokens = _spec_tokens(spec)
    if not tokens:
        return None
    base = tokens[0]
    pool = [g for g in gpus if g.name.split("-")[0].lower() == base]
    if len(pool) > 1:
        form = [g for g in pool if any(t in g.name.lower() for t in tokens[1:] if t in ("pcie", "sxm"))]
        if "pcie" in tokens[1:]:
            pool = [g for g in pool if "pcie" in g.name.lower()]
        elif form:
            pool = form
    if memory_gib is not None and memory_gib > 0:
        pool = [g for g in pool if abs(g.memory_gb - memory_gib) <= 0.15 * g.memory_gb]
    elif len(pool) > 1:
        return None
    return pool[0].name if len(pool) == 1 else None


# ---- merging ------------------------------------------------------------------------------

def _as_of(rec: dict[str, Any]) -> str:
    return str(rec["fetched_at"])[:10]


def _price_factor(rec: dict[str, Any]) -> Optional[float]:
    """Multiplier from the overlay's currency to CNY; None when prices must not be used."""
    if rec.get("currency") == "CNY":
        return 1.0
    if rec.get("currency") == "USD" and rec.get("usd_to_cny_rate"):
        return float(rec["usd_to_cny_rate"])
    return None


def prices_usable(rec: dict[str, Any]) -> bool:
    """Whether the resolver may use this overlay's prices (CNY, or USD with a stated rate)."""
    return _price_factor(rec) is not None


def region_prices(rec: dict[str, Any]) -> list[RegionPrice]:
    """The overlay's price rows in CNY (empty when its prices are USD without a rate)."""
    factor = _price_factor(rec)
    if factor is None:
        return []

    def cny(v: Optional[float]) -> Optional[float]:
        return None if v is None else round(float(v) * factor, 4)

    rows = []
    for name, row in sorted(rec.get("prices", {}).items()):
        spot = row.get("spot_by_zone") or {}
        rows.append(RegionPrice(
            region=rec["region"], instance_type=name, on_demand_cny_per_hour=cny(row.get("on_demand")),
            spot_cny_per_hour=cny(min(spot.values())) if spot else None,
            trade_cny_per_hour=cny(row.get("trade")), currency="CNY",
            zones=tuple(sorted(row.get("zones", ()))), spot_zones=tuple(sorted(row.get("spot_zones", ()))),
            source=API_SOURCE_TAG, as_of=_as_of(rec)))
    return rows


def _unverified(values: dict[str, Any], keys: Iterable[str]) -> tuple[str, ...]:
    return tuple(k for k in keys if values.get(k) is None)


def _merge_known(t: InstanceType, e: dict[str, Any]) -> InstanceType:
    """API wins for what it knows; curated facts stay for the rest."""
    data = t.model_dump()
    learnt = {"gpu_count": e["gpu_count"]}
    for key in ("vcpu", "memory_gib", "eri_count", "network_bandwidth_gbps"):
        if e.get(key) is not None and not (key == "network_bandwidth_gbps" and e[key] == 0):
            learnt[key] = e[key]
    data.update(learnt)
    if API_SOURCE_TAG not in data["sources"]:
        data["sources"] = tuple(data["sources"]) + (API_SOURCE_TAG,)
    data["unverified"] = tuple(u for u in data["unverified"] if u not in learnt)
    return InstanceType.model_validate(data)


def _new_type(e: dict[str, Any], family: str) -> InstanceType:
    values = {
        "vcpu": e.get("vcpu"), "memory_gib": e.get("memory_gib"), "eri_count": e.get("eri_count"),
        "network_bandwidth_gbps": e.get("network_bandwidth_gbps") or None,
        "rdma_bandwidth_gbps": None,
    }
    unverified = list(_unverified(values, ("vcpu", "memory_gib", "eri_count", "network_bandwidth_gbps")))
    if (e.get("eri_count") or 0) > 0:
        unverified.append("rdma_bandwidth_gbps")
    return InstanceType(name=e["name"], family=family, gpu_count=e["gpu_count"], sources=(API_SOURCE_TAG,),
                        unverified=tuple(unverified), **values)


def _new_family(name: str, entries: list[dict[str, Any]], rec: dict[str, Any],
                curated: Optional[InstanceFamily]) -> InstanceFamily:
    first = entries[0]
    eri = any((e.get("eri_count") or 0) > 0 for e in entries)
    matched = {e.get("gpu") for e in entries}
    spec = first.get("gpu_spec") or "no GPUSpec"
    if curated is not None:
        # a new size of a curated family: keep its GPU unless the API names another one
        gpu = curated.gpu if matched <= {None, curated.gpu} else None
        rdma = "erdma" if eri and curated.rdma == "none" else curated.rdma
        training = curated.training
        bare_metal, status = curated.bare_metal, curated.status
        what = f"a size of {curated.name} that the curated catalog lacks"
    else:
        gpu = next(iter(matched)) if len(matched) == 1 else None
        rdma = "erdma" if eri else "none"
        training = not name.startswith(SLICE_PREFIXES)
        bare_metal, status = name.startswith("ebm"), "available"
        what = "a family the curated catalog lacks"
    unverified = ["interconnect", "uefi_required", "deployment_set_low_latency"]
    if gpu is None:
        unverified.insert(0, "gpu")
    return InstanceFamily(
        name=name, gpu=gpu, interconnect="unverified", rdma=rdma, training=training, bare_metal=bare_metal,
        uefi_required=False, status=status, sources=(API_SOURCE_TAG,), unverified=tuple(unverified),
        notes=(f"Added by `trainstack catalog refresh` from DescribeInstanceTypes in {rec['region']} "
               f"({_as_of(rec)}): {what}; GPUSpec {spec!r}. No API states the GPU interconnect, so "
               "multi-GPU training is refused until families.yaml curates it."))


def apply_overlays(records: Iterable[dict[str, Any]], families: list[InstanceFamily],
                   types: list[InstanceType], prices: list[RegionPrice],
                   ) -> tuple[list[InstanceFamily], list[InstanceType], list[RegionPrice]]:
    """Merge refresh overlays into the curated records (see the module doc for the rules).

    Raises :class:`trainstack.catalog.errors.CatalogError` (exit 2) naming the file when an
    overlay is invalid. Overlays are applied oldest first; for one region the newest wins.
    """
    records = list(records)
    problems = []
    for rec in records:
        for msg in validate_overlay(rec):
            where = ((rec.get("_file") or f"overlay for {rec.get('region')}") if isinstance(rec, dict)
                     else "overlay")
            problems.append(f"{where}: {msg}")
    if problems:
        raise CatalogError("refresh overlay is invalid (re-run `trainstack catalog refresh` or delete the "
                           "file):\n  " + "\n  ".join(problems))
    newest: dict[str, dict[str, Any]] = {}
    for rec in sorted(records, key=lambda r: str(r["fetched_at"])):
        newest[rec["region"]] = rec

    fams = {f.name: f for f in families}
    curated_fams = dict(fams)
    tps = {t.name: t for t in types}
    rows = list(prices)
    for rec in sorted(newest.values(), key=lambda r: (str(r["fetched_at"]), r["region"])):
        fresh: dict[str, list[dict[str, Any]]] = {}
        for e in rec["instance_types"]:
            if e["name"] in tps:
                tps[e["name"]] = _merge_known(tps[e["name"]], e)
            else:
                api_family = e["family"]
                fam_name = e["name"].removeprefix("ecs.") if api_family in curated_fams else api_family
                fresh.setdefault(fam_name, []).append(e)
        for fam_name, entries in sorted(fresh.items()):
            curated = curated_fams.get(entries[0]["family"])
            gpus = {e.get("gpu") for e in entries}
            if curated is None and len(gpus) > 1:
                groups = {e["name"].removeprefix("ecs."): [e] for e in entries}  # GPUs differ: one family each
            else:
                groups = {fam_name: entries}
            for name, group in groups.items():
                if name not in fams:
                    fams[name] = _new_family(name, group, rec, curated)
                for e in group:
                    tps[e["name"]] = _new_type(e, name)
        if prices_usable(rec):
            rows = [p for p in rows if p.region != rec["region"]] + region_prices(rec)
    return list(fams.values()), list(tps.values()), rows
