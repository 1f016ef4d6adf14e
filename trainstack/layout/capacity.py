"""Where an ECS plan may land if its first choice has no stock, and the capacity it may hold.

GPU stock, not price, most often stops a training run, and the offline catalog cannot see stock
(docs/DESIGN.md, "Prices and availability"). So a plan carries its *fallback order*
(``Plan.capacity.candidates``): the planned type in each zone the catalog saw offering it (the
planned zone first), then each alternative type the resolver ranked feasible (best first, one row
per type and zone), at most :data:`MAX_CANDIDATES`. Only these rows may be deployed by
`trainstack up` (trainstack/commands/up_failover.py) or picked by stock at deploy time
(components/network.py): the pull request's plan shows them, and each was checked against the
profile's budget, deadline and allow-lists by the same engine.

A zone the profile (or ``trainstack:zone``) states is the only zone of every row: pinned means
pinned. ``resources.capacity: reserve`` adds a :class:`~trainstack.plan.ReservationPlan`: an
immediate capacity reservation bills the pay-as-you-go rate of its instances while it exists,
used or not, and covers pay-as-you-go instances only (Alibaba, "Immediate capacity reservations",
https://help.aliyun.com/en/ecs/user-guide/overview-of-immediate-capacity-reservation), so the
profile refuses it with spot and its hourly figure is nodes x the on-demand price.
"""

from __future__ import annotations

from typing import Iterable, Optional, Sequence

from ..catalog import Catalog
from ..errors import InfeasibleError, InputError
from ..plan import CapacityPlan, Candidate, FallbackCandidate, ReservationPlan
from ..profile import TrainingProfile

#: Rows a plan lists (and `trainstack up` may try at most): the planned type's zones come first.
MAX_CANDIDATES = 12


def offered_zones(profile: TrainingProfile, catalog: Catalog, instance_type: str, spot: bool) -> list[str]:
    """Zones the catalog saw offering ``instance_type`` in the profile's region, as
    ``placement.engine.zone_for`` reads them: spot plans use the zones a refresh saw spot stock in
    when it priced spot at all; sorted, the profile's zone alone when it states one."""
    if profile.zone:
        return [profile.zone]
    seen = catalog.seen_in(profile.region, instance_type)
    if seen is None:
        return []
    if spot and seen.spot_cny_per_hour is not None:
        return sorted(seen.spot_zones)
    return sorted(seen.zones)


def fallback_order(profile: TrainingProfile, catalog: Catalog, best: Candidate,
                   alternatives: Iterable[Candidate]) -> tuple[FallbackCandidate, ...]:
    """The plan's own type and zone, its other zones, then one row per zone of each further
    feasible type in the resolver's rank order (the first, best row of a type stands for it)."""
    rows: list[FallbackCandidate] = []
    types: set[str] = set()
    for cand in (best, *alternatives):
        if not cand.feasible or not cand.instance_type or cand.instance_type in types:
            continue
        types.add(cand.instance_type)
        zones = offered_zones(profile, catalog, cand.instance_type, cand.spot)
        ordered = ([cand.zone] if cand.zone else []) + [z for z in zones if z != cand.zone]
        for i, zone in enumerate(ordered or [None]):
            rows.append(FallbackCandidate(
                instance_type=cand.instance_type, zone=zone, nodes=cand.nodes, gpus_per_node=cand.gpus_per_node,
                gpu_model=cand.gpu_model, spot=cand.spot, hourly_cost_cny=cand.hourly_cost_cny,
                total_cost_cny=cand.total_cost_cny, planned=cand is best and i == 0))
    return tuple(rows[:MAX_CANDIDATES])


def reservation_for(profile: TrainingProfile, catalog: Catalog, best: Candidate) -> Optional[ReservationPlan]:
    """The reservation ``resources.capacity: reserve`` asks for (the profile refuses it with spot)."""
    if profile.resources.capacity != "reserve" or not best.instance_type:
        return None
    assert not best.spot, "the profile refuses capacity: reserve unless resources.spot is never"
    quote = catalog.quote(profile.region, best.instance_type)
    rate = quote.on_demand_cny_per_hour
    return ReservationPlan(instance_type=best.instance_type, instances=best.nodes,
                           hourly_cny=None if rate is None else round(rate * best.nodes, 4),
                           price_source=quote.source)


def plan_capacity(profile: TrainingProfile, catalog: Catalog, best: Candidate,
                  alternatives: Iterable[Candidate]) -> CapacityPlan:
    return CapacityPlan(zone_pinned=profile.zone is not None,
                        candidates=fallback_order(profile, catalog, best, alternatives),
                        reservation=reservation_for(profile, catalog, best))


def capacity_labels(capacity: Optional[CapacityPlan]) -> list[str]:
    """What every output says about the fallback order and the reservation."""
    if capacity is None:
        return []
    out = []
    if capacity.zone_pinned:
        out.append("zone pinned (profile zone / trainstack:zone): never moved by stock; `trainstack up` tries only "
                   "other types there")
    res = capacity.reservation
    if res is not None:
        price = "an unknown amount" if res.hourly_cny is None else f"{res.hourly_cny:g} CNY/h"
        out.append(f"capacity reservation of {res.instances} x {res.instance_type}: bills {price} (the pay-as-you-go "
                   "rate) from creation until `pulumi destroy` releases it, also while the nodes are stopped; "
                   "costs above are the nodes only")
    return out


# ---- the zone at deploy time ----------------------------------------------------------------------

def planned_zones(capacity: Optional[CapacityPlan], instance_type: Optional[str]) -> list[str]:
    """The zones the fallback order lists for ``instance_type``, in order (empty: none known offline)."""
    if capacity is None or not instance_type:
        return []
    return list(dict.fromkeys(c.zone for c in capacity.candidates if c.instance_type == instance_type and c.zone))


def deploy_zone(name: str, region: str, candidates: Sequence[str], deployed: Iterable[str], in_stock: Iterable[str],
                cpfs_zones: Optional[Iterable[str]] = None) -> str:
    """The zone a stack's nodes go to when nothing pins it: the zone its node vSwitch already has
    (``deployed``: a later stock change never moves a deployed stack), else the first of
    ``candidates`` with stock (and CPFS, when planned). InfeasibleError (exit 3) when none has."""
    have = sorted(set(deployed))
    if len(have) > 1:
        raise InputError(f"{name} has node vSwitches in {', '.join(have)}; trainstack cannot tell which zone the "
                         "stack uses", hint="pin it: `pulumi config set trainstack:zone <zone>`")
    if have:
        return have[0]
    stocked, cpfs = set(in_stock), None if cpfs_zones is None else set(cpfs_zones)
    for zone in candidates:
        if zone in stocked and (cpfs is None or zone in cpfs):
            return zone
    why = [f"{z}: {'no stock' if z not in stocked else 'no CPFS'}" for z in candidates]
    raise InfeasibleError(
        f"no zone of {name}'s fallback order in {region} has stock now ({'; '.join(why) or 'no zone offers it'})",
        suggestions=["`trainstack up` tries the plan's other instance types in order (docs/capacity.md)",
                     "retry later, or pin a zone: `pulumi config set trainstack:zone <zone>`"])
