"""Sizing: the GPU memory and time a training job needs (pure, cached, calibrated on real H200 runs).

``memory_estimate`` gives the GPU-independent peak, requirement and breakdown per GPU;
``throughput_estimate`` the speed on one GPU model and layout; ``estimate`` both, with the fit
on each GPU model and the assumptions behind them; ``fit_suggestions`` what would make a job fit.
How the model works and how its constants were fitted: docs/sizing.md.
"""

from .estimate import (
    Estimate,
    GpuFit,
    GpuHourPrice,
    NodeLayout,
    assumptions,
    at_risk_label,
    estimate,
    fit_suggestions,
    gpu_fit,
    gpu_hour_price,
    memory_fit,
    min_margin_gib,
    summary_intervals,
)
from .flops import flops_per_token
from .memory import MemoryEstimate, memory_estimate
from .param_bytes import trainable_params
from .throughput import ThroughputEstimate, throughput_estimate

__all__ = [
    "Estimate", "GpuFit", "GpuHourPrice", "MemoryEstimate", "NodeLayout", "ThroughputEstimate", "assumptions",
    "at_risk_label", "summary_intervals",
    "estimate", "fit_suggestions", "flops_per_token", "gpu_fit", "gpu_hour_price", "memory_estimate", "memory_fit", "min_margin_gib",
    "throughput_estimate", "trainable_params",
]
