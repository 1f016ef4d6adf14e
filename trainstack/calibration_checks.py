"""What a real run can have measured, by physics: a heartbeat beyond it is refused, not calibrated.

A calibration multiplies every later estimate of the workload, so one poisoned heartbeat (5,340
tokens/s for an 8B LoRA on one A10) would make plans ~4x too short and cheap. Two bounds hold for
any run, whatever the software:

* **Speed.** Every token costs at least the model's FLOPs (forward, and the backward a method
  needs: trainstack.sizing.throughput.flops_per_token with ``recompute=False``, the count MFU is
  measured against). A GPU cannot run them faster than its dense tensor peak for the training
  precision (the catalog's TFLOPS, trainstack.sizing.throughput.dense_tflops), and no published
  training run has reached :data:`MFU_CEILING` of it: FlashAttention-2 reports "up to 225 TFLOPs/s
  per A100 GPU (72% model FLOPs utilization)" for end-to-end GPT training (Dao 2023,
  arXiv:2307.08691, abstract), the highest published figure found; the ceiling leaves room above it.
* **Memory.** A GPU holds at least its share of the weights while it trains (the estimate's
  ``weights`` component for the run's layout: sharded by tensor/pipeline degree and ZeRO-3); a peak
  below that is not this workload (another model, or parameters offloaded to the CPU, which the
  profile does not describe).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .architecture import Architecture
from .catalog.models import GpuModel
from .profile import TrainingSpec
from .sizing.memory import MemoryEstimate
from .sizing.throughput import dense_tflops, flops_per_token

#: The most model FLOPs utilisation a measured speed may imply (see the module docstring).
MFU_CEILING = 0.80


@dataclass(frozen=True)
class SpeedBound:
    """The fastest this workload can run on one GPU of ``gpu``."""

    gpu: str
    peak_tflops: float               # dense tensor peak for the precision (matmuls)
    flops_per_token: float           # model FLOPs per token (no recompute)
    tokens_per_second_per_gpu: float  # at MFU_CEILING of the peak

    def implied_tflops(self, tokens_per_second_per_gpu: float) -> float:
        return tokens_per_second_per_gpu * self.flops_per_token / 1e12


def speed_bound(arch: Architecture, training: TrainingSpec, gpu: GpuModel) -> Optional[SpeedBound]:
    """The ceiling on tokens/s per GPU (None: the catalog has no TFLOPS for the GPU)."""
    linear_peak, attention_peak, _ = dense_tflops(gpu, training)
    if not linear_peak or not attention_peak:
        return None
    fl = flops_per_token(arch, training, recompute=False)
    seconds = fl["linear"] / (linear_peak * 1e12) + fl["attention"] / (attention_peak * 1e12)
    if seconds <= 0:
        return None
    return SpeedBound(gpu=gpu.name, peak_tflops=linear_peak, flops_per_token=fl["linear"] + fl["attention"],
                      tokens_per_second_per_gpu=MFU_CEILING / seconds)


def speed_problem(measured_per_gpu: float, bound: Optional[SpeedBound]) -> Optional[str]:
    """Why ``measured_per_gpu`` tokens/s cannot be a real run's speed, or None."""
    if bound is None or measured_per_gpu <= bound.tokens_per_second_per_gpu:
        return None
    needs = bound.implied_tflops(measured_per_gpu)
    return (f"reports {measured_per_gpu:,.0f} tokens/s per GPU, which needs {needs:,.0f} "
            f"TFLOPS of model FLOPs ({bound.flops_per_token / 1e9:,.1f} GFLOP per token) on one {bound.gpu}: above "
            f"{MFU_CEILING:.0%} of its {bound.peak_tflops:g} TFLOPS dense peak, which no training run reaches (at most "
            f"{bound.tokens_per_second_per_gpu:,.0f} tokens/s per GPU for this workload)")


def memory_floor_gib(mem: MemoryEstimate) -> float:
    """The weights one GPU holds in the run's layout, GiB."""
    return float(mem.breakdown_gib.get("weights", 0.0))


def memory_problem(what: str, measured_gib: Optional[float], floor_gib: float) -> Optional[str]:
    """Why a measured memory peak cannot be this workload's, or None."""
    if measured_gib is None or floor_gib <= 0 or measured_gib >= floor_gib:
        return None
    return (f"reports {what} {measured_gib:.2f} GiB, below the {floor_gib:.2f} GiB of weights one GPU holds in this "
            "layout: not this workload (another model, or parameters offloaded to the CPU, which the profile "
            "does not describe)")
