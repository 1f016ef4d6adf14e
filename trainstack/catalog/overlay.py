"""Refresh overlays: what `trainstack catalog refresh` learnt from Alibaba's APIs, per region: read,
written, and merged with the curated catalog. The record's format and its validation are in
``overlay_schema.py``.

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

import json
import re
from pathlib import Path
from typing import Any, Iterable, Optional

from ..errors import InputError
from ..fsutil import read_json_file
from .errors import CatalogError
from .models import GpuModel, InstanceFamily, InstanceType, RegionPrice
from .overlay_schema import (  # noqa: F401  (the record's names, read here by loader, refresh and tests)
    API_SOURCE_TAG, CURRENCIES, MAX_OVERLAY_BYTES, MAX_OVERLAY_DEPTH, MAX_USD_TO_CNY, SCHEMA_VERSION, SOURCE,
    OverlayError, check_overlay, validate_overlay,
)

#: Families that are vGPU slices by Alibaba's naming (never training hardware).
SLICE_PREFIXES = ("vgn", "sgn")


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
    unverified = ["interconnect", "boot_mode", "deployment_set_low_latency"]
    if gpu is None:
        unverified.insert(0, "gpu")
    return InstanceFamily(
        name=name, gpu=gpu, interconnect="unverified", rdma=rdma, training=training, bare_metal=bare_metal,
        status=status, sources=(API_SOURCE_TAG,), unverified=tuple(unverified),
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
