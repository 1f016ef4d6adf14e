"""One micro-batch's compute time on one GPU: matmul FLOPs at the tensor-core peak and element-wise
traffic at HBM speed, each at its fitted efficiency (constants.py; benchmarks/fit_calibration.py
fits them on these same terms)."""

from __future__ import annotations

import functools
from typing import Optional

from ..catalog.models import GpuModel
from ..models import Architecture
from ..profile import TrainingSpec
from . import constants as K
from .flops import flop_parts
from .frameworks import fused_kernels, transformer_engine
from .parallel import Stage
from .traffic import elementwise_bytes_per_token, optimizer_bytes, per_step_bytes


def dense_tflops(gpu: GpuModel, t: TrainingSpec) -> tuple[Optional[float], Optional[float], list[str]]:
    """(matmul peak, attention peak, labels) in TFLOPS for the training precision."""
    labels: list[str] = []
    base = gpu.bf16_tflops
    if base is None and gpu.fp16_tflops is not None:
        base = gpu.fp16_tflops
        labels.append(f"{gpu.name} has no BF16 figure: its dense FP16 {base:g} TFLOPS is used")
    if base is None:
        return None, None, [f"no dense TFLOPS known for {gpu.name}: speed unknown"]
    linear = base
    if t.precision == "fp8-mixed":
        if gpu.fp8_tflops:
            linear = gpu.fp8_tflops
            labels.append("FP8 matmuls assumed to reach the same share of the FP8 peak as BF16 does "
                          "of the BF16 peak (not calibrated)")
        else:
            labels.append(f"{gpu.name} has no FP8: matmuls counted at its 16-bit peak")
    return linear, base, labels


def matmul_efficiency(gpu: GpuModel) -> float:
    """The fitted share of the dense tensor peak the matmuls reach on this GPU generation."""
    return K.MATMUL_EFFICIENCY_BY_ARCH.get(gpu.architecture, K.MATMUL_EFFICIENCY_BY_ARCH["hopper"])


def attention_efficiency(gpu: GpuModel) -> float:
    """The fitted share of the dense peak flash attention reaches on this GPU generation."""
    return K.ATTENTION_EFFICIENCY_BY_ARCH.get(gpu.architecture, K.ATTENTION_EFFICIENCY_BY_ARCH["hopper"])


def te_attention_efficiency(gpu: GpuModel) -> float:
    """Transformer Engine's fused attention: its fitted share of the dense peak (Hopper); other
    generations run flash attention's."""
    return K.TE_ATTENTION_EFFICIENCY_BY_ARCH.get(gpu.architecture, attention_efficiency(gpu))


@functools.lru_cache(maxsize=16384)
def stage_work(arch: Architecture, t: TrainingSpec, stage: Optional[Stage] = None
               ) -> tuple[float, float, float, float, int, bool, bool]:
    """One micro-batch's work on one GPU of ``stage``, whatever the GPU: (matmul FLOPs, attention FLOPs,
    element-wise bytes, optimizer-step bytes, layers, fused kernels, Transformer Engine)."""
    fl = flop_parts(arch, t)
    tokens = float(t.micro_batch_size * t.sequence_length)
    if stage is None:
        linear = fl["layers"] + fl["head"] + fl["vision"]
        attention, layers = fl["attention"], arch.num_layers
    else:
        frac = stage.layers / arch.num_layers
        linear = (fl["layers"] * frac + (fl["head"] if stage.last else 0.0)
                  + (fl["vision"] if stage.first else 0.0)) / stage.tp
        attention, layers = fl["attention"] * frac / stage.tp, stage.layers
        tokens /= stage.cp
    optimizer = optimizer_bytes(arch, t, stage)
    micro_bytes = tokens * elementwise_bytes_per_token(arch, t, stage) + per_step_bytes(arch, t, stage) - optimizer
    return (tokens * linear, tokens * attention, micro_bytes, optimizer, layers, fused_kernels(t),
            transformer_engine(t))


def step_terms(arch: Architecture, t: TrainingSpec, linear_tflops: float, attention_tflops: float,
               bandwidth_gbs: float, stage: Optional[Stage] = None) -> dict[str, float]:
    """One micro-batch's work at 100 % of the hardware (seconds), before the fitted efficiencies:
    ``linear`` matmuls, ``attention`` (flash attention's QK^T and AV), ``traffic`` element-wise bytes,
    ``fused_traffic`` the same for stacks with fused/compiled kernels, ``layers`` (the fixed per-layer
    launch cost counts layers), ``optimizer`` the optimizer step's traffic (once per step).
    On a pipeline ``stage`` (and its tensor/context split) the work of one GPU of it. The optimizer
    step's traffic is counted whole on every rank (ZeRO's sharded step is not modelled; the constants
    were fitted so).
    benchmarks/fit_calibration.py fits the efficiencies on these same terms."""
    flops, attention_flops, micro_bytes, optimizer, layers, fused, te = stage_work(arch, t, stage)
    bw = bandwidth_gbs * 1e9
    terms = {"linear": flops / (linear_tflops * 1e12),
             "attention": attention_flops / (attention_tflops * 1e12),
             "traffic": 0.0 if fused else micro_bytes / bw, "fused_traffic": micro_bytes / bw if fused else 0.0,
             "layers": float(layers), "optimizer": optimizer / bw,
             "te_attention": 0.0, "te_traffic": 0.0, "te_layers": 0.0}
    if te:
        # Transformer Engine fuses the element-wise work (norms, rotary, casts, SwiGLU) into its GEMM and
        # attention kernels: what is left of it is in a fixed per-layer cost of its own, and its fused
        # attention has its own efficiency (both fitted on NeMo's performance tables)
        terms.update(te_attention=terms["attention"], te_traffic=micro_bytes / bw, te_layers=float(layers),
                     attention=0.0, traffic=0.0, fused_traffic=0.0, layers=0.0)
    return terms


def micro_seconds(terms: dict[str, float], matmul_eff: float, attention_eff: float,
                  te_attention_eff: Optional[float] = None) -> float:
    """A micro-batch's time from its terms and the fitted constants (the model the fit script fits)."""
    seconds = (terms["linear"] / matmul_eff + terms["attention"] / attention_eff
               + (terms["traffic"] + K.FUSED_TRAFFIC * terms["fused_traffic"]) / K.BANDWIDTH_EFFICIENCY
               + K.LAYER_OVERHEAD_SECONDS * terms["layers"])
    if terms.get("te_layers"):
        seconds += (terms["te_attention"] / (te_attention_eff or attention_eff)
                    + K.TE_LAYER_OVERHEAD_SECONDS * terms["te_layers"])
    return seconds
