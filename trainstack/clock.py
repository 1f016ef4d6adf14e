"""Today's date, the one clock every "how old is this price" answer reads.

A seam, so outputs that carry a price's age can be pinned: tests replace :func:`today` (or set
``TRAINSTACK_TODAY``), and a CI job that compares saved plans may set ``TRAINSTACK_TODAY`` too, so
a plan computed on Monday and one computed on Tuesday differ only where the inputs differ.
"""

from __future__ import annotations

import datetime as _dt
import os
from typing import Optional

from .errors import InputError, Problem

#: Environment variable that pins today's date (ISO ``YYYY-MM-DD``).
TODAY_ENV = "TRAINSTACK_TODAY"


def today() -> _dt.date:
    """The date ages are counted to: ``$TRAINSTACK_TODAY`` when set, else the local date."""
    pinned = os.environ.get(TODAY_ENV)
    if pinned:
        try:
            return _dt.date.fromisoformat(pinned.strip())
        except ValueError:
            raise InputError(f"{TODAY_ENV}={pinned!r} is not a date", problems=[Problem(
                path=TODAY_ENV, message="must be an ISO date like 2026-01-31", given=pinned, has_given=True)]) from None
    return _dt.date.today()


def age_days(as_of: Optional[str], on: Optional[_dt.date] = None) -> Optional[int]:
    """Whole days from ``as_of`` (ISO date or timestamp) to ``on`` (default :func:`today`); None if unparseable."""
    if not as_of:
        return None
    try:
        when = _dt.date.fromisoformat(str(as_of)[:10])
    except ValueError:
        return None
    return ((on or today()) - when).days
