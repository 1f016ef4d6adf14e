"""Leave-one-source-out validation of the sizing model: the accuracy docs/sizing.md reports.

usage: python benchmarks/group_validation.py [--markdown] [--rows] [--write]

For each source (benchmarks/observations.py: a repository, or this project's H200 harness) every fitted
constant is refitted on the rows of all *other* sources (benchmarks/fitting.py: the speed constants with
each source's weight capped at 25 %, the allocator and autocast constants on the H200 rows) and the
held-out source's rows are scored with those constants. The H200 harness is one source for this rule;
the memory constants it alone can fit are validated inside it leave-one-model-out (each model's rows
scored by constants fitted on the other models' rows). Printed: per source, per class (GPU generation,
framework, method, dense/MoE) and pooled: median and worst absolute error, the 10th-90th percentile of
the signed error, the coverage of the 80 % intervals (each row's interval from the residuals of the
*other* sources of its class: nested, so the coverage is itself out of sample), and every published
out-of-memory configuration with the fit verdict it gets; in-sample figures (constants fitted on every
row) beside them, labelled. ``--write`` regenerates trainstack/sizing/error_bars.py, the per-class
residual table the estimator's intervals are read from.
"""

from __future__ import annotations

import pathlib
import statistics
import sys
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from benchmarks import fitting as F  # noqa: E402
from benchmarks.observations import H200_SOURCE, Obs, load_observations, sources  # noqa: E402


@dataclass
class Fitters:
    """The fitting functions a fold calls (the test wraps them to see what each was given)."""

    speed: Callable[[Sequence[Obs]], dict] = F.fit_speed
    memory: Callable[[Sequence[Obs]], dict] = F.fit_memory


@dataclass
class Residual:
    """One scored row: its signed errors (predicted / measured - 1) with the constants of its fold."""

    obs: Obs
    memory: Optional[float] = None
    speed: Optional[float] = None
    predicted_required_gib: Optional[float] = None


@dataclass
class Result:
    residuals: list[Residual] = field(default_factory=list)
    folds: dict[str, dict] = field(default_factory=dict)   # source -> the constants its rows were scored with


def score(o: Obs, speed: dict, memory: dict) -> Residual:
    """The row's errors with the given constants (the production formulas)."""
    r = Residual(o)
    with F.constants(speed=speed, memory=memory):
        target = F.memory_target(o)
        est = F.memory_estimate(o)
        r.predicted_required_gib = est.required_gib_per_gpu
        if target:
            r.memory = F.memory_figure(o, est) / target - 1
        if o.has_speed:
            s = F.speed_estimate(o)
            if s.tokens_per_second_per_gpu:
                r.speed = s.tokens_per_second_per_gpu / o.tokens_per_second - 1
    return r


def leave_one_source_out(obs: Sequence[Obs] = (), fitters: Optional[Fitters] = None,
                         only: Optional[Sequence[str]] = None) -> Result:
    """Each source scored with constants fitted on the other sources' rows (see the module docstring)."""
    obs = list(obs or load_observations())
    fitters = fitters or Fitters()
    h200 = [o for o in obs if o.source == H200_SOURCE]
    out = Result()
    for src in only or sources(tuple(obs)):
        rest = [o for o in obs if o.source != src]
        speed = fitters.speed(rest)
        if src != H200_SOURCE:
            memory = fitters.memory(h200)
            out.folds[src] = {"speed": speed, "memory": memory}
            out.residuals += [score(o, speed, memory) for o in obs if o.source == src]
            continue
        # the harness: its speed rows scored by the other sources' speed constants; its memory rows
        # leave-one-model-out (the allocator and autocast constants only it can fit)
        for model in sorted({o.model for o in h200}):
            memory = fitters.memory([o for o in h200 if o.model != model])
            out.folds[f"{src} / {model}"] = {"speed": speed, "memory": memory}
            out.residuals += [score(o, speed, memory) for o in h200 if o.model == model]
    return out


def in_sample(obs: Sequence[Obs] = ()) -> Result:
    """Every row scored with the constants fitted on every row (labelled in-sample wherever printed)."""
    obs = list(obs or load_observations())
    speed = F.fit_speed(obs)
    memory = F.fit_memory([o for o in obs if o.source == H200_SOURCE])
    return Result([score(o, speed, memory) for o in obs], {"all": {"speed": speed, "memory": memory}})


# ---- summaries ------------------------------------------------------------------------------------------

def quantile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default)."""
    v = sorted(values)
    if not v:
        raise ValueError("no values")
    pos = q * (len(v) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def summary(values: Sequence[float]) -> dict[str, float]:
    a = [abs(x) for x in values]
    return {"n": len(a), "median": statistics.median(a), "worst": max(a), "p10": quantile(values, 0.1),
            "p90": quantile(values, 0.9)}


def fmt(values: Sequence[float]) -> str:
    if not values:
        return "-"
    s = summary(values)
    return (f"median {s['median']:.1%}, worst {s['worst']:.1%}, 80 % of errors in [{s['p10']:+.0%}, {s['p90']:+.0%}] "
            f"(n={s['n']})")


def main() -> int:
    markdown = "--markdown" in sys.argv
    obs = load_observations()
    loso = leave_one_source_out(obs)
    ins = in_sample(obs)
    from benchmarks.group_report import report
    print("\n".join(report(obs, loso, ins, markdown, rows="--rows" in sys.argv)))
    if "--write" in sys.argv:
        from benchmarks.error_bar_table import write_table
        path = write_table(obs, loso)
        print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
