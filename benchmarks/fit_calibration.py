"""Fit the sizing model's constants on every corpus row; print them and the rows they were fitted on.

usage: python benchmarks/fit_calibration.py

The production constants (trainstack/sizing/constants.py) are the fit on every observation
(benchmarks/observations.py) with each source's weight capped at 25 % (benchmarks/fitting.py: one joint
speed fit, Huber loss, weak sourced priors; the allocator envelope and AUTOCAST_KV_EXTRA_BYTES on the
H200 rows). A test checks constants.py holds what this prints. How well those constants do on sources
they were never fitted to is benchmarks/group_validation.py's (leave-one-source-out); the figures here
are in-sample and labelled so.
"""

from __future__ import annotations

import pathlib
import statistics
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from benchmarks import fitting as F  # noqa: E402
from benchmarks.observations import H200_SOURCE, load_observations  # noqa: E402


def fitted() -> tuple[dict, dict]:
    """(speed constants, memory constants) fitted on every row."""
    obs = load_observations()
    return F.fit_speed(obs), F.fit_memory([o for o in obs if o.source == H200_SOURCE])


def constants_block(speed: dict, memory: dict) -> list[str]:
    def eff(name: str) -> str:
        return f"{1 / speed[name]:.3f}"

    return [
        f"MATMUL_EFFICIENCY_BY_ARCH = {{\"hopper\": {eff('u_hopper')}, \"ampere\": {eff('u_ampere')}}}",
        f"ATTENTION_EFFICIENCY_BY_ARCH = {{\"hopper\": {eff('a_hopper')}, \"ampere\": {eff('a_ampere')}}}",
        f"BANDWIDTH_EFFICIENCY = {eff('b')}",
        f"LAYER_OVERHEAD_SECONDS = {speed['c']:.5f}",
        f"TE_ATTENTION_EFFICIENCY_BY_ARCH = {{\"hopper\": {eff('te_a_hopper')}}}",
        f"TE_LAYER_OVERHEAD_SECONDS = {speed['te_c']:.5f}",
        f"FP8_MATMUL_EFFICIENCY_BY_ARCH = {{\"hopper\": {eff('u8_hopper')}}}",
        *(f"{k} = {v}" for k, v in memory.items()),
    ]


def main() -> int:
    speed, memory = fitted()
    print("Constants (trainstack/sizing/constants.py), fitted on every row:")
    print("\n".join("  " + line for line in constants_block(speed, memory)))
    print(f"  in constants.py now: {F.current_speed()} {F.current_memory()}")
    print()
    from benchmarks.group_validation import in_sample

    res = in_sample()
    by: dict[str, list[float]] = {}
    for r in res.residuals:
        if r.speed is not None:
            by.setdefault(r.obs.source, []).append(abs(r.speed))
    print("In-sample |tokens/s error| per source (NOT the accuracy to report: see group_validation.py):")
    for src, errs in sorted(by.items()):
        print(f"  {src:40} median {statistics.median(errs):6.1%}  worst {max(errs):6.1%}  (n={len(errs)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
