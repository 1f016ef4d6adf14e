"""The catalog: every GPU, family, instance type and price row, validated together (sources cited,
memory figures within their basis, families and types consistent), answering lookups with "did
you mean" and pricing a type in a region. Built from the data files by ``loader.py``.
"""

from __future__ import annotations

import copy
import difflib
import math
from typing import Any, Iterable, Optional

from ..errors import InputError, Problem, did_you_mean
from .citations import family_citation_errors
from .errors import CatalogError
from .models import (
    GpuModel,
    InstanceFamily,
    InstanceType,
    PriceQuote,
    PricedService,
    RegionPrice,
    ResolvedInstance,
    SourceRef,
)
from .overlay_schema import API_SOURCE_TAG
from .quote import PRICES_DOC, ecs_quote, is_mainland_china  # noqa: F401  (is_mainland_china is read from here)
from .resource_prices import ResourcePrices, ResourceQuote, no_public_prices, price_errors, quote_resource


def excluded_family_of(name: str, excluded: Iterable[str]) -> Optional[str]:
    """The excluded family an instance type name belongs to, if any.

    Matches whole family names before a ``-`` or ``.`` (``ecs.sgn7i-vws-m2.xlarge`` is sgn7i,
    ``ecs.video-trans.26xhevc`` is video-trans), the longest first, so a family whose name holds
    a hyphen is not cut at it.
    """
    body = str(name).removeprefix("ecs.")
    for fam in sorted(excluded, key=len, reverse=True):
        if body.startswith(fam) and body[len(fam):len(fam) + 1] in ("-", "."):
            return fam
    return None


def usable_limit_gib(gpu: GpuModel, allowance_mib: Optional[int]) -> Optional[float]:
    """The most ``usable_gib`` may be for ``gpu`` by its basis (None when no figure bounds it).

    PyTorch's own device total where one is known; otherwise the nvidia-smi total less the
    documented allowance, rounded down to the hundredth the data is written in.
    """
    limits = []
    if gpu.torch_total_gib is not None:
        limits.append(gpu.torch_total_gib)
    if gpu.nvidia_smi_total_mib is not None and allowance_mib is not None and gpu.usable_basis != "torch-total":
        limits.append(math.floor((gpu.nvidia_smi_total_mib - allowance_mib) / 1024 * 100) / 100)
    return min(limits) if limits else None

def _unique(mapping: dict, items: Iterable, kind: str, key) -> dict:
    items = list(items)
    if len(mapping) != len(items):
        seen: set = set()
        dups = sorted({key(i) for i in items if key(i) in seen or seen.add(key(i))})
        raise CatalogError(f"duplicate {kind} in catalog data: {', '.join(dups)}")
    return mapping


class Catalog:
    """All catalog facts, validated together. Immutable after construction."""

    def __init__(
        self,
        *,
        sources: Iterable[SourceRef],
        gpus: Iterable[GpuModel],
        families: Iterable[InstanceFamily],
        instance_types: Iterable[InstanceType],
        prices: Iterable[RegionPrice],
        settings: dict[str, Any],
        excluded_families: Iterable[str] | dict[str, str] = (),
        overlays: Iterable[dict[str, Any]] = (),
        resource_prices: Optional[ResourcePrices] = None,
    ):
        self.sources = _unique({s.tag: s for s in sources}, sources, "source", lambda s: s.tag)
        self.gpus = _unique({g.name: g for g in gpus}, gpus, "GPU", lambda g: g.name)
        self.families = _unique({f.name: f for f in families}, families, "family", lambda f: f.name)
        self.instance_types = _unique(
            {t.name: t for t in instance_types}, instance_types, "instance type", lambda t: t.name)
        # family -> why it is left out (a dict from families.yaml; a plain iterable gives no reason)
        self.excluded_reasons: dict[str, str] = (
            dict(excluded_families) if isinstance(excluded_families, dict)
            else {f: "" for f in excluded_families})
        self.excluded_families = frozenset(self.excluded_reasons)
        self.settings = dict(settings)
        self.overlays = list(overlays)
        #: The team's prices, in front of every public figure (:meth:`with_price_book`).
        self.price_book: Optional[Any] = None  # a price_book.PriceBook (not imported: it reads this module's data)
        #: Public storage and network prices (data/resource_prices.yaml, passed by the loader), priced by
        #: :meth:`resource_quote`; a catalog built without them knows none (everything unpriced).
        self._own_resource_prices = resource_prices is not None
        self.resource_prices: ResourcePrices = resource_prices or no_public_prices()
        self._resource_quotes: dict[tuple, ResourceQuote] = {}
        self.prices: dict[str, dict[str, RegionPrice]] = {}
        for p in prices:
            self.prices.setdefault(p.region, {})[p.instance_type] = p
        self._validate()
        self._resolved = {n: self._join(t) for n, t in self.instance_types.items()}

    # ---- validation -------------------------------------------------------------------
    def _validate(self) -> None:
        errors: list[str] = []
        tags = set(self.sources)

        def cite(kind: str, name: str, refs: Iterable[str]) -> None:
            refs = list(refs)
            if not refs:
                errors.append(f"{kind} {name} has no source")
            for r in refs:
                if r not in tags:
                    errors.append(f"{kind} {name} cites unknown source {r!r}")

        allowance = self.settings.get("usable_memory_allowance_mib")
        for g in self.gpus.values():
            cite("GPU", g.name, g.sources)
            errors.extend(self._usable_memory_errors(g, allowance))
            # GPU vendors' "GB" are binary in practice (an "80 GB" A100 shows 81,920 MiB in
            # nvidia-smi and 79.15 GiB to PyTorch; an H200 "141 GB" gives PyTorch 139.8 GiB), so
            # the bound is memory_gb GiB.
            if g.usable_gib > g.memory_gb + 0.01:
                errors.append(f"GPU {g.name}: usable {g.usable_gib} GiB exceeds its {g.memory_gb} GB")
            if g.supports_fp8 != (g.fp8_tflops is not None) and g.fp8_tflops is not None:
                errors.append(f"GPU {g.name}: FP8 TFLOPS given but FP8 unsupported")
        for f in self.families.values():
            cite("family", f.name, f.sources)
            errors.extend(family_citation_errors(f, tags))
            if f.gpu is not None and f.gpu not in self.gpus:
                errors.append(f"family {f.name} names unknown GPU {f.gpu!r}")
        for t in self.instance_types.values():
            cite("instance type", t.name, t.sources)
            if t.family not in self.families:
                errors.append(f"instance type {t.name} names unknown family {t.family!r}")
            elif not t.name.startswith(f"ecs.{t.family}"):
                errors.append(f"instance type {t.name} is not in family {t.family}")
            if t.gpu_count < 1:
                errors.append(f"instance type {t.name} has no GPU")
        for region, rows in self.prices.items():
            for name, p in rows.items():
                if p.source not in tags:
                    errors.append(f"price {region}/{name} cites unknown source {p.source!r}")
                if p.on_demand_cny_per_hour is not None and p.on_demand_cny_per_hour <= 0:
                    errors.append(f"price {region}/{name} is {p.on_demand_cny_per_hour}: unknown must be null")
                if name not in self.instance_types:
                    errors.append(f"price {region}/{name} is for a type the catalog lacks")
        if self._own_resource_prices:
            errors += price_errors(self.resource_prices, tags, set(self.regions()))
        if errors:
            raise CatalogError("catalog data is inconsistent:\n  " + "\n  ".join(errors))

    @staticmethod
    def _usable_memory_errors(g: GpuModel, allowance: Optional[int]) -> list[str]:
        """usable_gib follows its stated basis and never exceeds PyTorch's figure (gpus.yaml header)."""
        out: list[str] = []
        if g.usable_source is None:
            out.append(f"GPU {g.name}: usable_gib has no usable_source")
        elif g.usable_source not in g.sources:
            out.append(f"GPU {g.name}: usable_source {g.usable_source!r} is not among its sources")
        if g.usable_basis == "torch-total":
            if g.torch_total_gib is None or abs(g.usable_gib - g.torch_total_gib) > 1e-9:
                out.append(f"GPU {g.name}: usable_basis torch-total needs usable_gib == torch_total_gib")
        elif g.usable_basis == "nvidia-smi-less-allowance":
            if g.nvidia_smi_total_mib is None or allowance is None:
                out.append(f"GPU {g.name}: usable_basis nvidia-smi-less-allowance needs nvidia_smi_total_mib "
                           "and settings usable_memory_allowance_mib")
        if g.usable_basis != "torch-total" and "usable_gib" not in g.unverified:
            out.append(f"GPU {g.name}: usable_gib from {g.usable_basis} must be listed in unverified")
        limit = usable_limit_gib(g, allowance)
        if limit is not None and g.usable_gib > limit + 1e-9:
            out.append(f"GPU {g.name}: usable {g.usable_gib} GiB is above {limit} GiB allowed by its "
                       f"{'PyTorch figure' if g.torch_total_gib is not None else 'nvidia-smi total less the allowance'}")
        return out

    def _join(self, t: InstanceType) -> ResolvedInstance:
        fam = self.families[t.family]
        return ResolvedInstance(type=t, family=fam, gpu=self.gpus.get(fam.gpu) if fam.gpu else None)

    # ---- lookups ----------------------------------------------------------------------
    @property
    def snapshot_date(self) -> str:
        dates = [p.as_of for rows in self.prices.values() for p in rows.values()]
        return min(dates) if dates else "unknown"

    @property
    def newest_price_date(self) -> str:
        dates = [p.as_of for rows in self.prices.values() for p in rows.values()]
        return max(dates) if dates else "unknown"

    def gpu(self, name: str, *, path: str = "gpu") -> GpuModel:
        for g in self.gpus.values():
            if g.name.lower() == str(name).lower():
                return g
        raise InputError(
            f"unknown GPU model {name!r}",
            problems=[Problem(path=path, message="unknown GPU model", given=name, has_given=True,
                              allowed=", ".join(sorted(self.gpus)),
                              suggestions=did_you_mean(name, self.gpus))])

    def instance(self, name: str, *, path: str = "instance_type") -> ResolvedInstance:
        if name in self._resolved:
            return self._resolved[name]
        fam = excluded_family_of(name, self.excluded_families)
        why = "unknown instance type"
        if fam is not None:
            reason = self.excluded_reasons.get(fam) or "a vGPU slice, not training hardware"
            why = f"instance type of family {fam} is not in the catalog ({reason})"
        raise InputError(
            f"{why}: {name!r}",
            problems=[Problem(path=path, message=why, given=name, has_given=True,
                              suggestions=self._suggest_types(name))],
            hint="`trainstack catalog` lists every known type")

    def _suggest_types(self, name: str, n: int = 3) -> list[str]:
        """Close real types, those of the family the name claims first (gn7-xlarge -> gn7-*)."""
        fams = [f for f in self.families if name.startswith(f"ecs.{f}")]
        same: list[str] = []
        if fams:
            fam = max(fams, key=len)
            pool = [t for t, r in self._resolved.items() if r.family.name == fam]
            same = did_you_mean(name, pool, n=n) or sorted(
                pool, key=lambda t: -difflib.SequenceMatcher(None, name, t).ratio())[:n]
        rest = [t for t in did_you_mean(name, self._resolved, n=n) if t not in same]
        return (same + rest)[:n]

    def knows(self, name: str) -> bool:
        return name in self._resolved

    def resolved_instances(self) -> list[ResolvedInstance]:
        return [self._resolved[n] for n in sorted(self._resolved)]

    def regions(self) -> list[str]:
        return sorted(set(self.prices) | set(self.settings.get("regions", [])))

    def check_region(self, region: str, *, path: str = "region") -> None:
        if region not in self.regions():
            raise InputError(
                f"unknown region {region!r}",
                problems=[Problem(path=path, message="unknown region", given=region, has_given=True,
                                  allowed=", ".join(self.regions()),
                                  suggestions=did_you_mean(region, self.regions()))])

    def seen_in(self, region: str, name: str) -> Optional[RegionPrice]:
        return self.prices.get(region, {}).get(name)

    def with_price_book(self, book: Optional[Any]) -> "Catalog":
        """This catalog with the team's prices in front of every public figure (a shallow copy)."""
        if book is None or book is self.price_book:
            return self
        other = copy.copy(self)
        other.price_book = book
        other._resource_quotes = {}  # quotes cached for the public prices only hold without a book
        return other

    def price_source(self, row: RegionPrice) -> tuple[str, str]:
        """(kind, words) for a snapshot or refresh price row."""
        if row.source == API_SOURCE_TAG:
            return "refresh", f"the account's API price (`trainstack catalog refresh` of {row.as_of})"
        return "snapshot", f"Alibaba's public list price (snapshot {row.source} of {row.as_of})"

    def quote(self, region: str, name: str, *, service: PricedService = "ecs") -> PriceQuote:
        """Price of ``name`` in ``region``: the price book's (absolute, then discounts on the list price),
        else the local figure, else a labelled mainland estimate (:mod:`.quote`). ``service`` "dlc" prices
        a PAI-DLC spec per pod and "dlc-quota" a resource quota per GPU: Alibaba publishes neither
        [DLC-BILL], so only the price book has them."""
        if service != "ecs":
            return self._pai_quote(region, name, service)
        return ecs_quote(self, region, name)

    def _pai_quote(self, region: str, name: str, service: PricedService) -> PriceQuote:
        """A PAI-DLC spec (per pod-hour) or resource quota (per GPU-hour): price book only."""
        kind = "dlc_spec" if service == "dlc" else "resource_id"
        what = f"PAI-DLC spec {name}" if service == "dlc" else f"resource quota {name}"
        per = "pod" if service == "dlc" else "GPU"
        entry = self.price_book.get(kind, region, name) if self.price_book is not None else None
        if entry is None:
            words = (f"no price known for {what} in {region}: Alibaba publishes no per-spec PAI price (the console "
                     "shows it) [DLC-BILL]")
            fix = (f"add a `{kind}: {name}` entry to price book {self.price_book.path}" if self.price_book is not None
                   else f"add a `{kind}: {name}` entry to a price book ({PRICES_DOC})")
            return PriceQuote(instance_type=name, region=region, service=service, per=per,
                              on_demand_cny_per_hour=None, spot_cny_per_hour=None, labels=(f"{words}; {fix}",),
                              source_kind="none", source=words)
        words = entry.describe(self.price_book.path)
        spot_labels = ((f"spot price of {what} is the team's price from price book {self.price_book.path} "
                        f"({entry.spot_cny_per_hour:g} CNY/h)",) if entry.spot_cny_per_hour is not None else ())
        return PriceQuote(instance_type=name, region=region, service=service, per=per,
                          on_demand_cny_per_hour=entry.on_demand_cny_per_hour,
                          spot_cny_per_hour=entry.spot_cny_per_hour, spot_estimated=entry.spot_cny_per_hour is None,
                          labels=(f"price of {what} in {region} is {words}",), spot_labels=spot_labels,
                          as_of=entry.as_of.isoformat(), source_kind="price-book", source=words)

    def resource_quote(self, region: str, kind: str, level: Optional[str] = None) -> ResourceQuote:
        """Price of storage ``kind`` (cloud_essd, cloud_auto, cpfs, oss; at ``level``) per GiB-month, or of
        network ``kind`` (nat_gateway, eip) per hour: the price book's, else the public figure, else a
        labelled mainland estimate, else unpriced (:mod:`.resource_prices`). Cached per catalog."""
        key = (region, kind, level)
        hit = self._resource_quotes.get(key)
        if hit is None:
            hit = self._resource_quotes[key] = quote_resource(self, region, kind, level)
        return hit

    def nvlink_alternatives(self, gpu_count: int, limit: int = 4) -> list[str]:
        """Instance types where ``gpu_count`` GPUs share NVLink/NVSwitch, cheapest listed first."""
        rows = [r for r in self.resolved_instances()
                if r.trainable and r.multi_gpu_training_ok and r.gpu_count >= gpu_count]
        rows.sort(key=lambda r: (r.gpu_count, r.name))
        return [r.name for r in rows[:limit]]
