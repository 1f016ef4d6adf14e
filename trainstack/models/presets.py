"""Named shapes of open models (data/model_presets.yaml) and the shape derived from a size alone.

Preset names are case-insensitive and accept the Hugging Face repository id
(``Qwen/Qwen2.5-7B-Instruct``) and the ``-instruct``/``-it``/``-chat``/``-base`` variants of the
same shape: fine-tuned variants share the base model's architecture.
"""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path
from typing import Optional

from pydantic import BaseModel, ConfigDict, Field

from ..datafile import load_data_yaml
from .architecture import Architecture

PRESETS_FILE = Path(__file__).resolve().parents[1] / "data" / "model_presets.yaml"

#: Name parts that mark a fine-tuned or re-released variant of the same shape (dropped for lookup),
#: besides release dates such as ``2407`` or ``2507``.
VARIANT_WORDS = frozenset({"instruct", "chat", "base", "it", "hf", "thinking"})


class PublishedCount(BaseModel):
    """The parameter count a model's publisher states, with where it is stated."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    total: float = Field(gt=0)
    active: Optional[float] = Field(None, gt=0, description="MoE: parameters per token, as published")
    active_excludes_embedding: bool = Field(
        False, description="The publisher counts active parameters without the input embedding (gpt-oss)")
    source: str
    quote: str


class Preset(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    source: str = Field(description="The config.json the shape was read from (URL; where it was read)")
    architecture: Architecture
    published: PublishedCount
    aliases: tuple[str, ...] = ()


def normalize(name: str) -> str:
    """The lookup key of a preset name: lower case, no organisation, no variant suffix."""
    key = name.strip().lower()
    if "/" in key:
        key = key.rsplit("/", 1)[1]
    key = key.replace("_", "-").replace(" ", "-")
    key = re.sub(r"^meta-llama-", "llama-", key)
    parts = [w for w in key.split("-") if w not in VARIANT_WORDS and not re.fullmatch(r"2[0-9]{3}", w)]
    key = "-".join(parts) or key
    return key


@functools.lru_cache(maxsize=1)
def presets() -> dict[str, Preset]:
    """Every preset by its name and aliases (as written in the data file)."""
    doc = load_data_yaml(PRESETS_FILE)
    out: dict[str, Preset] = {}
    for name, row in doc["presets"].items():
        p = Preset(name=name, **row)
        for key in (name, *p.aliases):
            out[key] = p
    return out


@functools.lru_cache(maxsize=1)
def _index() -> dict[str, Preset]:
    out: dict[str, Preset] = {}
    for key, p in presets().items():
        norm = normalize(key)
        if norm in out and out[norm].name != p.name:
            raise ValueError(f"preset names {out[norm].name!r} and {p.name!r} normalise to the same key {norm!r}")
        out[norm] = p
    return out


def find_preset(name: str) -> Optional[Preset]:
    """The preset ``name`` denotes (case-insensitive, HF ids and variant suffixes accepted), or None."""
    return _index().get(normalize(name))


def preset_names() -> list[str]:
    """Canonical preset names, sorted."""
    return sorted({p.name for p in presets().values()})


@functools.lru_cache(maxsize=1024)
def derive_architecture(params_b: float) -> Architecture:
    """A Llama-3-style shape with about ``params_b`` billion parameters.

    Documented rule (so a size-only profile is reproducible): head_dim 128, hidden size a
    multiple of 256, layers = hidden/128 (Llama-3-8B's aspect ratio), 8 KV heads (fewer when
    there are fewer heads), SwiGLU width 3.5 x hidden rounded to 256, vocabulary 128,256, untied
    embeddings. The hidden size is the one whose total parameter count is closest to the target.
    Cached: the search builds up to ~250 shapes and the resolver asks for the architecture of every
    candidate it weighs (benchmarks/size_only_speed.py: a 430B size-only profile validates in 0.9 s
    cached, 13.9 s uncached).
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
