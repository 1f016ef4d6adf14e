"""Transformer shapes: the presets table, parameter counts, and shapes derived from a size.

Only decoder-only, Llama-style models are described (RMSNorm, GQA attention, SwiGLU MLP),
which covers the presets and what the calibration measured.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

PRESETS_FILE = Path(__file__).parent / "data" / "model_presets.yaml"


class Architecture(BaseModel):
    """The shape of a decoder-only transformer (field names follow docs/DESIGN.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    hidden_size: int = Field(gt=0, le=65536)
    num_layers: int = Field(gt=0, le=1024)
    num_attention_heads: int = Field(gt=0, le=1024)
    num_kv_heads: int = Field(gt=0, le=1024)
    intermediate_size: int = Field(gt=0, le=1 << 20)
    vocab_size: int = Field(gt=0, le=1 << 22)
    tie_embeddings: bool = False
    head_dim: Optional[int] = Field(None, gt=0, le=4096, description="Defaults to hidden_size / heads")
    attention_bias: bool = Field(False, description="q/k/v projections carry biases (Qwen2)")

    @model_validator(mode="after")
    def _heads_divide(self) -> "Architecture":
        if self.num_attention_heads % self.num_kv_heads:
            raise ValueError(
                f"num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                f"num_kv_heads ({self.num_kv_heads})")
        if self.head_dim is None and self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size ({self.hidden_size}) must divide by num_attention_heads "
                f"({self.num_attention_heads}) unless head_dim is given")
        return self

    @property
    def dim_head(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def q_dim(self) -> int:
        return self.num_attention_heads * self.dim_head

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.dim_head

    def layer_linear_shapes(self) -> dict[str, tuple[int, int]]:
        """(in, out) of each linear layer in one decoder block."""
        h = self.hidden_size
        return {
            "q_proj": (h, self.q_dim), "k_proj": (h, self.kv_dim), "v_proj": (h, self.kv_dim),
            "o_proj": (self.q_dim, h), "gate_proj": (h, self.intermediate_size),
            "up_proj": (h, self.intermediate_size), "down_proj": (self.intermediate_size, h),
        }

    @property
    def layer_params(self) -> int:
        linear = sum(i * o for i, o in self.layer_linear_shapes().values())
        bias = (self.q_dim + 2 * self.kv_dim) if self.attention_bias else 0
        return linear + bias + 2 * self.hidden_size  # two RMSNorm weights

    @property
    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def params(self) -> int:
        """Total parameters (a tied LM head shares the embedding)."""
        head = 0 if self.tie_embeddings else self.embedding_params
        return self.embedding_params + head + self.num_layers * self.layer_params + self.hidden_size


class Preset(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    source: str
    architecture: Architecture
    params: int
    aliases: tuple[str, ...] = ()


@functools.lru_cache(maxsize=1)
def presets() -> dict[str, Preset]:
    """Every preset by name and alias."""
    doc = yaml.safe_load(PRESETS_FILE.read_text(encoding="utf-8"))
    out: dict[str, Preset] = {}
    for name, row in doc["presets"].items():
        p = Preset(name=name, **row)
        for key in (name, *p.aliases):
            out[key] = p
    return out


def derive_architecture(params_b: float) -> Architecture:
    """A Llama-3-style shape with about ``params_b`` billion parameters.

    Documented rule (so a size-only profile is reproducible): head_dim 128, hidden size a
    multiple of 256, layers = hidden/128 (Llama-3-8B's aspect ratio), 8 KV heads (fewer when
    there are fewer heads), SwiGLU width 3.5 x hidden rounded to 256, vocabulary 128,256, untied
    embeddings. The hidden size is the one whose total parameter count is closest to the target.
    """
    target = params_b * 1e9
    best: Optional[Architecture] = None
    for h in range(256, 65536 + 1, 256):
        heads = max(1, h // 128)
        arch = Architecture(
            hidden_size=h, num_layers=max(1, round(h / 128)), num_attention_heads=heads,
            num_kv_heads=math.gcd(heads, 8), intermediate_size=int(round(3.5 * h / 256) * 256),
            vocab_size=128256, tie_embeddings=False, head_dim=128)
        if best is None or abs(arch.params - target) < abs(best.params - target):
            best = arch
        if arch.params > target * 1.5:
            break
    assert best is not None
    return best
