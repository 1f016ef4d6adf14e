"""Mixture-of-Experts compute at the size each expert really gets (issue 32).

A routed expert multiplies only the tokens its router sends it: with balanced routing, ``ep x T x k / E``
of them per expert on a GPU that holds ``E / ep`` experts (T tokens per GPU, k experts per token). Its
GEMMs are small, so each is timed on a roofline, the larger of its FLOPs at the tensor-core peak and its
operand bytes at HBM speed (the model torchao uses for its own GEMMs: pytorch/ao@36027d82d1ad
torchao/testing/training/roofline_utils.py get_individual_gemm_time_sympy, reads M K + K N and writes M N;
float8 operands are 1 byte, outputs bf16): a grouped GEMM over experts this small is memory-bound and a
dense-efficiency estimate is too fast. Routing is assumed balanced (the corpus's MoE runs force-balance
or aux-loss balance); imbalance is in the error bars, not here.

transformers' eager MoE blocks loop over the experts in Python (huggingface/transformers@002272831fba
src/transformers/models/mixtral/modeling_mixtral.py MixtralSparseMoeBlock.forward, ``for expert_idx in
range(self.num_experts)``; Qwen2-MoE and Qwen3-MoE the same): each expert a token reaches costs a fixed
number of kernel launches (constants.HF_EXPERT_LOOP_KERNELS), priced like a dense layer's kernels.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

from ..models import Architecture
from ..profile import TrainingSpec
from . import constants as K
from .flops import recompute_share
from .parallel import Stage


class ExpertWork(NamedTuple):
    """One micro-batch's routed-expert GEMMs on one GPU: their FLOPs (already in the layers' FLOPs), and
    the GEMM shapes with how many of each run: (M, K, N, count)."""

    flops: float
    gemms: tuple[tuple[float, int, int, float], ...]
    operand_bytes: float


def expert_work(arch: Architecture, t: TrainingSpec, tokens: float, stage: Optional[Stage], ep: int) -> Optional[ExpertWork]:
    """The routed experts' GEMMs of one micro-batch of ``tokens`` tokens on one GPU (None: a dense model)."""
    if not arch.is_moe or not arch.num_experts_per_token:
        return None
    E, k, h, w = arch.num_experts, arch.num_experts_per_token, arch.hidden_size, arch.expert_width
    tp = stage.tp if stage else 1
    layers = arch.moe_layers * ((stage.layers / arch.num_layers) if stage else 1.0)
    m = max(1.0, tokens * k * ep / E)               # tokens each local expert multiplies
    local = E / max(1, ep) * layers                 # expert instances on this GPU per micro-batch
    frozen = t.adapters is not None
    forwards = 1.0 + recompute_share(t)["linear"]
    backward = 1.0 if frozen else 2.0               # input gradients (+ weight gradients when trained)
    wt = w / tp
    # forward: gate and up (M x h x w), down (M x w x h); the backward repeats each as dgrad (and wgrad)
    per_pass = ((m, h, wt, 2.0), (m, wt, h, 1.0))
    gemms = tuple((mm, kk, nn, c * local * (forwards + backward)) for mm, kk, nn, c in per_pass)
    flops = sum(2.0 * mm * kk * nn * c for mm, kk, nn, c in gemms)
    return ExpertWork(flops, gemms, 1.0 if t.precision == "fp8-mixed" else 2.0)


def expert_roofline(work: ExpertWork, peak_tflops: float, bandwidth_gbs: float,
                    matmul_efficiency: float) -> tuple[float, float]:
    """(FLOPs of the compute-bound expert GEMMs, bytes of the memory-bound ones) at the fitted efficiencies
    in force: each GEMM shape takes the slower of the two."""
    compute_flops, memory_bytes = 0.0, 0.0
    eff_c = peak_tflops * 1e12 * matmul_efficiency
    eff_m = bandwidth_gbs * 1e9 * K.BANDWIDTH_EFFICIENCY
    for m, kk, n, count in work.gemms:
        fl = 2.0 * m * kk * n
        by = (m * kk + kk * n) * work.operand_bytes + m * n * 2.0
        if by / eff_m > fl / eff_c:
            memory_bytes += by * count
        else:
            compute_flops += fl * count
    return compute_flops, memory_bytes


def loop_layers(arch: Architecture, t: TrainingSpec, tokens: float, stage: Optional[Stage]) -> float:
    """transformers' per-expert loop, in dense-layer launch costs: the experts a micro-batch reaches per MoE
    layer (E (1 - (1 - k/E)^T) of them) x HF_EXPERT_LOOP_KERNELS / KERNELS_PER_LAYER (+ the recompute)."""
    if not arch.is_moe or t.framework != "hf":
        return 0.0
    E, k = arch.num_experts, arch.num_experts_per_token
    reached = E * (1.0 - (1.0 - k / E) ** max(1.0, tokens))
    layers = arch.moe_layers * ((stage.layers / arch.num_layers) if stage else 1.0)
    recompute = 1.0 + recompute_share(t)["linear"] / 3.0
    return layers * reached * K.HF_EXPERT_LOOP_KERNELS / K.KERNELS_PER_LAYER * recompute
