"""Load the catalog data files (curated facts, the price snapshot and supplements, refresh overlays)
into a validated :class:`~trainstack.catalog.facts.Catalog`, once per process."""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any, Optional

from pydantic import ValidationError

from ..datafile import load_data_yaml
from ..errors import InputError, Problem
from .errors import CatalogError
from .facts import Catalog, excluded_family_of, is_mainland_china  # noqa: F401  (also read from here)
from .models import GpuModel, InstanceFamily, InstanceType, RegionPrice, SourceRef
from .overlay import OverlayError, apply_overlays, read_overlays
from .resource_prices import load_resource_prices

DATA_DIR = Path(__file__).parent / "data"
#: Environment variable pointing at another overlay directory (tests, forks).
OVERLAY_DIR_ENV = "TRAINSTACK_CATALOG_OVERLAYS"


def read_data_yaml(path: Path) -> Any:
    return load_data_yaml(path)


def source_tags(data_dir: Path) -> set[str]:
    """The tags of ``sources.yaml`` in ``data_dir``: what every data file's ``source`` may cite."""
    return {row["tag"] for row in read_data_yaml(data_dir / "sources.yaml") or []}


def overlay_dir() -> Path:
    return Path(os.environ.get(OVERLAY_DIR_ENV) or DATA_DIR / "overlays")


def _parse(model, rows: list[dict], file: str) -> list:
    out = []
    for i, row in enumerate(rows or []):
        try:
            out.append(model.model_validate(row))
        except ValidationError as exc:
            raise CatalogError(f"{file}[{i}] ({row.get('name', '?')}): {exc}") from None
    return out


def _snapshot_prices(meta: dict, types: dict[str, InstanceType], excluded: frozenset,
                     data_dir: Path = DATA_DIR) -> list[RegionPrice]:
    """Turn the dated public price snapshot into RegionPrice rows (0 means unknown)."""
    raw = json.loads((data_dir / "prices" / meta["file"]).read_text(encoding="utf-8"))
    rows: list[RegionPrice] = []
    mismatches: list[str] = []
    for region, entries in raw.items():
        for name, row in entries.items():
            if excluded_family_of(name, excluded) is not None:
                continue
            t = types.get(name)
            if t is not None and (t.gpu_count, t.vcpu) != (row["gpu_count"], row["vcpu"]):
                mismatches.append(f"{region}/{name}: snapshot says {row['gpu_count']} GPU/"
                                  f"{row['vcpu']} vCPU, catalog {t.gpu_count}/{t.vcpu}")
            price = row.get("on_demand_cny_per_hour") or None
            rows.append(RegionPrice(
                region=region, instance_type=name, on_demand_cny_per_hour=price,
                zones=tuple(row.get("zones", ())), source=meta["source"], as_of=meta["as_of"]))
    if mismatches:
        raise CatalogError("price snapshot disagrees with the catalog:\n  " + "\n  ".join(mismatches))
    return rows


def _supplementary_prices(data_dir: Path, known: set[tuple[str, str]]) -> list[RegionPrice]:
    """Dated, sourced prices for (region, type) pairs the snapshot lacks (``prices/supplementary.yaml``)."""
    path = data_dir / "prices" / "supplementary.yaml"
    if not path.exists():
        return []
    rows = []
    for block in read_data_yaml(path) or []:
        for name, price in block["on_demand_cny_per_hour"].items():
            if (block["region"], name) not in known:
                rows.append(RegionPrice(region=block["region"], instance_type=name, on_demand_cny_per_hour=price,
                                        source=block["source"], as_of=str(block["as_of"])))
    return rows


def _overlay_records(directory: Path) -> list[dict[str, Any]]:
    """Validated refresh overlays; a broken file is an InputError naming it (exit 2)."""
    if not directory.is_dir() or not any(directory.glob("*.json")):
        return []

    try:
        return read_overlays(directory)
    except OverlayError as exc:
        raise InputError(str(exc), problems=[Problem(path="", message=f"catalog overlay is invalid: {p}",
                                                     file=exc.where) for p in exc.problems],
                         hint="fix or delete the file, or run `trainstack catalog refresh` again") from None


def build_catalog(data_dir: Path = DATA_DIR, overlays: Optional[list[dict[str, Any]]] = None) -> Catalog:
    """Read every data file and build a validated :class:`Catalog` (uncached)."""
    sources = _parse(SourceRef, read_data_yaml(data_dir / "sources.yaml"), "sources.yaml")
    gpus = _parse(GpuModel, read_data_yaml(data_dir / "gpus.yaml"), "gpus.yaml")
    fam_doc = read_data_yaml(data_dir / "families.yaml")
    families = _parse(InstanceFamily, fam_doc["families"], "families.yaml")
    excluded = dict(fam_doc.get("excluded_families") or {})
    types = _parse(InstanceType, read_data_yaml(data_dir / "instance_types.yaml"), "instance_types.yaml")
    settings = read_data_yaml(data_dir / "settings.yaml")
    by_name = {t.name: t for t in types}
    prices = _snapshot_prices(settings["price_snapshot"], by_name, frozenset(excluded), data_dir)
    prices += _supplementary_prices(data_dir, {(p.region, p.instance_type) for p in prices})
    records = _overlay_records(overlay_dir()) if overlays is None else overlays
    if records:
        families, types, prices = apply_overlays(records, families, types, prices)
    return Catalog(sources=sources, gpus=gpus, families=families, instance_types=types,
                   prices=prices, settings=settings, excluded_families=excluded, overlays=records,
                   resource_prices=load_resource_prices(data_dir / "resource_prices.yaml"))


@functools.lru_cache(maxsize=4)
def _cached(overlay_key: str) -> Catalog:
    return build_catalog()


def load_catalog() -> Catalog:
    """The catalog, loaded once per process (per overlay directory)."""
    return _cached(str(overlay_dir()))


def clear_cache() -> None:
    """Forget the loaded catalog (after a refresh wrote new overlays)."""
    _cached.cache_clear()
