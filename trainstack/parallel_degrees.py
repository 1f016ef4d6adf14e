"""The parallel degrees a job may state: which ones each training stack runs, and which layouts a
model can be split into.

Pure rules over plain values, below both ``trainstack.profile`` (which refuses a stated degree at
validate) and ``trainstack.sizing`` (which sizes layouts and searches the unset degrees): neither
package is imported here, so the profile's validator and the sizing model share one rule book
without an import circle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Protocol

from .models import Architecture

#: Degrees a layout has, by the profile field that sets them.
DEGREE_FIELDS = {"tensor": "tensor_parallel", "pipeline": "pipeline_parallel", "context": "context_parallel",
                 "expert": "expert_parallel"}


@dataclass(frozen=True)
class Layout:
    """How ``world`` GPUs split one job. ``vp``: model chunks per pipeline rank (interleaved 1F1B);
    ``replicas``: hybrid sharding (HSDP), the dp x cp ranks split into this many replicas, each sharding
    the weights ZeRO-3 style over its ``shard`` ranks (PyTorch FSDP HYBRID_SHARD: shard inside a node,
    replicate across; torchtitan dp_replicate x dp_shard)."""

    tp: int = 1
    pp: int = 1
    cp: int = 1
    dp: int = 1
    ep: int = 1
    vp: int = 1
    replicas: int = 1

    @property
    def world(self) -> int:
        return self.tp * self.pp * self.cp * self.dp

    @property
    def model_parallel(self) -> int:
        """GPUs one model replica is spread over (tensor x pipeline x context)."""
        return self.tp * self.pp * self.cp

    @property
    def shard(self) -> int:
        """Ranks ZeRO/FSDP shards the weights over: those holding the same weights (dp x cp), or, with hybrid
        sharding, one replica's share of them."""
        return self.dp * self.cp // max(1, self.replicas)

    @property
    def same_weights(self) -> int:
        """Ranks holding the same weights, whose gradients are reduced together (dp x cp)."""
        return self.dp * self.cp

    @property
    def trivial(self) -> bool:
        return self.tp == self.pp == self.cp == 1

    @property
    def label(self) -> str:
        parts = [f"TP {self.tp}"] if self.tp > 1 else []
        if self.pp > 1:
            parts.append(f"PP {self.pp}" + (f" (x{self.vp} virtual)" if self.vp > 1 else ""))
        if self.cp > 1:
            parts.append(f"CP {self.cp}")
        if self.ep > 1:
            parts.append(f"EP {self.ep}")
        parts.append(f"DP {self.dp}" + (f" (HSDP {self.replicas} x {self.shard})" if self.replicas > 1 else ""))
        return " x ".join(parts)


def layout_problems(arch: Architecture, lay: Layout, sequence_length: int,
                    gpus: Optional[int] = None, even_stages: bool = True) -> list[tuple[str, str]]:
    """(degree field, why) for every way ``lay`` cannot run: Megatron-LM core_v0.14.0's own checks
    (transformer_config.py: heads and query groups divisible by tp; arguments.py: world size
    divisible by tp x pp x cp, layers by pp and layers per stage by the virtual stages, sequence by
    2 x cp). ``even_stages`` False (torchtitan, which splits layers unevenly) only needs a layer per
    (virtual) stage."""
    out: list[tuple[str, str]] = []
    full = lay
    if lay.pp > 1 and not even_stages:
        if lay.pp * lay.vp > arch.num_layers:
            out.append(("pipeline_parallel", f"pipeline_parallel {lay.pp} x virtual_pipeline_stages {lay.vp} stages "
                                             f"need at least one of the model's {arch.num_layers} layers each"))
        lay = Layout(tp=lay.tp, cp=lay.cp, dp=lay.dp, ep=lay.ep)
    if lay.tp > 1:
        for what, n in (("attention heads", arch.num_attention_heads), ("key/value heads", arch.num_kv_heads)):
            if n % lay.tp:
                out.append(("tensor_parallel", f"tensor_parallel {lay.tp} must divide the model's {n} {what} "
                                               "(each GPU computes whole heads)"))
                break
    if lay.pp > 1:
        if arch.num_layers % lay.pp:
            out.append(("pipeline_parallel", f"pipeline_parallel {lay.pp} must divide the model's {arch.num_layers} "
                                             "layers (equal stages)"))
        elif (arch.num_layers // lay.pp) % lay.vp:
            out.append(("virtual_pipeline_stages", f"virtual_pipeline_stages {lay.vp} must divide the "
                                                   f"{arch.num_layers // lay.pp} layers of each pipeline stage"))
    if lay.cp > 1 and sequence_length % (2 * lay.cp):
        out.append(("context_parallel", f"context_parallel {lay.cp} needs a sequence_length divisible by 2 x "
                                        f"{lay.cp} = {2 * lay.cp} (load-balanced causal chunks); it is "
                                        f"{sequence_length}"))
    if gpus is not None and gpus % full.model_parallel:
        out.append(("tensor_parallel" if full.tp > 1 else "pipeline_parallel" if full.pp > 1 else "context_parallel",
                    f"tensor_parallel {full.tp} x pipeline_parallel {full.pp} x context_parallel {full.cp} = "
                    f"{full.model_parallel} must divide the world size ({gpus} GPUs)"))
    return out


def hybrid_replicas(sharding: object, tp: int, cp: int, dp: int, per_node: int) -> int:
    """Replicas of hybrid sharding: each shards over the dp x cp ranks one node holds (per_node / tp of
    them), the rest replicate; 1 unless ``sharding`` is ``hybrid`` and the ranks split evenly."""
    if sharding != "hybrid":
        return 1
    ranks = dp * cp
    group = max(1, min(ranks, max(1, per_node) // max(1, tp)))
    return ranks // group if ranks % group == 0 else 1


#: The parallel degrees (besides data parallelism and MoE expert parallelism, which every stack runs)
#: each stack documents, with where: a degree a stack cannot run is refused at validate, and the
#: resolver searches only these.
PARALLEL_DEGREES: dict[str, tuple[frozenset[str], str]] = {
    "megatron": (frozenset({"tensor", "pipeline", "context"}),
                 "Megatron-LM core_v0.14.0 (23e00ed0963c35382dfe8a5a94fb3cda4d21e133) megatron/training/arguments.py: "
                 "--tensor-model-parallel-size, --pipeline-model-parallel-size, --context-parallel-size, "
                 "--num-virtual-stages-per-pipeline-rank"),
    "torchtitan": (frozenset({"tensor", "pipeline", "context"}),
                   "torchtitan 0.3.0 (PyPI) torchtitan/config/configs.py ParallelismConfig: tensor_parallel_degree, "
                   "pipeline_parallel_degree, context_parallel_degree (v0.2.2, 73a0e6979dd10b6b1904098eb3c8f62c18ab87ce: "
                   "torchtitan/config/job_config.py Parallelism)"),
    "hf": (frozenset({"tensor", "context"}),
           "Accelerate 1.15.0 ParallelismConfig (accelerate launch --parallelism_config_tp_size, "
           "--parallelism_config_cp_size; FSDP2), src/accelerate/parallelism_config.py"),
    "torchtune": (frozenset({"tensor"}),
                  "torchtune 0.6.1 recipes/full_finetune_distributed.py: tensor_parallel_dim (with a "
                  "tensor_parallel_plan in the config)"),
    "llm-foundry": (frozenset(), "llm-foundry trains with FSDP (data parallelism) only"),
    "litgpt": (frozenset(), "litgpt trains with FSDP/DDP (data parallelism) only"),
}


class StatedDegrees(Protocol):
    """What the degree rules read of a profile's training section (``TrainingSpec`` has it)."""

    @property
    def framework(self) -> str: ...
    @property
    def tensor_parallel(self) -> Optional[int]: ...
    @property
    def pipeline_parallel(self) -> Optional[int]: ...
    @property
    def context_parallel(self) -> Optional[int]: ...


def unsupported_degrees(t: StatedDegrees) -> list[tuple[str, str]]:
    """(field, why) for each degree > 1 the profile gives that its framework cannot run."""
    can, _ = PARALLEL_DEGREES[t.framework]
    out = []
    for degree, field in (("tensor", "tensor_parallel"), ("pipeline", "pipeline_parallel"),
                          ("context", "context_parallel")):
        if (getattr(t, field) or 1) > 1 and degree not in can:
            who = sorted(f for f, (d, _) in PARALLEL_DEGREES.items() if degree in d)
            out.append((field, f"framework {t.framework} cannot run {degree} parallelism ({field} "
                               f"{getattr(t, field)}); frameworks that can: {', '.join(who)}"))
    return out
