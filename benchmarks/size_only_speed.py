"""`validate` and `resolve` of a size-only profile (``model.params_b``) that fits nowhere, in process:
the case that kept `make fuzz` over its 30-minute bound (issue 34). The resolver asks for the model's
shape for every candidate it weighs and every suggestion it tests; a size-only shape is a search over
~250 hidden sizes, so ``derive_architecture`` is cached. Prints the best of several runs with the
cache and without it (the search run on every call), and their ratio.

    .venv/bin/python benchmarks/size_only_speed.py
"""

from __future__ import annotations

import contextlib
import io
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import trainstack.profile.training as training  # noqa: E402
from trainstack.cli import main  # noqa: E402

PROFILE = {
    "name": "bench-size-only", "region": "cn-beijing", "model": {"params_b": 431.7},
    "training": {"method": "full", "precision": "bf16", "micro_batch_size": 3, "sequence_length": 8192,
                 "gradient_checkpointing": True, "tokens": 1e11},
    "resources": {"gpus": "auto", "max_nodes": 16, "spot": "allow", "deadline_hours": 1.0, "max_total_cost": 5.0},
    "storage": {"dataset_gib": 10, "checkpoint": "oss"},
}
REPEAT = 3


def timed(args: list[str]) -> tuple[float, int]:
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main(args)
    return time.perf_counter() - start, code


def best(path: str, command: str) -> tuple[float, int]:
    runs = [timed([command, path] + (["--json"] if command == "resolve" else [])) for _ in range(REPEAT)]
    return min(t for t, _ in runs), runs[0][1]


def run() -> None:
    with tempfile.TemporaryDirectory() as d:
        path = str(Path(d) / "p.yaml")
        Path(path).write_text(yaml.safe_dump(PROFILE), encoding="utf-8")
        timed(["validate", path])  # imports and catalog load out of the way
        cached = {c: best(path, c) for c in ("validate", "resolve")}
        derive = training.derive_architecture
        training.derive_architecture = derive.__wrapped__  # the search on every call, as before the cache
        try:
            uncached = {c: best(path, c) for c in ("validate", "resolve")}
        finally:
            training.derive_architecture = derive
    for c in ("validate", "resolve"):
        (t1, code), (t0, _) = cached[c], uncached[c]
        print(f"{c:9s} exit {code}: cached {t1:6.2f} s, uncached {t0:6.2f} s, uncached/cached {t0 / t1:5.1f}x "
              f"(best of {REPEAT})")


if __name__ == "__main__":
    run()
