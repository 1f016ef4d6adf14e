"""The parts of a Plan around the chosen placement: estimate, storage, network, image, spot pool, DLC job."""

from __future__ import annotations

import functools
import ipaddress
from typing import Literal, Optional

from pydantic import Field, model_validator

from ..errors import InputError
from .base import _Frozen
from .replacement import ReplacementEstimate



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
    # issue 32: the central 80 % intervals (leave-one-source-out errors of the estimate's class) and the fit
    tokens_per_second_per_gpu_interval: Optional[tuple[float, float]] = None
    peak_gib_interval: Optional[tuple[float, float]] = None
    required_gib_interval: Optional[tuple[float, float]] = None
    fit: Optional[Literal["fits", "at_risk", "does_not_fit"]] = Field(
        None, description="fits: the required-memory interval's upper end plus the margin is within usable memory; "
                          "at_risk: only the estimate plus the margin is (chosen only when nothing fits)")
    interval_class: Optional[str] = None


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
    dataset_sync: Literal["stream", "at-boot"] = Field(
        "stream", description="at-boot: every node copies dataset_uri to dataset_dir on its data disk in the "
                              "background from its first boot on (trainstack_sync.mirror); stream: the job reads it")
    checkpoint_gib: Optional[float] = Field(None, description="Planned size of the checkpoints kept (GiB): what the "
                                                              "bucket stores when it holds them")
    retain_on_destroy: bool = True
    notes: tuple[str, ...] = ()

    @property
    def dataset_dir(self) -> Optional[str]:
        """Where the dataset copy lands on a node (``TRAINSTACK_DATASET_DIR``); None: nothing is copied."""
        if self.dataset_sync != "at-boot" or self.data_disk is None:
            return None
        return f"{self.data_disk.mount_path}/dataset"


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
    provides: tuple[str, ...] = Field((), description="What the pinned image holds (profile image_provides): the "
                                                      "nodes' setup finds it and skips installing it")
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
    replacement: Optional[ReplacementEstimate] = Field(
        None, description="What one preemption costs: the replacement's phases, labelled measured/sourced/assumed")
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
