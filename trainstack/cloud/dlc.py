"""PAI-DLC OpenAPI calls: the client, and what a failed call means (exit 5 with its fix).

The Pulumi dynamic provider (``components.dlc.DlcJobProvider``) makes these calls at deploy time;
the client is built per call so nothing about it is pickled into the state. ``trainstack status``
reads the job with :func:`find_job` (ListJobs by display name) and :func:`observe_job` (GetJob).
"""

from __future__ import annotations

import calendar
import time
from typing import TYPE_CHECKING, Any, Optional

from ..errors import CloudApiError
from ..lazy import LazyModule
from .credentials import sdk_config
from .errors import ApiErrorInfo, clean_field, cloud_error, fix_for, is_not_found
from .retry import ECS_READS, GaveUp, with_retries

if TYPE_CHECKING:
    from alibabacloud_pai_dlc20201203 import client as dlc_client, models as dlc_models
else:  # the SDK (~2 s with its OpenAPI core) only when a DLC call is made
    dlc_client = LazyModule("alibabacloud_pai_dlc20201203.client")
    dlc_models = LazyModule("alibabacloud_pai_dlc20201203.models")


def default_client(region: str) -> Any:
    """The real PAI-DLC client of ``region``: default credentials chain; endpoint from the SDK's own
    rule (``pai-dlc.<region>.aliyuncs.com``). Building it does no network I/O."""
    return dlc_client.Client(sdk_config(region, connect_timeout=10_000, read_timeout=30_000))


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


def _dlc_time(value: Any) -> Optional[float]:
    """DLC times (``2021-01-12T14:35:00Z``, sometimes with fractions) as epoch seconds."""
    text = (clean_field(value) or "").replace(".000", "")
    for fmt in ("%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%M:%S.%fZ"):
        try:
            return float(calendar.timegm(time.strptime(text, fmt)))
        except ValueError:
            continue
    return None


def _call(operation: str, region: str, fn: Any, sleep: Any = None) -> Any:
    try:
        return with_retries(fn, policy=ECS_READS, sleep=sleep)
    except GaveUp as failed:
        raise cloud_error("dlc", operation, region, failed.cause, attempts=failed.attempts) from None


def find_job(client: Any, region: str, display_name: str, workspace_id: Optional[str] = None, *,
             sleep: Any = None) -> Optional[str]:
    """The newest job named ``display_name`` (the stack's job: components/dlc.py names it after the
    plan), or None."""
    req = dlc_models.ListJobsRequest(display_name=display_name, workspace_id=workspace_id, page_size=50,
                                     sort_by="GmtCreateTime", order="desc")
    body = _call("ListJobs", region, lambda: client.list_jobs(req), sleep).body
    jobs = [j for j in (body.jobs or []) if j.display_name == display_name and not j.is_deleted]
    jobs.sort(key=lambda j: _dlc_time(j.gmt_create_time) or 0, reverse=True)
    return jobs[0].job_id if jobs else None


def observe_job(client: Any, region: str, job_id: str, *, sleep: Any = None) -> Any:
    """The job as a DlcJobObservation (GetJob)."""
    # status/ loads only when a run is observed
    from ..status.record import DlcJobObservation

    body = _call("GetJob", region, lambda: client.get_job(job_id, dlc_models.GetJobRequest(need_detail=False)),
                 sleep).body
    duration = body.duration if isinstance(body.duration, (int, float)) and body.duration >= 0 else None
    return DlcJobObservation(
        job_id=job_id, display_name=clean_field(body.display_name), status=job_status(body) or "unknown",
        reason=job_reason(body), duration_seconds=None if duration is None else float(duration),
        created_at=_dlc_time(body.gmt_create_time), running_at=_dlc_time(body.gmt_running_time),
        finished_at=_dlc_time(body.gmt_finish_time), pods=len(body.pods or []))
