"""`trainstack up`'s loop: deploy the plan's first fallback row with stock, and move on when a create finds none.

Pure orchestration against two protocols, so it is tested without a Pulumi CLI or a cloud:
:class:`Deployer` (the stack through Pulumi's Automation API: trainstack/commands/up_automation.py)
and :class:`Witness` (did this stack ever run a job; are its nodes running), plus the stock table
(trainstack/cloud/stock.py). The rules:

- **Only the reviewed rows.** The rows are the plan's fallback order (``Plan.capacity.candidates``,
  what `trainstack plan` / the PR comment show). An attempt pins one row with the stack config
  ``trainstack:zone`` (and ``trainstack:instanceType`` for another type), is planned again by the
  rule book (budget, deadline, allow-lists) and must re-plan to that very row; its preview runs the
  policy pack, and a mandatory verdict stops everything (exit 4). A row without stock
  (DescribeAvailableResource) is skipped without an attempt.
- **A job has run** when an earlier update of the stack succeeded, or the stack bucket holds a
  heartbeat under ``status/`` (a node writes one when its job starts, docs/status.md), or that
  cannot be read. Then the zone never moves (only rows in the stack's zone, other types there), no
  row whose preview deletes or replaces a disk, CPFS, the bucket, the VPC or a vSwitch is tried, and
  no new type is tried while a node runs (ModifyInstanceSpec stops it).
- **First deploy** (no job ever ran): before the next row, what a failed attempt created is removed,
  so no node is left behind: its nodes always; on a zone change, everything in the old zone (vSwitches,
  disks, CPFS and what depends on them, capacity reservation). Protected checkpoint storage among them
  is released from protection first: on a first deploy no node has run, so it holds nothing. The VPC,
  bucket and RAM role are not zonal and stay.
- **The end.** A row deploys: exit 0, its ``trainstack:zone`` / ``trainstack:instanceType`` stay in the
  stack config (so later `pulumi up`s keep it); nothing has stock within ``max_attempts`` `pulumi up`
  runs: exit 3 with every attempt, the config restored; an API or credentials error: exit 5.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Mapping, Optional, Protocol, Sequence

from ..cloud.errors import capacity_code
from ..errors import CloudApiError, InfeasibleError, InputError, PolicyError, TrainstackError
from ..plan import FallbackCandidate, Plan

ZONE_KEY, TYPE_KEY = "trainstack:zone", "trainstack:instanceType"
#: a create or update of these that fails with a capacity code is a stock failure (not a bug to report)
NODE_TYPES = frozenset({"alicloud:ecs/instance:Instance", "alicloud:ecs/capacityReservation:CapacityReservation"})
#: what holds data or addresses: after a job has run, an attempt may not delete or replace any of them
KEPT_TYPES = frozenset({"alicloud:ecs/ecsDisk:EcsDisk", "alicloud:nas/fileSystem:FileSystem",
                        "alicloud:oss/bucket:Bucket", "alicloud:vpc/network:Network", "alicloud:vpc/switch:Switch"})
#: resources that sit in one zone (removed on a first deploy's zone change)
ZONAL_TYPES = frozenset({"alicloud:vpc/switch:Switch", "alicloud:ecs/ecsDisk:EcsDisk", "alicloud:nas/fileSystem:FileSystem",
                         "alicloud:ecs/instance:Instance", "alicloud:ecs/capacityReservation:CapacityReservation"})
REMOVING_OPS = frozenset({"delete", "replace", "create-replacement", "delete-replaced", "discard"})
CREATING_OPS = frozenset({"create", "replace", "create-replacement"})


@dataclass(frozen=True)
class StateResource:
    urn: str
    type: str
    zone: Optional[str] = None
    protect: bool = False
    outputs: Mapping[str, Any] = field(default_factory=dict)
    #: what it depends on (its dependencies and its parent): a destroy of those takes it too
    depends_on: tuple[str, ...] = ()
    #: ``retain_on_delete``: a destroy only forgets it, the cloud keeps it (and bills it)
    retain: bool = False


def dependents(targets: Sequence[str], resources: Sequence[StateResource]) -> list[StateResource]:
    """``targets`` and everything that depends on them, transitively (what ``destroy --target-dependents``
    removes), in state order."""
    gone = set(targets)
    changed = True
    while changed:
        changed = False
        for r in resources:
            if r.urn not in gone and gone.intersection(r.depends_on):
                gone.add(r.urn)
                changed = True
    return [r for r in resources if r.urn in gone]


@dataclass(frozen=True)
class Diagnostic:
    urn: Optional[str]
    type: Optional[str]
    message: str


@dataclass(frozen=True)
class Verdict:
    policy: str
    level: str
    urn: Optional[str]
    message: str


@dataclass(frozen=True)
class RunResult:
    ok: bool
    steps: tuple[tuple[str, str, str], ...] = ()  # (op, urn, type)
    diagnostics: tuple[Diagnostic, ...] = ()
    verdicts: tuple[Verdict, ...] = ()
    error: str = ""


class Deployer(Protocol):
    def config(self) -> dict[str, str]: ...

    def set_config(self, key: str, value: Optional[str]) -> None: ...

    def succeeded_before(self) -> bool: ...

    def resources(self) -> list[StateResource]: ...

    def preview(self) -> RunResult: ...

    def up(self) -> RunResult: ...

    def destroy(self, urns: Sequence[str]) -> RunResult: ...

    def release_protection(self, urns: Sequence[str]) -> None: ...


class Witness(Protocol):
    def job_started(self, bucket: str, prefix: str) -> Optional[bool]:
        """A heartbeat exists under ``prefix``; None when that cannot be read."""

    def running_nodes(self, plan: Plan) -> list[str]:
        """Names of the stack's training nodes that are Running now."""


class Stock(Protocol):
    def check(self, instance_type: str, zone: Optional[str], spot: bool) -> tuple[bool, str, Optional[str]]: ...

    def zones_with_stock(self, instance_type: str, spot: bool) -> list[str]: ...


@dataclass
class Attempt:
    rank: int
    instance_type: str
    zone: Optional[str]
    outcome: str  # deployed | no-stock | no-capacity | skipped
    cause: str
    code: Optional[str] = None
    up_run: bool = False

    def line(self) -> str:
        where = self.zone or "any zone"
        return f"row {self.rank} {self.instance_type} in {where}: {self.outcome}: {self.cause}"


@dataclass
class Report:
    stack: str
    attempts: list[Attempt] = field(default_factory=list)
    deployed: Optional[Attempt] = None
    job_has_run: bool = False
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"stack": self.stack, "deployed": asdict(self.deployed) if self.deployed else None,
                "job_has_run": self.job_has_run, "attempts": [asdict(a) for a in self.attempts], "notes": self.notes}


Echo = Callable[[str], None]
Planner = Callable[[Mapping[str, str]], Plan]


def node_vswitch_zone(plan: Plan, resources: Sequence[StateResource]) -> Optional[str]:
    """The zone of the stack's node vSwitch in the state (components/network.py names it ``<stack>-network-vswitch``)."""
    for r in resources:
        if r.type == "alicloud:vpc/switch:Switch" and r.urn.endswith(f"::{plan.name}-network-vswitch"):
            return r.zone
    return None


def job_has_run(plan: Plan, deployer: Deployer, resources: Sequence[StateResource], witness: Witness,
                notes: list[str]) -> bool:
    if deployer.succeeded_before():
        notes.append("an earlier update of this stack succeeded: its nodes started their job")
        return True
    bucket = next((r.outputs.get("bucket") for r in resources if r.type == "alicloud:oss/bucket:Bucket"), None)
    if not bucket or plan.storage.oss is None:
        return False
    # bootstrap/ (the node files) loads only when a deployed job is checked
    from ..bootstrap.heartbeat import status_prefix

    started = witness.job_started(str(bucket), status_prefix(plan))
    if started is None:
        notes.append(f"cannot read oss://{bucket}/{status_prefix(plan)}: treated as a stack that has run a job")
    elif started:
        notes.append(f"a node wrote a heartbeat under oss://{bucket}/{status_prefix(plan)}: a job has run")
    return started is not False


def capacity_failure(result: RunResult) -> Optional[tuple[str, str]]:
    """(code, what) of the first error diagnostic of a node resource that is a capacity error."""
    for d in result.diagnostics:
        if d.type in NODE_TYPES and (code := capacity_code(d.message)) is not None:
            return code.code, f"{d.type.rsplit(':', 1)[-1]} {d.urn.rsplit('::', 1)[-1] if d.urn else ''}: " \
                              f"{code.code} ({code.meaning})"
    code = capacity_code(result.error) if not result.diagnostics else None
    return (code.code, f"{code.code} ({code.meaning})") if code else None


def mandatory(result: RunResult) -> list[Verdict]:
    return [v for v in result.verdicts if v.level == "mandatory"]


class Failover:
    """One `trainstack up` run over one stack."""

    def __init__(self, stack: str, deployer: Deployer, stock: Stock, witness: Witness, planner: Planner, *,
                 max_attempts: int = 3, echo: Echo = print):
        self.stack, self.deployer, self.stock, self.witness, self.planner = stack, deployer, stock, witness, planner
        self.max_attempts, self.echo = max_attempts, echo
        self.report = Report(stack)

    # ---- the run ------------------------------------------------------------------------------------
    def run(self) -> Report:
        config0 = dict(self.deployer.config())
        plan0 = self.planner(config0)
        if plan0.target != "ecs" or plan0.capacity is None:
            self.echo(f"{self.stack}: {plan0.target} plan without ECS nodes: one `pulumi up`, no fallback")
            self._single(plan0)
            return self.report
        resources = self.deployer.resources()
        ran = job_has_run(plan0, self.deployer, resources, self.witness, self.report.notes)
        self.report.job_has_run = ran
        # after a job: the zone the stack's node vSwitch is in (the planned one if the state has none)
        fixed = (node_vswitch_zone(plan0, resources) or plan0.zone) if ran else None
        rows = list(plan0.capacity.candidates)
        self.echo(f"{self.stack}: {len(rows)} row(s) in the fallback order; at most {self.max_attempts} `pulumi up` "
                  f"run(s){'; a job has run here, so the zone stays ' + str(fixed) if ran else ''}")
        for note in self.report.notes:
            self.echo(f"  note: {note}")
        ups = 0
        for rank, row in enumerate(rows, 1):
            if ups >= self.max_attempts:
                self.report.notes.append(f"stopped after {ups} `pulumi up` run(s) (--max-attempts {self.max_attempts})")
                break
            try:
                attempt = self._attempt(rank, row, plan0, config0, ran, fixed)
            except TrainstackError:
                pinned = {k: v for k, v in self.deployer.config().items() if k in (ZONE_KEY, TYPE_KEY)}
                self.echo(f"  row {rank} {row.instance_type}: stopped; the stack config keeps {pinned or 'no pin'}, "
                          "matching what this attempt may have created")
                raise
            self.report.attempts.append(attempt)
            self.echo(f"  {attempt.line()}")
            ups += attempt.up_run
            if attempt.outcome == "deployed":
                self.report.deployed = attempt
                return self.report
        self._give_up(config0, ran)
        return self.report

    def _attempt(self, rank: int, row: FallbackCandidate, plan0: Plan, config0: dict, ran: bool,
                 fixed: Optional[str]) -> Attempt:
        zone = row.zone
        if fixed and zone not in (None, fixed):
            return Attempt(rank, row.instance_type, zone, "skipped", f"the stack has run a job in {fixed}: "
                                                                     "its zone never moves")
        if zone is None:
            zones = [z for z in self.stock.zones_with_stock(row.instance_type, row.spot) if not fixed or z == fixed]
            if not zones:
                return Attempt(rank, row.instance_type, None, "no-stock", "DescribeAvailableResource: no zone with stock")
            zone = zones[0]
        # nodes this row has already (a deployed stack's next `up`): their stock no longer matters
        have = [r for r in self.deployer.resources() if r.type == "alicloud:ecs/instance:Instance" and r.zone == zone
                and r.outputs.get("instanceType") == row.instance_type]
        status = "nodes exist" if len(have) >= row.nodes else self._no_stock(row, zone)
        if status.startswith("DescribeAvailableResource"):
            return Attempt(rank, row.instance_type, zone, "no-stock", status)
        if ran and row.instance_type != plan0.instance_type and (running := self.witness.running_nodes(plan0)):
            return Attempt(rank, row.instance_type, zone, "skipped",
                           f"{', '.join(running)} running: a new type stops it (ModifyInstanceSpec); stop the job first")
        if not ran:
            self._clear_failed_attempt(zone)
        config = self._pin(config0, plan0, row, zone)
        try:
            attempt_plan = self.planner(config)
        except (InputError, InfeasibleError) as err:  # the rule book refuses this row pinned: the next one
            return Attempt(rank, row.instance_type, zone, "skipped", f"the rule book refuses it pinned: {err.message}")
        got = (attempt_plan.instance_type, attempt_plan.zone, attempt_plan.nodes, attempt_plan.spot)
        if got != (row.instance_type, zone, row.nodes, row.spot):
            return Attempt(rank, row.instance_type, zone, "skipped", f"re-plans to {got[2]} x {got[0]} in {got[1]}"
                                                                     f"{' (spot)' if got[3] else ''}, not this row")
        preview = self.deployer.preview()
        self._stop_on(preview, "pulumi preview")
        if ran and (touched := [u for op, u, t in preview.steps if op in REMOVING_OPS and t in KEPT_TYPES]):
            return Attempt(rank, row.instance_type, zone, "skipped",
                           f"would delete or replace {', '.join(u.rsplit('::', 1)[-1] for u in touched)}")
        creates = any(op in CREATING_OPS and t in NODE_TYPES for op, _, t in preview.steps)
        if creates and status == "nodes exist":
            status = self._no_stock(row, zone)
            if status.startswith("DescribeAvailableResource"):
                return Attempt(rank, row.instance_type, zone, "no-stock", status)
        ready = "its nodes exist" if status == "nodes exist" else f"in stock ({status})"
        self.echo(f"  row {rank} {row.instance_type} in {zone}: {ready}, policies passed: pulumi up")
        result = self.deployer.up()
        if result.ok:
            return Attempt(rank, row.instance_type, zone, "deployed", "pulumi up succeeded", up_run=True)
        failure = capacity_failure(result)
        if failure is None:
            self._stop_on(result, "pulumi up")
            raise CloudApiError(f"pulumi up failed: {result.error or 'see the output above'}",
                                hint="not a stock error: fix it and run `trainstack up` again")
        return Attempt(rank, row.instance_type, zone, "no-capacity", failure[1], code=failure[0], up_run=True)

    # ---- helpers --------------------------------------------------------------------------------------
    def _no_stock(self, row: FallbackCandidate, zone: str) -> str:
        """The stock status when the type is in stock in ``zone``, else why not (``DescribeAvailableResource: ...``)."""
        ok, status, _ = self.stock.check(row.instance_type, zone, row.spot)
        return status if ok else f"DescribeAvailableResource: {status}"

    def _pin(self, config0: dict, plan0: Plan, row: FallbackCandidate, zone: str) -> dict:
        config = dict(config0)
        config[ZONE_KEY] = zone
        if row.instance_type != plan0.instance_type:
            config[TYPE_KEY] = row.instance_type
        for key in (ZONE_KEY, TYPE_KEY):
            self.deployer.set_config(key, config.get(key))
        return config

    def _stop_on(self, result: RunResult, what: str) -> None:
        if hard := mandatory(result):
            raise PolicyError(f"{what}: mandatory policy {hard[0].policy} failed: {hard[0].message}"
                              + (f" (and {len(hard) - 1} more)" if len(hard) > 1 else ""))
        if not result.ok and what == "pulumi preview":
            raise CloudApiError(f"pulumi preview failed: {result.error or 'see the output above'}")

    def _clear_failed_attempt(self, next_zone: Optional[str]) -> None:
        """First deploy: remove the nodes a failed attempt left, and everything in another zone."""
        resources = self.deployer.resources()
        roots = [r.urn for r in resources if r.type == "alicloud:ecs/instance:Instance"
                 or (r.type in ZONAL_TYPES and r.zone is not None and r.zone != next_zone)]
        if not roots:
            return
        targets = dependents(roots, resources)
        protected = [r.urn for r in targets if r.protect or r.retain]
        self.echo(f"  removing what the failed attempt left ({len(targets)} resource(s)"
                  f"{', ' + str(len(protected)) + ' protected but empty: no job has run' if protected else ''})")
        if protected:
            self.deployer.release_protection(protected)
        result = self.deployer.destroy(roots)
        if not result.ok:
            raise CloudApiError(f"removing the failed attempt's resources failed: {result.error}",
                                hint="run `pulumi destroy` for this stack (nothing in it has run a job), then "
                                     "`trainstack up` again")

    def _give_up(self, config0: dict, ran: bool) -> None:
        if not ran:
            self._clear_failed_attempt(None)
        for key in (ZONE_KEY, TYPE_KEY):
            self.deployer.set_config(key, config0.get(key))
        tried = "; ".join(a.line() for a in self.report.attempts) or "no row"
        raise InfeasibleError(
            f"{self.stack}: no row of the fallback order could be deployed ({tried})",
            suggestions=["retry later: stock changes by the hour", "widen the choice: resources.gpu_models / "
                         "instance_types, another region, or resources.spot: allow",
                         "hold capacity for a long on-demand run: resources.capacity: reserve (docs/capacity.md)"],
            details={"up": self.report.to_dict()})

    def _single(self, plan: Plan) -> None:
        preview = self.deployer.preview()
        self._stop_on(preview, "pulumi preview")
        result = self.deployer.up()
        if not result.ok:
            self._stop_on(result, "pulumi up")
            raise CloudApiError(f"pulumi up failed: {result.error or 'see the output above'}")
        self.report.deployed = Attempt(1, plan.instance_type or plan.target, plan.zone, "deployed",
                                       "pulumi up succeeded", up_run=True)
