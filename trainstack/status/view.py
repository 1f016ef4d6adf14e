"""The status view: what a run is doing, what it has cost and where it is heading (pure).

:func:`build_view` joins the plan (what was predicted, the price, the limits), the nodes'
heartbeats and what ECS or PAI-DLC says about the nodes or the job into :class:`StatusView`,
the ``trainstack status --json`` contract (``schema_version`` 1, docs/status.md; a schema test
keeps docs/status.schema.json in step). Every number that rests on an assumption is labelled:
spend is always an estimate (instance hours x the plan's hourly price), an ETA from the plan's
speed says so, a heartbeat older than :data:`STALE_AFTER_SECONDS` is marked stale.
"""

from __future__ import annotations

import time
from typing import Literal, Optional, Sequence

from pydantic import BaseModel, ConfigDict, Field

from ..plan import Plan
from ..profile import TrainingProfile
from ..sizing import memory_estimate
from .record import DlcJobObservation, Heartbeat, InstanceObservation, StopCause, StopReason

STATUS_SCHEMA_VERSION = 1
#: A heartbeat older than this (five missed beats at the default 60 s) is stale: the node or its
#: heartbeat service is down, and its numbers are the last ones it sent.
STALE_AFTER_SECONDS = 300.0
#: PAI-DLC statuses in which the job holds resources and bills.
DLC_ACTIVE = frozenset({"Creating", "Queuing", "Dequeued", "Running", "Restarting", "Stopping", "EnvPreparing"})

JobState = Literal["not-deployed", "unknown", "starting", "training", "stopping", "interrupted", "finished",
                   "stopped", "failed"]


class _View(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def iso(epoch: Optional[float]) -> Optional[str]:
    return None if epoch is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


class PlanView(_View):
    instance_type: Optional[str]
    gpu_model: Optional[str]
    nodes: int
    gpus_per_node: int
    spot: bool


class StopView(_View):
    reason: StopCause
    message: str
    at: Optional[str]


class JobView(_View):
    state: JobState
    dlc_status: Optional[str] = Field(None, description="PAI's own status word (DLC plans)")
    dlc_job_id: Optional[str] = None
    exit_code: Optional[int] = None
    stop: Optional[StopView] = Field(None, description="Why and when the job stopped (budget guard, max runtime; "
                                                       "on a self-healing cluster how its run ended)")
    started_at: Optional[str] = None


class NodeView(_View):
    name: str
    rank: int
    instance_id: Optional[str]
    state: str = Field(description="ECS status (Running, Stopped, ...), or missing when no instance carries the name")
    spot: Optional[bool]
    stopped_mode: Optional[str]
    job_state: Optional[str] = Field(description="The node's own word from its heartbeat")
    interruptions: int
    replacements: int
    heartbeat_at: Optional[str]
    heartbeat_age_seconds: Optional[float]
    stale: bool
    spent_cny: Optional[float]


class ProgressView(_View):
    step: Optional[int]
    tokens_done: Optional[int]
    tokens_total: Optional[float]
    fraction: Optional[float]
    tokens_per_second: Optional[float] = Field(description="Measured over the last minutes, whole job")
    tokens_per_second_per_gpu: Optional[float]
    updated_at: Optional[str]


class SpendView(_View):
    spent_cny: Optional[float]
    hourly_cny: Optional[float]
    estimate: Literal[True] = True
    basis: Literal["heartbeats", "instance-start", "dlc-duration", "none"]
    price_source: Optional[str]


class EtaView(_View):
    remaining_hours: Optional[float]
    finish_at: Optional[str]
    deadline_at: Optional[str]
    on_track: Optional[bool]
    basis: Literal["measured", "plan", "none"]


class BudgetView(_View):
    max_total_cost_cny: Optional[float]
    projected_total_cny: Optional[float]
    within_budget: Optional[bool]


class Comparison(_View):
    predicted: Optional[float]
    measured: Optional[float]
    ratio: Optional[float] = Field(description="measured / predicted")


class PredictedVsMeasured(_View):
    tokens_per_second_per_gpu: Comparison
    peak_allocated_gib: Comparison
    peak_reserved_gib: Comparison
    memory_source: Optional[Literal["trainer", "nvidia-smi"]]


class StatusView(_View):
    """``trainstack status --json`` (schema_version 1)."""

    schema_version: Literal[1] = STATUS_SCHEMA_VERSION
    stack: str
    target: Literal["ecs", "dlc"]
    region: str
    observed_at: str
    plan: PlanView
    job: JobView
    nodes: list[NodeView]
    progress: ProgressView
    spend: SpendView
    eta: EtaView
    budget: BudgetView
    predicted_vs_measured: PredictedVsMeasured
    labels: list[str]


class Prediction(_View):
    """What the plan predicts per GPU, for the comparison with the run."""

    tokens_per_second_per_gpu: Optional[float]
    peak_allocated_gib: Optional[float]
    peak_reserved_gib: Optional[float]


def prediction_for(profile: TrainingProfile, plan: Plan) -> Prediction:
    """The plan's speed and memory per GPU (reserved from the memory model for the plan's GPU count)."""
    reserved = memory_estimate(profile.architecture, profile.training, plan.total_gpus).reserved_gib_per_gpu
    return Prediction(tokens_per_second_per_gpu=plan.estimate.tokens_per_second_per_gpu,
                      peak_allocated_gib=plan.estimate.peak_gib_per_gpu, peak_reserved_gib=round(reserved, 2))


def _ratio(measured: Optional[float], predicted: Optional[float]) -> Optional[float]:
    return round(measured / predicted, 3) if measured is not None and predicted else None


def _round(value: Optional[float], digits: int = 2) -> Optional[float]:
    return None if value is None else round(value, digits)


def _max(values: Sequence[Optional[float]]) -> Optional[float]:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _node_instance(instances: Sequence[InstanceObservation], name: str, rank: int) -> Optional[InstanceObservation]:
    by_name = [i for i in instances if i.name == name]
    by_rank = [i for i in instances if i.node_rank == rank]
    found = by_name or by_rank
    return max(found, key=lambda i: i.created_at or 0) if found else None


def _ecs_nodes(plan: Plan, beats: Sequence[Heartbeat], instances: Sequence[InstanceObservation]
               ) -> list[tuple[int, str, Optional[Heartbeat], Optional[InstanceObservation]]]:
    """(rank, name, heartbeat, instance) of each node. A multi-node self-healing plan's pool nodes share
    one name and take their ranks from the rendezvous: they are listed by instance (``NAME-pool/i-...``),
    numbered 1.. in instance-id order, and a slot no instance reports is shown missing."""
    names = plan.node_names()
    by_name = {b.node: b for b in beats}
    if not plan.elastic:
        return [(r, n, by_name.get(n), _node_instance(instances, n, r)) for r, n in enumerate(names)]
    rows = [(0, names[0], by_name.get(names[0]), _node_instance(instances, names[0], 0))]
    pool = plan.pool_node_name()
    pool_beats = {b.instance_id: b for b in beats if b.node == pool and b.instance_id}
    pool_instances = {i.instance_id: i for i in instances if i.name == pool}
    for k, iid in enumerate(sorted(set(pool_beats) | set(pool_instances)), start=1):
        rows.append((k, f"{pool}/{iid}", pool_beats.get(iid), pool_instances.get(iid)))
    rows += [(k, f"{pool}/(none)", None, None) for k in range(len(rows), plan.nodes)]
    return rows


def _job_state(plan: Plan, beats: Sequence[Heartbeat], instances: Sequence[InstanceObservation],
               dlc: Optional[DlcJobObservation]) -> JobState:
    if plan.target == "dlc":
        if dlc is None:
            return "not-deployed"
        return {"Succeeded": "finished", "Failed": "failed", "Stopped": "stopped", "Running": "training",
                "Stopping": "stopping", "Restarting": "interrupted"}.get(dlc.status, "starting")
    states = {b.state for b in beats}
    for state in ("stopped", "stopping", "interrupted", "training", "starting"):
        if state in states:
            return state  # type: ignore[return-value]
    if beats and states == {"finished"}:
        return "failed" if any(b.exit_code not in (0, None) for b in beats) else "finished"
    return "unknown" if instances else "not-deployed"


def build_view(profile: TrainingProfile, plan: Plan, prediction: Prediction, *,
               heartbeats: Sequence[Heartbeat] = (), instances: Sequence[InstanceObservation] = (),
               dlc: Optional[DlcJobObservation] = None, now: Optional[float] = None) -> StatusView:
    """The view at ``now`` (epoch seconds) from what was observed."""
    now = time.time() if now is None else now
    labels: list[str] = []
    beats = [b for b in heartbeats if b.stack == plan.name]
    mine = {b.node: b for b in beats}
    if foreign := sorted({b.node for b in heartbeats if b.stack != plan.name}):
        labels.append(f"ignored heartbeats of another stack: {', '.join(foreign)}")
    node_hourly = None if plan.hourly_cost_cny is None else plan.hourly_cost_cny / plan.nodes

    nodes: list[NodeView] = []
    spend_parts: list[float] = []
    basis: str = "none"
    if plan.target == "ecs":
        for rank, name, beat, inst in _ecs_nodes(plan, beats, instances):
            age = None if beat is None else max(0.0, now - beat.written_at)
            spent = beat.billing.spent_cny if beat is not None else None
            if spent is None and beat is None and inst is not None and inst.status == "Running" and inst.started_at \
                    and node_hourly is not None:
                spent = (now - inst.started_at) / 3600 * node_hourly  # no heartbeat yet: since its last start
                basis = "instance-start" if basis == "none" else basis
                labels.append(f"{name}: no heartbeat; its spend is counted from the instance's last start")
            elif spent is not None:
                basis = "heartbeats"
            if spent is not None:
                spend_parts.append(spent)
            stale = age is not None and age > STALE_AFTER_SECONDS and beat.state not in ("finished", "stopped")
            if stale:
                labels.append(f"{name}: last heartbeat {age / 60:.0f} min ago: the node or its heartbeat service is "
                              "down; its numbers are the last it sent")
            nodes.append(NodeView(
                name=name, rank=rank, instance_id=inst.instance_id if inst else (beat.instance_id if beat else None),
                state=inst.status if inst else "missing", spot=inst.spot if inst else None,
                stopped_mode=inst.stopped_mode if inst else None, job_state=beat.state if beat else None,
                interruptions=beat.interruptions if beat else 0, replacements=beat.replacements if beat else 0,
                heartbeat_at=iso(beat.written_at) if beat else None, heartbeat_age_seconds=_round(age, 0),
                stale=bool(stale), spent_cny=_round(spent)))
            if inst and plan.instance_type and inst.instance_type and inst.instance_type != plan.instance_type:
                labels.append(f"{name} runs {inst.instance_type}; the plan now says {plan.instance_type}: the "
                              "predictions are for the current plan")
    elif dlc is not None and plan.hourly_cost_cny is None:
        labels.append("DLC spend unknown: the plan has no price for this job (PAI-DLC prices are not in the catalog)")
    elif dlc is not None and dlc.duration_seconds is not None and plan.hourly_cost_cny is not None:
        spend_parts.append(dlc.duration_seconds / 3600 * plan.hourly_cost_cny)
        basis = "dlc-duration"
        labels.append("DLC spend: the job's running time (GetJob Duration) x the plan's hourly price, the ECS list "
                      "price of its spec as a proxy for PAI-DLC's price")
    spent = round(sum(spend_parts), 2) if spend_parts else None

    state = _job_state(plan, beats, instances, dlc)
    lead = mine.get(plan.node_names()[0]) if plan.target == "ecs" else None
    lead = lead or (max(beats, key=lambda b: b.progress.tokens or -1) if beats else None)
    tokens = _max([b.progress.tokens for b in beats])
    rate = lead.progress.tokens_per_second if lead else None
    per_gpu = None if rate is None else rate / plan.total_gpus
    total = profile.training.tokens
    running = state in ("starting", "training", "interrupted")

    eta_basis, speed = ("measured", rate) if rate else ("plan", plan.estimate.tokens_per_second)
    remaining_hours = None
    if total and speed:
        remaining_hours = max(0.0, total - (tokens or 0)) / speed / 3600
    if not (total and speed):
        eta_basis = "none"
    elif eta_basis == "plan":
        labels.append("no measured speed yet: the ETA uses the plan's predicted tokens/s")
    started = min([b.started_at for b in beats], default=None)
    if plan.target == "dlc" and dlc is not None:
        started = dlc.running_at or dlc.created_at
    deadline_at = _max([b.guard.deadline_at for b in beats])
    if deadline_at is None and started is not None and profile.resources.deadline_hours:
        deadline_at = started + profile.resources.deadline_hours * 3600
    finish_at = now + remaining_hours * 3600 if remaining_hours is not None and running else None
    on_track = (finish_at <= deadline_at) if finish_at is not None and deadline_at is not None else None

    budget = profile.resources.max_total_cost
    projected = None
    if spent is not None:
        more = remaining_hours * plan.hourly_cost_cny if running and remaining_hours is not None and \
            plan.hourly_cost_cny is not None else 0.0
        projected = round(spent + more, 2)
    stop = next((b.stop for b in beats if b.stop is not None), None)
    exit_codes = [b.exit_code for b in beats if b.exit_code is not None]
    alloc = _max([b.memory.peak_allocated_gib for b in beats])
    reserved = _max([b.memory.peak_reserved_gib for b in beats])
    memory_source = next((b.memory.source for b in beats if b.memory.source), None)
    if memory_source == "nvidia-smi":
        labels.append("memory from nvidia-smi (memory.used: the allocator's reserved memory plus the CUDA context); "
                      "report it from the trainer (docs/status.md) to compare allocated and reserved exactly")
    price_source = next((b.billing.price_source for b in beats if b.billing.price_source), None) or (
        f"all-in: {'spot price estimate' if plan.spot else 'on-demand list price'} of "
        f"{plan.instance_type or 'the DLC job'} "
        f"in {plan.region} with the plan's storage and network, catalog {plan.catalog_date or 'undated'}")
    labels.append("spend is an estimate: instance hours x each node's share of the plan's all-in hourly price "
                  "(nodes, disks, CPFS, bucket, NAT; traffic and requests on top); the bill is the truth")
    if stop is not None and stop.reason in ("budget", "deadline", "max_runtime"):
        labels.append(f"stopped by trainstack ({stop.reason}): {stop.message}")
    elif stop is not None:
        labels.append(f"the run ended ({stop.reason}): {stop.message}; the pool went to 0 and node 0 stopped")
    return StatusView(
        stack=plan.name, target=plan.target, region=plan.region, observed_at=iso(now) or "",
        plan=PlanView(instance_type=plan.instance_type, gpu_model=plan.gpu_model, nodes=plan.nodes,
                      gpus_per_node=plan.gpus_per_node, spot=plan.spot),
        job=JobView(state=state, dlc_status=dlc.status if dlc else None, dlc_job_id=dlc.job_id if dlc else None,
                    exit_code=max(exit_codes, key=abs) if exit_codes else None, stop=_stop(stop),
                    started_at=iso(started)),
        nodes=nodes,
        progress=ProgressView(step=lead.progress.step if lead else None, tokens_done=tokens, tokens_total=total,
                              fraction=_round(tokens / total, 4) if tokens is not None and total else None,
                              tokens_per_second=_round(rate, 1), tokens_per_second_per_gpu=_round(per_gpu, 1),
                              updated_at=iso(lead.progress.updated_at) if lead else None),
        spend=SpendView(spent_cny=spent, hourly_cny=plan.hourly_cost_cny, basis=basis,  # type: ignore[arg-type]
                        price_source=price_source),
        eta=EtaView(remaining_hours=_round(remaining_hours, 2), finish_at=iso(finish_at), deadline_at=iso(deadline_at),
                    on_track=on_track, basis=eta_basis),  # type: ignore[arg-type]
        budget=BudgetView(max_total_cost_cny=budget, projected_total_cny=projected,
                          within_budget=None if budget is None or projected is None else projected <= budget),
        predicted_vs_measured=PredictedVsMeasured(
            tokens_per_second_per_gpu=Comparison(predicted=prediction.tokens_per_second_per_gpu,
                                                 measured=_round(per_gpu, 1),
                                                 ratio=_ratio(per_gpu, prediction.tokens_per_second_per_gpu)),
            peak_allocated_gib=Comparison(predicted=prediction.peak_allocated_gib, measured=_round(alloc),
                                          ratio=_ratio(alloc, prediction.peak_allocated_gib)),
            peak_reserved_gib=Comparison(predicted=prediction.peak_reserved_gib, measured=_round(reserved),
                                         ratio=_ratio(reserved, prediction.peak_reserved_gib)),
            memory_source=memory_source),
        labels=list(dict.fromkeys(labels)))


def _stop(stop: Optional[StopReason]) -> Optional[StopView]:
    return None if stop is None else StopView(reason=stop.reason, message=stop.message, at=iso(stop.at))


def is_terminal(view: StatusView) -> bool:
    """Nothing will change any more (``--watch`` ends)."""
    if view.target == "dlc":
        return view.job.state in ("finished", "failed", "stopped")
    return view.job.state in ("finished", "failed", "stopped") and all(n.state in ("Stopped", "missing")
                                                                       for n in view.nodes)


def status_json_schema() -> dict:
    """The JSON Schema of ``status --json`` (docs/status.schema.json is this, committed)."""
    schema = StatusView.model_json_schema()
    return {**schema, "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "trainstack status --json (schema_version 1)"}
