"""Error bars: the central 80 % interval of an estimate, from how wrong the model was on sources it was
never fitted to.

``benchmarks/group_validation.py`` scores every corpus source with constants fitted on the other
sources (leave-one-source-out) and writes the signed errors (predicted / measured - 1) of each class
to ``error_bars.py``: their 10th and 90th percentiles, the rows and the sources behind them. An
estimate's class is its GPU generation, framework, method and dense/MoE (memory: no generation, the
memory model does not depend on the GPU). Its interval is the true value's range those percentiles
imply, ``[estimate / (1 + p90), estimate / (1 + p10)]``, from the finest class that has at least
``MIN_ROWS`` residuals from ``MIN_SOURCES`` sources (each source weighs the same in the percentiles); a
class with fewer takes its nearest parent (framework dropped first, then method, then generation, then
dense/MoE) widened ``FEW_ROWS_WIDEN`` times about its centre (in log space) and says so. FP8 on a GPU with no FP8 training
measurement in the corpus (H20, L20: none) is widened ``NO_FP8_MEASUREMENT_WIDEN`` times more and
says so.

The fit rule (``fit_verdict``): ``fits`` when the upper end of the required-memory interval (never
below the estimate) plus the margin is within usable memory; ``at_risk`` when only the estimate plus
the margin is; else ``does_not_fit``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal, NamedTuple, Optional

from pydantic import BaseModel, ConfigDict, Field

from . import error_bars as T

if TYPE_CHECKING:  # pragma: no cover
    from ..models import Architecture
    from ..profile import TrainingSpec

#: A class needs this many leave-one-source-out residuals, from this many sources, for a band of its own.
MIN_ROWS = 10
MIN_SOURCES = 3
#: A thinner class takes its nearest parent's band, this many times as wide (the rule is labelled): per
#: quantity the smallest of 1.5, 2, 2.5, 3 whose nested leave-one-source-out intervals (each row's band from the
#: other sources' residuals, benchmarks/group_report.py) cover at least 80 % of the rows.
FEW_ROWS_WIDEN = {"speed": 1.5, "memory": 2.0}
#: FP8 on a GPU no FP8 training run of the corpus measured: the band this many times as wide again.
NO_FP8_MEASUREMENT_WIDEN = 2.0

Quantity = Literal["speed", "memory"]
Fit = Literal["fits", "at_risk", "does_not_fit"]


class EstimateClass(NamedTuple):
    """What an estimate's error depends on most: GPU generation, framework, method, dense or MoE."""

    generation: str
    framework: str
    method: str        # full (full fine-tuning and pretraining) | lora | qlora
    moe: str           # dense | moe

    def key(self, quantity: Quantity) -> str:
        gen = "*" if quantity == "memory" else self.generation
        return "/".join((gen, self.framework, self.method, self.moe))


def estimate_class(arch: "Architecture", t: "TrainingSpec", generation: Optional[str]) -> EstimateClass:
    method = "full" if t.method in ("full", "pretrain") else t.method
    return EstimateClass(generation or "*", t.framework, method, "moe" if arch.is_moe else "dense")


def parents(key: str, quantity: Quantity) -> list[str]:
    """The key and its parents, finest first: framework, then method, then generation, then dense/MoE."""
    gen, fw, method, moe = key.split("/")
    if quantity == "memory":
        gen = "*"
    out = [f"{gen}/{fw}/{method}/{moe}", f"{gen}/*/{method}/{moe}", f"{gen}/*/*/{moe}", f"*/*/*/{moe}", "*/*/*/*"]
    return list(dict.fromkeys(out))


class Band(NamedTuple):
    """Signed-error percentiles (predicted / measured - 1) behind an interval, and where they come from."""

    p10: float
    p90: float
    rows: int
    sources: int
    key: str               # the class whose residuals these are
    widened: float = 1.0   # how many times the band was widened about its centre

    def bounds(self, estimate: float) -> tuple[float, float]:
        lo, hi = math.log1p(max(self.p10, -0.95)), math.log1p(max(self.p90, -0.95))
        mid, half = (lo + hi) / 2, (hi - lo) / 2 * self.widened
        return estimate / math.exp(mid + half), estimate / math.exp(mid - half)


def band(quantity: Quantity, cls: EstimateClass, table: Optional[dict] = None) -> Optional[Band]:
    """The band of ``cls``: its own, or its nearest parent's widened (None: no residual at all)."""
    table = table if table is not None else (T.SPEED if quantity == "speed" else T.MEMORY)
    own = cls.key(quantity)
    for i, key in enumerate(parents(own, quantity)):
        got = table.get(key)
        if got is None:
            continue
        p10, p90, rows, srcs = got
        if rows >= MIN_ROWS and srcs >= MIN_SOURCES:
            return Band(p10, p90, rows, srcs, key, 1.0 if i == 0 else FEW_ROWS_WIDEN[quantity])
    got = table.get("*/*/*/*")
    if got is None:
        return None
    return Band(*got, "*/*/*/*", FEW_ROWS_WIDEN[quantity])


class Interval(BaseModel):
    """An estimate's central 80 % interval and what it rests on."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    low: float
    high: float
    estimate_class: str = Field(description="generation/framework/method/dense-or-moe of the estimate")
    basis: str = Field(description="The class whose leave-one-source-out errors set the interval")
    rows: int = 0
    sources: int = 0
    few_rows: bool = Field(False, description="The class had too few rows: a parent's band, widened")
    labels: tuple[str, ...] = ()


def interval(quantity: Quantity, estimate: float, cls: EstimateClass, *, fp8_unmeasured_gpu: Optional[str] = None,
             digits: int = 1, table: Optional[dict] = None) -> Optional[Interval]:
    """The 80 % interval of ``estimate`` (tokens/s per GPU, or GiB) for an estimate of class ``cls``."""
    b = band(quantity, cls, table)
    if b is None or estimate <= 0:
        return None
    labels = []
    own = cls.key(quantity)
    if b.key != own:
        labels.append(f"few rows for {own}: the {quantity} interval of {b.key} ({b.rows} rows, {b.sources} sources), "
                      f"widened x{b.widened:g}")
    if fp8_unmeasured_gpu:
        b = b._replace(widened=b.widened * NO_FP8_MEASUREMENT_WIDEN)
        labels.append(f"no FP8 training measurement on {fp8_unmeasured_gpu} (none in the corpus; none known "
                      f"elsewhere): the {quantity} interval is widened x{NO_FP8_MEASUREMENT_WIDEN:g}")
    lo, hi = b.bounds(estimate)
    return Interval(low=round(lo, digits), high=round(hi, digits), estimate_class=own, basis=b.key, rows=b.rows,
                    sources=b.sources, few_rows=b.key != own, labels=tuple(labels))


def fp8_unmeasured(t: "TrainingSpec", gpu_name: str, measured: Optional[tuple[str, ...]] = None) -> Optional[str]:
    """The GPU's name when the job trains in FP8 on a GPU no corpus row measured FP8 training on."""
    if t.precision != "fp8-mixed":
        return None
    return None if gpu_name in (measured if measured is not None else T.FP8_MEASURED_GPUS) else gpu_name


def memory_high_factor(cls: EstimateClass, fp8_gpu: Optional[str] = None) -> tuple[float, Optional[Interval]]:
    """How far above the estimate the memory interval's upper end lies (>= 1: never below the estimate)."""
    iv = interval("memory", 1.0, cls, fp8_unmeasured_gpu=fp8_gpu, digits=6)
    return (max(1.0, iv.high) if iv else 1.0), iv


def fit_verdict(required_gib: float, usable_gib: float, min_margin_gib: float, high_factor: float) -> Fit:
    """fits | at_risk | does_not_fit (the module docstring's rule)."""
    if required_gib * max(1.0, high_factor) + min_margin_gib <= usable_gib:
        return "fits"
    if required_gib + min_margin_gib <= usable_gib:
        return "at_risk"
    return "does_not_fit"
