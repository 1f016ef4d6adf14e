"""Counts read off a model's shape: matmul parameters, LoRA adapter shapes, factored states.

Everything the memory and throughput models multiply by bytes or FLOPs starts here, so the two
models always agree on what a layer contains.
"""

from __future__ import annotations

import functools
from typing import Optional

from ..architecture import Architecture
from ..profile import LoraSpec

ATTENTION_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")
ALL_LINEAR_TARGETS = ATTENTION_TARGETS + ("gate_proj", "up_proj", "down_proj")


@functools.lru_cache(maxsize=1024)
def layer_matmul_params(arch: Architecture) -> int:
    """Weights of one decoder block's seven linear layers (what autocast copies and NF4 packs)."""
    return sum(i * o for i, o in arch.layer_linear_shapes().values())


def head_params(arch: Architecture) -> int:
    """The LM head's matmul weight (V x h), whether or not it is tied to the embedding."""
    return arch.vocab_size * arch.hidden_size


@functools.lru_cache(maxsize=1024)
def lora_shapes(arch: Architecture, targets: str) -> tuple[tuple[int, int], ...]:
    """(in, out) of every adapted linear in one layer: attention = q,k,v,o; all-linear adds the MLP."""
    names = ATTENTION_TARGETS if targets == "attention" else ALL_LINEAR_TARGETS
    shapes = arch.layer_linear_shapes()
    return tuple(shapes[n] for n in names)


def lora_params(arch: Architecture, lora: Optional[LoraSpec]) -> int:
    """Adapter parameters: rank x (in + out) per adapted linear, every layer (peft's count)."""
    if lora is None:
        return 0
    return arch.num_layers * sum(lora.rank * (i + o) for i, o in lora_shapes(arch, lora.targets))


@functools.lru_cache(maxsize=1024)
def factored_state_elements(arch: Architecture) -> int:
    """Adafactor's second-moment size for full training: rows + columns per matrix, vectors whole."""
    h, layers = arch.hidden_size, arch.num_layers
    matrices = layers * sum(i + o for i, o in arch.layer_linear_shapes().values())
    embeddings = (1 if arch.tie_embeddings else 2) * (arch.vocab_size + h)
    vectors = (2 * layers + 1) * h + (layers * (arch.q_dim + 2 * arch.kv_dim) if arch.attention_bias else 0)
    return matrices + embeddings + vectors


def lora_factored_state_elements(arch: Architecture, lora: LoraSpec) -> int:
    """Adafactor's state over LoRA adapters: A is in x r, B is r x out."""
    r = lora.rank
    return arch.num_layers * sum((i + r) + (r + o) for i, o in lora_shapes(arch, lora.targets))
