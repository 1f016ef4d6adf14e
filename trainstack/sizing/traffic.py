"""Bytes the memory-bound kernels move through HBM: per token (norms, casts, rotary, SwiGLU's
products, the loss over the vocabulary, LoRA's casts, eager attention's score matrix, FP8 casts), per
micro-batch (autocast weight casts, NF4 unpacking, FP8 weight casts) and per optimizer step (weights,
gradients and states read and written once).

Two counts of the element-wise work of a layer: op by op (eager PyTorch: every op reads its inputs and
writes its output), and compiled (``training.compile``; torch.compile/Inductor fuses each chain of
pointwise and reduction ops between two matmuls into one kernel, which reads the chain's inputs once and
writes its outputs once: Ansel et al., "PyTorch 2", ASPLOS 2024, sec. 4 on Inductor's fusion; matmuls
and attention stay library calls)."""

from __future__ import annotations

from typing import Optional

from ..models import Architecture
from ..profile import TrainingSpec
from . import constants as K
from .frameworks import LOSS_TRAFFIC, attention_kind, fused_kernels, loss_mode
from .param_bytes import MIXED, adapter_bytes, param_bytes, trainable_params
from .parallel import Stage, shares
from .shapes import (
    head_params, lora_layer_shapes, mlp_widths, moe_layer_fraction, total_matmul_params,
)


def _eager_layer_bytes(arch: Architecture, a: int, autocast: bool) -> float:
    """One layer's forward element-wise bytes per token, op by op (the H200 calibration's setting)."""
    h = arch.hidden_size
    cast_in = 6 if a == 2 else 0                      # RMSNorm's upcast and downcast of a 16-bit input
    norm = 2 * cast_in + 8 + 4 + 8 + 2 * a            # + pow, mean, scale, weight: per element of h
    per_layer = 2 * norm * h
    per_layer += (38 if autocast else 22) * (arch.q_dim + arch.kv_dim)  # rotary (fp32 under autocast)
    per_layer += 2 * (2 * a + 2) * h                  # two residual adds
    per_layer += sum(10 * w * m for w, m in mlp_widths(arch))  # SiLU and the gate * up product
    if autocast:
        per_layer += 5 * 6 * h                        # a 16-bit cast of the normed input per projection
    return per_layer


def _compiled_layer_bytes(arch: Architecture, a: int) -> float:
    """One layer's forward element-wise bytes per token when compiled: each fused region between matmuls
    reads its inputs and writes its outputs once. RMSNorm 1: the residual in, the normed input out ((a + 2) h);
    rotary on q and k (4 (q + kv)); the residual add fused with RMSNorm 2: residual and attention output in,
    residual and normed input out ((2a + 4) h); SwiGLU: gate and up in, the product out (6 I per MLP a token
    meets); the second residual add ((2a + 2) h). Autocast's per-projection casts fuse into the norm's output."""
    h = arch.hidden_size
    per_layer = (a + 2) * h + 4 * (arch.q_dim + arch.kv_dim) + (2 * a + 4) * h + (2 * a + 2) * h
    return per_layer + sum(6 * w * m for w, m in mlp_widths(arch))


def _fp8_token_bytes(arch: Architecture, t: TrainingSpec) -> float:
    """torchao float8 casts per token and layer (constants.FP8_CAST_BYTES): each linear's input in every
    forward (and recompute), its output gradient in the backward, made float8 (Transformer Engine fuses these
    into its kernels: none counted there)."""
    if t.precision != "fp8-mixed" or t.framework == "megatron":
        return 0.0
    fused = 1 if fused_kernels(t) else 0
    cast = K.FP8_CAST_BYTES[t.fp8_recipe or "tensorwise"]
    h = arch.hidden_size
    ins = sum(i for i, _ in arch.attention_shapes().values()) + sum(m * (2 * h + w) for w, m in mlp_widths(arch))
    outs = sum(o for _, o in arch.attention_shapes().values()) + sum(m * (2 * w + h) for w, m in mlp_widths(arch))
    forwards = 2 if t.checkpointing == "full" else 1
    return forwards * ins * cast["input"][fused] + outs * cast["grad_output"][fused]


def elementwise_bytes_per_token(arch: Architecture, t: TrainingSpec, stage: Optional[Stage] = None) -> float:
    """Bytes moved per token by memory-bound kernels (forward x 3 for forward + backward); on a
    pipeline ``stage`` its layers (and the loss on the last), per GPU of its tensor-parallel group."""
    lay = param_bytes(arch, t, 1)
    h, V, L = arch.hidden_size, arch.vocab_size, arch.num_layers
    a = lay.residual
    compiled = fused_kernels(t)
    per_layer = _compiled_layer_bytes(arch, a) if compiled else _eager_layer_bytes(arch, a, lay.autocast)
    if arch.is_moe:                                   # router softmax/top-k, permute and un-permute
        k = arch.num_experts_per_token
        per_layer += moe_layer_fraction(arch) * (12 * arch.num_experts + 4 * 2 * k * h)
    if t.adapters is not None:
        if adapter_bytes(t) == 4:                     # peft: fp32 cast, adapter, scale, add, downcast
            per_layer += sum((10 * i + 28 * o) * m for i, o, m in lora_layer_shapes(arch, t.adapters.targets))
        else:                                         # adapters in the model dtype: scale and add only
            per_layer += sum(10 * o * m for i, o, m in lora_layer_shapes(arch, t.adapters.targets))
    passes = 3 + (1 if t.checkpointing == "full" else 0)
    per_layer = per_layer * passes + _fp8_token_bytes(arch, t)
    if attention_kind(t) == "eager":                  # the s x s scores: forward, backward, recompute
        recompute = K.EAGER_SCORE_BYTES["forward"] if t.checkpointing == "full" else 0.0
        per_layer += arch.num_attention_heads * t.sequence_length * (
            K.EAGER_SCORE_BYTES["forward"] + K.EAGER_SCORE_BYTES["backward"] + recompute)
    loss = LOSS_TRAFFIC[loss_mode(t)] * V             # upcast, log-softmax and its gradient over V
    if stage is None:
        return L * per_layer + loss
    return (stage.layers * per_layer + (loss if stage.last else 0.0)) / stage.tp


def per_step_bytes(arch: Architecture, t: TrainingSpec, stage: Optional[Stage] = None) -> float:
    """Traffic paid once per micro-batch: autocast weight casts and NF4 unpacking; and once per
    optimizer step: the optimizer's reads and writes (see :func:`optimizer_bytes`)."""
    lay = param_bytes(arch, t, 1)
    sh = shares(arch, stage) if stage is not None else None
    body = total_matmul_params(arch) * (sh.matmul if sh else 1.0)
    head = head_params(arch) / (stage.tp if stage else 1) if (stage is None or stage.last) else 0.0
    total = 0.0
    if lay.autocast:
        casts = 1 + (1 if t.checkpointing == "full" else 0)
        total += 6.0 * (body * casts + head) + 6.0 * (body + head)
    if t.method == "qlora":
        total += 2.5 * body * (3 if t.checkpointing == "full" else 2)
    if t.precision == "fp8-mixed" and t.framework != "megatron":
        # torchao casts each weight to float8 once per micro-batch (and its transpose for the backward)
        cast = K.FP8_CAST_BYTES[t.fp8_recipe or "tensorwise"]["weight"][1 if fused_kernels(t) else 0]
        total += cast * body
    return total + optimizer_bytes(arch, t, stage)


def optimizer_bytes(arch: Architecture, t: TrainingSpec, stage: Optional[Stage] = None) -> float:
    """The optimizer step's traffic: weights, gradients and states read and written once (the
    stage's share of them on one GPU)."""
    lay = param_bytes(arch, t, 1)
    n = trainable_params(arch, t)
    if stage is not None:
        sh = shares(arch, stage)
        n = n * (sh.adapters if t.adapters is not None else sh.params)
    w = 4 if (t.adapters is not None or t.precision in MIXED) else 2  # bytes per trainable weight
    state = {"adamw": 2 * 2 * w, "adamw-8bit": 2 * 2, "sgd": 2 * w, "adafactor": 0}[t.optimizer]
    return n * (2 * w + lay.grad_per_param + state)
