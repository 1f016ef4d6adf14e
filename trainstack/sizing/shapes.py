"""Counts read off a model's shape: matmul parameters, LoRA adapter shapes, factored states.

Everything the memory and throughput models multiply by bytes or FLOPs starts here, so the two
models always agree on what a layer contains. Mixture-of-Experts models hold every expert (memory
counts :func:`total_matmul_params`) but a token passes through ``num_experts_per_token`` of them
(FLOPs and per-token traffic count :func:`active_matmul_params` and :func:`token_linear_shapes`).
"""

from __future__ import annotations

import functools
from typing import Optional

from ..models import Architecture
from ..profile import LoraSpec

ATTENTION_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP_TARGETS = ("gate_proj", "up_proj", "down_proj")
ALL_LINEAR_TARGETS = ATTENTION_TARGETS + MLP_TARGETS

#: (in, out, how many per layer on average): the linears a token passes through.
Shapes = tuple[tuple[int, int, float], ...]


def total_matmul_params(arch: Architecture) -> int:
    """Every decoder weight matrix, all experts included (what NF4 packs and autocast copies)."""
    return arch.matmul_params


def active_matmul_params(arch: Architecture) -> int:
    """Decoder weight matrices a token multiplies by (the routed experts it is sent to)."""
    return arch.active_matmul_params


@functools.lru_cache(maxsize=1024)
def layer_matmul_params(arch: Architecture) -> int:
    """Matmul weights of one decoder layer on average (all experts held)."""
    return arch.matmul_params // arch.num_layers


@functools.lru_cache(maxsize=1024)
def largest_layer_matmul_params(arch: Architecture) -> int:
    """The biggest layer's matmul weights (what ZeRO-3 gathers at once)."""
    attn = sum(i * o for i, o in arch.attention_shapes().values())
    dense = sum(i * o for i, o in arch.mlp_shapes().values()) if arch.dense_mlp_layers else 0
    moe = 0
    if arch.moe_layers:
        expert = sum(i * o for i, o in arch.mlp_shapes(arch.expert_width).values())
        shared = sum(i * o for i, o in arch.mlp_shapes(arch.shared_width).values())
        moe = arch.num_experts * expert + arch.num_shared_experts * shared + arch.hidden_size * arch.num_experts
    return attn + max(dense, moe)


def biggest_linear(arch: Architecture) -> int:
    """The largest single weight matrix (QLoRA dequantises one at a time)."""
    shapes = list(arch.layer_linear_shapes().values())
    if arch.is_moe:
        shapes += list(arch.mlp_shapes(arch.expert_width).values())
    return max(i * o for i, o in shapes)


def head_params(arch: Architecture) -> int:
    """The LM head's matmul weight (V x h), whether or not it is tied to the embedding."""
    return arch.vocab_size * arch.hidden_size


def _mlp_per_layer(arch: Architecture, active: bool) -> list[tuple[int, int, float]]:
    """MLP linears per layer on average: dense layers' MLP, MoE layers' experts and shared experts."""
    L = arch.num_layers
    out: list[tuple[int, int, float]] = []
    if arch.dense_mlp_layers:
        out += [(i, o, arch.dense_mlp_layers / L) for i, o in arch.mlp_shapes().values()]
    if arch.moe_layers:
        experts = arch.num_experts_per_token if active else arch.num_experts
        out += [(i, o, experts * arch.moe_layers / L) for i, o in arch.mlp_shapes(arch.expert_width).values()]
        if arch.num_shared_experts:
            out += [(i, o, arch.num_shared_experts * arch.moe_layers / L)
                    for i, o in arch.mlp_shapes(arch.shared_width).values()]
    return out


@functools.lru_cache(maxsize=1024)
def lora_layer_shapes(arch: Architecture, targets: str, active: bool = True) -> Shapes:
    """Adapted linears per layer: attention = q,k,v,o; all-linear adds the MLP (every expert of a MoE
    layer holds adapters; ``active`` counts only the experts a token is routed to)."""
    shapes = [(i, o, 1.0) for i, o in arch.attention_shapes().values()]
    if targets == "all-linear":
        shapes += _mlp_per_layer(arch, active)
    return tuple(shapes)


def lora_shapes(arch: Architecture, targets: str) -> tuple[tuple[int, int], ...]:
    """(in, out) of the adapted linears of one dense layer (kept for callers that need plain shapes)."""
    names = ATTENTION_TARGETS if targets == "attention" else ALL_LINEAR_TARGETS
    shapes = arch.layer_linear_shapes()
    return tuple(shapes[n] for n in names)


def lora_params(arch: Architecture, lora: Optional[LoraSpec], active: bool = False) -> int:
    """Adapter parameters: rank x (in + out) per adapted linear, every layer (peft's count);
    ``active`` counts the adapters one token uses."""
    if lora is None:
        return 0
    per_layer = sum(lora.rank * (i + o) * m for i, o, m in lora_layer_shapes(arch, lora.targets, active))
    return int(round(arch.num_layers * per_layer))


@functools.lru_cache(maxsize=1024)
def factored_state_elements(arch: Architecture) -> int:
    """Adafactor's second-moment size for full training: rows + columns per matrix, vectors whole."""
    h, L = arch.hidden_size, arch.num_layers
    matrices = L * sum(i + o for i, o in arch.attention_shapes().values())
    matrices += int(round(L * sum((i + o) * m for i, o, m in _mlp_per_layer(arch, active=False))))
    matrices += arch.moe_layers * (h + arch.num_experts)  # routers
    embeddings = (1 if arch.tie_embeddings else 2) * (arch.vocab_size + h)
    vectors = arch.norm_params + (L * (arch.q_dim + 2 * arch.kv_dim) if arch.attention_bias else 0)
    vision = arch.vision.params if arch.vision else 0  # counted whole (small)
    return matrices + embeddings + vectors + vision


def lora_factored_state_elements(arch: Architecture, lora: LoraSpec) -> int:
    """Adafactor's state over LoRA adapters: A is in x r, B is r x out."""
    r = lora.rank
    per_layer = sum(((i + r) + (r + o)) * m for i, o, m in lora_layer_shapes(arch, lora.targets, False))
    return int(round(arch.num_layers * per_layer))


def expert_params(arch: Architecture) -> int:
    """Routed-expert parameters of the whole model (what expert parallelism divides)."""
    return arch.expert_total_params


@functools.lru_cache(maxsize=1024)
def mlp_widths(arch: Architecture, active: bool = True) -> tuple[tuple[int, float], ...]:
    """(gated-MLP width, how many per layer on average) a token passes through: the dense MLP, its
    routed experts and the shared experts."""
    return tuple((o, m) for (i, o, m), name in zip(_mlp_per_layer(arch, active), _names(arch, active))
                 if name == "gate_proj")


def _names(arch: Architecture, active: bool) -> list[str]:
    n = len(_mlp_per_layer(arch, active)) // 3
    return list(MLP_TARGETS) * n


def moe_layer_fraction(arch: Architecture) -> float:
    return arch.moe_layers / arch.num_layers
