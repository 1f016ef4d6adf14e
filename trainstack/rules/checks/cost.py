"""The hourly budget of a stack's GPU nodes.

A machine is priced at its spot price limit when it is a ``SpotWithPriceLimit`` node with one, else at
the planned price it carries (the channel: ``trainstack:planned-price``, DLC ``on_demand_cny_per_hour``),
else at the catalog's on-demand price of its type in its region (a hand-written stack). A node whose
price is known nowhere is not counted; when the priced nodes are within budget, the policy cannot run.
"""

from __future__ import annotations

import math
from typing import Iterator, Optional

from ...catalog import Catalog
from ..stack_view import GpuNode, NotApplicable, PlannedPrice, StackView, ValueUnknown, known
from . import Finding
from .gpu import names


def fmt_money(value: float) -> str:
    return f"{value:,.2f}"


def node_price(cat: Catalog, node: GpuNode, region: str) -> tuple[Optional[float], str, str]:
    """(CNY/h per machine, what is priced, basis) at the worst case over the node's types; None = unknown."""
    planned = known(node.planned_price)
    if not node.instance_types:  # a DLC quota job: priced only by the plan (its price book), else not counted
        if isinstance(planned, PlannedPrice):
            return planned.cny_per_hour, f"quota {node.quota_id}", f"on-demand, {planned.source}"
        return None, "", ""
    worst: tuple[Optional[float], str, str] = (None, "", "")
    for t in node.instance_types:
        limit = node.spot_price_limits.get(t, node.spot_price_limits.get("*"))
        if limit is not None:
            price, basis = limit, "spot price limit"
        elif isinstance(planned, PlannedPrice):
            price, basis = planned.cny_per_hour, f"on-demand, {planned.source}" + (" cap of spot" if node.spot else "")
        else:
            price = cat.quote(region, t).on_demand_cny_per_hour if cat.knows(t) else None
            basis = "on-demand" + (" cap of spot" if node.spot else "")
        if price is None:
            return None, t, basis
        if worst[0] is None or price > worst[0]:
            worst = (price, t, basis)
    return worst


def gpu_hourly_budget(view: StackView, settings: dict, cat: Catalog) -> Iterator[Finding]:
    budget = settings.get("max_hourly_cost_cny")
    if budget is None or isinstance(budget, bool):
        raise NotApplicable("max_hourly_cost_cny is not configured")
    try:
        budget = float(budget)
    except (TypeError, ValueError):
        raise NotApplicable("max_hourly_cost_cny is not configured") from None
    if not math.isfinite(budget) or budget < 0:  # fail closed: NaN would turn the budget off
        yield Finding(f"max_hourly_cost_cny is {budget}, not a finite number >= 0: the budget cannot be checked; "
                      "fix the policy config")
        return
    default_region = view.region or settings.get("region") or cat.settings.get("default_region", "cn-shenzhen")
    total, lines, unpriced = 0.0, [], []
    for n in view.nodes:
        count = 1 if n.count is None else n.count
        if count == 0 or not (n.instance_types or n.quota_id):
            continue
        if not (n.training or any(cat.knows(t) for t in n.instance_types)):
            continue  # not a GPU node
        region = n.region or default_region
        price, t, basis = node_price(cat, n, region)
        if price is None:
            if t:
                unpriced.append(f"{n.name} ({t} in {region})")
            continue  # an unpriced quota job is paid by its subscription
        total += price * count
        lines.append(f"{n.label()} {t} {fmt_money(price)} ({basis})")
    if total > budget:
        also = f"; not counted, no price: {names(unpriced)}" if unpriced else ""
        yield Finding(f"GPU nodes cost {fmt_money(total)} CNY/h, above max_hourly_cost_cny "
                      f"{fmt_money(budget)}: {names(lines)}{also}; use fewer or cheaper nodes, spot "
                      "with a lower spot price limit, or raise max_hourly_cost_cny")
    elif unpriced:
        raise ValueUnknown(reason=f"the catalog has no price for {names(unpriced)}, so the budget of "
                                  f"{fmt_money(budget)} CNY/h is not verified (priced nodes: {fmt_money(total)} "
                                  "CNY/h); set a spot price limit or run `trainstack catalog refresh`")
