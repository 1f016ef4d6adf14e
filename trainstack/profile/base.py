"""What every profile section model shares: frozen, strict, finite numbers; no control characters."""

from __future__ import annotations

import re
from typing import Optional

from pydantic import BaseModel, ConfigDict

#: characters that never belong in an id, a tag or a URI: C0/C1 controls, DEL, line separators
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _no_control(v: Optional[str], what: str = "value") -> Optional[str]:
    if v is not None and CONTROL.search(v):
        raise ValueError(f"the {what} holds a control character (a newline or tab?)")
    return v


class _Strict(BaseModel):
    # NaN and Infinity are never a size, a price or a budget: refused like any wrong number
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
