"""Small formatters the plan, cost and diff renderers share (money, numbers, a markdown table cell).

Apart from render.py so render_cost.py can use them without an import circle through render.py.
"""

from __future__ import annotations

import math
from typing import Any, Optional


def money(v: Optional[float], unit: str = "CNY") -> str:
    return "unknown" if v is None else f"{v:,.2f} {unit}"


def num(v: Optional[float], digits: int = 1) -> str:
    return "unknown" if v is None else f"{v:,.{digits}f}"


def md_escape(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def finite_number(v: object) -> bool:
    """A JSON number a renderer can format: not a boolean, NaN, infinite or beyond float range (a saved
    plan may be hand-edited; parse_json refuses such integers, this holds for any document)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:
        return False


def number_pair(iv: object) -> Optional[tuple[float, float]]:
    """An interval as saved ([low, high] numbers), or None for anything else."""
    if isinstance(iv, (list, tuple)) and len(iv) == 2 and all(finite_number(x) for x in iv):
        return float(iv[0]), float(iv[1])
    return None
