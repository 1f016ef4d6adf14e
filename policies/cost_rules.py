"""The hourly budget of a stack's GPU nodes, priced from the catalog (or each node's spot price limit)."""

from __future__ import annotations

import math
from typing import Optional

# _base before trainstack: from a bare checkout it puts the checkout's trainstack on sys.path
if __package__:
    from ._base import GPU_HOURLY_BUDGET, catalog, config_value, level_or_default
    from . import _nodes as N
    from . import _props as P
else:  # run by Pulumi from inside policies/
    from _base import GPU_HOURLY_BUDGET, catalog, config_value, level_or_default  # type: ignore[no-redef]
    import _nodes as N  # type: ignore[no-redef]
    import _props as P  # type: ignore[no-redef]

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError

from trainstack.catalog import Catalog


class BudgetUnverified(UnknownValueError):
    """A price the catalog does not know: the budget can't be checked (reported as advisory)."""

    def __init__(self, message: str):  # noqa: D107 (UnknownValueError wants a sentinel)
        Exception.__init__(self, message)
        self.unknown_type_sentinel = None
        self.props: list[str] = []
        self.message = message


# ---- 6. gpu-hourly-budget ---------------------------------------------------------------------
def _node_price(cat: Catalog, node: N.Node, region: str) -> tuple[Optional[float], str, str]:
    """(CNY/h per machine, type, basis) at the worst case over the node's types; None = unknown."""
    worst: tuple[Optional[float], str, str] = (None, "", "")
    for t in node.instance_types:
        limit = node.spot_price_limits.get(t, node.spot_price_limits.get("*"))
        if limit is not None:
            price, basis = limit, "spot price limit"
        else:
            price = cat.quote(region, t).on_demand_cny_per_hour if cat.knows(t) else None
            basis = "on-demand" + (" cap of spot" if node.spot else "")
        if price is None:
            return None, t, basis
        if worst[0] is None or price > worst[0]:
            worst = (price, t, basis)
    return worst


def gpu_hourly_budget(level: Optional[EnforcementLevel] = None) -> StackValidationPolicy:
    def validate(args: StackValidationArgs, report: ReportViolation) -> None:
        budget = P.as_number(config_value(args, "max_hourly_cost_cny"))
        if budget is None:
            args.not_applicable("max_hourly_cost_cny is not configured")
        if not math.isfinite(budget) or budget < 0:  # fail closed: NaN would turn the budget off
            report(f"max_hourly_cost_cny is {budget}, not a finite number >= 0: the budget cannot be checked; "
                   "fix the policy config")
            return
        cat = catalog()
        default_region = (N.stack_region(args.resources) or config_value(args, "region")
                          or cat.settings.get("default_region", "cn-shenzhen"))
        providers = {r.urn: N.provider_region(getattr(r, "provider", None)) for r in args.resources}
        total, lines, unpriced = 0.0, [], []
        for n in N.stack_nodes(args.resources):
            count = 1 if n.count is None else n.count
            if count == 0 or not n.instance_types:
                continue  # a DLC quota job (no ECS spec) is paid by its subscription
            if not (n.training or any(cat.knows(t) for t in n.instance_types)):
                continue  # not a GPU node
            region = n.region or providers.get(n.urn) or default_region
            price, t, basis = _node_price(cat, n, region)
            if price is None:
                unpriced.append(f"{n.name} ({t} in {region})")
                continue
            total += price * count
            lines.append(f"{n.label()} {t} {P.fmt_money(price)} ({basis})")
        if total > budget:
            also = f"; not counted, no price: {P.names(unpriced)}" if unpriced else ""
            report(f"GPU nodes cost {P.fmt_money(total)} CNY/h, above max_hourly_cost_cny "
                   f"{P.fmt_money(budget)}: {P.names(lines)}{also}; use fewer or cheaper nodes, spot "
                   "with a lower spot price limit, or raise max_hourly_cost_cny")
        elif unpriced:
            raise BudgetUnverified(
                f"the catalog has no price for {P.names(unpriced)}, so the budget of "
                f"{P.fmt_money(budget)} CNY/h is not verified (priced nodes: {P.fmt_money(total)} CNY/h); "
                "set a spot price limit or run `trainstack catalog refresh`")

    return StackValidationPolicy(
        name=GPU_HOURLY_BUDGET,
        description="Checks whether the stack's GPU nodes cost more per hour than max_hourly_cost_cny "
                    "(catalog on-demand prices; the price limit for spot nodes that set one).",
        validate=validate,
        enforcement_level=level_or_default(GPU_HOURLY_BUDGET, level),
        config_schema=PolicyConfigSchema(properties={
            "max_hourly_cost_cny": {"type": "number", "minimum": 0,
                                    "description": "Budget for all GPU nodes, CNY per hour; unset = off"},
            "region": {"type": "string",
                       "description": "Region to price in when no alicloud provider region is visible "
                                      "(default: the catalog's default region, cn-shenzhen)"},
        }),
    )
