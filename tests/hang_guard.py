"""A wall-clock guard for tests that replay hostile inputs: a hang fails the test instead of the run."""

from __future__ import annotations

import contextlib
import signal


@contextlib.contextmanager
def time_limit(seconds: int = 60):
    def boom(*_):
        raise TimeoutError(f"hang: still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
