"""Small formatters the plan, cost and diff renderers share (money, numbers, a markdown table cell).

Apart from render.py so render_cost.py can use them without an import circle through render.py.
"""

from __future__ import annotations

from typing import Any, Optional


def money(v: Optional[float], unit: str = "CNY") -> str:
    return "unknown" if v is None else f"{v:,.2f} {unit}"


def num(v: Optional[float], digits: int = 1) -> str:
    return "unknown" if v is None else f"{v:,.{digits}f}"


def md_escape(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")
