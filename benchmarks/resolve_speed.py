"""In-process resolve time for a 1-GPU and a 512-GPU (64-node) profile, and `gpus: auto` profiles up to
64 nodes: one with data parallelism only (hf), one whose framework and command let the resolver search
tensor/pipeline/context layouts for every candidate (megatron, pretrain_gpt.py).

Goal: under 100 ms for the fixed ones and under 200 ms (warm) for the `gpus: auto` ones on a 2-core
machine. Prints the best and median of several runs, cold (first run, sizing caches empty) and warm,
how many candidates were considered and how many layouts were sized for them.

    .venv/bin/python benchmarks/resolve_speed.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainstack.catalog import load_catalog  # noqa: E402
from trainstack.profile import parse_profile  # noqa: E402
from trainstack.placement.layouts import layout_options  # noqa: E402
from trainstack.resolver import resolve_all  # noqa: E402

PROFILES = {
    "1 GPU (8B LoRA)": {
        "name": "bench-1", "model": {"preset": "llama-3-8b"},
        "training": {"method": "lora", "precision": "bf16", "micro_batch_size": 1, "sequence_length": 1024,
                     "gradient_checkpointing": True, "tokens": 5e7},
        "resources": {"gpus": 1, "spot": "allow"}},
    "512 GPUs (405B full, 64 nodes)": {
        "name": "bench-512", "model": {"preset": "llama-3.1-405b"},
        "training": {"method": "full", "precision": "bf16-mixed", "micro_batch_size": 1, "sequence_length": 4096,
                     "gradient_checkpointing": True, "zero_stage": 3, "tokens": 1e9},
        "resources": {"gpus": 512, "max_nodes": 64, "spot": "allow"}},
    "auto GPUs, up to 64 nodes (70B full)": {
        "name": "bench-auto", "model": {"preset": "llama-3-70b"},
        "training": {"method": "full", "precision": "bf16-mixed", "micro_batch_size": 1, "sequence_length": 4096,
                     "gradient_checkpointing": True, "zero_stage": 3, "tokens": 2e9},
        "resources": {"gpus": "auto", "max_nodes": 64, "spot": "allow"}},
    "auto GPUs + layout search, 64 nodes (70B)": {
        "name": "bench-layout", "model": {"preset": "llama-3-70b"},
        "training": {"method": "full", "precision": "bf16-mixed", "micro_batch_size": 1, "sequence_length": 4096,
                     "gradient_checkpointing": True, "zero_stage": 1, "framework": "megatron",
                     "global_batch_size": 512, "tokens": 2e9},
        "job": {"command": "torchrun pretrain_gpt.py --micro-batch-size 1 --global-batch-size 512"},
        "resources": {"gpus": "auto", "max_nodes": 64, "spot": "allow"}},
}


def clear_caches() -> None:
    """Empty every sizing cache, so 'cold' measures the formulas too."""
    names = [m for m in sys.modules if m.startswith("trainstack.sizing.")] + ["trainstack.placement.engine"]
    for module in (sys.modules[m] for m in names):
        for value in vars(module).values():
            if callable(getattr(value, "cache_clear", None)):
                value.cache_clear()


def main() -> None:
    catalog = load_catalog()
    print(f"{'profile':<44} {'cold ms':>8} {'warm best ms':>13} {'warm median ms':>15} {'candidates':>11} "
          f"{'layouts':>8}  chosen")
    for label, doc in PROFILES.items():
        profile = parse_profile(doc)
        clear_caches()
        t0 = time.perf_counter()
        res = resolve_all(profile, catalog)
        cold = (time.perf_counter() - t0) * 1000
        runs = []
        for _ in range(15):
            t0 = time.perf_counter()
            resolve_all(profile, catalog)
            runs.append((time.perf_counter() - t0) * 1000)
        p = res.plan
        layouts = sum(len(layout_options(profile, catalog.instance(c.instance_type), c.nodes)[0])
                      for c in res.candidates if c.instance_type and not c.spot)
        print(f"{label:<44} {cold:8.1f} {min(runs):13.1f} {statistics.median(runs):15.1f} {len(res.candidates):11d} "
              f"{layouts:8d}  {p.nodes} x {p.instance_type}, {p.parallelism.layout.label}")


if __name__ == "__main__":
    main()
