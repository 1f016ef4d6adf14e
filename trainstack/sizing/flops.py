"""FLOPs per token of training: the matmuls with weights (from the exact shape: a token's routed
experts only, LoRA's adapters, the LM head, a vision tower) and causal attention, forward, backward
and what gradient checkpointing recomputes."""

from __future__ import annotations

import functools

from ..models import Architecture
from ..profile import TrainingSpec
from .frameworks import attention_kind
from .shapes import active_matmul_params, head_params, lora_params


def flops_per_token(arch: Architecture, t: TrainingSpec, recompute: bool = True) -> dict[str, float]:
    """FLOPs per token: ``linear`` (matmuls with weights) and ``attention`` (QK^T and AV).

    Forward is 2 FLOPs per weight a token meets (its routed experts only); backward 4 (input and
    weight gradients), only 2 for a frozen LoRA/QLoRA base (no weight gradient); gradient
    checkpointing recomputes the layers' forward (``recompute=False``: model FLOPs, what MFU counts).
    Causal attention costs 2 * s * q_dim per token and layer forward (half of the full square).
    """
    parts = flop_parts(arch, t, recompute)
    return {"linear": parts["layers"] + parts["head"] + parts["vision"],
            "attention": parts["attention"] + parts["attention_gemm"]}


def flop_parts(arch: Architecture, t: TrainingSpec, recompute: bool = True) -> dict[str, float]:
    """FLOPs per token by where they run: the decoder ``layers``, the LM ``head`` (last pipeline
    stage), the ``vision`` tower (first stage) and ``attention`` (in the layers; causal). With eager
    attention the hardware multiplies the full s x s square as two batched matmuls: ``attention_gemm``
    (and ``attention`` is then 0)."""
    return dict(_flop_parts(arch, t, recompute))


@functools.lru_cache(maxsize=4096)
def _flop_parts(arch: Architecture, t: TrainingSpec, recompute: bool) -> tuple[tuple[str, float], ...]:
    L, s = arch.num_layers, t.sequence_length
    body = active_matmul_params(arch)
    head = head_params(arch)
    adapters = lora_params(arch, t.adapters, active=True)
    attn_fwd = 2.0 * L * s * arch.q_dim
    frozen = t.adapters is not None
    layers = 2.0 * (body + adapters) + ((2.0 * body + 4.0 * adapters) if frozen else 4.0 * body)
    head_fl = 2.0 * head + (2.0 * head if frozen else 4.0 * head)
    attention = 3.0 * attn_fwd
    if recompute:
        share = recompute_share(t)
        layers += share["linear"] * 2.0 * (body + adapters)
        attention += share["attention"] * attn_fwd
    gemm = 0.0
    if recompute and attention_kind(t) == "eager":
        gemm, attention = 2.0 * attention, 0.0   # the full square: twice the causal FLOPs
    return (("layers", layers), ("head", head_fl), ("vision", vision_flops_per_token(arch, t)),
            ("attention", attention), ("attention_gemm", gemm))


def vision_flops_per_token(arch: Architecture, t: TrainingSpec) -> float:
    """The vision tower's matmuls for ``images_per_sample`` images, spread over the sequence's tokens:
    forward only when it is frozen (LoRA), forward and backward (x3) when trained. An approximation."""
    v = arch.vision
    if v is None or not t.images_per_sample:
        return 0.0
    h, i = v.hidden_size, v.intermediate_size
    matmul = v.num_layers * (4 * h * h + 2 * h * i) + v.projector_params
    passes = 1.0 if t.adapters is not None else 3.0
    return 2.0 * passes * matmul * v.patches * t.images_per_sample / t.sequence_length


def recompute_share(t: TrainingSpec) -> dict[str, float]:
    """How much of the layers' forward is recomputed: all of it with full checkpointing; with
    selective checkpointing, torchtitan's op-level policy recomputes every second matmul (it saves
    the attention outputs), Megatron's recomputes only the attention softmax (flash attention
    recomputes that in its backward anyway)."""
    if t.checkpointing == "full":
        return {"linear": 1.0, "attention": 1.0}
    if t.checkpointing == "selective" and t.framework == "torchtitan":
        # FP8 matmuls (torch._scaled_mm) are not on the save list: all of them are recomputed
        return {"linear": 1.0 if t.precision == "fp8-mixed" else 0.5, "attention": 0.0}
    return {"linear": 0.0, "attention": 0.0}
