"""What self-healing costs next to on-demand, priced by part (docs/self-healing.md "What a preemption costs").

A multi-node self-healing plan bills three prices: node 0 on-demand, the pool at spot, and the pool at
on-demand while ESS compensates a missing spot node (``compensate_with_on_demand``, ``spot: allow``). The
resolver ranks healing against the same nodes on-demand by total cost; this module says, with the
figures it ranked on, where healing breaks even: the spot price, as a fraction of on-demand, at which
the healing plan's total equals the on-demand plan's.

Both totals are all-in (storage and network too). The healing plan's hourly figure is linear in the
spot fraction f: at today's fraction f0 it is H, so at f it is H + (N-1) x P x (f - f0), P being one
node on-demand. Setting hours_h x that equal to the on-demand total T_o gives the break-even
f* = f0 + (T_o / hours_h - H) / ((N-1) x P). Pure arithmetic over the two candidates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Optional

from ..catalog.models import PriceQuote
from ..profile import TrainingProfile
from .engine import anchor_nodes
from ..plan import Candidate


@dataclass(frozen=True)
class HealingComparison:
    healing: Candidate
    on_demand: Candidate
    break_even_spot_fraction: Optional[float]

    def label(self, spot_fraction: Optional[float]) -> str:
        h, o = self.healing, self.on_demand
        head = (f"self-healing vs on-demand ({h.nodes} x {h.instance_type}): healing {h.total_cost_cny:,.2f} CNY "
                f"({h.estimated_hours:g} h at {h.hourly_cost_cny:.2f} CNY/h, {h.tokens_per_second:,.0f} tokens/s), "
                f"on-demand {o.total_cost_cny:,.2f} CNY ({o.estimated_hours:g} h at {o.hourly_cost_cny:.2f} CNY/h, "
                f"{o.tokens_per_second:,.0f} tokens/s)")
        f = self.break_even_spot_fraction
        if spot_fraction is None:
            return head + "; no spot price known for the type, so no break-even"
        if f is None:
            return head + "; healing never breaks even (it is slower by more than its spot savings can cover)"
        now = f" (spot now at {spot_fraction:.0%})" if spot_fraction is not None else ""
        return head + f"; healing breaks even at a spot price of {f:.1%} of on-demand{now}"


def break_even(healing: Candidate, on_demand: Candidate, f0: Optional[float]) -> Optional[float]:
    """The spot fraction f* at which both all-in totals match (None: unknown, or no fraction >= 0 does)."""
    n, hours = healing.nodes, healing.estimated_hours
    if (n < 2 or not hours or f0 is None or healing.hourly_cost_cny is None or on_demand.total_cost_cny is None
            or not on_demand.compute_hourly_cny):
        return None
    node = on_demand.compute_hourly_cny / on_demand.nodes
    f = f0 + (on_demand.total_cost_cny / hours - healing.hourly_cost_cny) / ((n - 1) * node)
    return round(f, 4) if f >= 0 else None


def compare(profile: TrainingProfile, candidates: Iterable[Candidate],
            fraction_of: Callable[[str], Optional[float]]) -> Optional[HealingComparison]:
    """The cheapest healing candidate and the same type and node count on-demand (None: no such pair,
    or a total cost is unknown); ``fraction_of(instance type)``: today's spot fraction, which the
    healing total was priced at."""
    rows = [c for c in candidates if c.feasible and c.total_cost_cny is not None and c.estimated_hours]
    healing = sorted((c for c in rows if anchor_nodes(profile, c.target, c.nodes, c.spot) > 0),
                     key=lambda c: c.total_cost_cny)
    for h in healing:
        twin = [c for c in rows if not c.spot and c.instance_type == h.instance_type and c.nodes == h.nodes]
        if twin:
            o = twin[0]
            return HealingComparison(h, o, break_even(h, o, fraction_of(h.instance_type or "")))
    return None


def spot_fraction(quote: PriceQuote) -> Optional[float]:
    if quote.spot_cny_per_hour is None or not quote.on_demand_cny_per_hour:
        return None
    return quote.spot_cny_per_hour / quote.on_demand_cny_per_hour


def node_prices(quote: PriceQuote, gpus_per_node: int) -> tuple[Optional[float], Optional[float]]:
    """One node's on-demand and spot price per hour (None: unknown)."""
    unit = gpus_per_node if quote.per == "GPU" else 1
    od, spot = quote.on_demand_cny_per_hour, quote.spot_cny_per_hour
    return (None if od is None else od * unit), (None if spot is None else spot * unit)


@dataclass(frozen=True)
class PoolPrices:
    """Node 0 on-demand and the pool at spot, per hour (CNY/h); the pool's on-demand fallback is its own
    contingent cost line (trainstack.placement.cost.compute_items)."""

    node0_on_demand: float
    pool_spot: float

    def labels(self, nodes: int) -> list[str]:
        return [f"self-healing pricing: node 0 on-demand {self.node0_on_demand:.2f} CNY/h + the pool's {nodes - 1} "
                f"spot node(s) {self.pool_spot:.2f} CNY/h = {self.node0_on_demand + self.pool_spot:.2f} CNY/h (the "
                "pool's on-demand fallback: its contingent cost line)"]


def pool_prices(quote: PriceQuote, gpus_per_node: int, nodes: int) -> Optional[PoolPrices]:
    """Node 0 on-demand and the pool at spot (None: a price is unknown, or no pool beside node 0)."""
    od, spot = node_prices(quote, gpus_per_node)
    if od is None or spot is None or nodes < 2:
        return None
    return PoolPrices(node0_on_demand=round(od, 4), pool_spot=round(spot * (nodes - 1), 4))
