"""`trainstack preflight PROFILE`: is the planned instance type in stock, right now, where planned?

Run it before `pulumi up`. It resolves the profile exactly like `resolve`, then asks ECS
(``DescribeAvailableResource``, same SDK and credential chain as `catalog refresh`) whether the
planned type can be bought, pay-as-you-go or spot as planned, in the planned zone (or in any zone
of the region when the plan leaves the zone to deploy time).

Exit codes: 0 in stock; 3 not in stock (infeasible now), with suggestions: another zone for the
same type, on-demand when spot is sold out, or one of the plan's ranked alternatives that is in
stock; 5 on an API or credentials error. A DLC plan is not checked (PAI schedules it; the ECS
stock API does not describe PAI's pools) and exits 0 saying so.

Every ECS check also lists the plan's fallback order (``Plan.capacity.candidates``, the rows
`trainstack up` may try) with each row's stock now (trainstack/cloud/stock.py): ``fallback`` and,
in JSON, ``first_candidate_in_stock`` and ``fallback_order``. ``--stack NAME`` checks a stack's plan
(its ``trainstack:zone`` / ``trainstack:instanceType`` applied), as the live preview job does.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Optional

from ..errors import InfeasibleError, InputError
from ..layout.capacity import planned_zones
from ..profile import load_profile
from ..rules import planned

#: How many alternative zones / types a failed check suggests.
MAX_SUGGESTIONS = 3


def register(sub) -> None:
    p = sub.add_parser(
        "preflight", help="check the planned instance type is in stock before `pulumi up`",
        description="Resolve PROFILE, then check with DescribeAvailableResource that the planned instance "
                    "type is in stock in the planned zone (exit 0), or suggest another zone or type (exit 3). "
                    "API or credential errors exit 5.")
    p.add_argument("profile", nargs="?", help="path to a profile YAML")
    p.add_argument("--stack", metavar="NAME", help="check the plan of stacks/Pulumi.NAME.yaml instead")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")
    p.set_defaults(func=run)


def resolve_plan(profile, file=None):  # a seam: tests hand in a plan
    return planned(profile, file=file)


@dataclass
class PreflightResult:
    name: str
    region: str
    zone: Optional[str]
    instance_type: Optional[str]
    spot: bool
    nodes: int
    checked: bool
    in_stock: Optional[bool]
    status: Optional[str] = None
    zones_in_stock: list[str] = field(default_factory=list)
    catalog_date: Optional[str] = None
    notes: list[str] = field(default_factory=list)
    #: the plan's fallback order with each row's stock now (dicts of trainstack.cloud.stock.RowStock)
    fallback: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["first_candidate_in_stock"] = self.fallback[0]["in_stock"] if self.fallback else self.in_stock
        out["fallback_order"] = [f"{r['instance_type']}@{r['zone'] or '*'}" for r in self.fallback]
        return out


def _pricing(spot: bool) -> str:
    return "spot" if spot else "on-demand"


def check(plan, client_factory: Callable[[str], Any], *, sleep=None) -> PreflightResult:
    """The stock check for ``plan``; raises InfeasibleError (exit 3) with suggestions when out of stock."""
    # the cloud adapters (and their SDKs) load only when this command calls the cloud
    from ..cloud.ecs import describe_stock
    from ..cloud.ecs_parse import in_stock

    base = dict(name=plan.name, region=plan.region, zone=plan.zone, instance_type=plan.instance_type,
                spot=bool(plan.spot), nodes=plan.nodes, catalog_date=plan.catalog_date)
    if plan.target == "dlc" or not plan.instance_type:
        return PreflightResult(**base, checked=False, in_stock=None, notes=[
            "PAI-DLC job: PAI schedules it on its own resources; DescribeAvailableResource describes ECS "
            "stock only, so nothing was checked"])
    # the cloud adapters (and their SDKs) load only when this command calls the cloud
    from ..cloud.stock import StockTable, fallback_stock

    strategy = plan.spot_strategy if plan.spot else "NoSpot"
    client = client_factory(plan.region)
    stock = describe_stock(client, plan.region, instance_type=plan.instance_type, spot_strategy=strategy,
                           spot_duration=plan.spot_duration_hours if plan.spot else None, sleep=sleep)
    zones = stock.get(plan.instance_type, {})
    ok_zones = sorted(z for z, s in zones.items() if in_stock(s))
    notes: list[str] = []
    if plan.nodes > 1:
        notes.append(f"DescribeAvailableResource reports availability, not capacity: {plan.nodes} nodes "
                     "are not reserved until `pulumi up` creates them")

    pinned = plan.capacity.zone_pinned if plan.capacity is not None else bool(plan.zone)
    candidates = planned_zones(plan.capacity, plan.instance_type)
    if plan.zone and pinned:
        status = zones.get(plan.zone)
        ok = plan.zone in ok_zones
    elif plan.zone and candidates:  # the deploy takes the first fallback zone with stock (components/zone.py)
        first = next((z for z in candidates if z in ok_zones), None)
        status, ok = zones.get(first or plan.zone), first is not None
        if first and first != plan.zone:
            notes.append(f"not in stock in the planned zone {plan.zone} ({zones.get(plan.zone) or 'not offered'}); "
                         f"a first deploy takes {first}, the first zone of the fallback order with stock")
    else:
        status = zones.get(ok_zones[0]) if ok_zones else None
        ok = bool(ok_zones)
        if ok:
            notes.append(f"the plan leaves the zone to deploy time; in stock in {', '.join(ok_zones)} "
                         f"(pin one with `zone:` in the profile)")
    if ok and status == "ClosedWithStock":
        notes.append("ClosedWithStock: in stock but supply is low; an alternative zone is safer if creation fails")
    table = StockTable(client, plan.region, spot_duration=plan.spot_duration_hours, sleep=sleep)
    rows = [r.to_dict() for r in fallback_stock(plan, table)]
    result = PreflightResult(**base, checked=True, in_stock=ok, status=status, zones_in_stock=ok_zones,
                             notes=notes, fallback=rows)
    if ok:
        return result
    raise _out_of_stock(plan, result, table)


def _out_of_stock(plan, result: PreflightResult, table) -> InfeasibleError:
    where = plan.zone or plan.region
    status = result.status or "not offered"
    message = (f"{plan.instance_type} ({_pricing(plan.spot)}) is not in stock in {where} "
               f"(DescribeAvailableResource: {status})")
    suggestions: list[str] = []
    for z in result.zones_in_stock[:MAX_SUGGESTIONS]:
        suggestions.append(f"{plan.instance_type} is in stock in {z}: set `zone: {z}` in the profile")
    if plan.spot:
        od_zones = table.zones_with_stock(plan.instance_type, False)
        if plan.zone in od_zones or (plan.zone is None and od_zones):
            suggestions.append(f"on-demand {plan.instance_type} is in stock in {plan.zone or od_zones[0]}: set "
                               "`resources.spot: never` (or `allow`) in the profile")
    alternatives = []
    seen = {plan.instance_type}
    for c in plan.alternatives:
        if not c.feasible or not c.instance_type or c.instance_type in seen:
            continue
        seen.add(c.instance_type)
        alternatives.append(c)
    offered: list[str] = []
    if alternatives:
        for c in alternatives:
            zs = table.zones_with_stock(c.instance_type, plan.spot)
            if not zs or len(offered) >= MAX_SUGGESTIONS:
                continue
            zone = c.zone if c.zone in zs else (plan.zone if plan.zone in zs else zs[0])
            cost = "" if c.hourly_cost_cny is None else f", {c.hourly_cost_cny:g} CNY/h"
            offered.append(c.instance_type)
            suggestions.append(
                f"{c.instance_type} ({c.nodes} x {c.gpus_per_node} {c.gpu_model or 'GPU'}, {_pricing(c.spot)}"
                f"{cost}) is in stock in {zone}: allow it with `resources.instance_types: [{c.instance_type}]`")
    if not suggestions:
        suggestions.append(f"nothing the resolver ranked is in stock in {plan.region} now: retry later, or choose "
                           "another region")
    details = result.to_dict()
    details["alternatives_in_stock"] = offered
    return InfeasibleError(message, suggestions=suggestions, details={"preflight": details})


def _plan(args):
    if args.stack:
        # it reads stacks through preview/: loaded only when a run is read
        from ._run_source import load_run

        return load_run(args.profile, args.stack, "preflight")[1]
    if not args.profile:
        raise InputError("preflight needs a PROFILE path or --stack NAME (one of them)")
    return resolve_plan(load_profile(args.profile), args.profile)


def run(args) -> int:
    # the cloud adapters (and their SDKs) load only when this command calls the cloud
    from ..cloud import ecs

    plan = _plan(args)
    try:
        result = check(plan, ecs.make_client)
    except InfeasibleError as err:
        if not args.json:  # the order `trainstack up` would try, also when the planned row has no stock
            _print_fallback(err.details.get("preflight", {}).get("fallback") or [])
        raise
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
        return 0
    if not result.checked:
        print(f"preflight {result.name}: not checked")
    else:
        where = result.zone or f"{result.region} ({', '.join(result.zones_in_stock)})"
        status = f" [{result.status}]" if result.status else ""
        print(f"preflight {result.name}: {result.instance_type} ({_pricing(result.spot)}) is in stock in "
              f"{where}{status}")
    print(f"  catalog date: {result.catalog_date or 'unknown'}")
    for note in result.notes:
        print(f"  note: {note}")
    _print_fallback(result.fallback)
    return 0


def _print_fallback(rows: list[dict]) -> None:
    # the cloud adapters (and their SDKs) load only when this command calls the cloud
    from ..cloud.stock import RowStock, describe_row

    if not rows:
        return
    print(f"  first fallback row in stock now: {'yes' if rows[0]['in_stock'] else 'no'}")
    print("  fallback order (`trainstack up` tries these in order):")
    for row in rows:
        print(f"    {describe_row(RowStock(**row))}")
