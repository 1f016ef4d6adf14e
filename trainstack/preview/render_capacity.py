"""The fallback order and the capacity reservation, as the plan and the PR comment show them.

Reads only ``plan.capacity`` of a plan document (``Plan.capacity`` as JSON): the rows `trainstack up`
may deploy, in the order it tries them, and the reservation's hourly price. A reviewer approves
these rows with the pull request; nothing else is ever tried.
"""

from __future__ import annotations

from typing import Callable, Optional

from ..textable import render_table
from .text_format import finite_number, md_escape

#: rows a PR comment lists before folding the rest away
SHOWN = 12


def _candidates(capacity: object) -> list[dict]:
    """The candidate rows of ``plan.capacity``; a hand-edited saved plan may hold anything there."""
    found = capacity.get("candidates") if isinstance(capacity, dict) else None
    return [c for c in found if isinstance(c, dict)] if isinstance(found, list) else []


def _rows(capacity: dict, cell: Callable[[str], str] = str) -> list[tuple[str, str, str, str, str, str]]:
    out = []
    for i, c in enumerate(_candidates(capacity), 1):
        cost = c.get("hourly_cost_cny")
        out.append((str(i), cell(str(c.get("instance_type"))), cell(str(c.get("zone") or "by stock at deploy")),
                    cell(f"{c.get('nodes')} x {c.get('gpus_per_node')} {c.get('gpu_model') or 'GPU'}"),
                    ("spot" if c.get("spot") else "on-demand") + (" (planned)" if c.get("planned") else ""),
                    f"{cost:,.2f}" if finite_number(cost) else "unknown"))
    return out


def reservation_line(capacity: Optional[dict]) -> Optional[str]:
    res = capacity.get("reservation") if isinstance(capacity, dict) else None
    if not isinstance(res, dict) or not res:
        return None
    price = f"{res['hourly_cny']:,.2f} CNY/h" if finite_number(res.get("hourly_cny")) else "an unknown amount"
    return (f"capacity reservation: {res.get('instances')} x {res.get('instance_type')}, bills {price} from creation "
            "until `pulumi destroy` (also while the nodes are stopped)")


def _pin(capacity: dict) -> str:  # only called once _candidates found rows, so capacity is an object
    return ("zone pinned: `trainstack up` tries only other types there" if capacity.get("zone_pinned") else
            "zone not pinned: a first deploy takes the first zone in stock; once deployed it never moves")


def capacity_text(capacity: Optional[dict]) -> list[str]:
    if not _candidates(capacity):
        return []
    table = render_table(["#", "TYPE", "ZONE", "NODES", "PRICING", "CNY/H"], _rows(capacity)).splitlines()
    lines = ["", f"Fallback order (`trainstack up` tries these in order; {_pin(capacity)})"]
    lines += ["  " + ln for ln in table]
    if res := reservation_line(capacity):
        lines.append(f"  {res}")
    return lines


def capacity_markdown(capacity: Optional[dict], note: str = "") -> list[str]:
    if not _candidates(capacity):
        return []
    rows = _rows(capacity, cell=md_escape)
    out = [f"<details><summary>Fallback order: {len(rows)} row{'s' if len(rows) != 1 else ''} `trainstack up` may "
           f"deploy{note}</summary>", "", f"{_pin(capacity)}.", "",
           "| # | Type | Zone | Nodes | Pricing | CNY/h |", "|---|---|---|---|---|---|"]
    out += [f"| {' | '.join(r)} |" for r in rows[:SHOWN]]
    if len(rows) > SHOWN:
        out.append(f"| … | {len(rows) - SHOWN} more | | | | |")
    if res := reservation_line(capacity):
        out += ["", md_escape(res)]
    return out + ["", "</details>", ""]
