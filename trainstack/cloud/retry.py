"""One retry policy for every OpenAPI call: capped exponential backoff, optional jitter, Retry-After.

A call is retried only when :func:`~trainstack.cloud.errors.is_transient` says a retry may help; a
non-idempotent call (PAI-DLC CreateJob) only when the API surely did not run it.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

from .errors import ApiErrorInfo, is_transient

Sleep = Callable[[float], None]


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 5
    base_s: float = 0.5
    cap_s: float = 8.0
    #: share of each wait that is random (0: deterministic; 0.5: half of it jittered)
    jitter: float = 0.0

    def delay(self, attempt: int, retry_after_ms: Optional[float] = None,
              rand: Callable[[], float] = random.random) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based); never shorter than the API's
        Retry-After (capped)."""
        wait = min(self.cap_s, self.base_s * 2 ** (attempt - 1))
        if self.jitter:
            wait = wait * (1 - self.jitter) + rand() * wait * self.jitter
        if retry_after_ms:
            wait = max(wait, min(self.cap_s, float(retry_after_ms) / 1000))
        return wait


#: Catalog refresh and preflight: read-only ECS calls, deterministic waits.
ECS_READS = RetryPolicy()
#: PAI-DLC job calls from the Pulumi provider: longer, jittered (several stacks may deploy at once).
DLC_CALLS = RetryPolicy(attempts=6, base_s=1.0, cap_s=30.0, jitter=0.5)


class GaveUp(Exception):
    """The call failed for good: the last error, classified, and how many attempts were made."""

    def __init__(self, info: ApiErrorInfo, attempts: int, cause: BaseException):
        super().__init__(info.detail)
        self.info, self.attempts, self.cause = info, attempts, cause


def with_retries(fn: Callable[[], Any], *, policy: RetryPolicy, idempotent: bool = True,
                 sleep: Optional[Sleep] = None, rand: Optional[Callable[[], float]] = None,
                 stop: Callable[[ApiErrorInfo], bool] = lambda info: False) -> Any:
    """``fn()``, retried on transient failures; :class:`GaveUp` when it cannot succeed. ``stop(info)``
    ends retrying at once for errors the caller handles itself."""
    attempt = 1
    while True:
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - every SDK failure is classified
            info = ApiErrorInfo.from_exception(exc)
            if not stop(info) and attempt < policy.attempts and is_transient(info, idempotent=idempotent):
                (sleep or time.sleep)(policy.delay(attempt, info.retry_after_ms, rand or random.random))
                attempt += 1
                continue
            raise GaveUp(info, attempt, exc) from exc
