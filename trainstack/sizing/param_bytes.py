"""Bytes per parameter one precision, method and ZeRO stage keep: weights, gradients, optimizer
states (with ZeRO's fp32 master copy), LoRA adapters, and the widths of the residual stream and of
saved matmul inputs. Memory and speed both read it (the optimizer step's traffic, gradient sync)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ..models import Architecture
from ..profile import TrainingSpec
from . import constants as K
from .frameworks import framework
from .shapes import factored_state_elements, lora_factored_state_elements, lora_params, total_matmul_params

MIXED = ("bf16-mixed", "fp16-mixed", "fp8-mixed")


@dataclass(frozen=True)
class ParamBytes:
    """Bytes per parameter or element for one precision/method/ZeRO combination."""

    weights: float          # total bytes of the held (base) weights
    quant_constants: float  # QLoRA blockwise constants
    grad_per_param: float   # bytes per trainable parameter
    state_bytes: float      # total optimizer-state bytes (incl. ZeRO's fp32 master copy)
    adapter_weights: float  # LoRA adapter weights
    residual: int           # bytes per element of the residual stream (fp32 under autocast)
    linear_input: int       # bytes per element of a saved matmul input (1 with FP8)
    autocast: bool          # per-op casts of activations and a cached 16-bit copy of each weight


@functools.lru_cache(maxsize=8192)
def trainable_params(arch: Architecture, t: TrainingSpec) -> int:
    return lora_params(arch, t.adapters) if t.adapters else arch.params


def _optimizer_bytes(arch: Architecture, t: TrainingSpec, state_elem_bytes: float) -> float:
    """Optimizer states over the trainable parameters (before any ZeRO sharding)."""
    n = trainable_params(arch, t)
    if t.optimizer == "adamw":
        return 2 * state_elem_bytes * n
    if t.optimizer == "adamw-8bit":
        return 2 * K.ADAM8BIT_BYTES_PER_STATE * n
    if t.optimizer == "sgd":
        return state_elem_bytes * n  # one momentum buffer
    elems = lora_factored_state_elements(arch, t.adapters) if t.adapters else factored_state_elements(arch)
    return 4.0 * elems  # adafactor: fp32 row and column statistics, no first moment


def adapter_bytes(t: TrainingSpec) -> int:
    """peft keeps LoRA adapters in fp32 on a bf16 base; torchtune and litgpt keep them in the model dtype."""
    return K.ADAPTER_BYTES if t.framework == "hf" else 2


@functools.lru_cache(maxsize=8192)
def param_bytes(arch: Architecture, t: TrainingSpec, dp: int) -> ParamBytes:
    p = arch.params
    mixed = t.precision in MIXED
    lin_in = 1 if t.precision == "fp8-mixed" else 2
    if t.adapters is not None:  # frozen 16-bit (or NF4) base; adapters in fp32 (peft) or bf16
        n = lora_params(arch, t.adapters)
        ab = adapter_bytes(t)
        residual = 2
        if t.method == "qlora":
            packed = total_matmul_params(arch)
            # peft's prepare_model_for_kbit_training casts every non-quantised parameter (embeddings,
            # LM head, norms) to fp32, so the residual stream runs in fp32 too
            upcast = framework(t).qlora_upcast
            weights = packed * K.NF4_BYTES_PER_PARAM + (p - packed) * (4 if upcast else 2)
            quant = packed * K.NF4_CONSTANT_BYTES_PER_PARAM
            residual = 4 if upcast else 2
        else:
            weights, quant = 2.0 * p, 0.0
        return ParamBytes(weights=weights, quant_constants=quant, grad_per_param=ab,
                       state_bytes=_optimizer_bytes(arch, t, ab),
                       adapter_weights=ab * n, residual=residual, linear_input=lin_in, autocast=False)
    if t.zero_stage >= 3 and mixed and framework(t).fsdp_fp32_params:
        # FSDP2 mixed precision (pytorch 01d5c2cc8ac53ec6f45d10e2b90f7387df1f1ac4
        # torch/distributed/fsdp/_fully_shard/_fsdp_api.py MixedPrecisionPolicy): the sharded parameters stay
        # in fp32 and are the optimizer's ("does not require any extra memory to keep a high-precision copy"),
        # cast to bf16 only when all-gathered; gradients are reduced in reduce_dtype (fp32) into fp32 shards.
        return ParamBytes(weights=4.0 * p, quant_constants=0.0, grad_per_param=4,
                       state_bytes=_optimizer_bytes(arch, t, 4), adapter_weights=0.0, residual=2,
                       linear_input=lin_in, autocast=False)
    if t.zero_stage >= 1:
        # DeepSpeed / ZeRO paper layout: 16-bit working weights and gradients; the fp32 master copy
        # (mixed precision) lives with the optimizer states and is sharded with them.
        master = 4.0 * p if mixed else 0.0
        return ParamBytes(weights=2.0 * p, quant_constants=0.0, grad_per_param=2,
                       state_bytes=master + _optimizer_bytes(arch, t, 4 if mixed else 2),
                       adapter_weights=0.0, residual=2, linear_input=lin_in, autocast=False)
    if mixed:  # torch autocast: fp32 weights, gradients and states; bf16 copies made per forward
        return ParamBytes(weights=4.0 * p, quant_constants=0.0, grad_per_param=4,
                       state_bytes=_optimizer_bytes(arch, t, 4), adapter_weights=0.0,
                       residual=4, linear_input=lin_in, autocast=True)
    return ParamBytes(weights=2.0 * p, quant_constants=0.0, grad_per_param=2,
                   state_bytes=_optimizer_bytes(arch, t, 2), adapter_weights=0.0,
                   residual=2, linear_input=2, autocast=False)
