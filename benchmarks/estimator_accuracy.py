"""How close the sizing model comes to real H200 training steps, next to the common calculator.

usage: python benchmarks/estimator_accuracy.py [--markdown]

For every calibration row (the constants were fitted on these) and every held-out row (measured
later with benchmarks/calibration/measure.py --heldout; never fitted on), prints measured vs
predicted peak allocated memory and tokens/s, the error, and what a weights + gradients +
optimizer-states calculator predicts (16 bytes per trainable parameter under bf16-mixed, 8 under
pure bf16, a 2-byte frozen base under LoRA; no activations, no logits). Ends with the speed of
the model itself on a resolver-sized workload.
"""

from __future__ import annotations

import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from benchmarks.calibration_rows import CALIBRATION, HELDOUT, Row, load_rows  # noqa: E402
from trainstack.architecture import presets  # noqa: E402
from trainstack.catalog import load_catalog  # noqa: E402
from trainstack.profile import TrainingSpec  # noqa: E402
from trainstack.sizing import memory_estimate, throughput_estimate, trainable_params  # noqa: E402
from trainstack.sizing import memory as memory_mod  # noqa: E402
from trainstack.sizing import throughput as throughput_mod  # noqa: E402

GIB = 2**30


def naive_gib(row: Row) -> float:
    """Weights + gradients + AdamW states only: what most calculators print."""
    t, p = row.training, row.arch.params
    n = trainable_params(row.arch, t)
    if t.adapters is not None:
        return (2 * p + 16 * n) / GIB
    return (16 if t.precision == "bf16-mixed" else 8) * p / GIB


def describe(row: Row) -> str:
    t = row.training
    what = t.method + (f" r{t.adapters.rank} {t.adapters.targets}" if t.adapters else "")
    gc = " +ckpt" if t.gradient_checkpointing else ""
    return f"{row.model} {what} {t.precision} {t.micro_batch_size}x{t.sequence_length}{gc}"


def table(rows: list[Row], markdown: bool) -> tuple[list[str], float, float, float]:
    h200 = load_catalog().gpu("H200")
    head = ["row", "case", "measured GiB", "predicted GiB", "error", "naive GiB", "naive error",
            "measured tok/s", "predicted tok/s", "error", "MFU"]
    out = []
    if markdown:
        out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    else:
        out.append(f"{'row':4} {'case':48} {'meas GiB':>8} {'pred':>7} {'err':>7} {'naive':>7} {'err':>7} "
                   f"{'meas tok/s':>10} {'pred':>8} {'err':>7} {'MFU':>5}")
    worst_mem = worst_tps = worst_naive = 0.0
    for r in rows:
        m = memory_estimate(r.arch, r.training)
        s = throughput_estimate(r.arch, r.training, h200)
        naive = naive_gib(r)
        em, en = m.peak_gib_per_gpu / r.peak_gib - 1, naive / r.peak_gib - 1
        et = (s.tokens_per_second_per_gpu or 0) / r.tokens_per_second - 1
        worst_mem, worst_tps, worst_naive = max(worst_mem, abs(em)), max(worst_tps, abs(et)), max(worst_naive, abs(en))
        cells = [r.id, describe(r), f"{r.peak_gib:.2f}", f"{m.peak_gib_per_gpu:.2f}", f"{em:+.2%}",
                 f"{naive:.2f}", f"{en:+.0%}", f"{r.tokens_per_second:,.0f}",
                 f"{s.tokens_per_second_per_gpu:,.0f}", f"{et:+.1%}", f"{s.mfu:.2f}"]
        if markdown:
            out.append("| " + " | ".join(cells) + " |")
        else:
            out.append(f"{cells[0]:4} {cells[1]:48} {cells[2]:>8} {cells[3]:>7} {cells[4]:>7} {cells[5]:>7} "
                       f"{cells[6]:>7} {cells[7]:>10} {cells[8]:>8} {cells[9]:>7} {cells[10]:>5}")
    return out, worst_mem, worst_tps, worst_naive


def speed_check() -> str:
    """A resolver-sized workload with a cold cache: 95 types x 1..64 nodes x 2 pricing options."""
    catalog = load_catalog()
    arch = presets()["llama-3-70b"].architecture
    t = TrainingSpec(method="full", precision="bf16-mixed", micro_batch_size=1, sequence_length=4096,
                     gradient_checkpointing=True, zero_stage=3, tokens=2e8)
    memory_mod._memory.cache_clear()
    throughput_mod._throughput.cache_clear()
    calls = 0
    start = time.perf_counter()
    for inst in catalog.resolved_instances():
        if inst.gpu is None:
            continue
        for nodes in (1, 2, 4, 8, 16, 32, 64):
            for _spot in (False, True):
                gpus = nodes * inst.gpu_count
                memory_estimate(arch, t, gpus)
                throughput_estimate(arch, t, inst.gpu, gpus_per_node=inst.gpu_count, nodes=nodes,
                                    interconnect=inst.interconnect, network=inst.rdma,
                                    network_gbps=inst.type.rdma_bandwidth_gbps)
                calls += 2
    ms = (time.perf_counter() - start) * 1000
    return f"{calls} sizing calls for a 64-node resolve over the whole catalog: {ms:.1f} ms (cold cache)"


def main() -> int:
    markdown = "--markdown" in sys.argv
    for title, path in (("Calibration rows (constants fitted on these)", CALIBRATION),
                        ("Held-out rows (never fitted on)", HELDOUT)):
        if not path.exists():
            continue
        lines, wm, wt, wn = table(load_rows(path), markdown)
        print(f"### {title}" if markdown else title)
        if markdown:
            print()
        print("\n".join(lines))
        print()
        print(f"worst memory error {wm:.2%} (naive calculator {wn:.0%}), worst tokens/s error {wt:.1%}")
        print()
    print(speed_check())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
