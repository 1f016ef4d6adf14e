"""Plain-value coercion for the checks, as the policies read props: an unknown raises ``ValueUnknown``,
garbage becomes None (never a crash)."""

from __future__ import annotations

import math
from typing import Any, Optional

from ..stack_view import known


def as_str(value: Any) -> Optional[str]:
    value = known(value)
    return value if isinstance(value, str) and value else None


def number_of(value: Any) -> Optional[float]:
    """A finite float, or ``None`` for missing or garbage (``value`` known; policies/_props reads the same)."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def whole(number: Optional[float]) -> Optional[int]:
    """Engine floats (``2.0``) back to ints; ``None`` for fractions."""
    return None if number is None or number != int(number) else int(number)


def as_number(value: Any) -> Optional[float]:
    return number_of(known(value))


def as_int(value: Any) -> Optional[int]:
    return whole(as_number(value))
