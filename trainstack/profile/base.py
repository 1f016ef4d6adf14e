"""What every profile section model shares: frozen, strict, finite numbers; no control characters."""

from __future__ import annotations

import re
from typing import Optional

from pydantic import BaseModel, ConfigDict

#: characters that never belong in an id, a tag or a URI: C0/C1 controls, DEL, line separators
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
#: KMS secret names: letters, digits and _ / + = . @ -, at most 192 (KMS CreateSecret, SecretName:
#: https://www.alibabacloud.com/help/en/kms/support/api-kms-createsecret)
KMS_SECRET_NAME = re.compile(r"[A-Za-z0-9_/+=.@-]{1,192}")
KMS_KEY_ID = re.compile(r"key-[A-Za-z0-9]{1,64}")


def _no_control(v: Optional[str], what: str = "value") -> Optional[str]:
    if v is not None and CONTROL.search(v):
        raise ValueError(f"the {what} holds a control character (a newline or tab?)")
    return v


class _Strict(BaseModel):
    # NaN and Infinity are never a size, a price or a budget: refused like any wrong number
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)
