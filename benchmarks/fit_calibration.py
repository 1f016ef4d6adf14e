"""Fit the sizing model's constants on measured rows; print them, the fit and the rows left out.

usage: python benchmarks/fit_calibration.py

Speed. One micro-batch takes (compute_time.micro_seconds)

    t = linear / u[gen] + attention / a + (traffic + f * fused_traffic) / b + c * layers

where the terms are the work at 100 % of the hardware (compute_time.step_terms): matmul FLOPs over
the dense peak, flash attention's FLOPs, element-wise bytes over HBM bandwidth (``fused_traffic``
for stacks that fuse or compile those kernels), and the layer count (a fixed launch cost per layer).
The step is ``gradient_accumulation_steps`` micro-batches, the optimizer step and the exposed
communication (the communication model is not fitted). The time is linear in
(1/u[hopper], 1/u[ampere], 1/a, 1/b, f/b, c), so least squares on the relative error gives them
without scipy; communication depends on the micro-batch time (overlap), so the fit iterates.
Rows: the 12 H200 calibration rows and the published rows marked ``fit`` (set A's profiles file,
every second llm-foundry row); each group (H200, published set A, llm-foundry per GPU) weighs the
same in total. The H200 held-out rows and the other published rows are never fitted on.

Memory. The allocator model (allocator.reserved_bytes) is fitted as the tightest upper envelope of
the 20 H200 rows' peak_reserved: every prediction at or above the measurement, the largest
overshoot as small as possible. Leave-one-out is printed for both.
"""

from __future__ import annotations

import pathlib
import statistics
import sys
from typing import Iterable, NamedTuple, Optional

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from benchmarks.calibration_rows import (  # noqa: E402
    CALIBRATION, HELDOUT, PublishedRow, Row, harness_casts_on_gpu, load_parallel, load_published, load_rows,
)
from trainstack.catalog.models import GpuModel  # noqa: E402
from trainstack.sizing import constants as K  # noqa: E402
from trainstack.sizing import allocator, param_bytes, phases  # noqa: E402
from trainstack.sizing import compute_time, links  # noqa: E402
from trainstack.sizing import throughput as thr  # noqa: E402

H200 = GpuModel(name="H200", architecture="hopper", memory_gb=141, usable_gib=139.8, memory_bandwidth_gbs=4800,
                bf16_tflops=989, fp16_tflops=989, fp8_tflops=1979, supports_bf16=True, supports_fp8=True,
                sources=("CALIB-H200",))
#: The H200 rows weigh six times a published group: they are the measurements whose conditions are
#: known exactly (the fit must keep them within 5 % median, 12 % worst).
GROUP_WEIGHT = {"H200": 6.0}
PARAMS = ("u_hopper", "u_ampere", "a_hopper", "a_ampere", "b", "fb", "c")  # 1/efficiencies, fused/b, s per layer


class SpeedCase(NamedTuple):
    """One row for the speed fit: its terms, layout and the measured seconds per optimizer step."""

    id: str
    group: str
    arch: object
    training: object
    gpu: GpuModel
    per_node: int
    nodes: int
    interconnect: str
    network: str
    network_gbps: Optional[float]
    measured_tps_per_gpu: float


def h200_case(row: Row) -> SpeedCase:
    return SpeedCase(row.id, "H200", row.arch, row.training, H200, 1, 1, "none", "none", None, row.tokens_per_second)


def published_case(row: PublishedRow) -> SpeedCase:
    group = "llm-foundry " + row.gpu.architecture if row.framework == "llm-foundry" else "published set A"
    return SpeedCase(row.id, group, row.arch, row.training, row.gpu, row.per_node, row.nodes, row.interconnect,
                     row.network if row.nodes > 1 else "none", row.network_gbps, row.tokens_per_second)


def _peaks(case: SpeedCase) -> tuple[float, float, float]:
    linear, attention, _ = compute_time.dense_tflops(case.gpu, case.training)
    bandwidth = case.gpu.memory_bandwidth_gbs or 4800.0 * linear / 989.0
    return linear, attention, bandwidth


def features(case: SpeedCase) -> dict[str, float]:
    linear, attention, bandwidth = _peaks(case)
    return compute_time.step_terms(case.arch, case.training, linear, attention, bandwidth)


def _row_vector(case: SpeedCase) -> list[float]:
    """Coefficients of PARAMS in one optimizer step's compute time (gas micro-batches + optimizer)."""
    f = features(case)
    gas = case.training.accumulation_steps(case.per_node * case.nodes)
    gen = case.gpu.architecture
    hop, amp = gen != "ampere", gen == "ampere"
    return [gas * f["linear"] * hop, gas * f["linear"] * amp, gas * f["attention"] * hop, gas * f["attention"] * amp,
            gas * f["traffic"] + f["optimizer"], gas * f["fused_traffic"], gas * f["layers"]]


def predict(case: SpeedCase, p: dict[str, float]) -> float:
    """Tokens/s per GPU with the constants ``p`` (the production formula, constants swapped in)."""
    saved = _swap(p)
    try:
        est = thr._throughput.__wrapped__(case.arch, case.training, case.gpu, case.per_node, case.nodes,
                                          case.interconnect, case.network, case.network_gbps)
    finally:
        _restore(saved)
    return est.tokens_per_second_per_gpu or 0.0


def _swap(p: dict[str, float]) -> dict:
    saved = {"MATMUL_EFFICIENCY_BY_ARCH": dict(K.MATMUL_EFFICIENCY_BY_ARCH),
             "ATTENTION_EFFICIENCY_BY_ARCH": dict(K.ATTENTION_EFFICIENCY_BY_ARCH),
             "BANDWIDTH_EFFICIENCY": K.BANDWIDTH_EFFICIENCY, "FUSED_TRAFFIC": K.FUSED_TRAFFIC,
             "LAYER_OVERHEAD_SECONDS": K.LAYER_OVERHEAD_SECONDS}
    K.MATMUL_EFFICIENCY_BY_ARCH = {"hopper": 1 / p["u_hopper"], "ampere": 1 / p["u_ampere"]}
    K.ATTENTION_EFFICIENCY_BY_ARCH = {"hopper": 1 / p["a_hopper"], "ampere": 1 / p["a_ampere"]}
    K.BANDWIDTH_EFFICIENCY = 1 / p["b"]
    K.FUSED_TRAFFIC = p["fb"] / p["b"]
    K.LAYER_OVERHEAD_SECONDS = p["c"]
    return saved


def _restore(saved: dict) -> None:
    for k, v in saved.items():
        setattr(K, k, v)


def current() -> dict[str, float]:
    return {"u_hopper": 1 / K.MATMUL_EFFICIENCY_BY_ARCH["hopper"], "u_ampere": 1 / K.MATMUL_EFFICIENCY_BY_ARCH["ampere"],
            "a_hopper": 1 / K.ATTENTION_EFFICIENCY_BY_ARCH["hopper"],
            "a_ampere": 1 / K.ATTENTION_EFFICIENCY_BY_ARCH["ampere"], "b": 1 / K.BANDWIDTH_EFFICIENCY,
            "fb": K.FUSED_TRAFFIC / K.BANDWIDTH_EFFICIENCY, "c": K.LAYER_OVERHEAD_SECONDS}


def _solve(a: list[list[float]], y: list[float]) -> list[float]:
    """Gauss-Jordan on the normal equations (6 unknowns)."""
    n = len(a[0])
    m = [[sum(r[i] * r[j] for r in a) for j in range(n)] + [sum(r[i] * v for r, v in zip(a, y))] for i in range(n)]
    for col in range(n):
        piv = max(range(col, n), key=lambda r: abs(m[r][col]))
        m[col], m[piv] = m[piv], m[col]
        div = m[col][col]
        m[col] = [x / div for x in m[col]]
        for r in range(n):
            if r != col and m[r][col]:
                fac = m[r][col]
                m[r] = [x - fac * yv for x, yv in zip(m[r], m[col])]
    return [m[i][n] for i in range(n)]


def fit_speed(cases: list[SpeedCase], iterations: int = 6) -> dict[str, float]:
    """Constants minimising the squared relative step-time error, each group weighing the same."""
    groups: dict[str, int] = {}
    for c in cases:
        groups[c.group] = groups.get(c.group, 0) + 1
    p = current()
    for _ in range(iterations):
        rows, ys = [], []
        for c in cases:
            gpus = c.per_node * c.nodes
            tokens_step = c.training.micro_batch_size * c.training.sequence_length * c.training.accumulation_steps(gpus)
            measured = tokens_step / c.measured_tps_per_gpu            # seconds per optimizer step
            predicted_total = tokens_step / max(predict(c, p), 1e-9)
            compute = sum(k * p[name] for k, name in zip(_row_vector(c), PARAMS))
            comm = max(predicted_total - compute, 0.0)                  # exposed communication at p
            w = (GROUP_WEIGHT.get(c.group, 1.0) / groups[c.group]) ** 0.5
            rows.append([w * x / measured for x in _row_vector(c)])
            ys.append(w * (measured - comm) / measured)
        sol = _solve(rows, ys)
        p = dict(zip(PARAMS, sol))
    return p


def speed_cases(fit_only: bool = True) -> tuple[list[SpeedCase], list[SpeedCase]]:
    """(cases fitted on, cases left out)."""
    fitted = [h200_case(r) for r in load_rows(CALIBRATION)]
    left = [h200_case(r) for r in load_rows(HELDOUT)]
    for r in load_published():
        if not r.tokens_per_second or r.gpu.bf16_tflops is None:
            continue
        (fitted if r.fit else left).append(published_case(r))
    return fitted, left


# ---- second stage: Transformer Engine (the published parallel rows) ------------------------------

TE_PARAMS = ("te_a", "te_c")  # 1 / TE attention efficiency (Hopper), seconds per layer and micro-batch


def te_current() -> dict[str, float]:
    return {"te_a": 1 / K.TE_ATTENTION_EFFICIENCY_BY_ARCH["hopper"], "te_c": K.TE_LAYER_OVERHEAD_SECONDS}


def _te_swap(p: dict[str, float]) -> dict:
    saved = {"TE_ATTENTION_EFFICIENCY_BY_ARCH": dict(K.TE_ATTENTION_EFFICIENCY_BY_ARCH),
             "TE_LAYER_OVERHEAD_SECONDS": K.TE_LAYER_OVERHEAD_SECONDS}
    K.TE_ATTENTION_EFFICIENCY_BY_ARCH = {"hopper": 1 / p["te_a"]}
    K.TE_LAYER_OVERHEAD_SECONDS = p["te_c"]
    return saved


def te_predict(case: SpeedCase, p: dict[str, float]) -> float:
    saved = _te_swap(p)
    try:
        return predict(case, current())
    finally:
        _restore(saved)


def _te_row(case: SpeedCase, p: dict[str, float]) -> tuple[list[float], float]:
    """(coefficients of TE_PARAMS in one step's time, micro-batch times per step) at ``p``: the pacing
    stage's TE terms times the micro-batches a step runs through it (its own and the bubble's)."""
    from trainstack.sizing import parallel as P

    saved = _te_swap(p)
    try:
        t, gpus = case.training, case.per_node * case.nodes
        lay = P.layout_for(t, gpus)
        gas = P.micro_batches(t, lay)
        linear, attention, bandwidth = _peaks(case)
        lk = links.links(lay, case.gpu, case.per_node, case.nodes, case.interconnect, case.network, case.network_gbps)
        *_, terms = thr.pipeline_pace(case.arch, t, case.gpu, lay, gas, linear, attention, bandwidth, lk)
    finally:
        _restore(saved)
    runs = gas + P.bubble_micro_batches(lay)
    return [runs * terms["te_attention"], runs * terms["te_layers"]], runs


def fit_te(cases: list[SpeedCase], iterations: int = 6) -> dict[str, float]:
    """The Transformer Engine constants minimising the squared relative step-time error of the Megatron
    rows, every first-stage constant held fixed (the H200 rows do not move)."""
    p = te_current()
    for _ in range(iterations):
        rows, ys = [], []
        for c in cases:
            gpus = c.per_node * c.nodes
            lay_dp = c.training.data_parallel(gpus)
            tokens_step = (c.training.micro_batch_size * c.training.sequence_length
                           * c.training.accumulation_steps(lay_dp) * lay_dp / gpus)
            measured = tokens_step / c.measured_tps_per_gpu
            predicted = tokens_step / max(te_predict(c, p), 1e-9)
            vec, _ = _te_row(c, p)
            rest = predicted - sum(k * p[n] for k, n in zip(vec, TE_PARAMS))
            rows.append([x / measured for x in vec])
            ys.append((measured - rest) / measured)
        p = dict(zip(TE_PARAMS, _solve(rows, ys)))
    return p


def parallel_speed_cases() -> tuple[list[SpeedCase], list[SpeedCase]]:
    """(parallel rows fitted on, left out); only Transformer Engine rows carry the second stage's terms."""
    fitted, left = [], []
    for r in load_parallel():
        if not r.tokens_per_second:
            continue
        case = published_case(r)._replace(group="published parallel")
        (fitted if r.fit else left).append(case)
    return fitted, left


def te_cases() -> list[SpeedCase]:
    from trainstack.sizing.frameworks import transformer_engine

    fitted, _ = parallel_speed_cases()
    return [c for c in fitted if transformer_engine(c.training)]


# ---- the allocator envelope --------------------------------------------------------------------

class ReservedCase(NamedTuple):
    id: str
    checkpointed: bool
    static: float
    dynamic: float
    one_layer: float
    autocast_copies: float
    residue: float
    measured: float


def reserved_case(row: Row) -> ReservedCase:
    t = row.training
    alive = phases.phase_components(row.arch, t, 1, keeps_outputs=True)
    name = max(alive, key=lambda p: sum(alive[p].values()))
    at = alive[name]
    static = sum(at.get(k, 0.0) for k in allocator.STATIC)
    reusable = at.get("gradients", 0.0) + at.get("optimizer_states", 0.0)
    if t.checkpointing == "none":
        reusable += at.get("activations", 0.0)
    residue = max(0.0, 2.0 * row.arch.params - reusable) if harness_casts_on_gpu(row) else 0.0
    copies = 2.0 * row.arch.matmul_params if param_bytes.param_bytes(row.arch, t, 1).autocast else 0.0
    return ReservedCase(row.id, t.checkpointing == "full", static, sum(at.values()) - static,
                        allocator.recomputed_layer_bytes(row.arch, t, 1), copies, residue, row.reserved_gib * K.GIB)


def reserved_predict(c: ReservedCase, k: dict[str, float]) -> float:
    if c.checkpointed:
        base = (c.static + k["FRAG_DYNAMIC_CHECKPOINTED"] * c.dynamic + k["FRAG_RECOMPUTE_LAYERS"] * c.one_layer
                + k["FRAG_AUTOCAST_COPIES"] * c.autocast_copies)
    else:
        base = c.static + k["FRAG_DYNAMIC"] * c.dynamic
    return base + k["BUILD_RESIDUE_KEPT"] * c.residue


def _grid(lo: float, hi: float, step: float) -> Iterable[float]:
    n = int(round((hi - lo) / step))
    return (round(lo + i * step, 4) for i in range(n + 1))


#: The bound the fit keeps: every prediction within this much above its measurement (issue 21).
RESERVED_BOUND = 0.15


def fit_reserved(cases: list[ReservedCase]) -> dict[str, float]:
    """Every prediction at or above its measurement and within RESERVED_BOUND of it; among those
    constants, the smallest mean overshoot (grid search, 2 decimals)."""
    plain = [c for c in cases if not c.checkpointed]
    ckpt = [c for c in cases if c.checkpointed]
    best: Optional[tuple] = None
    for rho in _grid(0.0, 1.0, 0.05):
        # without (full) checkpointing: the smallest FRAG_DYNAMIC that covers every row
        fd = _ceil(max([(c.measured - c.static - rho * c.residue) / c.dynamic for c in plain] + [1.0]))
        plain_errs = [(c.static + fd * c.dynamic + rho * c.residue) / c.measured - 1 for c in plain]
        if max(plain_errs, default=0.0) > RESERVED_BOUND:
            continue
        for fac in _grid(0.0, 3.0, 0.1):
            for fdc in _grid(1.0, 1.4, 0.01):
                # every term only adds: the smallest FRAG_RECOMPUTE_LAYERS that covers every row is the best one
                need = [(c.measured - c.static - fdc * c.dynamic - fac * c.autocast_copies - rho * c.residue)
                        / c.one_layer for c in ckpt if c.one_layer > 0]
                frl = max(0.0, _ceil(max(need + [0.0]), 0.1))
                if frl > 4.0:
                    continue
                k = {"FRAG_DYNAMIC": fd, "FRAG_DYNAMIC_CHECKPOINTED": fdc, "FRAG_RECOMPUTE_LAYERS": frl,
                     "FRAG_AUTOCAST_COPIES": fac, "BUILD_RESIDUE_KEPT": rho}
                errs = [reserved_predict(c, k) / c.measured - 1 for c in ckpt]
                if min(errs) < 0 or max(errs) > RESERVED_BOUND:
                    continue
                score = round(sum(plain_errs + errs) / len(cases), 5)
                if best is None or score < best[0]:
                    best = (score, k)
    assert best is not None, "no constants keep every H200 row within the bound"
    return best[1]


def _ceil(x: float, step: float = 0.01) -> float:
    import math
    return round(math.ceil(x / step - 1e-9) * step, 4)


def reserved_cases() -> list[ReservedCase]:
    return [reserved_case(r) for r in load_rows(CALIBRATION) + load_rows(HELDOUT)]


# ---- report -------------------------------------------------------------------------------------

def _table(cases: list[SpeedCase], p: dict[str, float], title: str) -> list[float]:
    print(title)
    errs = []
    for c in cases:
        e = predict(c, p) / c.measured_tps_per_gpu - 1
        errs.append(e)
        print(f"  {c.id:46} {c.group:22} measured {c.measured_tps_per_gpu:10,.0f}  predicted {predict(c, p):10,.0f}  {e:+7.1%}")
    if errs:
        a = [abs(e) for e in errs]
        print(f"  median |error| {statistics.median(a):.1%}, worst {max(a):.1%} ({len(a)} rows)")
    return errs


def main() -> int:
    fitted, left = speed_cases()
    p = fit_speed(fitted)
    print("Speed constants (constants.py):")
    print(f"  MATMUL_EFFICIENCY_BY_ARCH = {{'hopper': {1 / p['u_hopper']:.3f}, 'ampere': {1 / p['u_ampere']:.3f}}}")
    print(f"  ATTENTION_EFFICIENCY_BY_ARCH = {{'hopper': {1 / p['a_hopper']:.3f}, 'ampere': {1 / p['a_ampere']:.3f}}}")
    print(f"  BANDWIDTH_EFFICIENCY = {1 / p['b']:.3f}")
    print(f"  FUSED_TRAFFIC = {p['fb'] / p['b']:.3f}")
    print(f"  LAYER_OVERHEAD_SECONDS = {p['c']:.5f}")
    print(f"  (in constants.py: {current()})")
    print()
    _table(fitted, p, "Fitted on:")
    print()
    _table(left, p, "Left out (never fitted on):")
    print()
    te = fit_te(te_cases())
    print("Second stage, Transformer Engine constants (constants.py), fitted on the published parallel rows:")
    print(f"  TE_ATTENTION_EFFICIENCY_BY_ARCH = {{'hopper': {1 / te['te_a']:.3f}}}")
    print(f"  TE_LAYER_OVERHEAD_SECONDS = {te['te_c']:.5f}")
    pf, pl = parallel_speed_cases()
    _table(pf, p, "Parallel rows fitted on (second stage):")
    _table(pl, p, "Parallel rows left out:")
    print()
    cases = reserved_cases()
    k = fit_reserved(cases)
    print("Allocator constants (constants.py):", k)
    print(f"{'row':5} {'measured GiB':>12} {'predicted':>10} {'err':>7} {'leave-one-out':>14} {'err':>7}")
    for i, c in enumerate(cases):
        pred = reserved_predict(c, k)
        loo_k = fit_reserved(cases[:i] + cases[i + 1:])
        loo = reserved_predict(c, loo_k)
        print(f"{c.id:5} {c.measured / K.GIB:12.2f} {pred / K.GIB:10.2f} {pred / c.measured - 1:+7.1%} "
              f"{loo / K.GIB:14.2f} {loo / c.measured - 1:+7.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
