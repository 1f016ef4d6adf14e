"""PAI-DLC OpenAPI calls: the client, and what a failed call means (exit 5 with its fix).

The Pulumi dynamic provider (``components.dlc.DlcJobProvider``) makes these calls at deploy time;
the client is built per call so nothing about it is pickled into the state.
"""

from __future__ import annotations

from typing import Any, Optional

from ..errors import CloudApiError
from .credentials import sdk_config
from .errors import ApiErrorInfo, clean_field, fix_for, is_not_found


def default_client(region: str) -> Any:
    """The real PAI-DLC client of ``region``: default credentials chain; endpoint from the SDK's own
    rule (``pai-dlc.<region>.aliyuncs.com``). Building it does no network I/O."""
    from alibabacloud_pai_dlc20201203.client import Client

    return Client(sdk_config(region, connect_timeout=10_000, read_timeout=30_000))


class DlcApiError(CloudApiError):
    """A PAI-DLC call failed for good (exit 5): code, message, request id and what to fix."""

    def __init__(self, operation: str, info: ApiErrorInfo, *, fix: Optional[str] = None, attempts: int = 1):
        self.operation = operation
        self.info = info
        self.code = info.code
        self.api_message = info.message
        self.request_id = info.request_id
        self.status = info.status
        self.attempts = attempts
        self.fix = fix or fix_for(info, "dlc", operation)
        head = f"PAI-DLC {operation} failed: {info.code or 'error'}: {info.message}"
        details = []
        if info.status:
            details.append(f"HTTP {info.status}")
        if info.request_id:
            details.append(f"request id {info.request_id}")
        if attempts > 1:
            details.append(f"after {attempts} attempts")
        if details:
            head += f" ({', '.join(details)})"
        super().__init__(f"{head}\nWhat to fix: {self.fix}")

    @property
    def not_found(self) -> bool:
        """The job (the only entity GetJob/StopJob/DeleteJob name) does not exist."""
        return is_not_found(self.info)


def job_reason(body: Any) -> str:
    """A job's ``ReasonCode: ReasonMessage`` (empty when it has none)."""
    code, message = clean_field(getattr(body, "reason_code", None)), clean_field(getattr(body, "reason_message", None))
    return ": ".join(p for p in (code, message) if p)


def job_status(body: Any) -> str:
    return clean_field(getattr(body, "status", None)) or ""
