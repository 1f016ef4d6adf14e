"""Bytes the memory-bound kernels move through HBM: per token (norms, casts, rotary, SwiGLU's
products, the loss over the vocabulary, LoRA's casts), per micro-batch (autocast weight casts, NF4
unpacking) and per optimizer step (weights, gradients and states read and written once)."""

from __future__ import annotations

from typing import Optional

from ..models import Architecture
from ..profile import TrainingSpec
from .frameworks import LOSS_TRAFFIC, loss_mode
from .param_bytes import MIXED, adapter_bytes, param_bytes, trainable_params
from .parallel import Stage, shares
from .shapes import head_params, lora_layer_shapes, mlp_widths, moe_layer_fraction, total_matmul_params


def elementwise_bytes_per_token(arch: Architecture, t: TrainingSpec, stage: Optional[Stage] = None) -> float:
    """Bytes moved per token by memory-bound kernels (forward x 3 for forward + backward); on a
    pipeline ``stage`` its layers (and the loss on the last), per GPU of its tensor-parallel group."""
    lay = param_bytes(arch, t, 1)
    h, V, L = arch.hidden_size, arch.vocab_size, arch.num_layers
    a = lay.residual
    cast_in = 6 if a == 2 else 0                      # RMSNorm's upcast and downcast of a 16-bit input
    norm = 2 * cast_in + 8 + 4 + 8 + 2 * a            # + pow, mean, scale, weight: per element of h
    per_layer = 2 * norm * h
    per_layer += (38 if lay.autocast else 22) * (arch.q_dim + arch.kv_dim)  # rotary (fp32 under autocast)
    per_layer += 2 * (2 * a + 2) * h                  # two residual adds
    per_layer += sum(10 * w * m for w, m in mlp_widths(arch))  # SiLU and the gate * up product
    if arch.is_moe:                                   # router softmax/top-k, permute and un-permute
        k = arch.num_experts_per_token
        per_layer += moe_layer_fraction(arch) * (12 * arch.num_experts + 4 * 2 * k * h)
    if lay.autocast:
        per_layer += 5 * 6 * h                        # a 16-bit cast of the normed input per projection
    if t.adapters is not None:
        if adapter_bytes(t) == 4:                     # peft: fp32 cast, adapter, scale, add, downcast
            per_layer += sum((10 * i + 28 * o) * m for i, o, m in lora_layer_shapes(arch, t.adapters.targets))
        else:                                         # adapters in the model dtype: scale and add only
            per_layer += sum(10 * o * m for i, o, m in lora_layer_shapes(arch, t.adapters.targets))
    passes = 3 + (1 if t.checkpointing == "full" else 0)
    loss = LOSS_TRAFFIC[loss_mode(t)] * V             # upcast, log-softmax and its gradient over V
    if stage is None:
        return L * per_layer * passes + loss
    return (stage.layers * per_layer * passes + (loss if stage.last else 0.0)) / stage.tp


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
