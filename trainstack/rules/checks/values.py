"""Plain-value coercion for the checks, as the policies read props: an unknown raises ``ValueUnknown``,
garbage becomes None (never a crash)."""

from __future__ import annotations

import math
from typing import Any, Optional

from ..stack_view import known


def as_str(value: Any) -> Optional[str]:
    value = known(value)
    return value if isinstance(value, str) and value else None


def as_number(value: Any) -> Optional[float]:
    value = known(value)
    if isinstance(value, bool) or value is None:
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def as_int(value: Any) -> Optional[int]:
    number = as_number(value)
    if number is None or number != int(number):
        return None
    return int(number)
