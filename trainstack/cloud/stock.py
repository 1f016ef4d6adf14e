"""ECS stock for a plan's fallback order: one region-wide DescribeAvailableResource per pricing.

``trainstack preflight`` shows every row of ``Plan.capacity.candidates`` with its stock, and
`trainstack up` asks before each attempt, so an attempt is made only where the type is in stock
now. DescribeAvailableResource (DestinationResource InstanceType, pay-as-you-go, the row's spot
strategy) reports a ``StatusCategory`` per type and zone: ``WithStock`` and ``ClosedWithStock`` can
be bought (trainstack/cloud/ecs_parse.py ``IN_STOCK``); ``WithoutStock``, ``ClosedWithoutStock`` or a
zone not listed cannot. Stock is availability, not a promise of capacity: RunInstances can still
fail, which is what `trainstack up` answers by moving on.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Optional

from .ecs import EcsClient, describe_stock
from .ecs_parse import in_stock
from .retry import Sleep

#: The spot strategy trainstack's spot nodes use (components/cluster.py): a price limit, never SpotAsPriceGo.
SPOT_STRATEGY = "SpotWithPriceLimit"


@dataclass(frozen=True)
class RowStock:
    """One fallback row and what ECS says about it now."""

    rank: int
    instance_type: str
    zone: Optional[str]
    nodes: int
    spot: bool
    planned: bool
    status: str
    in_stock: bool
    #: a row whose zone is chosen at deploy time: the first zone with stock (None: none has)
    zone_with_stock: Optional[str] = None
    hourly_cost_cny: Optional[float] = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class StockTable:
    """Stock per (type, zone) for one region, fetched once per pricing and kept for the command."""

    def __init__(self, client: EcsClient, region: str, *, spot_duration: Optional[int] = None,
                 sleep: Optional[Sleep] = None):
        self.client, self.region, self.spot_duration, self.sleep = client, region, spot_duration, sleep
        self._by_strategy: dict[str, dict[str, dict[str, str]]] = {}

    def statuses(self, instance_type: str, spot: bool) -> dict[str, str]:
        """``{zone: StatusCategory}`` of ``instance_type`` for pay-as-you-go or spot."""
        strategy = SPOT_STRATEGY if spot else "NoSpot"
        if strategy not in self._by_strategy:
            self._by_strategy[strategy] = describe_stock(
                self.client, self.region, spot_strategy=strategy,
                spot_duration=self.spot_duration if spot else None, sleep=self.sleep)
        return self._by_strategy[strategy].get(instance_type, {})

    def zones_with_stock(self, instance_type: str, spot: bool) -> list[str]:
        return sorted(z for z, s in self.statuses(instance_type, spot).items() if in_stock(s))

    def check(self, instance_type: str, zone: Optional[str], spot: bool) -> tuple[bool, str, Optional[str]]:
        """(in stock, status, the zone it is in stock in): a zone of None takes the first zone with stock."""
        statuses = self.statuses(instance_type, spot)
        if zone is None:
            zones = self.zones_with_stock(instance_type, spot)
            return (True, statuses[zones[0]], zones[0]) if zones else (False, "not in stock in any zone", None)
        status = statuses.get(zone) or "not offered"
        return in_stock(status), status, zone


def fallback_stock(plan: Any, table: StockTable) -> list[RowStock]:
    """Every row of the plan's fallback order with its stock now (empty for plans without one)."""
    out: list[RowStock] = []
    for rank, row in enumerate(plan.capacity.candidates if plan.capacity else (), 1):
        ok, status, where = table.check(row.instance_type, row.zone, row.spot)
        out.append(RowStock(rank=rank, instance_type=row.instance_type, zone=row.zone, nodes=row.nodes, spot=row.spot,
                            planned=row.planned, status=status, in_stock=ok,
                            zone_with_stock=where if row.zone is None else None,
                            hourly_cost_cny=row.hourly_cost_cny))
    return out


def describe_row(row: RowStock) -> str:
    """``2. ecs.x in cn-x-f (on-demand, 1 node): WithStock``, as preflight and up print it."""
    where = row.zone or (f"{row.zone_with_stock} (chosen by stock)" if row.zone_with_stock else "any zone")
    pricing = "spot" if row.spot else "on-demand"
    mark = " [planned]" if row.planned else ""
    return (f"{row.rank}. {row.instance_type} in {where} ({pricing}, {row.nodes} node{'s' if row.nodes > 1 else ''})"
            f"{mark}: {row.status}")
