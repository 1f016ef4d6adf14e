"""In-process `trainstack estimate --json` time (every catalog GPU model), issue 36: estimate sizes each
GPU model through the resolver's engine (layout search included), so it costs about one `resolve`.

Profiles: the issue's case (Qwen3-30B-A3B, 32k tokens, 64 GPUs, Megatron: the layout search runs), an
8B LoRA on one GPU, and a 70B Megatron job with `gpus: auto` up to 64 nodes (every node count of every
type, each with its layout search). Goal: interactive, under 1 s warm on a 2-core machine. Prints the
best and median of several runs, cold (sizing caches empty) and warm, and `resolve --json` of the same
profile beside it (the first profile's cold run also pays the imports).

    .venv/bin/python benchmarks/estimate_speed.py
"""

from __future__ import annotations

import contextlib
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainstack.cli import main as cli  # noqa: E402

from resolve_speed import PROFILES as RESOLVE_PROFILES  # noqa: E402 - a sibling script

PROFILES = {
    "issue 36: Qwen3-30B-A3B 32k, 64 GPUs (megatron)": {
        "name": "bench-qwen", "region": "cn-beijing", "model": {"preset": "qwen3-30b-a3b"},
        "training": {"method": "full", "precision": "bf16-mixed", "framework": "megatron", "micro_batch_size": 1,
                     "sequence_length": 32768, "gradient_checkpointing": True, "global_batch_size": 128,
                     "tokens": 1e9},
        "job": {"command": "torchrun pretrain_gpt.py"}, "resources": {"gpus": 64, "gpu_models": ["A100-80G"]}},
    "1 GPU (8B LoRA)": {
        "name": "bench-1", "model": {"preset": "llama-3-8b"},
        "training": {"method": "lora", "precision": "bf16", "micro_batch_size": 1, "sequence_length": 1024,
                     "gradient_checkpointing": True, "tokens": 5e7},
        "resources": {"gpus": 1, "spot": "allow"}},
    # the same layout-search case resolve_speed.py times, so the two scripts compare like with like
    "auto GPUs + layout search, 64 nodes (70B)": RESOLVE_PROFILES["auto GPUs + layout search, 64 nodes (70B)"],
}


def clear_caches() -> None:
    """Empty every sizing and placement cache, so 'cold' measures the formulas too."""
    names = [m for m in sys.modules if m.startswith(("trainstack.sizing.", "trainstack.placement."))]
    for module in (sys.modules[m] for m in names):
        for value in vars(module).values():
            if callable(getattr(value, "cache_clear", None)):
                value.cache_clear()


def once(path: str, command: str = "estimate") -> float:
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        cli([command, path, "--json"])
    return (time.perf_counter() - t0) * 1000


def main() -> None:
    print(f"{'profile':<52} {'cold ms':>8} {'warm best ms':>13} {'warm median ms':>15} {'resolve cold':>13} "
          f"{'resolve warm median':>20}")
    with tempfile.TemporaryDirectory() as d:
        for label, doc in PROFILES.items():
            path = Path(d) / f"{doc['name']}.yaml"
            path.write_text(yaml.safe_dump(doc), encoding="utf-8")
            clear_caches()
            cold = once(str(path))
            runs = [once(str(path)) for _ in range(7)]
            clear_caches()
            resolve_cold = once(str(path), "resolve")
            resolve_warm = statistics.median(once(str(path), "resolve") for _ in range(7))
            print(f"{label:<52} {cold:8.1f} {min(runs):13.1f} {statistics.median(runs):15.1f} {resolve_cold:13.1f} "
                  f"{resolve_warm:20.1f}")


if __name__ == "__main__":
    main()
