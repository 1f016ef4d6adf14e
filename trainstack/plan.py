"""The Plan: everything trainstack decided, as pure, frozen, JSON-serialisable data.

The resolver builds it; the Pulumi components, the DLC job, the bootstrap renderer, the
policies and the offline preview only read it. ``Plan.model_dump(mode="json")`` is the
``resolve --json`` contract of docs/DESIGN.md (top-level ``target``, ``instance_type``, ``nodes``,
``gpus_per_node``, ``spot``, ``spot_price_limit``, ``zone``, ``hourly_cost_cny``,
``estimated_hours``, ``total_cost_cny``, ``labels``, ``alternatives``, ``rejected``).
"""

from __future__ import annotations

import functools
import ipaddress
import math
from typing import Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

from .catalog.limits import service_limits
from .reasons import Reason, ReasonCode

PLAN_SCHEMA_VERSION = 1

_LIMITS = service_limits()
#: Minimum ESSD size per performance level and the largest ESSD (GiB): data/service_limits.yaml.
ESSD_MIN_GIB: dict[str, int] = {k: int(v) for k, v in _LIMITS.value("ecs.essd.min_gib").items()}  # type: ignore[union-attr]
ESSD_MAX_GIB = int(_LIMITS.number("ecs.essd.max_gib"))
#: Alibaba LowLatency deployment sets hold at most this many instances (one zone).
DEPLOYMENT_SET_MAX = int(_LIMITS.number("ecs.deployment_set.low_latency.max_instances"))


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def spot_price_limit(price: float) -> float:
    """A spot bid: at most 3 decimals, rounded down (never above the price given)."""
    return math.floor(price * 1000 + 1e-9) / 1000


def ess_price_limit(price: float) -> float:
    """An ESS scaling configuration's spot bid: at most 2 decimals (pulumi-alicloud 4.0
    ``ScalingConfigurationSpotPriceLimitArgs.price_limit``), rounded down."""
    return math.floor(price * 100 + 1e-9) / 100


class EstimateSummary(_Frozen):
    """The sizing numbers the choice rests on, for the chosen layout."""

    gpu_model: Optional[str] = None
    peak_gib_per_gpu: float
    required_gib_per_gpu: float
    usable_gib_per_gpu: Optional[float] = None
    memory_margin_gib: Optional[float] = None
    tokens_per_second: Optional[float] = Field(None, description="Whole cluster")
    tokens_per_second_per_gpu: Optional[float] = None
    estimated_hours: Optional[float] = None
    on_demand_hourly_cny: Optional[float] = None
    spot_hourly_cny: Optional[float] = None


class DataDiskPlan(_Frozen):
    """A standalone ESSD attached to one node (``EcsDisk`` + ``EcsDiskAttachment``): its size grows
    in place (ResizeDisk online) and it outlives a replaced node, which gets it attached again."""

    category: Literal["cloud_essd", "cloud_auto"] = "cloud_essd"
    performance_level: Literal["PL0", "PL1", "PL2", "PL3"] = "PL1"
    size_gib: int
    encrypted: bool = True
    delete_with_instance: bool = False
    mount_path: str = "/mnt/data"
    holds_checkpoints: bool = False
    label: str = Field("trainstack-data", pattern=r"^[a-z0-9-]{1,16}$",
                       description="ext4 label: how the node finds the disk again after it has grown")


class CpfsPlan(_Frozen):
    capacity_gib: int
    storage_type: Literal["advance_100", "advance_200"] = "advance_100"
    protocol_service: bool = Field(True, description="CPFS-NFS protocol service + mount target")
    mount_path: str = "/mnt/cpfs"
    throughput_mbps: Optional[float] = None


class OssPlan(_Frozen):
    """The stack bucket (every ECS plan has one; DLC plans when checkpoints are on OSS), one bucket
    with documented prefixes (``trainstack.layout.storage.BUCKET_PREFIXES``): ``job/`` (the job
    settings the deployer writes; nodes read only), ``status/`` (node status the nodes write),
    ``checkpoints/`` (checkpoints when ``storage.checkpoint`` is oss)."""

    bucket: str
    versioning: bool = True
    server_side_encryption: Literal["AES256", "KMS"] = "AES256"
    internal_endpoint: str
    prefix: str = "checkpoints/"
    job_prefix: str = "job/"
    #: Where the nodes' heartbeats go: ``<status_prefix><node name>/heartbeat.json`` (docs/status.md)
    status_prefix: str = "status/"
    name_from_stack: bool = Field(
        True, description="The name's last part is derived at deploy time from the account, Pulumi project and "
                          "stack (and trainstack:storageGeneration), so it is unique per stack")

    @property
    def job_settings_key(self) -> str:
        return f"{self.job_prefix}settings.json"


class StoragePlan(_Frozen):
    system_disk_gib: int = 200
    system_disk_category: str = "cloud_essd"
    system_disk_performance_level: Literal["PL0", "PL1", "PL2", "PL3"] = "PL1"
    data_disk: Optional[DataDiskPlan] = Field(None, description="Dataset cache and scratch (not retained)")
    checkpoint_disk: Optional[DataDiskPlan] = Field(None, description="Checkpoints on ESSD (retained)")
    cpfs: Optional[CpfsPlan] = None
    oss: Optional[OssPlan] = None
    checkpoint: Literal["cpfs", "oss", "essd"]
    checkpoint_path: str = Field(description="Where the trainer writes checkpoints on a node")
    dataset_uri: Optional[str] = None
    dataset_gib: float = 0
    retain_on_destroy: bool = True
    notes: tuple[str, ...] = ()


class NetworkPlan(_Frozen):
    """``vswitch_cidr`` holds the nodes' fixed primary IPs and nothing that allocates addresses at
    random; ``eri_vswitch_cidr`` (secondary ERIs) and ``services_vswitch_cidr`` (CPFS and its protocol
    service, the NAT gateway) take the random allocations (trainstack.layout.network)."""

    vpc_cidr: str
    vswitch_cidr: str
    eri_vswitch_cidr: Optional[str] = None
    services_vswitch_cidr: Optional[str] = None
    pool_vswitch_cidr: Optional[str] = Field(
        None, description="A multi-node self-healing pool's nodes (ESS picks their addresses; never the node vSwitch)")
    rdma: Literal["erdma", "roce", "none"] = "none"
    eri_per_node: int = 0
    queue_pair_number: Optional[int] = Field(
        None, description="Queue pairs of EACH ERI (the type's maximum split evenly); None on an eRDMA plan: "
                          "read from DescribeInstanceTypes at deploy time")
    queue_pair_number_max: Optional[int] = Field(None, description="The type's maximum, when the catalog knows it")
    jumbo_frames: bool = Field(False, description="Only where the family's jumbo-frame support is sourced")
    deployment_set: Optional[Literal["LowLatency"]] = None
    deployment_set_groups: int = 0
    mtu: int = 1500
    internet_egress: bool = False
    ssh_cidrs: tuple[str, ...] = ()
    key_pair: Optional[str] = None
    nccl_env: dict[str, str] = Field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def node_private_ips(self, nodes: int) -> list[str]:
        """Fixed private IPs for the nodes (host 10, 11, ... of the vSwitch), so the hostfile and
        the rendezvous address (node 0) are plain values known before anything exists."""
        return list(_node_ips(self.vswitch_cidr, nodes))


@functools.lru_cache(maxsize=64)
def _node_ips(vswitch_cidr: str, nodes: int) -> tuple[str, ...]:
    net = ipaddress.ip_network(vswitch_cidr)
    if nodes + 10 > net.num_addresses - 4:
        from .errors import InputError

        raise InputError(f"network: vSwitch {vswitch_cidr} is too small for {nodes} node(s): nodes take fixed "
                         f"addresses from host .10 on and Alibaba reserves 4 per vSwitch, so it needs at least "
                         f"{nodes + 14} addresses", hint="use a larger network.vswitch_cidr / vpc_cidr (a /24 holds "
                                                         "242 nodes)")
    return tuple(str(net.network_address + 10 + i) for i in range(nodes))


class ImagePlan(_Frozen):
    image_id: Optional[str] = Field(None, description="Pinned by the profile; else looked up by family")
    image_family: str = "acs:alibaba_cloud_linux_3_2104_lts_x64"
    uefi: bool = False
    auto_install_driver: bool = True
    container_image: Optional[str] = None
    notes: tuple[str, ...] = ()


class SpotPoolPlan(_Frozen):
    """A self-healing spot pool (profile ``resources.self_healing``): one ESS scaling group that
    keeps ``max_size`` spot nodes running and replaces a reclaimed one (trainstack.layout.spot_pool).

    1-node plans: the pool holds the node. Multi-node plans (``anchor``): node 0 is a plain
    on-demand instance at a fixed private IP that hosts torchrun's c10d rendezvous; the pool holds
    the other ``nodes - 1`` nodes in a vSwitch of their own (ESS picks their IPs), and every node
    runs torchrun elastic with a fixed world size, so a replacement joins the running job."""

    min_size: int = Field(1, ge=1)
    max_size: int = Field(1, ge=1)
    on_demand_base: int = Field(0, ge=0, description="On-demand nodes below the spot capacity (0: all spot)")
    compensate_with_on_demand: bool = Field(
        False, description="Start an on-demand node when no spot node can be had (profile spot: allow)")
    multi_az_policy: Literal["COST_OPTIMIZED"] = "COST_OPTIMIZED"
    price_limit: float = Field(gt=0, description="ESS spot price limit, CNY/h (at most 2 decimals, rounded down)")
    anchor: bool = Field(False, description="Node 0 runs outside the pool, on-demand, at its fixed private IP, "
                                            "and hosts the rendezvous (multi-node plans)")
    rendezvous_port: int = Field(29400, ge=1024, le=65535, description="torchrun c10d rendezvous port on node 0")
    max_restarts: int = Field(0, ge=0, description="torchrun --max-restarts: worker failures each agent survives "
                                                   "(a replacement joining costs none)")
    join_timeout_seconds: int = Field(600, ge=60, description="How long the agents wait for a replacement node "
                                                              "(rendezvous join_timeout)")
    notes: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _sizes(self) -> "SpotPoolPlan":
        if self.min_size != self.max_size:
            raise ValueError("a self-healing pool keeps a fixed size (min_size = max_size)")
        if not self.anchor and self.max_size != 1:
            raise ValueError("a pool without an anchor node holds a 1-node plan's single node")
        return self


class ImageLookup(_Frozen):
    """PAI's official training image, looked up at deploy time (AIWorkspace ListImages): the newest
    whose labels match and whose tag names a GPU build with at least ``min_cuda``."""

    labels: tuple[str, ...] = Field(description="ListImages Labels filter, Key=Value each")
    name: str = Field(description="ListImages Name filter (the framework)")
    repository: str = Field(description="Repository name the image must come from, e.g. pytorch-training")
    min_cuda: str = Field(description="Oldest CUDA the GPU generation needs, e.g. 11.8")
    architecture: str = Field(description="GPU generation the CUDA minimum is for")


class DlcPlan(_Frozen):
    workspace_id: Optional[str] = None
    resource_id: Optional[str] = None
    job_type: str = "PyTorchJob"
    image: Optional[str] = Field(None, description="None: the official image is looked up at deploy time")
    image_lookup: Optional[ImageLookup] = None
    image_is_default: bool = True
    quota_spec: Optional[str] = Field(None, description="Node spec of the quota (ECS type or Lingjun spec)")
    quota_kind: Optional[Literal["lingjun", "general", "unknown"]] = None
    nccl_preset: Optional[str] = Field(None, description="PAI's NCCL preset the job keeps (Lingjun)")
    ecs_spec: Optional[str] = None
    pod_count: int = 1
    gpus_per_pod: int = 1
    cpu_per_pod: Optional[int] = None
    memory_gib_per_pod: Optional[float] = None
    enable_rdma: bool = False
    spot: bool = False
    spot_price_limit: Optional[float] = None
    command: str
    envs: dict[str, str] = Field(default_factory=dict)
    max_running_minutes: Optional[int] = None
    notes: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _one_image(self) -> "DlcPlan":
        if (self.image is None) == (self.image_lookup is None):
            raise ValueError("a DLC plan has an image or an image lookup (exactly one)")
        return self


class JobSecretPlan(_Frozen):
    """A job secret by reference: read by the node at job start, never held by trainstack."""

    kms_secret: str
    kms_key_id: Optional[str] = None


class ParallelLayout(_Frozen):
    """How the job's GPUs split it: tensor x pipeline x context x data parallel (expert parallelism
    splits the routed experts over that many of the data x context ranks). World size = the product of
    tensor, pipeline, context and data parallel."""

    tensor_parallel: int = Field(1, ge=1)
    pipeline_parallel: int = Field(1, ge=1)
    context_parallel: int = Field(1, ge=1)
    data_parallel: int = Field(1, ge=1)
    expert_parallel: int = Field(1, ge=1)
    virtual_pipeline_stages: int = Field(1, ge=1, description="Model chunks per pipeline rank (interleaved 1F1B)")

    @property
    def world_size(self) -> int:
        return self.tensor_parallel * self.pipeline_parallel * self.context_parallel * self.data_parallel

    @property
    def trivial(self) -> bool:
        return self.tensor_parallel == self.pipeline_parallel == self.context_parallel == 1

    @property
    def label(self) -> str:
        parts = [f"TP {self.tensor_parallel}"] if self.tensor_parallel > 1 else []
        if self.pipeline_parallel > 1:
            parts.append(f"PP {self.pipeline_parallel}"
                         + (f" (x{self.virtual_pipeline_stages} virtual)" if self.virtual_pipeline_stages > 1 else ""))
        if self.context_parallel > 1:
            parts.append(f"CP {self.context_parallel}")
        if self.expert_parallel > 1:
            parts.append(f"EP {self.expert_parallel}")
        return " x ".join(parts + [f"DP {self.data_parallel}"])


class LayoutOption(_Frozen):
    """One layout the resolver sized for the chosen instance type and node count."""

    layout: ParallelLayout
    required_gib_per_gpu: float
    tokens_per_second: Optional[float] = None
    fits: bool
    chosen: bool = False


class ParallelismPlan(_Frozen):
    """The chosen layout and how it was chosen (the layouts considered, the pipeline's micro-batches)."""

    layout: ParallelLayout = Field(default_factory=ParallelLayout)
    chosen_by: Literal["profile", "resolver"] = "profile"
    considered: tuple[LayoutOption, ...] = ()
    micro_batches: int = Field(1, ge=1, description="Micro-batches per optimizer step on each data-parallel rank")
    micro_batches_in_flight: float = Field(1.0, description="Micro-batches whose activations the fullest stage holds")
    bubble_fraction: float = Field(0.0, ge=0, le=1, description="Share of the step pipeline stages sit idle")
    layers_per_chunk: int = Field(0, ge=0, description="Decoder layers per pipeline model chunk (0: no pipeline)")


class JobPlan(_Frozen):
    command: str
    code_uri: Optional[str] = None
    env: dict[str, str] = Field(default_factory=dict)
    secrets: dict[str, JobSecretPlan] = Field(default_factory=dict, description="env name -> KMS secret")
    max_runtime_hours: Optional[float] = None
    #: the budget guard on the nodes (docs/status.md): resources.max_total_cost and deadline_hours
    max_total_cost_cny: Optional[float] = None
    deadline_hours: Optional[float] = None
    nproc_per_node: int = 1
    method: str
    precision: str
    zero_stage: int = 0
    gradient_checkpointing: Union[bool, Literal["selective"]] = False
    micro_batch_size: int = 1
    sequence_length: int = 2048
    gradient_accumulation_steps: int = Field(1, ge=1, description="Micro-batches per optimizer step (per rank)")
    parallel: ParallelLayout = Field(default_factory=ParallelLayout,
                                     description="The degrees the launcher passes (tensor, pipeline, context, ...)")
    global_batch_size: Optional[int] = Field(None, ge=1, description="training.global_batch_size, when stated "
                                             "(launchers/intent.py keeps it at the plan's node count)")

    @model_serializer(mode="wrap")
    def _omit_unstated(self, handler):  # absent unless stated: other plans stay byte-identical
        out = handler(self)
        if isinstance(out, dict) and out.get("global_batch_size", 0) is None:
            del out["global_batch_size"]
        return out


class PriceProvenance(_Frozen):
    """Whose price a plan rests on, how old it is, and whether the type and zone were seen offered.

    The ``prices`` block of ``resolve``/``plan``/``diff`` JSON (``prices.as_of``, ``prices.age_days``,
    ``prices.source``); ``headline`` is the line every text output prints first.
    """

    source: Literal["snapshot", "borrowed-region", "price-book", "refresh", "none"]
    as_of: Optional[str] = Field(None, description="ISO date of the price")
    age_days: Optional[int] = Field(None, description="Days from as_of to the day the plan was made")
    stale: bool = Field(False, description="Older than the catalog's price_max_age_days")
    max_age_days: int = 90
    priced: str = Field(description="What is priced: ECS type, DLC spec or resource quota id")
    service: Literal["ecs", "dlc", "dlc-quota"] = "ecs"
    per: Literal["node", "pod", "GPU"] = "node"
    whose: str = Field(description="Whose figure it is, in words")
    borrowed_from: Optional[str] = None
    type_seen_in_region: Optional[bool] = Field(None, description="Type seen offered in the region (ECS only)")
    zone: Optional[str] = None
    zone_seen: Optional[bool] = Field(None, description="Zone seen offered for the type; None: chosen at deploy")
    spot_estimated: Optional[bool] = Field(None, description="Spot plans: the spot price is an estimate")
    headline: str


class Candidate(_Frozen):
    """One considered way to run the job (chosen, alternative or rejected)."""

    target: Literal["ecs", "dlc"] = "ecs"
    instance_type: Optional[str]
    gpu_model: Optional[str] = None
    nodes: int
    gpus_per_node: int
    spot: bool = False
    zone: Optional[str] = None
    hourly_cost_cny: Optional[float] = None
    estimated_hours: Optional[float] = None
    total_cost_cny: Optional[float] = None
    objective: Optional[float] = Field(None, description="Value minimised (CNY or hours)")
    memory_margin_gib: Optional[float] = None
    tokens_per_second: Optional[float] = None
    layout: Optional[ParallelLayout] = Field(None, description="The parallel layout sized for this candidate")
    feasible: bool = True
    reason: Optional[str] = Field(None, description="Why it was rejected, in the user's words")
    reason_code: Optional[ReasonCode] = Field(None, description="Which rule rejected it (for programs)")
    labels: tuple[str, ...] = ()

    def rejected_by(self, why: Optional[Reason]) -> "Candidate":
        """This candidate with its verdict: feasible when ``why`` is None."""
        return self.model_copy(update={"feasible": why is None, "reason": why.message if why else None,
                                       "reason_code": why.code if why else None})


class Rejection(_Frozen):
    """Why a family (or type) could not host the job; one line per family in the output."""

    family: str
    instance_types: tuple[str, ...] = ()
    reason: str
    reason_codes: tuple[ReasonCode, ...] = Field((), description="The rules behind ``reason``, most common first")


class Plan(_Frozen):
    schema_version: int = PLAN_SCHEMA_VERSION
    name: str
    region: str
    zone: Optional[str] = Field(None, description="None: chosen at deploy time from stock")
    target: Literal["ecs", "dlc"]
    instance_type: Optional[str]
    gpu_model: Optional[str] = None
    nodes: int = Field(ge=1)
    gpus_per_node: int = Field(ge=1)
    total_gpus: int = Field(ge=1)
    spot: bool = False
    spot_price_limit: Optional[float] = None
    spot_price_limit_source: Optional[Literal["on-demand price", "profile"]] = Field(
        None, description="on-demand price: picked by trainstack (kept after creation); profile: stated, managed")
    spot_strategy: Literal["NoSpot", "SpotWithPriceLimit"] = "NoSpot"
    spot_interruption_behavior: Literal["Terminate", "Stop"] = "Terminate"
    spot_duration_hours: int = Field(1, ge=0, le=6)
    hourly_cost_cny: Optional[float] = None
    estimated_hours: Optional[float] = None
    total_cost_cny: Optional[float] = None
    objective: Literal["cost", "time"] = "cost"
    estimate: EstimateSummary
    storage: StoragePlan
    network: NetworkPlan
    image: ImagePlan
    job: JobPlan
    parallelism: ParallelismPlan = Field(default_factory=ParallelismPlan)
    dlc: Optional[DlcPlan] = None
    spot_pool: Optional[SpotPoolPlan] = Field(
        None, description="Self-healing spot pool (ESS) instead of plain instances (all of a 1-node plan; "
                          "nodes 1.. of a multi-node plan, whose node 0 is an on-demand anchor)")
    self_healing: bool = Field(False, description="The profile asks for self-healing (resources.self_healing)")
    tags: dict[str, str] = Field(default_factory=dict)
    labels: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()
    alternatives: tuple[Candidate, ...] = ()
    rejected: tuple[Rejection, ...] = ()
    catalog_date: Optional[str] = None
    prices: Optional[PriceProvenance] = Field(None, description="Whose price, how old, seen offered or not")

    @model_validator(mode="after")
    def _spot_pool_fits(self) -> "Plan":
        pool = self.spot_pool
        if pool is not None and not (self.target == "ecs" and self.spot):
            raise ValueError("spot_pool (self-healing) needs an ECS spot plan")
        if pool is not None and pool.max_size != (self.nodes - 1 if pool.anchor else self.nodes):
            raise ValueError(f"spot_pool holds {pool.max_size} node(s) of a {self.nodes}-node plan")
        return self

    @property
    def elastic(self) -> bool:
        """A multi-node self-healing plan: torchrun elastic, ranks from the rendezvous on node 0."""
        return self.spot_pool is not None and self.spot_pool.anchor

    def instance_ranks(self) -> list[int]:
        """The nodes that are plain ``ecs.Instance``s (the rest are the pool's)."""
        if self.spot_pool is None:
            return list(range(self.nodes))
        return [0] if self.spot_pool.anchor else []

    def node_spot_strategy(self, rank: int) -> str:
        """A plain node's spot strategy: the plan's, except an anchor node, which is on-demand."""
        return "NoSpot" if (self.elastic and rank == 0) else self.spot_strategy

    @property
    def is_multi_node(self) -> bool:
        return self.nodes > 1

    def node_private_ips(self) -> list[str]:
        return self.network.node_private_ips(self.nodes)

    def node_names(self) -> list[str]:
        return [f"{self.name}-node-{i}" for i in range(self.nodes)]

    def pool_node_name(self) -> str:
        """The name every pool node of a multi-node self-healing plan shares (ESS launches them all from
        one scaling configuration; each reports its heartbeat under its instance id)."""
        return f"{self.name}-pool"

    def summary(self) -> dict[str, object]:
        """The few numbers a reviewer reads first (exports, PR comments)."""
        return {
            "target": self.target, "instance_type": self.instance_type, "gpu_model": self.gpu_model,
            "nodes": self.nodes, "gpus_per_node": self.gpus_per_node, "zone": self.zone,
            "spot": self.spot, "spot_price_limit": self.spot_price_limit,
            "memory_margin_gib": self.estimate.memory_margin_gib,
            "tokens_per_second": self.estimate.tokens_per_second,
            "estimated_hours": self.estimated_hours, "hourly_cost_cny": self.hourly_cost_cny,
            "total_cost_cny": self.total_cost_cny,
        }
