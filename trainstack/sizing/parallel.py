"""The parallel layout of a job: tensor x context x data x pipeline (x expert) GPUs, in one place.

Every division of memory and of the work that a layout brings is decided here; the memory and speed
modules ask this module which share of the model and of the tokens one GPU holds. Which link each
dimension's traffic crosses is ``links.py``'s; the degree rules are ``trainstack.parallel_degrees``.

Ranks are ordered the way Megatron-LM (``tp-cp-ep-dp-pp``) and torchtitan (mesh
``pp, dp_replicate, dp_shard, cp, tp``) order them: tensor parallelism innermost (inside a node, over
NVLink/NVSwitch), then context, then data, pipeline outermost. ZeRO/FSDP shards and the gradient
reduction run over the ``dp x cp`` ranks that hold the same weights (Megatron's data-parallel group
with context parallelism; torchtitan's ``dp_shard_cp`` mesh). Expert parallelism splits the routed
experts over ``ep`` of those ranks.

Assumed with tensor parallelism: sequence parallelism (Megatron ``--sequence-parallel``; torchtitan's
TP plan shards the norms on the sequence), so every activation is divided by ``tp``, and a
vocabulary-parallel loss (Megatron's fused vocab-parallel cross entropy; torchtitan ``loss_parallel``),
so the logits are too. Pipeline schedules: 1F1B, or interleaved 1F1B with ``vp`` model chunks per
rank; the warm-up (micro-batches in flight) follows Megatron-LM core_v0.14.0
``megatron/core/pipeline_parallel/schedules.py`` (``pp - rank - 1``, interleaved
``2 (pp - rank - 1) + (vp - 1) pp``), the bubble is ``(pp - 1) / vp`` micro-batch times per step.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..models import Architecture
from ..parallel_degrees import DEGREE_FIELDS, Layout, hybrid_replicas, layout_problems  # noqa: F401 - the layout's rules, kept importable here

if TYPE_CHECKING:
    from ..profile import TrainingSpec


#: GPUs per node assumed where a caller sizes memory without a node layout (hybrid sharding's shard group)
DEFAULT_GPUS_PER_NODE = 8


def layout_for(t: TrainingSpec, gpus: int, per_node: int = DEFAULT_GPUS_PER_NODE) -> Layout:
    """The profile's own layout on ``gpus`` GPUs: its degrees (unset: 1), data parallel the rest; with
    ``training.sharding: hybrid`` the replicas of per_node-GPU nodes."""
    tp, pp, cp = t.tensor_parallel or 1, t.pipeline_parallel or 1, t.context_parallel or 1
    dp = max(1, int(gpus) // (tp * pp * cp))
    return Layout(tp=tp, pp=pp, cp=cp, dp=dp, ep=t.expert_parallel, vp=t.virtual_pipeline_stages if pp > 1 else 1,
                  replicas=hybrid_replicas(t.sharding, tp, cp, dp, per_node))


def micro_batches(t: TrainingSpec, lay: Layout) -> int:
    """Micro-batches per optimizer step on each data-parallel rank (the pipeline's micro-batches)."""
    return t.accumulation_steps(lay.dp)


def expert_degree(arch: Architecture, t: TrainingSpec, lay: Layout) -> int:
    """training.expert_parallel on a MoE model, at most the ranks holding the same weights."""
    if not arch.is_moe:
        return 1
    return max(1, min(t.expert_parallel, lay.same_weights))


# ---- pipeline stages -------------------------------------------------------------------------

@dataclass(frozen=True)
class Stage:
    """One GPU's part of the model: its decoder layers, whether it holds the embedding (``first``)
    or the final norm, LM head and loss (``last``), and how many layers' activations of one
    micro-batch it holds at its peak (``act_layers``: its layers x the micro-batches in flight)."""

    layers: int
    first: bool
    last: bool
    act_layers: float
    tp: int = 1
    cp: int = 1
    pp: int = 1


def in_flight_chunks(pp: int, vp: int, rank: int, m: int) -> int:
    """Model chunks (of L / (pp vp) layers) whose forward activations rank ``rank`` holds at once:
    Megatron's warm-up micro-batches plus the one in 1F1B (never more than the step has)."""
    if pp == 1:
        return 1
    if vp == 1:
        return max(1, min(m, pp - rank))
    return max(1, min(m * vp, 2 * (pp - rank - 1) + (vp - 1) * pp + 1))


@functools.lru_cache(maxsize=4096)
def stages(num_layers: int, lay: Layout, m: int) -> tuple[Stage, ...]:
    """The stages that decide memory and time: the first (embedding, most micro-batches in flight),
    the last (LM head, loss) and, when the layers do not divide evenly (torchtitan splits them so,
    ``generate_split_points``: the first and last stages get the fewer), a middle one with the most
    layers; one stage without pipeline parallelism."""
    if lay.pp == 1:
        return (Stage(num_layers, True, True, float(num_layers), lay.tp, lay.cp, 1),)
    pp, vp = lay.pp, lay.vp
    few, many = num_layers // pp, -(-num_layers // pp)

    def stage(rank: int, layers: int) -> Stage:
        return Stage(layers, rank == 0, rank == pp - 1, in_flight_chunks(pp, vp, rank, m) * layers / vp,
                     lay.tp, lay.cp, pp)

    out = [stage(0, few)]
    if many != few and pp > 2:
        out.append(stage(1, many))
    out.append(stage(pp - 1, few))
    return tuple(out)


def bubble_micro_batches(lay: Layout) -> float:
    """Idle micro-batch times per step of a 1F1B pipeline: (pp - 1) / vp (interleaving shortens it)."""
    return (lay.pp - 1) / lay.vp if lay.pp > 1 else 0.0


def bubble_fraction(lay: Layout, m: int) -> float:
    """Share of the step a pipeline stage sits idle."""
    idle = bubble_micro_batches(lay)
    return idle / (m + idle) if idle else 0.0


# ---- what one GPU holds ------------------------------------------------------------------------

@dataclass(frozen=True)
class Shares:
    """Fractions of the whole model one GPU of a stage holds (before ZeRO/FSDP sharding): all
    parameters (``params``), decoder matmul weights (``matmul``), non-matmul parameters
    (``other``: embedding, head, norms), and of the LoRA adapters (``adapters``)."""

    params: float = 1.0
    matmul: float = 1.0
    other: float = 1.0
    adapters: float = 1.0


TRIVIAL_SHARES = Shares()


@functools.lru_cache(maxsize=8192)
def shares(arch: Architecture, stage: Stage) -> Shares:
    """A stage holds its decoder layers, the embedding if first, the LM head (or, tied, a copy of the
    embedding) if last; tensor parallelism splits all of it (norms, replicated, are neglected)."""
    L = arch.num_layers
    if stage.layers == L and stage.first and stage.last and stage.tp == 1:
        return TRIVIAL_SHARES
    p, packed = arch.params, arch.matmul_params
    embed, head = arch.embedding_params, arch.head_params
    body = p - embed - head                      # decoder layers, final norm, vision tower
    frac = stage.layers / L
    held = body * frac
    if stage.first:
        held += embed
    if stage.last:
        held += head if not arch.tie_embeddings or stage.first else embed  # Megatron: the last stage keeps a copy
    tp = stage.tp
    matmul = frac / tp
    other_total = p - packed
    other_held = held - packed * frac
    return Shares(params=held / p / tp, matmul=matmul,
                  other=(other_held / other_total / tp) if other_total else matmul, adapters=frac / tp)


def tokens_per_gpu(t: TrainingSpec, stage: Stage) -> float:
    """Tokens of one micro-batch one GPU works on: context parallelism splits the sequence."""
    return t.micro_batch_size * t.sequence_length / stage.cp
