"""A tiny, dependency-free plain-text table renderer for the CLI.

``render_table(["GPU", "QTY"], [["A10", "1"], ["A100-80G", "8"]], align="lr")`` gives::

    GPU       QTY
    A10         1
    A100-80G    8

Columns are separated by two spaces; no borders, no trailing spaces. Width counts East Asian
wide characters as two cells so Chinese region or family notes still line up.
"""

from __future__ import annotations

import unicodedata
from typing import Optional, Sequence

__all__ = ["render_table", "display_width"]

_GAP = "  "


def display_width(text: str) -> int:
    """Terminal cells ``text`` occupies (wide/full-width characters count as two)."""
    width = 0
    for ch in text:
        if unicodedata.combining(ch):
            continue
        width += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return width


def _pad(text: str, width: int, how: str) -> str:
    gap = width - display_width(text)
    if gap <= 0:
        return text
    if how == "r":
        return " " * gap + text
    if how == "c":
        left = gap // 2
        return " " * left + text + " " * (gap - left)
    return text + " " * gap


def render_table(headers: Sequence[str], rows: Sequence[Sequence[object]],
                 align: Optional[str] = None) -> str:
    """Render ``rows`` under ``headers`` as aligned text (no trailing newline).

    ``align`` holds one letter per column: ``l`` (left, the default), ``r`` (right) or ``c``
    (centre); a shorter string leaves the remaining columns left-aligned. Cells are turned into
    text with ``str()`` (``None`` becomes ``""``); a row shorter than the header is padded with
    empty cells, a longer one is an error.
    """
    ncol = len(headers)
    how = (align or "").lower().ljust(ncol, "l")
    if len(how) > ncol or set(how) - set("lrc"):
        raise ValueError(f"align must be at most {ncol} of 'l', 'r', 'c'; got {align!r}")
    cells: list[list[str]] = [[str(h) for h in headers]]
    for i, row in enumerate(rows):
        if len(row) > ncol:
            raise ValueError(f"row {i} has {len(row)} cells for {ncol} columns")
        cells.append(["" if c is None else str(c) for c in row] + [""] * (ncol - len(row)))
    widths = [max(display_width(r[c]) for r in cells) for c in range(ncol)]
    lines = []
    for r in cells:
        # the last column is not padded on the left-aligned side: no trailing spaces
        parts = [_pad(r[c], widths[c], how[c]) for c in range(ncol)]
        lines.append(_GAP.join(parts).rstrip())
    return "\n".join(lines)
