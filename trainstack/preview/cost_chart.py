"""A chart GitHub renders of total cost against hours for the feasible candidates, the chosen one marked.

Mermaid ``xychart-beta`` (not ``quadrantChart``): its axes carry the real numbers (CNY on the y-axis,
each candidate's hours in its x-axis label, candidates sorted fastest first), where a quadrant chart
only places points on a 0..1 square and its axes cannot show a value, so "what does finishing 2x
sooner cost" could not be read off it. The chosen candidate is marked twice: a "★" in its label and a
second bar series holding only its bar, drawn over the first in the next colour (xychart draws each
bar series at the same x; mermaid ``barPlot.ts``).

Syntax (mermaid-js/mermaid@df032c9, ``packages/mermaid/src/diagrams/xychart/parser/xychart.jison``;
``xychart-beta`` is the keyword of every release since the chart appeared, later ones accept
``xychart`` too): ``title "text"``; ``x-axis "title" ["a", "b"]``; ``y-axis "title" MIN --> MAX``;
``bar [n, n]`` with numbers ``[+-]?(\\d+(\\.\\d+)?|\\.\\d+)`` (no exponent, no thousands separator). A
quoted string is ``"[^"]*"`` with no escape, a string opening with a backtick is markdown, and ``%%``
starts a comment: :func:`label` keeps a candidate's words within those rules. Candidates without hours
or a total cost are left out and named under the chart; past :data:`MAX_POINTS`, only the frontier
(no other candidate both faster and cheaper) and the chosen one are charted.
"""

from __future__ import annotations

import math
import re
from typing import Any, Iterable, Optional

#: The most bars a chart holds (a PR comment stays readable); the rest are in the table.
MAX_POINTS = 24
MAX_LABEL = 40
CHOSEN_MARK = "★"
#: what a label keeps: ``"`` ends the string, a leading backtick makes it markdown, ``%%`` opens a comment,
#: ``#...;`` and ``&...;`` read as entities and ``<``/``>`` as markup in mermaid's text: all become ``_``
_UNSAFE = re.compile(r"[^A-Za-z0-9 ._:/()+=',★-]")


def label(text: Any) -> str:
    """``text`` as a safe xychart string body (see :data:`_UNSAFE`), at most :data:`MAX_LABEL` characters."""
    safe = _UNSAFE.sub("_", str(text)).strip() or "_"
    return safe[:MAX_LABEL]


def number(v: float) -> str:
    """A value as the grammar's NUMBER_WITH_DECIMAL: fixed point, at most 2 decimals."""
    text = f"{v:.2f}".rstrip("0").rstrip(".")
    return text if text not in ("-0", "") else "0"


def point_label(c: dict, chosen: bool) -> str:
    """``[★ ]<nodes> x <type>[ spot] <hours>h``: the words cut short, the hours always whole."""
    hours = f" {c['estimated_hours']:.1f}h"
    words = label(f"{CHOSEN_MARK + ' ' if chosen else ''}{describe(c)}")[:MAX_LABEL - len(hours)].rstrip()
    return words + hours


def key(c: dict) -> tuple:
    return (c.get("target"), c.get("instance_type"), c.get("nodes"), c.get("gpus_per_node"), bool(c.get("spot")))


def describe(c: dict) -> str:
    what = c.get("instance_type") or f"{c.get('gpus_per_node')} {c.get('gpu_model') or 'GPU'}/pod"
    return f"{c.get('nodes')} x {str(what).removeprefix('ecs.')}{' spot' if c.get('spot') else ''}"


def _charted(c: dict) -> bool:
    h, t = c.get("estimated_hours"), c.get("total_cost_cny")
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0 for v in (h, t))


def frontier(points: list[dict]) -> list[dict]:
    """Candidates no other beats on both hours and cost (sorted fastest first)."""
    out, best_cost = [], math.inf
    for c in sorted(points, key=lambda c: (c["estimated_hours"], c["total_cost_cny"])):
        if c["total_cost_cny"] < best_cost:
            out.append(c)
            best_cost = c["total_cost_cny"]
    return out


def cost_chart(candidates: Iterable[dict], chosen: Optional[dict]) -> list[str]:
    """Markdown lines: the mermaid block and the notes under it (nothing when no candidate is feasible)."""
    feasible = list({key(c): c for c in candidates if c.get("feasible", True)}.values())
    if chosen is not None and key(chosen) not in {key(c) for c in feasible}:
        feasible.insert(0, chosen)
    if not feasible:
        return []
    points = [c for c in feasible if _charted(c)]
    missing = [c for c in feasible if not _charted(c)]
    crowded = 0
    if len(points) > MAX_POINTS:
        keep = frontier(points)[:MAX_POINTS - 1]
        if chosen is not None and key(chosen) not in {key(c) for c in keep}:
            keep += [c for c in points if key(c) == key(chosen)]
        crowded = len(points) - len(keep)
        points = keep
    points.sort(key=lambda c: (c["estimated_hours"], c["total_cost_cny"], describe(c)))
    notes = _notes(missing, crowded)
    if not points:
        return ["No chart: no feasible candidate has both hours and a total cost.", *notes]
    chosen_key = key(chosen) if chosen is not None else None
    names = [point_label(c, key(c) == chosen_key) for c in points]
    costs = [c["total_cost_cny"] for c in points]
    top = max(costs) * 1.1 or 1.0
    lines = ["```mermaid", "xychart-beta",
             f'    title "{label("Total cost against hours, fastest first")}"',
             '    x-axis "candidate and hours" [' + ", ".join(f'"{n}"' for n in names) + "]",
             f'    y-axis "total CNY" 0 --> {number(math.ceil(top))}',
             "    bar [" + ", ".join(number(v) for v in costs) + "]"]
    if chosen_key is not None and any(key(c) == chosen_key for c in points):
        lines.append("    bar [" + ", ".join(number(v if key(c) == chosen_key else 0)
                                             for c, v in zip(points, costs)) + "]")
    lines.append("```")
    return lines + [f"{CHOSEN_MARK} = the chosen plan (its bar in the second colour)."] + notes


def _notes(missing: list[dict], crowded: int) -> list[str]:
    out = []
    if missing:
        def why(c: dict) -> str:
            gaps = [w for w, v in (("hours", c.get("estimated_hours")), ("total cost", c.get("total_cost_cny")))
                    if not isinstance(v, (int, float)) or isinstance(v, bool)]
            return f"{label(describe(c))} (no {' or '.join(gaps) or 'finite value'})"
        shown = ", ".join(why(c) for c in missing[:6]) + (f", ... ({len(missing) - 6} more)" if len(missing) > 6 else "")
        out.append(f"Not charted: {len(missing)} feasible candidate(s) without hours or a total cost: {shown}.")
    if crowded:
        out.append(f"Charted: the candidates no other is both faster and cheaper than, and the chosen one; "
                   f"{crowded} more are in the table.")
    return out
