"""One micro-batch's compute time on one GPU: matmul FLOPs at the tensor-core peak and element-wise
traffic at HBM speed, each at its fitted efficiency (constants.py; benchmarks/fit_calibration.py
fits them on these same terms)."""

from __future__ import annotations

import functools
from typing import NamedTuple, Optional

from ..catalog.models import GpuModel
from ..models import Architecture
from ..profile import TrainingSpec
from . import constants as K
from .flops import flop_parts
from .frameworks import transformer_engine
from .moe_time import ExpertWork, expert_roofline, expert_work, loop_layers
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
            labels.append("FP8: the decoder's matmuls at the FP8 peak with the 16-bit matmul efficiency, as torchao's "
                          "roofline has it (pct_achievable_gemm_tops the same for both), plus the float8 casts' "
                          "traffic (torchao roofline_utils); the LM head and attention stay 16-bit")
        else:
            labels.append(f"{gpu.name} has no FP8: matmuls counted at its 16-bit peak")
    return linear, base, labels


def matmul_efficiency(gpu: GpuModel) -> float:
    """The fitted share of the dense tensor peak the matmuls reach on this GPU generation."""
    return K.MATMUL_EFFICIENCY_BY_ARCH.get(gpu.architecture, K.MATMUL_EFFICIENCY_BY_ARCH["hopper"])


def fp8_matmul_efficiency(gpu: GpuModel) -> float:
    """The fitted share of the dense FP8 peak the FP8 matmuls reach (Hopper's for every FP8 GPU)."""
    return K.FP8_MATMUL_EFFICIENCY_BY_ARCH.get(gpu.architecture, K.FP8_MATMUL_EFFICIENCY_BY_ARCH["hopper"])


def attention_efficiency(gpu: GpuModel) -> float:
    """The fitted share of the dense peak flash attention reaches on this GPU generation."""
    return K.ATTENTION_EFFICIENCY_BY_ARCH.get(gpu.architecture, K.ATTENTION_EFFICIENCY_BY_ARCH["hopper"])


def te_attention_efficiency(gpu: GpuModel) -> float:
    """Transformer Engine's fused attention: its fitted share of the dense peak (Hopper); other
    generations run flash attention's."""
    return K.TE_ATTENTION_EFFICIENCY_BY_ARCH.get(gpu.architecture, attention_efficiency(gpu))


class Work(NamedTuple):
    """One micro-batch's work on one GPU of a stage, whatever the GPU (FLOPs and bytes, not seconds)."""

    layer_flops: float        # decoder matmuls (at the training precision's peak)
    bf16_flops: float         # LM head, vision tower and eager attention's matmuls (16-bit peak)
    attention_flops: float    # flash/SDPA attention, causal FLOPs
    micro_bytes: float        # element-wise traffic of the micro-batch
    optimizer: float          # the optimizer step's traffic (once per step)
    layers: int
    loop_layers: float        # transformers' per-expert loop, in dense-layer launch costs
    experts: Optional[ExpertWork]
    te: bool


@functools.lru_cache(maxsize=16384)
def stage_work(arch: Architecture, t: TrainingSpec, stage: Optional[Stage] = None, ep: int = 1,
               shard: int = 1) -> Work:
    """One micro-batch's work on one GPU of ``stage`` (``ep``: the expert-parallel degree in force;
    ``shard``: the ranks ZeRO shards over, whose optimizer step each updates its shard of)."""
    fl = flop_parts(arch, t)
    tokens = float(t.micro_batch_size * t.sequence_length)
    frac, tp, first, last = 1.0, 1, True, True
    if stage is not None:
        frac, tp, first, last = stage.layers / arch.num_layers, stage.tp, stage.first, stage.last
        tokens /= stage.cp
    layer_flops = fl["layers"] * frac / tp
    bf16 = ((fl["head"] if last else 0.0) + (fl["vision"] if first else 0.0) + fl["attention_gemm"] * frac) / tp
    attention = fl["attention"] * frac / tp
    layers = arch.num_layers if stage is None else stage.layers
    optimizer = optimizer_bytes(arch, t, stage)
    micro_bytes = tokens * elementwise_bytes_per_token(arch, t, stage) + per_step_bytes(arch, t, stage) - optimizer
    if t.zero_stage >= 1:
        optimizer /= max(1, shard)   # ZeRO-1 and up: each rank steps the states it holds
    return Work(tokens * layer_flops, tokens * bf16, tokens * attention, micro_bytes, optimizer, layers,
                loop_layers(arch, t, tokens, stage), expert_work(arch, t, tokens / tp, stage, ep),
                transformer_engine(t))


def step_terms(arch: Architecture, t: TrainingSpec, linear_tflops: float, attention_tflops: float,
               bandwidth_gbs: float, stage: Optional[Stage] = None, ep: int = 1,
               matmul_eff: Optional[float] = None, shard: int = 1) -> dict[str, float]:
    """One micro-batch's work at 100 % of the hardware (seconds), before the fitted efficiencies:
    ``linear`` matmuls (decoder layers, the LM head and eager attention's matmuls at the 16-bit peak),
    ``linear_fp8`` the decoder's matmuls at the FP8 peak when the job trains in FP8, ``attention`` (flash/SDPA attention's QK^T and AV), ``traffic``
    element-wise bytes (op by op, or compiled: traffic.py), ``layers`` (the fixed per-layer launch cost
    counts layers; transformers' per-expert loop adds to it), ``optimizer`` the optimizer step's traffic
    (once per step). Routed-expert GEMMs are timed on a roofline (moe_time.py): the memory-bound ones move
    to ``traffic``. On a pipeline ``stage`` (and its tensor/context split) the work of one GPU of it. The
    optimizer step's traffic is the rank's share of the states (all of them without ZeRO).
    benchmarks/fitting.py fits the efficiencies on these same terms."""
    w = stage_work(arch, t, stage, ep, shard)
    bw = bandwidth_gbs * 1e9
    layer_flops, expert_bytes = w.layer_flops, 0.0
    fp8 = t.precision == "fp8-mixed" and linear_tflops > attention_tflops   # the GPU has an FP8 peak
    if w.experts is not None:
        eff = K.MATMUL_EFFICIENCY if matmul_eff is None else matmul_eff
        if fp8:
            eff = K.FP8_MATMUL_EFFICIENCY_BY_ARCH["hopper"]
        compute, expert_bytes = expert_roofline(w.experts, linear_tflops, bandwidth_gbs, eff)
        layer_flops += compute - w.experts.flops
    fp8_seconds = layer_flops / (linear_tflops * 1e12) if fp8 else 0.0
    terms = {"linear": (0.0 if fp8 else layer_flops / (linear_tflops * 1e12)) + w.bf16_flops / (attention_tflops * 1e12),
             "linear_fp8": fp8_seconds,
             "attention": w.attention_flops / (attention_tflops * 1e12),
             "traffic": w.micro_bytes / bw, "layers": float(w.layers) + w.loop_layers, "optimizer": w.optimizer / bw,
             "te_attention": 0.0, "te_layers": 0.0}
    if w.te:
        # Transformer Engine fuses the element-wise work (norms, rotary, casts, SwiGLU) into its GEMM and
        # attention kernels: what is left of it is in a fixed per-layer cost of its own, and its fused
        # attention has its own efficiency (both fitted)
        terms.update(te_attention=terms["attention"], te_layers=terms["layers"], attention=0.0, traffic=0.0,
                     layers=0.0)
    terms["traffic"] += expert_bytes / bw
    return terms


def micro_seconds(terms: dict[str, float], matmul_eff: float, attention_eff: float,
                  te_attention_eff: Optional[float] = None, fp8_eff: Optional[float] = None) -> float:
    """A micro-batch's time from its terms and the fitted constants (the model the fit script fits)."""
    seconds = (terms["linear"] / matmul_eff + terms["attention"] / attention_eff
               + terms.get("linear_fp8", 0.0) / (fp8_eff or K.FP8_MATMUL_EFFICIENCY_BY_ARCH["hopper"])
               + terms["traffic"] / K.BANDWIDTH_EFFICIENCY + K.LAYER_OVERHEAD_SECONDS * terms["layers"])
    if terms.get("te_layers"):
        seconds += (terms["te_attention"] / (te_attention_eff or attention_eff)
                    + K.TE_LAYER_OVERHEAD_SECONDS * terms["te_layers"])
    return seconds
