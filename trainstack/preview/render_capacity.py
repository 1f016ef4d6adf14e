"""The fallback order and the capacity reservation, as the plan and the PR comment show them.

Reads only ``plan.capacity`` of a plan document (``Plan.capacity`` as JSON): the rows `trainstack up`
may deploy, in the order it tries them, and the reservation's hourly price. A reviewer approves
these rows with the pull request; nothing else is ever tried.
"""

from __future__ import annotations

from typing import Optional

from ..textable import render_table

#: rows a PR comment lists before folding the rest away
SHOWN = 12


def _rows(capacity: dict) -> list[tuple[str, str, str, str, str, str]]:
    out = []
    for i, c in enumerate(capacity.get("candidates") or [], 1):
        cost = c.get("hourly_cost_cny")
        out.append((str(i), str(c.get("instance_type")), str(c.get("zone") or "by stock at deploy"),
                    f"{c.get('nodes')} x {c.get('gpus_per_node')} {c.get('gpu_model') or 'GPU'}",
                    ("spot" if c.get("spot") else "on-demand") + (" (planned)" if c.get("planned") else ""),
                    "unknown" if cost is None else f"{cost:,.2f}"))
    return out


def reservation_line(capacity: Optional[dict]) -> Optional[str]:
    res = (capacity or {}).get("reservation")
    if not res:
        return None
    price = "an unknown amount" if res.get("hourly_cny") is None else f"{res['hourly_cny']:,.2f} CNY/h"
    return (f"capacity reservation: {res.get('instances')} x {res.get('instance_type')}, bills {price} from creation "
            "until `pulumi destroy` (also while the nodes are stopped)")


def _pin(capacity: dict) -> str:
    return ("zone pinned: `trainstack up` tries only other types there" if capacity.get("zone_pinned") else
            "zone not pinned: a first deploy takes the first zone in stock; once deployed it never moves")


def capacity_text(capacity: Optional[dict]) -> list[str]:
    if not capacity or not capacity.get("candidates"):
        return []
    table = render_table(["#", "TYPE", "ZONE", "NODES", "PRICING", "CNY/H"], _rows(capacity)).splitlines()
    lines = ["", f"Fallback order (`trainstack up` tries these in order; {_pin(capacity)})"]
    lines += ["  " + ln for ln in table]
    if res := reservation_line(capacity):
        lines.append(f"  {res}")
    return lines


def capacity_markdown(capacity: Optional[dict], note: str = "") -> list[str]:
    if not capacity or not capacity.get("candidates"):
        return []
    rows = _rows(capacity)
    out = [f"<details><summary>Fallback order: {len(rows)} row{'s' if len(rows) != 1 else ''} `trainstack up` may "
           f"deploy{note}</summary>", "", f"{_pin(capacity)}.", "",
           "| # | Type | Zone | Nodes | Pricing | CNY/h |", "|---|---|---|---|---|---|"]
    out += [f"| {' | '.join(r)} |" for r in rows[:SHOWN]]
    if len(rows) > SHOWN:
        out.append(f"| … | {len(rows) - SHOWN} more | | | | |")
    if res := reservation_line(capacity):
        out += ["", res]
    return out + ["", "</details>", ""]
