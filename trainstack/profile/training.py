"""The profile's ``model`` and ``training`` sections: what is trained (a preset, a Hugging Face
config, an architecture or a size) and how (method, precision, batch, parallel degrees, framework).
Field and cross-field rules that need only these sections; the profile as a whole is
``trainstack.profile.model``."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Literal, Optional, Union

from pydantic import Field, PrivateAttr, ValidationInfo, field_validator, model_validator

from ..models import Architecture, HfConfigError, derive_architecture, find_preset, load_hf_config
from .base import _Strict
from .kernels import Attention, Fp8Recipe, Sharding, kernel_problems


class ModelSpec(_Strict):
    """Exactly one of ``preset``, ``hf_config``, ``architecture`` or ``params_b``."""

    preset: Optional[str] = Field(None, description="A preset name (case-insensitive; a Hugging Face repo id "
                                                    "such as Qwen/Qwen2.5-7B-Instruct is accepted), e.g. llama-3-8b")
    hf_config: Optional[str] = Field(None, min_length=1, max_length=4096,
                                     description="A Hugging Face config.json, relative to the profile file")
    architecture: Optional[Architecture] = None
    params_b: Optional[float] = Field(None, gt=0, le=2000, description="Size in billions; shape derived")
    _hf_architecture: Optional[Architecture] = PrivateAttr(None)

    @field_validator("hf_config")
    @classmethod
    def _readable(cls, v: Optional[str], info: ValidationInfo) -> Optional[str]:
        if v is not None:
            read_hf_config(v, _base_dir(info))
        return v

    @model_validator(mode="after")
    def _exactly_one(self, info: ValidationInfo) -> "ModelSpec":
        given = [k for k in ("preset", "hf_config", "architecture", "params_b") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of preset, hf_config, architecture, params_b (got {given or 'none'})")
        if self.preset is not None and find_preset(self.preset) is None:
            raise ValueError(f"unknown preset {self.preset!r}")
        if self.hf_config is not None:
            self._hf_architecture = read_hf_config(self.hf_config, _base_dir(info))
        return self

    def resolved_architecture(self) -> Architecture:
        if self.architecture is not None:
            return self.architecture
        if self.preset is not None:
            preset = find_preset(self.preset)
            assert preset is not None  # checked when the profile was validated
            return preset.architecture
        if self.hf_config is not None:
            return self._hf_architecture or read_hf_config(self.hf_config, None)
        return derive_architecture(float(self.params_b))  # type: ignore[arg-type]

    @property
    def label(self) -> str:
        if self.preset:
            preset = find_preset(self.preset)
            return preset.name if preset else self.preset
        if self.hf_config:
            return f"{self.hf_config} (Hugging Face config)"
        if self.params_b is not None:
            return f"{self.params_b:g}B (derived shape)"
        return "custom architecture"


def _base_dir(info: ValidationInfo) -> Optional[Path]:
    ctx = info.context or {}
    base = ctx.get("profile_dir") if isinstance(ctx, dict) else None
    return Path(base) if base is not None else None


def read_hf_config(path: str, base: Optional[Path]) -> Architecture:
    """``path`` (relative to the profile's folder, else the working directory) read into a shape;
    every failure is a ValueError naming the file and the config key."""
    p = Path(path)
    if not p.is_absolute() and base is not None:
        p = base / p
    try:
        st = p.stat()
    except OSError:
        raise ValueError(f"{path}: config file not found (paths are relative to the profile file)") from None
    try:
        return _read_hf_cached(str(p.resolve()), st.st_mtime_ns, st.st_size)
    except HfConfigError as exc:
        raise ValueError(f"{path}: {exc}") from None


@functools.lru_cache(maxsize=64)
def _read_hf_cached(path: str, _mtime_ns: int, _size: int) -> Architecture:
    return load_hf_config(path)


class LoraSpec(_Strict):
    rank: int = Field(16, ge=1, le=1024)
    targets: Literal["attention", "all-linear"] = "attention"
    alpha: Optional[float] = Field(None, gt=0, description="Defaults to 2 x rank")


Method = Literal["full", "lora", "qlora", "pretrain"]
Precision = Literal["bf16", "bf16-mixed", "fp16-mixed", "fp8-mixed"]
#: The training stack that runs the job: it decides what is kept in memory and how fast it runs
#: (docs/sizing.md, "Frameworks"). hf = Transformers Trainer / TRL / peft / Accelerate / DeepSpeed
#: with HF models (axolotl, LLaMA-Factory and ms-swift run on it).
Framework = Literal["hf", "torchtune", "torchtitan", "megatron", "llm-foundry", "litgpt"]
#: How the loss is computed over the vocabulary: full logits upcast to fp32 (transformers), full logits
#: kept in bf16, in chunks (torchtune, litgpt), or in a fused kernel (Liger, flash-attn, Megatron).
Loss = Literal["full", "bf16", "chunked", "fused"]
Checkpointing = Union[bool, Literal["selective"]]


class TrainingSpec(_Strict):
    method: Method = "full"
    precision: Precision = "bf16-mixed"
    optimizer: Literal["adamw", "adamw-8bit", "sgd", "adafactor"] = "adamw"
    micro_batch_size: int = Field(1, ge=1, le=4096)
    sequence_length: int = Field(2048, ge=16, le=1 << 20)
    gradient_checkpointing: Checkpointing = Field(
        False, description="true (every layer), false, or selective (the attention/activation ops only)")
    lora: Optional[LoraSpec] = None
    zero_stage: int = Field(0, ge=0, le=3)
    tokens: Optional[float] = Field(None, gt=0, le=1e15, description="Total tokens to process")
    framework: Framework = Field("hf", description="The training stack (hf, torchtune, torchtitan, megatron, "
                                                   "llm-foundry, litgpt); sets what it keeps in memory and its speed")
    loss: Optional[Loss] = Field(None, description="full | bf16 | chunked | fused; default: the framework's")
    gradient_accumulation_steps: Optional[int] = Field(
        None, ge=1, le=65536, description="Micro-batches per optimizer step (default 1, or derived from "
                                          "global_batch_size)")
    global_batch_size: Optional[int] = Field(
        None, ge=1, le=1 << 24, description="Sequences per optimizer step over all data-parallel GPUs")
    expert_parallel: int = Field(1, ge=1, le=1024, description="GPUs the routed experts are split over (MoE)")
    tensor_parallel: Optional[int] = Field(
        None, ge=1, le=64, description="GPUs each layer's matrices are split over, inside a node (NVLink/NVSwitch); "
                                       "unset: the resolver chooses (megatron, torchtitan), else 1")
    pipeline_parallel: Optional[int] = Field(
        None, ge=1, le=256, description="Pipeline stages the layers are split into (micro-batches in flight from "
                                        "the batch settings); unset: the resolver chooses (megatron, torchtitan), else 1")
    context_parallel: Optional[int] = Field(
        None, ge=1, le=256, description="GPUs each sequence is split over (long contexts); unset: the resolver "
                                        "chooses (megatron, torchtitan), else 1")
    compile: Optional[bool] = Field(
        None, description="The stack compiles or fuses its element-wise kernels (torch.compile, torchtitan "
                          "compile.enable); default: the framework's")
    virtual_pipeline_stages: int = Field(
        1, ge=1, le=64, description="Model chunks per pipeline rank (interleaved 1F1B); 1: plain 1F1B")
    images_per_sample: int = Field(0, ge=0, le=1024, description="Images per sequence (vision-language models)")
    # issue 32 (trainstack/profile/kernels.py: which stack runs which, with sources)
    attention: Optional[Attention] = Field(None, description="flash | sdpa | eager; default: the framework's "
                                                             "(hf: sdpa)")
    fp8_recipe: Optional[Fp8Recipe] = Field(None, description="FP8 scaling: tensorwise (default) | rowwise; "
                                                              "precision fp8-mixed only")
    sharding: Optional[Sharding] = Field(None, description="full (default) | hybrid (HSDP: ZeRO-3 inside a node, "
                                                           "replicated across nodes)")

    @field_validator("attention", "fp8_recipe", "sharding")
    @classmethod
    def _kernel_runs_on_the_stack(cls, v: Optional[str], info: ValidationInfo) -> Optional[str]:
        d = info.data
        if v is None or "framework" not in d:
            return v
        for f, why in kernel_problems(d["framework"], d.get("precision", "bf16-mixed"), d.get("zero_stage", 0),
                                      **{info.field_name: v}):
            if f == info.field_name:
                raise ValueError(why)
        return v

    @model_validator(mode="after")
    def _lora_only_with_adapters(self) -> "TrainingSpec":
        if self.lora is not None and self.method not in ("lora", "qlora"):
            raise ValueError(f"a lora block is only valid with method lora or qlora, not {self.method!r}")
        if self.global_batch_size is not None and self.global_batch_size % self.micro_batch_size:
            raise ValueError(f"global_batch_size ({self.global_batch_size}) must be a multiple of micro_batch_size "
                             f"({self.micro_batch_size})")
        return self

    @property
    def adapters(self) -> Optional[LoraSpec]:
        """The LoRA settings in force (defaults when a LoRA method omits the block)."""
        if self.method in ("lora", "qlora"):
            return self.lora or LoraSpec()
        return None

    @property
    def checkpointing(self) -> Literal["none", "selective", "full"]:
        """Activation checkpointing as one word: none, selective, or full (every layer)."""
        if self.gradient_checkpointing == "selective":
            return "selective"
        return "full" if self.gradient_checkpointing else "none"

    @property
    def model_parallel(self) -> int:
        """GPUs one model replica spans with the degrees given (unset counts as 1)."""
        return (self.tensor_parallel or 1) * (self.pipeline_parallel or 1) * (self.context_parallel or 1)

    def data_parallel(self, gpus: int) -> int:
        """Data-parallel ranks on ``gpus`` GPUs with the degrees given (the batch is split over these)."""
        return max(1, int(gpus) // self.model_parallel)

    def accumulation_steps(self, data_parallel: int = 1) -> int:
        """Micro-batches per optimizer step on ``data_parallel`` ranks (given, or from global_batch_size)."""
        if self.gradient_accumulation_steps is not None:
            return self.gradient_accumulation_steps
        if self.global_batch_size is not None:
            return max(1, -(-self.global_batch_size // (self.micro_batch_size * max(1, data_parallel))))
        return 1

    def global_batch(self, data_parallel: int = 1) -> int:
        """Sequences per optimizer step over all data-parallel ranks."""
        return self.micro_batch_size * self.accumulation_steps(data_parallel) * max(1, data_parallel)
