"""A PAI-DLC training job as Pulumi resources.

``DlcTraining`` (component): the PAI workspace (unless ``dlc.workspace_id`` pins one), a PAI
dataset per storage location (OSS checkpoint bucket, ``storage.dataset_uri``) with DLC mount
paths, and the job itself in the stack's VPC / vSwitch / security group.

``DlcJob`` (dynamic resource): pulumi-alicloud has no DLC job resource, so this one calls
Alibaba's official SDK (``alibabacloud-pai-dlc20201203``, credentials from
``alibabacloud-credentials``' default chain):

* create -> on a quota, GetQuota first (PAI Studio): a quota that cannot run the pods (another kind,
  other nodes, too few GPUs/vCPU/memory) stops the deploy with the reason; with no pinned image,
  ListImages (AIWorkspace) finds PAI's newest official training image for the GPU; then CreateJob
  and one GetJob for the first status. The image used is kept in the state (``image_resolved``);
* read   -> GetJob (``status``, ``reason``, the job's image); a job that no longer exists reads as gone;
* diff   -> any input change replaces the job (a running job cannot be edited), delete first; the
  informational ``quota_spec``/``quota_kind`` never do, and a newer official image is no input at
  all (the lookup's answer is an output), so it never replaces a submitted job;
* delete -> StopJob unless the job already finished, wait until it is stopped, DeleteJob; a job
  that is already gone is success.

Throttling and transient failures are retried with exponential backoff and jitter (bounded).
CreateJob is retried only when the API certainly did not run it (throttled, 503, connect
timeout), so a retry can never start the same training twice. Everything else raises
:class:`DlcApiError` (exit 5) naming the API code, message, request id and what to fix.

The request body comes from :mod:`trainstack.cloud.dlc_request` over the pure job inputs of
:mod:`trainstack.dlc_job` (what ``trainstack plan`` also shows); error classification, the fix
table and the retry policy are the shared ones of :mod:`trainstack.cloud`. The provider is pickled into the state by dill: it holds only numbers and
optional callables; the SDK client is built per call by :data:`client_factory`, a module-level
name tests replace.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

import pulumi
import pulumi.dynamic as dyn
from pulumi.runtime import rpc
from alibabacloud_pai_dlc20201203 import models as dlc_models

from trainstack.cloud.dlc import DlcApiError, default_client, job_reason, job_status
from trainstack.cloud.dlc_images import default_workspace_client, resolve_image
from trainstack.cloud.dlc_quota import default_quota_client, get_quota, quota_problems
from trainstack.cloud.dlc_request import build_request_model
from trainstack.cloud.errors import ApiErrorInfo, may_have_run
from trainstack.cloud.retry import DLC_CALLS, GaveUp, RetryPolicy, with_retries
from trainstack.dlc_job import (
    INFORMATIONAL_INPUT_KEYS, INPUT_KEYS, KIND, TERMINAL_STATUSES, job_inputs, planned_datasets, validate_inputs,
    workspace_name,
)
from trainstack.errors import CloudApiError
from trainstack.plan import Plan

#: ``region -> client``. Replace it (or pass ``client_factory=`` to the provider) in tests.
client_factory: Callable[[str], Any] = default_client
#: ``region -> AIWorkspace client`` (ListImages) and ``region -> PAI Studio client`` (GetQuota), likewise.
workspace_client_factory: Callable[[str], Any] = default_workspace_client
quota_client_factory: Callable[[str], Any] = default_quota_client


# ---------------------------------------------------------------------------------------------
# the dynamic provider


def _inputs_only(props: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in props.items() if k in INPUT_KEYS}


class DlcJobProvider(dyn.ResourceProvider):
    """CRUD for one PAI-DLC job. Arguments are for tests; defaults are what ``pulumi up`` uses.

    A provider pickled into an older state lacks the attributes added since (the class is looked up
    by name when it is unpickled): read those with ``getattr`` and a default."""

    serialize_as_secret_always = False  # the pickled provider holds no secrets

    def __init__(self, client_factory: Optional[Callable[[str], Any]] = None, *,
                 sleep: Optional[Callable[[float], None]] = None, rand: Optional[Callable[[], float]] = None,
                 max_attempts: int = 6, base_delay: float = 1.0, max_delay: float = 30.0,
                 poll_interval: float = 10.0, stop_timeout: float = 900.0,
                 workspace_client_factory: Optional[Callable[[str], Any]] = None,
                 quota_client_factory: Optional[Callable[[str], Any]] = None) -> None:
        super().__init__()
        self.client_factory = client_factory
        self.workspace_client_factory = workspace_client_factory
        self.quota_client_factory = quota_client_factory
        self.sleep = sleep
        self.rand = rand
        self.max_attempts = max_attempts
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.poll_interval = poll_interval
        self.stop_timeout = stop_timeout

    # -- plumbing -------------------------------------------------------------------------------

    def _client(self, region: str) -> Any:
        factory = self.client_factory or client_factory  # module global looked up at call time
        return factory(region)

    def _workspace_client(self, region: str) -> Any:
        return (getattr(self, "workspace_client_factory", None) or workspace_client_factory)(region)

    def _quota_client(self, region: str) -> Any:
        return (getattr(self, "quota_client_factory", None) or quota_client_factory)(region)

    def check_quota(self, inputs: Mapping[str, Any]) -> None:
        """The real quota must be able to run the pods (GetQuota); its reason otherwise."""
        quota = get_quota(self._quota_client(inputs["region"]), inputs["resource_id"], self.call)
        problems = quota_problems(quota, inputs)
        if problems:
            raise CloudApiError(f"PAI resource quota {inputs['resource_id']} cannot run this job: "
                                + "; ".join(problems) + " (nothing was submitted)",
                                hint="fix dlc.quota_spec / dlc.cpu_per_pod / dlc.memory_gib_per_pod / resources.gpus "
                                     "to match the quota, or use the quota the job was planned for")

    def image_for(self, inputs: Mapping[str, Any]) -> str:
        """The pinned image, or PAI's official one looked up now (ListImages)."""
        if inputs.get("image"):
            return str(inputs["image"])
        return resolve_image(self._workspace_client(inputs["region"]), inputs["image_lookup"], inputs["region"],
                             self.call)

    def _sleep(self, seconds: float) -> None:
        (self.sleep or time.sleep)(seconds)

    @property
    def policy(self) -> RetryPolicy:
        return RetryPolicy(attempts=self.max_attempts, base_s=self.base_delay, cap_s=self.max_delay,
                           jitter=DLC_CALLS.jitter)

    def backoff(self, attempt: int, info: Optional[ApiErrorInfo] = None) -> float:
        """Seconds to wait after failed attempt ``attempt`` (the shared policy, with this provider's limits)."""
        return self.policy.delay(attempt, info.retry_after_ms if info else None, self.rand or random.random)

    def call(self, operation: str, fn: Callable[[], Any], *, idempotent: bool = True) -> Any:
        """``fn()`` with retries on throttling / transient errors; :class:`DlcApiError` otherwise."""
        try:
            return with_retries(fn, policy=self.policy, idempotent=idempotent, sleep=self._sleep,
                                rand=self.rand or random.random)
        except GaveUp as failed:
            if isinstance(failed.cause, DlcApiError):
                raise failed.cause from None
            fix = None
            if not idempotent and may_have_run(failed.info):
                fix = ("the API may have accepted the request before failing: look in PAI-DLC for a job with "
                       "this display name before re-running `pulumi up`, and delete any duplicate")
            raise DlcApiError(operation, failed.info, fix=fix, attempts=failed.attempts) from failed.cause

    def _get(self, client: Any, job_id: str) -> Any:
        resp = self.call("GetJob", lambda: client.get_job(job_id, dlc_models.GetJobRequest(need_detail=False)))
        return resp.body

    # -- CRUD -----------------------------------------------------------------------------------

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> dyn.CheckResult:
        known = {k: v for k, v in news.items() if not (isinstance(v, str) and v == rpc.UNKNOWN)}
        return dyn.CheckResult(news, [dyn.CheckFailure(p, r) for p, r in validate_inputs(known)])

    def create(self, props: dict[str, Any]) -> dyn.CreateResult:
        inputs = _inputs_only(props)
        build_request_model(inputs, image=inputs.get("image") or "(checked)")  # bad inputs fail before any call
        if inputs.get("resource_id"):
            self.check_quota(inputs)
        image = self.image_for(inputs)
        request = build_request_model(inputs, image=image)
        client = self._client(inputs["region"])
        resp = self.call("CreateJob", lambda: client.create_job(request), idempotent=False)
        job_id = resp.body.job_id
        status, reason = "Creating", ""
        try:  # the job exists now; a failing status read must not fail (and leak) the create
            body = self._get(client, job_id)
            status, reason = job_status(body) or status, job_reason(body)
        except DlcApiError:
            pass
        return dyn.CreateResult(job_id, {**inputs, "job_id": job_id, "status": status, "reason": reason,
                                         "image_resolved": image})

    def read(self, id_: str, props: dict[str, Any]) -> dyn.ReadResult:
        client = self._client(props["region"])
        try:
            body = self._get(client, id_)
        except DlcApiError as err:
            if err.not_found:
                return dyn.ReadResult("", {})  # gone: the engine drops it from the state
            raise
        outs = {**_inputs_only(props), "job_id": id_, "status": job_status(body), "reason": job_reason(body),
                "image_resolved": job_image(body) or props.get("image_resolved") or props.get("image")}
        return dyn.ReadResult(id_, outs)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> dyn.DiffResult:
        changed = sorted(k for k in INPUT_KEYS
                         if k not in INFORMATIONAL_INPUT_KEYS and _norm(olds.get(k)) != _norm(news.get(k)))
        return dyn.DiffResult(changes=bool(changed), replaces=changed, delete_before_replace=True)

    def update(self, _id: str, _olds: dict[str, Any], _news: dict[str, Any]) -> dyn.UpdateResult:
        raise CloudApiError("a PAI-DLC job cannot be changed in place; it is replaced (this is a bug if reached)")

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        client = self._client(props["region"])
        try:
            status = job_status(self._get(client, id_))
        except DlcApiError as err:
            if err.not_found:
                return
            raise
        if status not in TERMINAL_STATUSES:
            if status != "Stopping":
                try:
                    self.call("StopJob", lambda: client.stop_job(id_))
                except DlcApiError as err:
                    if err.not_found:
                        return
                    status = self._status_or_raise(client, id_, err)  # finished meanwhile?
                    if status is None:
                        return
            if not self._wait_stopped(client, id_):
                return
        try:
            self.call("DeleteJob", lambda: client.delete_job(id_))
        except DlcApiError as err:
            if not err.not_found:
                raise

    def _status_or_raise(self, client: Any, id_: str, err: DlcApiError) -> Optional[str]:
        try:
            status = job_status(self._get(client, id_))
        except DlcApiError as again:
            if again.not_found:
                return None
            raise err from again
        if status in TERMINAL_STATUSES or status == "Stopping":
            return status
        raise err

    def _wait_stopped(self, client: Any, id_: str) -> bool:
        """Poll until the job is stopped; False when it disappeared meanwhile."""
        polls = max(1, int(self.stop_timeout // max(self.poll_interval, 1e-9)))
        for _ in range(polls):
            try:
                status = job_status(self._get(client, id_))
            except DlcApiError as err:
                if err.not_found:
                    return False
                raise
            if status in TERMINAL_STATUSES:
                return True
            self._sleep(self.poll_interval)
        raise DlcApiError("StopJob", ApiErrorInfo(code="StopTimeout",
                                                  message=f"job {id_} still not stopped after {self.stop_timeout:.0f}s"),
                          fix="the job is still stopping; re-run `pulumi destroy` in a few minutes")


def job_image(body: Any) -> Optional[str]:
    """The image a submitted job runs (GetJob JobSpecs[0].Image)."""
    specs = getattr(body, "job_specs", None) or []
    image = getattr(specs[0], "image", None) if specs else None
    return image or None


def _norm(value: Any) -> Any:
    """Compare like the engine stores values: numbers as floats, tuples as lists."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, Mapping):
        return {k: _norm(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_norm(v) for v in value]
    return value


# ---------------------------------------------------------------------------------------------
# resources


@dataclass(frozen=True)
class DlcJobArgs:
    """A DLC job's inputs: the plan's plain values (``trainstack.dlc_job.job_inputs``, what policies
    judge) and the ids known only at deploy time (workspace, network, data sources)."""

    region: str
    workspace_id: pulumi.Input[str]
    command: str
    pod_count: int
    image: Optional[str] = None
    image_lookup: Optional[Mapping[str, Any]] = None
    quota_spec: Optional[str] = None
    quota_kind: Optional[str] = None
    gpus_per_pod: int = 1
    ecs_spec: Optional[str] = None
    resource_id: Optional[str] = None
    cpu_per_pod: Optional[int] = None
    memory_gib_per_pod: Optional[float] = None
    enable_rdma: bool = False
    spot: bool = False
    spot_price_limit: Optional[float] = None
    job_type: str = "PyTorchJob"
    envs: Mapping[str, str] = field(default_factory=dict)
    data_sources: Sequence[Mapping[str, pulumi.Input[Any]]] = ()
    vpc_id: pulumi.Input[Optional[str]] = None
    vswitch_id: pulumi.Input[Optional[str]] = None
    security_group_id: pulumi.Input[Optional[str]] = None
    vpc_cidr: Optional[str] = None
    max_running_minutes: Optional[int] = None
    display_name: Optional[str] = None
    kind: str = KIND
    #: the planned price per pod-hour and whose it is (informational: policies read it, it never replaces)
    on_demand_cny_per_hour: Optional[float] = None
    price_source: Optional[str] = None

    def props(self, name: str) -> dict[str, Any]:
        """The resource's inputs (and its outputs, unset), in the order the engine records them."""
        if self.kind != KIND:
            raise ValueError(f"DlcJob kind must be {KIND!r}")
        return {
            "kind": self.kind, "region": self.region, "display_name": self.display_name or name,
            "job_type": self.job_type, "image": self.image,
            "image_lookup": dict(self.image_lookup) if self.image_lookup else None,
            "quota_spec": self.quota_spec, "quota_kind": self.quota_kind,
            "command": self.command, "envs": dict(self.envs or {}), "ecs_spec": self.ecs_spec,
            "resource_id": self.resource_id, "pod_count": self.pod_count, "gpus_per_pod": self.gpus_per_pod,
            "cpu_per_pod": self.cpu_per_pod, "memory_gib_per_pod": self.memory_gib_per_pod,
            "enable_rdma": self.enable_rdma, "spot": self.spot, "spot_price_limit": self.spot_price_limit,
            "max_running_minutes": self.max_running_minutes, "vpc_cidr": self.vpc_cidr,
            **({"on_demand_cny_per_hour": self.on_demand_cny_per_hour, "price_source": self.price_source}
               if self.on_demand_cny_per_hour is not None else {}),
            "workspace_id": self.workspace_id, "vpc_id": self.vpc_id, "vswitch_id": self.vswitch_id,
            "security_group_id": self.security_group_id, "data_sources": [dict(d) for d in self.data_sources],
            "job_id": None, "status": None, "reason": None, "image_resolved": None,
        }


class DlcJob(dyn.Resource):
    """One PAI-DLC job. Plain inputs (``kind``, ``ecs_spec``, ``pod_count``, ``enable_rdma`` ...) are
    what policies judge; ``workspace_id``, network ids and ``data_sources`` may be Outputs."""

    job_id: pulumi.Output[str]
    status: pulumi.Output[str]
    reason: pulumi.Output[str]

    image_resolved: pulumi.Output[str]

    def __init__(self, name: str, args: DlcJobArgs, opts: Optional[pulumi.ResourceOptions] = None,
                 provider: Optional[DlcJobProvider] = None) -> None:
        super().__init__(provider or DlcJobProvider(), name, args.props(name), opts)


class DlcTraining(pulumi.ComponentResource):
    """Workspace, datasets and the DLC job of a plan whose target is ``dlc`` (no ECS nodes)."""

    def __init__(self, name: str, plan: Plan, vpc_id: pulumi.Input[str], vswitch_id: pulumi.Input[str],
                 security_group_id: pulumi.Input[str], opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("trainstack:index:DlcTraining", name, None, opts)
        # all plan checks first, so a bad plan creates nothing
        inputs = job_inputs(plan)
        stack = pulumi.get_stack()
        specs = planned_datasets(plan, stack)
        # PAI resources (1.4 s) only here: the job provider's own process loads this module and never declares
        from pulumi_alicloud import pai

        child = pulumi.ResourceOptions(parent=self)
        if plan.dlc.workspace_id:
            self.workspace = None
            workspace_id: pulumi.Input[str] = plan.dlc.workspace_id
        else:
            self.workspace = pai.WorkspaceWorkspace(
                f"{name}-workspace", workspace_name=workspace_name(plan.name, stack), display_name=plan.name,
                description=f"trainstack {plan.name} ({stack})"[:80], env_types=["prod"], opts=child)
            workspace_id = self.workspace.id
        self.datasets: dict[str, Any] = {}
        for spec in specs:
            self.datasets[spec.role] = pai.WorkspaceDataset(
                f"{name}-{spec.role}", workspace_id=workspace_id, dataset_name=spec.dataset_name,
                data_source_type=spec.data_source_type, uri=spec.uri, property=spec.data_property,
                options=spec.options, accessibility="PRIVATE", data_type="COMMON", source_type="USER",
                description=f"trainstack {plan.name}: {spec.role} ({spec.mount_access} at {spec.mount_path})",
                opts=child)
        data_sources = [spec.data_source(self.datasets[spec.role].id) for spec in specs]
        args = DlcJobArgs(**inputs, workspace_id=workspace_id, data_sources=data_sources, vpc_id=vpc_id,
                          vswitch_id=vswitch_id, security_group_id=security_group_id)
        self.job = DlcJob(f"{name}-job", args,
                          opts=pulumi.ResourceOptions(parent=self, depends_on=list(self.datasets.values())))
        self.workspace_id = pulumi.Output.from_input(workspace_id)
        self.job_id = self.job.job_id
        self.job_status = self.job.status
        self.image = self.job.image_resolved
        self.register_outputs({
            "workspace_id": self.workspace_id, "job_id": self.job.job_id, "job_status": self.job.status,
            "image": self.job.image_resolved,
            "dataset_ids": {role: ds.id for role, ds in self.datasets.items()},
        })
