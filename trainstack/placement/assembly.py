"""What the one Plan assembler (``assemble.py``) and its target parts share: the strategy's choice, the
problem collector, and the layout the candidate runs with (the engine's layout search, again)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal, Optional, TypeVar

from .. import sizing
from ..catalog import PriceQuote, ResolvedInstance
from ..errors import InputError, Problem
from ..plan import AlertsPlan, Candidate, JobPlan, ParallelismPlan, Plan, PolicyException, Rejection
from ..profile import TrainingProfile
from ..sizing.parallel import Layout, bubble_fraction, layout_for, micro_batches
from .engine import anchor_nodes, choose_layout, layout_options, node_network
from .dlc_pods import QuotaNode
from .layouts import LayoutPick, plan_layout

T = TypeVar("T")


@dataclass(frozen=True)
class Choice:
    """What a strategy chose, and the facts only the strategy knows."""

    target: Literal["ecs", "dlc"]
    best: Candidate
    #: the node the candidate was sized on: the ECS type, the DLC spec, or one pod of the quota's node
    inst: ResolvedInstance
    #: the price the plan rests on: the ECS type's, the DLC spec's (per pod) or the quota's (per GPU)
    quote: PriceQuote
    alternatives: tuple[Candidate, ...] = ()
    rejected: tuple[Rejection, ...] = ()
    #: the strategy's own labels (public-resource limits, the quota's node), before the candidate's
    labels: tuple[str, ...] = ()
    quota: Optional[QuotaNode] = None
    #: DLC next to the best ECS plan (``target: auto``), the last label
    comparison: Optional[str] = None
    #: the policy config's exceptions the chosen type rests on (``Plan.policy_exceptions``)
    exceptions: tuple[PolicyException, ...] = ()


@dataclass(frozen=True)
class Assembly:
    """The Plan, or (``plan`` None) the error with every problem found assembling it."""

    plan: Optional[Plan]
    error: Optional[InputError] = None


class Collector:
    """Runs assembly steps, keeping the error of each that fails (InputError) and going on."""

    def __init__(self) -> None:
        self.failed: list[tuple[str, InputError]] = []

    def run(self, step: Callable[[], T], path: str) -> Optional[T]:
        try:
            return step()
        except InputError as exc:
            self.failed.append((path, exc))
            return None

    def error(self) -> Optional[InputError]:
        """None, the one error, or one error with every step's problems (the first step's message)."""
        if len(self.failed) < 2:
            return self.failed[0][1] if self.failed else None
        problems = [p for path, e in self.failed
                    for p in (e.problems or [Problem(path=path, message=e.message, allowed=e.hint)])]
        first = self.failed[0][1]
        return InputError(f"{first.message} (and {len(problems) - 1} more)", problems=problems, hint=first.hint)


def alerts_plan(profile: TrainingProfile) -> Optional[AlertsPlan]:
    """The profile's alerts as the nodes run them (the webhook by its secret's name only)."""
    a = profile.alerts
    if a is None:
        return None
    return AlertsPlan(kms_secret=a.webhook.kms_secret, kms_key_id=a.webhook.kms_key_id, format=a.format,
                      events=a.events, relay=a.relay, via="relay" if a.relay else "nat")


def job_plan(profile: TrainingProfile, nproc_per_node: int, total_gpus: int,
             layout: Optional[Layout] = None) -> JobPlan:
    """What runs on the nodes (or pods), as the profile states it, with the plan's parallel layout."""
    t, j = profile.training, profile.job
    lay = layout or layout_for(t, total_gpus)
    return JobPlan(command=j.command, code_uri=j.code_uri, env=dict(j.env),
                   secrets={k: v.model_dump() for k, v in j.secrets.items()}, max_runtime_hours=j.max_runtime_hours,
                   max_total_cost_cny=profile.resources.max_total_cost, deadline_hours=profile.resources.deadline_hours,
                   nproc_per_node=nproc_per_node, method=t.method, precision=t.precision, zero_stage=t.zero_stage,
                   gradient_checkpointing=t.gradient_checkpointing, micro_batch_size=t.micro_batch_size,
                   sequence_length=t.sequence_length, gradient_accumulation_steps=t.accumulation_steps(lay.dp),
                   parallel=plan_layout(lay), global_batch_size=t.global_batch_size, alerts=alerts_plan(profile))


def candidate_layout(profile: TrainingProfile, inst: ResolvedInstance, c: Candidate) -> LayoutPick:
    """The layout search of candidate ``c`` again (a cache hit: the same call evaluate made)."""
    layouts, _ = layout_options(profile, inst, c.nodes)
    gpu = inst.gpu
    assert gpu is not None, "static_rejection refuses types without a known GPU"
    network, bandwidth = node_network(inst, c.nodes, tcp=anchor_nodes(profile, c.target, c.nodes, c.spot) > 0)
    return choose_layout(profile.architecture, profile.training, gpu, inst.gpu_count, c.nodes, inst.interconnect,
                         network, bandwidth, layouts,
                         sizing.min_margin_gib(gpu.usable_gib, profile.resources.memory_margin_percent / 100.0))


def parallelism_plan(profile: TrainingProfile, pick: LayoutPick) -> ParallelismPlan:
    t, lay = profile.training, pick.layout
    m = micro_batches(t, lay)
    chunk = -(-profile.architecture.num_layers // (lay.pp * lay.vp)) if lay.pp > 1 else 0
    return ParallelismPlan(layout=plan_layout(lay), chosen_by="resolver" if pick.searched else "profile",
                           considered=pick.options, micro_batches=m,
                           micro_batches_in_flight=pick.memory.micro_batches_in_flight,
                           bubble_fraction=round(bubble_fraction(lay, m), 4), layers_per_chunk=chunk)


def layout_reasons(profile: TrainingProfile, pick: LayoutPick, where: str) -> list[str]:
    """Why this layout: the profile's own, or the search's winner against the pure data-parallel one."""
    lay, t = pick.layout, profile.training
    m = micro_batches(t, lay)
    placed = []
    if lay.tp > 1:
        placed.append(f"TP {lay.tp} inside each node over NVLink/NVSwitch")
    if lay.pp > 1:
        placed.append(f"PP {lay.pp} stages ({m} micro-batches per step, {bubble_fraction(lay, m):.0%} bubble, "
                      f"{pick.memory.micro_batches_in_flight:g} in flight on the fullest stage)")
    if lay.cp > 1:
        placed.append(f"CP {lay.cp} (each sequence split over {lay.cp} GPUs)")
    placed.append(f"DP {lay.dp}" + (f" with ZeRO-{t.zero_stage}" if t.zero_stage else ""))
    head = f"layout {lay.label}: " + ", ".join(placed)
    if not pick.searched:
        return [head + " (as the profile states it)"]
    fitting = [o for o in pick.options if o.fits]
    tps = pick.throughput.tokens_per_second
    text = (f"{head}; chosen by the resolver: the fastest of {len(fitting)} layout(s) that fit {where} "
            f"(of {len(pick.options)} sized; `resolve --all` lists them)")
    plain = next((o for o in pick.options if o.layout.trivial), None)
    if plain is not None and not plain.chosen:
        if not plain.fits:
            text += f"; data parallelism alone needs {plain.required_gib_per_gpu:.1f} GiB per GPU"
        elif plain.tokens_per_second and tps:
            text += (f"; data parallelism alone runs {plain.tokens_per_second:,.0f} tokens/s against "
                     f"{tps:,.0f}")
    return [text]
