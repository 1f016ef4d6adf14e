"""What a refresh changed (pure): types added and removed, facts and prices moved, as a table."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

from ..catalog import overlay as ov
from ..catalog.loader import Catalog
from .fetch import RegionFetch

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
