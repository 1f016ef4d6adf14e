"""Activation bytes per token that one decoder layer (or the final norm, or the vision tower)
keeps for the backward, by checkpointing mode; counted tensor by tensor (docs/sizing.md)."""

from __future__ import annotations

from ..models import Architecture
from ..profile import LoraSpec, TrainingSpec
from . import constants as K
from .frameworks import attention_kind
from .param_bytes import ParamBytes
from .shapes import lora_layer_shapes, mlp_widths, moe_layer_fraction


def _attention_core(arch: Architecture, eager_keys: int = 0) -> float:
    """SDPA (flash) saves q, k, v and its output in 16 bits plus an fp32 log-sum-exp per head. Eager
    attention (``eager_keys``: the keys each query sees, the sequence) saves instead the keys and values
    repeat_kv expanded to every head, and per head and key softmax's fp32 output and its bf16 copy
    (constants.EAGER_SAVED_SCORE_BYTES; transformers LlamaAttention.forward)."""
    if not eager_keys:
        return 2 * (2 * arch.q_dim + 2 * arch.kv_dim) + 4 * arch.num_attention_heads
    return 2 * 4 * arch.q_dim + K.EAGER_SAVED_SCORE_BYTES * arch.num_attention_heads * eager_keys


def eager_keys(t: TrainingSpec) -> int:
    """The keys each query multiplies when attention is eager (the s x s matrix is kept), else 0."""
    return t.sequence_length if attention_kind(t) == "eager" else 0


def _mlp_full(arch: Architecture, lin_in: int) -> float:
    """SwiGLU keeps gate (for SiLU), act and up (for the product) and the product (down_proj's input),
    for every MLP a token passes through (MoE: its routed experts and the shared ones)."""
    return sum(m * (3 * 2 * w + lin_in * w) for w, m in mlp_widths(arch)) + _routing_bytes(arch)


def _routing_bytes(arch: Architecture) -> float:
    """MoE layers per token: fp32 router logits and probabilities (8 E), the token's copy sent to each
    routed expert and each expert's output kept for the weighted sum (2 x 2 k h). A hand count."""
    if not arch.is_moe:
        return 0.0
    k, h = arch.num_experts_per_token, arch.hidden_size
    return moe_layer_fraction(arch) * (8 * arch.num_experts + 4 * k * h)


def full_layer_bytes(arch: Architecture, lay: ParamBytes, keys: int = 0) -> float:
    """One decoder layer, every weight trainable, no checkpointing."""
    h, a, m = arch.hidden_size, lay.residual, lay.linear_input
    # RMSNorm keeps its fp32 input (for pow/mul) and the normalised tensor (for the weight's
    # gradient), in the residual dtype. Its output feeds the projections: one shared 16-bit tensor,
    # or, under autocast, one cast per consuming linear (3 for q/k/v, 2 for gate/up).
    norm = 4 * h + a * h
    consumers_attn, consumers_mlp = (3, 2) if lay.autocast else (1, 1)
    extra = K.AUTOCAST_KV_EXTRA_BYTES * arch.kv_dim if lay.autocast else 0
    return (2 * norm + (consumers_attn + consumers_mlp) * m * h
            + _attention_core(arch, keys) + _mlp_full(arch, m) + extra)


def lora_layer_bytes(arch: Architecture, lora: LoraSpec, first: bool = False, ab: int = K.ADAPTER_BYTES,
                     keys: int = 0) -> float:
    """One decoder layer with a frozen base and peft adapters (fp32) on the target linears.

    Frozen norms keep only their fp32 input; frozen linears keep nothing of their input; each
    adapter casts its input to fp32 and keeps that copy (for lora_A's gradient) plus lora_A's
    output. In the first layer without checkpointing nothing before the adapters needs a gradient.
    """
    h = arch.hidden_size
    adapters = sum(ab * (i + lora.rank) * m for i, _, m in lora_layer_shapes(arch, lora.targets))
    norms = (1 if first else 2) * 4 * h
    # gate, act and up kept by SiLU and the product; the frozen down_proj keeps nothing
    mlp = sum(m * 3 * 2 * w for w, m in mlp_widths(arch)) + _routing_bytes(arch)
    return norms + adapters + _attention_core(arch, keys) + mlp


def final_norm_bytes(arch: Architecture, t: TrainingSpec, lay: ParamBytes) -> int:
    h = arch.hidden_size
    if t.adapters is not None:
        return 4 * h  # frozen norm and frozen LM head: only the fp32 input
    return 4 * h + lay.residual * h + lay.linear_input * h


def selective_layer_bytes(arch: Architecture, t: TrainingSpec, lay: ParamBytes, full: float) -> float:
    """Selective activation checkpointing. torchtitan's op-level policy saves the attention (SDPA)
    outputs and every second matmul output and recomputes the rest: the layer input, the attention
    core and half the matmul outputs in 16 bits. Megatron/NeMo 'selective' recomputes only the
    attention softmax, which flash attention never keeps: the full set. A hand count."""
    if t.framework != "torchtitan":
        return full
    h, inter = arch.hidden_size, sum(w * m for w, m in mlp_widths(arch))
    outputs = 2 * (arch.q_dim + 2 * arch.kv_dim + 2 * h + 2 * inter)
    if t.precision == "fp8-mixed":
        outputs = 0  # Float8Linear runs torch._scaled_mm, which the save list (aten.mm) does not name
    return lay.residual * h + _attention_core(arch, eager_keys(t)) + outputs / 2


def checkpoint_bytes(arch: Architecture, lay: ParamBytes) -> int:
    """Gradient checkpointing keeps each layer's input (the residual stream)."""
    return lay.residual * arch.hidden_size


def vision_activation_bytes(arch: Architecture, t: TrainingSpec) -> float:
    """The vision tower's saved activations for ``images_per_sample`` images per sequence: per image
    token and layer about a pre-norm ViT layer's tensors (two LayerNorm inputs, q/k/v and the
    attention output, fc1's output and its GELU) in 16 bits. An approximation (labelled); none when
    the tower is frozen (LoRA): nothing before it needs a gradient."""
    v = arch.vision
    if v is None or not t.images_per_sample or t.adapters is not None:
        return 0.0
    per_token = 2 * (2 * v.hidden_size + 4 * v.hidden_size + 2 * v.intermediate_size)
    layers = v.num_layers if t.checkpointing != "full" else 1  # checkpointed: the layer inputs only (~)
    return float(per_token * layers * v.patches * t.images_per_sample * t.micro_batch_size)
