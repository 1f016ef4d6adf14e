"""Progress on stderr for slow steps (planning a diff's sides, `resolve`, `catalog refresh`, `node-files`).

One helper over tqdm (pinned in requirements.txt: a small, dependency-free, long-maintained meter that
already handles terminal widths and clearing its line), shown only when it helps: after
:data:`DELAY_S` seconds, on a terminal, never with ``--json`` (``quiet``), never under pytest, never
with ``TRAINSTACK_PROGRESS=off``. Silent, it imports nothing, so the pure core stays free of it; the
bar is cleared when the step ends, so what a command prints is the same with or without it.

Protocol (what ``trainstack.refresh`` calls): ``update(text)`` names the current step, ``advance(n)``
counts done items of a known ``total``, ``done()`` clears the line. :func:`step` also ticks the
elapsed time of a step that makes no calls of its own (one long resolution).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from typing import Any, Iterator, Optional, TextIO

#: Seconds a step runs before its progress shows (quick commands never flicker).
DELAY_S = 2.0
#: How often :func:`step` refreshes the elapsed time.
TICK_S = 0.5
OFF_VALUES = ("off", "0", "no", "false")


def wanted(stream: Optional[TextIO] = None, quiet: bool = False) -> bool:
    """Whether progress may show on ``stream`` (default stderr): a terminal, not ``--json``, not under
    pytest, not ``TRAINSTACK_PROGRESS=off``."""
    stream = stream or sys.stderr
    if quiet or os.environ.get("TRAINSTACK_PROGRESS", "").strip().lower() in OFF_VALUES:
        return False
    if under_tests():
        return False
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (OSError, ValueError):  # a closed stream
        return False


def under_tests() -> bool:
    """pytest sets PYTEST_CURRENT_TEST while a test runs: progress stays off there."""
    return "PYTEST_CURRENT_TEST" in os.environ


class Progress:
    """A one-line meter on ``stream`` (``enabled`` None: :func:`wanted`); silent and free when disabled."""

    def __init__(self, stream: Optional[TextIO] = None, enabled: Optional[bool] = None, *, label: str = "",
                 total: Optional[int] = None, delay: Optional[float] = None, quiet: bool = False):
        self.stream = stream or sys.stderr
        self.enabled = wanted(self.stream, quiet) if enabled is None else bool(enabled and not quiet)
        self._bar: Any = None
        self._lock = threading.Lock()
        if self.enabled:
            from tqdm import tqdm

            fmt = "{desc}: {elapsed}" if total is None else "{desc}: {n_fmt}/{total_fmt} [{elapsed}<{remaining}]"
            self._bar = tqdm(total=total, desc=label, file=self.stream, delay=DELAY_S if delay is None else delay,
                             leave=False, mininterval=0,
                             dynamic_ncols=True, bar_format=fmt)

    def update(self, text: str) -> None:
        """Name the current step (shown once the delay has passed)."""
        with self._lock:
            if self._bar is not None:
                self._bar.set_description_str(text, refresh=False)
                self._bar.update(0)

    def advance(self, n: int = 1) -> None:
        with self._lock:
            if self._bar is not None:
                self._bar.update(n)

    def tick(self) -> None:
        """Refresh the elapsed time (nothing before the delay)."""
        self.advance(0)

    def done(self) -> None:
        """Clear the line; the meter is gone (later calls do nothing)."""
        with self._lock:
            if self._bar is not None:
                self._bar.close()
                self._bar = None

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.done()


@contextlib.contextmanager
def step(label: str, *, total: Optional[int] = None, quiet: bool = False, stream: Optional[TextIO] = None,
         enabled: Optional[bool] = None, delay: Optional[float] = None) -> Iterator[Progress]:
    """A :class:`Progress` for one slow step, its elapsed time ticking while the step runs; cleared
    when the block ends (also on an error)."""
    progress = Progress(stream, enabled, label=label, total=total, delay=delay, quiet=quiet)
    stop = threading.Event()
    ticker = None
    if progress.enabled:
        def run() -> None:
            while not stop.wait(TICK_S):
                progress.tick()

        ticker = threading.Thread(target=run, name="trainstack-progress", daemon=True)
        ticker.start()
    try:
        yield progress
    finally:
        stop.set()
        if ticker is not None:
            ticker.join()
        progress.done()
