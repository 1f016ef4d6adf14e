"""The shape of a decoder-only transformer: dense or Mixture-of-Experts, with an optional vision tower.

One model covers the families teams fine-tune today (Llama, Mistral, Qwen2/2.5/3, Gemma 2/3, Phi-3/4,
Mixtral, Qwen2-MoE, Qwen3-MoE, gpt-oss): RMSNorm, GQA attention, a gated MLP (SwiGLU or GeGLU, the
same three matrices) and, in MoE layers, routed experts of their own width, optional shared experts
and a linear router. Parameter counts follow the modules transformers builds (``modeling_*.py``).

Field names are trainstack's (docs/DESIGN.md); Hugging Face's key names are accepted as aliases
(``num_hidden_layers``, ``num_key_value_heads``, ``tie_word_embeddings``, ``num_local_experts`` ...).
"""

from __future__ import annotations

import functools
from typing import Any, Optional

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, StrictInt, model_validator

#: trainstack field -> the Hugging Face config keys that mean the same (first one is HF's main name).
HF_ALIASES: dict[str, tuple[str, ...]] = {
    "num_layers": ("num_hidden_layers",),
    "num_kv_heads": ("num_key_value_heads",),
    "tie_embeddings": ("tie_word_embeddings",),
    "num_experts": ("num_local_experts", "n_routed_experts"),
    "num_experts_per_token": ("num_experts_per_tok", "experts_per_token"),
    "expert_intermediate_size": ("moe_intermediate_size",),
    "num_shared_experts": ("n_shared_experts",),
    "first_dense_layers": ("first_k_dense_replace",),
    "dense_layers": ("mlp_only_layers",),
    "moe_layer_step": ("decoder_sparse_step",),
}


def _field(name: str, default: Any, **kw: Any) -> Any:
    aliases = HF_ALIASES.get(name, ())
    if aliases:
        kw["validation_alias"] = AliasChoices(name, *aliases)
    return Field(default, **kw)


class VisionTower(BaseModel):
    """A ViT image encoder (CLIP/SigLIP style) and the projector into the language model.

    Counted from a Hugging Face ``vision_config``: patch embedding, position embeddings, encoder
    layers (q/k/v/o and fc1/fc2 with biases, two LayerNorms), a final LayerNorm; the projector's
    parameters are computed by the family's mapping (trainstack/models/hf_config.py).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    hidden_size: int = Field(gt=0, le=65536)
    intermediate_size: int = Field(gt=0, le=1 << 20)
    num_layers: int = Field(gt=0, le=512)
    patch_size: int = Field(gt=0, le=1024)
    image_size: int = Field(gt=0, le=65536)
    num_channels: int = Field(3, gt=0, le=64)
    class_token: bool = Field(False, description="CLIP prepends a class token (and a pre-LayerNorm)")
    projector_params: int = Field(0, ge=0, description="Parameters of the projector into the language model")
    tokens_per_image: int = Field(gt=0, le=1 << 20, description="Image tokens the language model sees per image")

    @property
    def patches(self) -> int:
        return (self.image_size // self.patch_size) ** 2

    @property
    def params(self) -> int:
        h, i = self.hidden_size, self.intermediate_size
        layer = 4 * (h * h + h) + (h * i + i) + (i * h + h) + 2 * 2 * h
        positions = self.patches + (1 if self.class_token else 0)
        embed = self.num_channels * self.patch_size ** 2 * h + (0 if self.class_token else h) + positions * h
        embed += (h + 2 * h) if self.class_token else 0  # class embedding and pre-LayerNorm
        return embed + self.num_layers * layer + 2 * h + self.projector_params


class Architecture(BaseModel):
    """A decoder-only transformer (field names follow docs/DESIGN.md; HF key names are aliases)."""

    # strict: true is not 1 KV head and "4096" is not a width (a profile's model.architecture, an HF config)
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, strict=True)

    hidden_size: int = Field(gt=0, le=65536)
    num_layers: int = _field("num_layers", ..., gt=0, le=1024)
    num_attention_heads: int = Field(gt=0, le=1024)
    num_kv_heads: int = _field("num_kv_heads", ..., gt=0, le=1024)
    intermediate_size: int = Field(gt=0, le=1 << 20, description="Dense MLP width (Mixtral: the expert width)")
    vocab_size: int = Field(gt=0, le=1 << 22)
    tie_embeddings: bool = _field("tie_embeddings", False)
    head_dim: Optional[int] = Field(None, gt=0, le=4096, description="Defaults to hidden_size / heads")
    attention_bias: bool = Field(False, description="q/k/v projections carry biases (Qwen2)")
    attention_output_bias: bool = Field(False, description="o_proj carries a bias (Llama attention_bias, gpt-oss)")
    mlp_bias: bool = Field(False, description="Dense MLP projections carry biases")
    qk_norm: bool = Field(False, description="RMSNorm over q and k per head (Qwen3, Gemma 3)")
    norms_per_layer: int = Field(2, ge=1, le=4, description="RMSNorms per decoder layer (Gemma 2/3: 4)")
    attention_sinks: bool = Field(False, description="A learned sink logit per head (gpt-oss)")
    # ---- Mixture-of-Experts ---------------------------------------------------------------------
    num_experts: int = _field("num_experts", 0, ge=0, le=4096, description="Routed experts per MoE layer (0: dense)")
    num_experts_per_token: int = _field("num_experts_per_token", 0, ge=0, le=4096)
    expert_intermediate_size: Optional[int] = _field(
        "expert_intermediate_size", None, gt=0, le=1 << 20, description="Defaults to intermediate_size")
    num_shared_experts: int = _field("num_shared_experts", 0, ge=0, le=64)
    shared_expert_intermediate_size: Optional[int] = Field(
        None, gt=0, le=1 << 20, description="Width of one shared expert; defaults to the expert width")
    shared_expert_gate: bool = Field(False, description="A sigmoid gate h->1 on the shared expert (Qwen2-MoE)")
    expert_bias: bool = Field(False, description="Expert projections carry biases (gpt-oss)")
    router_bias: bool = Field(False, description="The router carries a bias (gpt-oss)")
    first_dense_layers: int = _field("first_dense_layers", 0, ge=0, le=1024,
                                     description="The first k layers keep a dense MLP (DeepSeek)")
    dense_layers: tuple[StrictInt, ...] = _field("dense_layers", (), strict=False,
                                                 description="Layer indices with a dense MLP (Qwen)")
    moe_layer_step: int = _field("moe_layer_step", 1, ge=1, le=1024,
                                 description="Every n-th layer is MoE (Qwen decoder_sparse_step)")
    # ---- vision-language -------------------------------------------------------------------------
    vision: Optional[VisionTower] = None

    @model_validator(mode="before")
    @classmethod
    def _one_name_per_field(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name, aliases in HF_ALIASES.items():
                given = [k for k in (name, *aliases) if k in data]
                if len(given) > 1:
                    raise ValueError(f"{' and '.join(given)} name the same field ({name}); give one")
        return data

    @model_validator(mode="after")
    def _consistent(self) -> "Architecture":
        if self.num_attention_heads % self.num_kv_heads:
            raise ValueError(
                f"num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                f"num_kv_heads ({self.num_kv_heads})")
        if self.head_dim is None and self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size ({self.hidden_size}) must divide by num_attention_heads "
                f"({self.num_attention_heads}) unless head_dim is given")
        if self.num_experts:
            if not 1 <= self.num_experts_per_token <= self.num_experts:
                raise ValueError(f"num_experts_per_token ({self.num_experts_per_token}) must be 1 to "
                                 f"num_experts ({self.num_experts})")
            if self.moe_layers == 0:
                raise ValueError("num_experts is set but no layer is a MoE layer (first_dense_layers, "
                                 "dense_layers, moe_layer_step)")
        elif self.num_experts_per_token or self.num_shared_experts or self.expert_intermediate_size:
            raise ValueError("expert fields (num_experts_per_token, expert_intermediate_size, "
                             "num_shared_experts) need num_experts > 0")
        bad = [i for i in self.dense_layers if not 0 <= i < self.num_layers]
        if bad:
            raise ValueError(f"dense_layers {bad} are outside 0..{self.num_layers - 1}")
        return self

    # ---- shape ------------------------------------------------------------------------------------

    @property
    def dim_head(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def q_dim(self) -> int:
        return self.num_attention_heads * self.dim_head

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.dim_head

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def expert_width(self) -> int:
        return self.expert_intermediate_size or self.intermediate_size

    @property
    def shared_width(self) -> int:
        return self.shared_expert_intermediate_size or self.expert_width

    def is_moe_layer(self, index: int) -> bool:
        """transformers' rule: not in ``mlp_only_layers``, past ``first_k_dense_replace``, and
        ``(index + 1) % decoder_sparse_step == 0``."""
        return (self.is_moe and index >= self.first_dense_layers and index not in self.dense_layers
                and (index + 1) % self.moe_layer_step == 0)

    @property
    def moe_layers(self) -> int:
        return _moe_layer_count(self)

    @property
    def dense_mlp_layers(self) -> int:
        return self.num_layers - self.moe_layers

    def attention_shapes(self) -> dict[str, tuple[int, int]]:
        """(in, out) of each attention projection."""
        h = self.hidden_size
        return {"q_proj": (h, self.q_dim), "k_proj": (h, self.kv_dim), "v_proj": (h, self.kv_dim),
                "o_proj": (self.q_dim, h)}

    def mlp_shapes(self, width: Optional[int] = None) -> dict[str, tuple[int, int]]:
        """(in, out) of a gated MLP's three projections (a dense MLP, or one expert with ``width``)."""
        h, i = self.hidden_size, width or self.intermediate_size
        return {"gate_proj": (h, i), "up_proj": (h, i), "down_proj": (i, h)}

    def layer_linear_shapes(self) -> dict[str, tuple[int, int]]:
        """Attention projections and a *dense* MLP (LoRA targets, the dense layer's matmuls)."""
        return {**self.attention_shapes(), **self.mlp_shapes()}

    # ---- parameter counts -------------------------------------------------------------------------

    @property
    def attention_params(self) -> int:
        """One layer's attention: projections, biases, q/k norms, sinks."""
        p = sum(i * o for i, o in self.attention_shapes().values())
        p += (self.q_dim + 2 * self.kv_dim) if self.attention_bias else 0
        p += self.hidden_size if self.attention_output_bias else 0
        p += 2 * self.dim_head if self.qk_norm else 0
        p += self.num_attention_heads if self.attention_sinks else 0
        return p

    def _mlp_params(self, width: int, bias: bool) -> int:
        h = self.hidden_size
        return 3 * h * width + ((2 * width + h) if bias else 0)

    @property
    def dense_mlp_params(self) -> int:
        return self._mlp_params(self.intermediate_size, self.mlp_bias)

    @property
    def expert_params(self) -> int:
        """One routed expert."""
        return self._mlp_params(self.expert_width, self.expert_bias)

    @property
    def shared_params(self) -> int:
        """The shared experts of one MoE layer, with their gate."""
        gate = self.hidden_size if self.shared_expert_gate else 0
        return self.num_shared_experts * self._mlp_params(self.shared_width, False) + gate

    @property
    def router_params(self) -> int:
        return self.hidden_size * self.num_experts + (self.num_experts if self.router_bias else 0)

    @property
    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def head_params(self) -> int:
        """The untied LM head's own parameters (0 when tied to the embedding)."""
        return 0 if self.tie_embeddings else self.embedding_params

    @property
    def norm_params(self) -> int:
        return self.num_layers * self.norms_per_layer * self.hidden_size + self.hidden_size

    @property
    def expert_total_params(self) -> int:
        """Every routed expert of every MoE layer (what expert parallelism divides)."""
        return self.moe_layers * self.num_experts * self.expert_params

    @property
    def text_params(self) -> int:
        return _text_params(self)

    def _count_text_params(self) -> int:
        L = self.num_layers
        moe = self.moe_layers * (self.num_experts * self.expert_params + self.shared_params + self.router_params)
        return (self.embedding_params + self.head_params + self.norm_params + L * self.attention_params
                + self.dense_mlp_layers * self.dense_mlp_params + moe)

    @property
    def params(self) -> int:
        """Total parameters (a tied LM head shares the embedding; a vision tower included)."""
        return _params(self)

    @property
    def active_params(self) -> int:
        """Parameters one token uses, counted as model cards count them (embedding and LM head
        included; only ``num_experts_per_token`` routed experts); the total for a dense model."""
        idle = self.moe_layers * (self.num_experts - self.num_experts_per_token) * self.expert_params
        return self.params - idle

    # ---- matmul weights (what FLOPs, NF4 packing and autocast copies act on) -----------------------

    @property
    def matmul_params(self) -> int:
        """Every decoder weight matrix, all experts included (biases, norms, embeddings excluded)."""
        return _matmul_params(self)

    def _count_matmul_params(self) -> int:
        attn = sum(i * o for i, o in self.attention_shapes().values())
        dense = sum(i * o for i, o in self.mlp_shapes().values())
        expert = sum(i * o for i, o in self.mlp_shapes(self.expert_width).values())
        shared = self.num_shared_experts * sum(i * o for i, o in self.mlp_shapes(self.shared_width).values())
        router = self.hidden_size * self.num_experts
        return (self.num_layers * attn + self.dense_mlp_layers * dense
                + self.moe_layers * (self.num_experts * expert + shared + router))

    @property
    def active_matmul_params(self) -> int:
        """Decoder weight matrices one token multiplies by (k routed experts per MoE layer)."""
        expert = sum(i * o for i, o in self.mlp_shapes(self.expert_width).values())
        return self.matmul_params - self.moe_layers * (self.num_experts - self.num_experts_per_token) * expert


@functools.lru_cache(maxsize=4096)
def _text_params(arch: Architecture) -> int:
    return arch._count_text_params()


@functools.lru_cache(maxsize=4096)
def _params(arch: Architecture) -> int:
    return arch.text_params + (arch.vision.params if arch.vision else 0)


@functools.lru_cache(maxsize=4096)
def _matmul_params(arch: Architecture) -> int:
    return arch._count_matmul_params()


@functools.lru_cache(maxsize=4096)
def _moe_layer_count(arch: Architecture) -> int:
    return sum(1 for i in range(arch.num_layers) if arch.is_moe_layer(i))
