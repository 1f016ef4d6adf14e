"""The heartbeat record a node writes (``status/<node>/heartbeat.json``) and what the cloud says.

:class:`Heartbeat` is the contract of ``trainstack.heartbeat/1`` (docs/status.md), written by
``trainstack/bootstrap/templates/trainstack_heartbeat.py``. It is read strictly: a record whose
schema is not ours, whose numbers are negative, infinite or of the wrong type, whose state is
unknown, that is nested deeper than :data:`MAX_DEPTH` or larger than :data:`MAX_BYTES`, that names
a key twice, or that is dated in the future (more than :data:`CLOCK_SKEW_SECONDS` after this
machine's clock, or an event after the record's own ``written_at``) is refused with every reason
(:class:`HeartbeatError`), so neither ``status`` nor ``calibrate`` ever computes from a malformed
or hand-edited file. Unknown extra keys are ignored (a newer node may add some). The observations
(:class:`InstanceObservation`, :class:`DlcJobObservation`) are what the ECS and DLC adapters
return: plain, typed, no SDK objects.
"""

from __future__ import annotations

import time
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import InputError
from ..fsutil import parse_json

SCHEMA = "trainstack.heartbeat/1"
#: A heartbeat is a few KB; anything far larger is not one.
MAX_BYTES = 1 << 20
#: A heartbeat is 3 levels deep; a deeper document is not one (and must not make json recurse).
MAX_DEPTH = 16
#: How far a node's clock may run ahead of this machine's (both keep NTP time; ECS syncs its
#: instances with Alibaba's NTP servers): a record dated later than this is refused.
CLOCK_SKEW_SECONDS = 300.0

NodeState = Literal["starting", "training", "stopping", "interrupted", "finished", "stopped"]
#: why a job stopped: trainstack stopped it (the budget guard, max runtime), or, on a self-healing
#: cluster, how its run ended (trainstack_pool.py: the pool went to 0 and node 0 stopped after it)
StopCause = Literal["budget", "deadline", "max_runtime", "succeeded", "failed", "node0_lost", "no_run"]


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", strict=True, populate_by_name=True)


def _seconds(**kw: Any) -> Any:
    return Field(None, ge=0, allow_inf_nan=False, **kw)


class HeartbeatProgress(_Record):
    step: Optional[int] = Field(None, ge=0)
    tokens: Optional[int] = Field(None, ge=0, description="Tokens the whole job has processed (the trainer's count)")
    updated_at: Optional[float] = _seconds(description="Epoch seconds of the last progress line")
    tokens_per_second: Optional[float] = _seconds(description="Over the recent window (up to 10 minutes)")
    tokens_per_second_avg: Optional[float] = _seconds(description="Since this run's first progress line")
    window_seconds: Optional[float] = _seconds()


class HeartbeatMemory(_Record):
    peak_allocated_gib: Optional[float] = _seconds(description="torch.cuda.max_memory_allocated, GiB")
    peak_reserved_gib: Optional[float] = _seconds(description="max_memory_reserved, or nvidia-smi memory.used")
    source: Optional[Literal["trainer", "nvidia-smi"]] = None


class HeartbeatCheckpoint(_Record):
    last_at: Optional[float] = _seconds()
    save_seconds: Optional[float] = _seconds()
    source: Optional[Literal["trainer", "files"]] = None


class HeartbeatBilling(_Record):
    billed_seconds: float = Field(ge=0, allow_inf_nan=False, description="Instance seconds of this node so far")
    node_hourly_cny: Optional[float] = _seconds()
    spent_cny: Optional[float] = _seconds()
    price_source: Optional[str] = Field(None, max_length=500)


class HeartbeatGuard(_Record):
    max_total_cost_cny: Optional[float] = _seconds()
    deadline_at: Optional[float] = _seconds()
    reserve_seconds: float = Field(ge=0, allow_inf_nan=False)
    cluster_spent_cny: Optional[float] = _seconds()


class StopReason(_Record):
    reason: StopCause
    message: str = Field(max_length=1000)
    at: Optional[float] = _seconds()


class Heartbeat(_Record):
    """One node's status record (``trainstack.heartbeat/1``)."""

    schema_: Literal["trainstack.heartbeat/1"] = Field(alias="schema")
    stack: str = Field(min_length=1, max_length=128)
    node: str = Field(min_length=1, max_length=128)
    node_rank: int = Field(ge=0)
    nodes: int = Field(ge=1)
    gpus: int = Field(ge=1)
    instance_type: Optional[str] = Field(None, max_length=128)
    gpu_model: Optional[str] = Field(None, max_length=64)
    instance_id: Optional[str] = Field(None, max_length=64)
    instances: tuple[str, ...] = ()
    written_at: float = Field(ge=0, allow_inf_nan=False)
    started_at: float = Field(ge=0, allow_inf_nan=False)
    state: NodeState
    progress: HeartbeatProgress
    memory: HeartbeatMemory
    checkpoint: HeartbeatCheckpoint
    interruptions: int = Field(ge=0)
    notices: tuple[str, ...] = ()
    billing: HeartbeatBilling
    guard: HeartbeatGuard
    stop: Optional[StopReason] = None
    exit_code: Optional[int] = None

    @property
    def replacements(self) -> int:
        """Instances this node rank ran on before the current one (spot reclaims, replacements)."""
        return max(0, len(self.instances) - 1)


class HeartbeatError(ValueError):
    """A heartbeat that is not a valid ``trainstack.heartbeat/1`` record; ``problems`` says why."""

    def __init__(self, where: str, problems: list[str]):
        super().__init__(f"{where}: not a valid trainstack heartbeat: " + "; ".join(problems))
        self.where, self.problems = where, problems


def parse_heartbeat(data: bytes | str, where: str = "heartbeat", now: Optional[float] = None) -> Heartbeat:
    """The record in ``data`` (JSON text), or :class:`HeartbeatError` naming every problem; ``now``
    (epoch seconds, default this machine's clock) is what "in the future" is measured from."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if len(raw) > MAX_BYTES:
        raise HeartbeatError(where, [f"{len(raw):,} bytes; a heartbeat is at most {MAX_BYTES:,}"])
    try:
        doc = parse_json(raw, name=where, what="heartbeat", max_depth=MAX_DEPTH, limit=MAX_BYTES)
    except InputError as exc:
        reason = exc.problems[0].message if exc.problems else exc.message
        raise HeartbeatError(where, [f"not JSON ({reason})" if "JSON" in reason or "UTF-8" in reason
                                     else reason]) from None
    if not isinstance(doc, dict):
        raise HeartbeatError(where, ["not a JSON object"])
    if doc.get("schema") != SCHEMA:
        raise HeartbeatError(where, [f"schema is {doc.get('schema')!r}, expected {SCHEMA!r}"])
    try:
        beat = Heartbeat.model_validate_json(raw)
    except ValidationError as exc:
        raise HeartbeatError(where, [f"{'.'.join(str(p) for p in e['loc']) or '(top)'}: {e['msg']}"
                                     for e in exc.errors()]) from None
    problems = time_problems(beat, time.time() if now is None else now)
    if problems:
        raise HeartbeatError(where, problems)
    return beat


def _stamp(t: float) -> str:
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
    except (OverflowError, OSError, ValueError):
        return f"{t:.0f} s after 1970"


def time_problems(beat: Heartbeat, now: float) -> list[str]:
    """A record from the future: written later than ``now`` allows, or an event after it was written."""
    out = []
    if beat.written_at > now + CLOCK_SKEW_SECONDS:
        out.append(f"written_at: {_stamp(beat.written_at)} is in the future ({beat.written_at - now:,.0f} s after "
                   f"this machine's clock, {_stamp(now)}; at most {CLOCK_SKEW_SECONDS:g} s of clock skew is accepted)")
    events = {"started_at": beat.started_at, "progress.updated_at": beat.progress.updated_at,
              "checkpoint.last_at": beat.checkpoint.last_at, "stop.at": beat.stop.at if beat.stop else None}
    for name, t in events.items():
        if t is not None and t > beat.written_at + CLOCK_SKEW_SECONDS:
            out.append(f"{name}: {_stamp(t)} is after the record was written ({_stamp(beat.written_at)})")
    return out


# ---- what the cloud says ------------------------------------------------------------------------

class InstanceObservation(_Record):
    """One ECS instance of the stack (DescribeInstances, tag ``trainstack:name``)."""

    instance_id: str
    name: Optional[str] = None
    node_rank: Optional[int] = Field(None, ge=0, description="Tag trainstack:node-rank")
    status: str = Field(description="Pending | Starting | Running | Stopping | Stopped")
    spot: bool = False
    stopped_mode: Optional[str] = Field(None, description="StopCharging | KeepCharging | Not-applicable")
    instance_type: Optional[str] = None
    zone: Optional[str] = None
    created_at: Optional[float] = None
    started_at: Optional[float] = None


class DlcJobObservation(_Record):
    """The stack's PAI-DLC job (GetJob)."""

    job_id: str
    display_name: Optional[str] = None
    status: str = Field(description="PAI's status: Creating, Queuing, Running, Succeeded, Failed, Stopped, ...")
    reason: str = ""
    duration_seconds: Optional[float] = Field(None, ge=0, description="How long it has run (GetJob Duration)")
    created_at: Optional[float] = None
    running_at: Optional[float] = None
    finished_at: Optional[float] = None
    pods: int = Field(0, ge=0)
