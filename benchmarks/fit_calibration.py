"""Fit the throughput model's two efficiencies on the calibration rows; print them and the LOO error.

usage: python benchmarks/fit_calibration.py

The step time model is ``t = tokens * flops / (peak * 1/u) + bytes / (bandwidth * 1/v)`` with
u = 1 / MATMUL_EFFICIENCY and v = 1 / BANDWIDTH_EFFICIENCY. It is linear in (u, v), so ordinary
least squares on the *relative* error of every row gives them without scipy. Leave-one-out
(fit on 11 rows, predict the 12th) shows how far the constants are from fitting rows rather than
physics. The memory model has no fitted constant; it is printed for reference.
"""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from benchmarks.calibration_rows import Row, load_rows  # noqa: E402
from trainstack.sizing import constants as K  # noqa: E402
from trainstack.sizing.throughput import (  # noqa: E402
    elementwise_bytes_per_token,
    flops_per_token,
    per_step_bytes,
)

H200_TFLOPS = 989.0
H200_BANDWIDTH_GBS = 4800.0


def features(row: Row) -> tuple[float, float, float]:
    """(seconds of matmul at 100 % of peak, seconds of traffic at 100 % of bandwidth, measured seconds)."""
    t = row.training
    tokens = t.micro_batch_size * t.sequence_length
    fl = flops_per_token(row.arch, t)
    matmul = tokens * (fl["linear"] + fl["attention"]) / (H200_TFLOPS * 1e12)
    traffic = (tokens * elementwise_bytes_per_token(row.arch, t) + per_step_bytes(row.arch, t)) / (
        H200_BANDWIDTH_GBS * 1e9)
    return matmul, traffic, tokens / row.tokens_per_second


def fit(rows: list[Row]) -> tuple[float, float]:
    """(matmul efficiency, bandwidth efficiency) minimising the squared relative step-time error."""
    a11 = a12 = a22 = b1 = b2 = 0.0
    for row in rows:
        x, y, t = features(row)
        x, y = x / t, y / t
        a11, a12, a22, b1, b2 = a11 + x * x, a12 + x * y, a22 + y * y, b1 + x, b2 + y
    det = a11 * a22 - a12 * a12
    u = (b1 * a22 - b2 * a12) / det
    v = (a11 * b2 - a12 * b1) / det
    return 1 / u, 1 / v


def predict(row: Row, eta: float, zeta: float) -> float:
    x, y, _ = features(row)
    tokens = row.training.micro_batch_size * row.training.sequence_length
    return tokens / (x / eta + y / zeta)


def main() -> int:
    rows = load_rows()
    eta, zeta = fit(rows)
    print(f"MATMUL_EFFICIENCY = {eta:.3f}")
    print(f"BANDWIDTH_EFFICIENCY = {zeta:.3f}")
    print(f"(in constants.py: {K.MATMUL_EFFICIENCY}, {K.BANDWIDTH_EFFICIENCY})")
    print()
    print(f"{'row':4} {'measured tok/s':>14} {'fit':>9} {'err':>7} {'leave-one-out':>14} {'err':>7}")
    worst = worst_loo = 0.0
    for i, row in enumerate(rows):
        fitted = predict(row, eta, zeta)
        loo_eta, loo_zeta = fit(rows[:i] + rows[i + 1:])
        loo = predict(row, loo_eta, loo_zeta)
        e, el = fitted / row.tokens_per_second - 1, loo / row.tokens_per_second - 1
        worst, worst_loo = max(worst, abs(e)), max(worst_loo, abs(el))
        print(f"{row.id:4} {row.tokens_per_second:14,.0f} {fitted:9,.0f} {e:+7.1%} {loo:14,.0f} {el:+7.1%}")
    print(f"worst error: fitted {worst:.1%}, leave-one-out {worst_loo:.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
