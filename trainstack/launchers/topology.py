"""The plan's process layout in the one shape every launcher reads.

ECS nodes know everything when their user data is rendered (node count, this node's rank, node
0's fixed private IP), so their values are literal. A PAI-DLC pod learns its place only at run
time from the variables PAI sets in every PyTorchJob pod: ``MASTER_ADDR``, ``MASTER_PORT``,
``WORLD_SIZE`` (the number of pods, i.e. NODES, not processes) and ``RANK`` (the pod's index)
(https://www.alibabacloud.com/help/en/pai/general-environment-variables); :meth:`Topology.node`
maps them explicitly onto node count and node rank.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Literal, Optional

from .words import Ref, Word, joined, lit

#: PAI-DLC's PyTorchJob variables (data/pai-dlc.yaml)
DLC_NODE_COUNT, DLC_NODE_RANK, DLC_MASTER_ADDR, DLC_MASTER_PORT = "WORLD_SIZE", "RANK", "MASTER_ADDR", "MASTER_PORT"
DEFAULT_MASTER_PORT = 29500


@dataclass(frozen=True)
class NodeValues:
    """How one node writes the topology: literal text (ECS) or run-time references (DLC)."""

    nnodes: Word
    node_rank: Word
    nproc_per_node: Word
    master_addr: Word
    master_port: Word

    @property
    def endpoint(self) -> Word:
        return joined(*self.master_addr, ":", *self.master_port)


@dataclass(frozen=True)
class Degrees:
    """The plan's parallel layout as launchers pass it: tensor x pipeline x context x data parallel
    (expert parallelism splits the experts), the virtual pipeline stages per rank, the micro-batches
    per step, and whether ZeRO-3/FSDP shards the data-parallel ranks."""

    tensor: int = 1
    pipeline: int = 1
    context: int = 1
    data: int = 1
    expert: int = 1
    virtual: int = 1
    micro_batches: int = 1
    sharded: bool = False
    layers_per_stage: int = 0   # decoder layers per model chunk (torchtitan's pipeline_parallel_layers_per_stage)

    @property
    def trivial(self) -> bool:
        return self.tensor == self.pipeline == self.context == 1

    def value(self, degree: str) -> int:
        return getattr(self, degree)


@dataclass(frozen=True)
class Batch:
    """The batch a plan is sized for, per data-parallel rank, at its node count."""

    micro_batch_size: int
    sequence_length: int
    zero_stage: int
    accumulation: int
    data_parallel: int
    global_batch_size: Optional[int] = None  # stated: the accumulation follows the node count

    @property
    def follows_nodes(self) -> bool:
        return self.global_batch_size is not None

    @property
    def achieved(self) -> int:
        """The global batch the plan runs: micro-batch x accumulation x data-parallel ranks (the stated
        one when it divides; the accumulation is rounded up otherwise)."""
        return self.micro_batch_size * self.accumulation * self.data_parallel

    @property
    def global_batch(self) -> int:
        return self.global_batch_size or self.achieved

    def wants(self, field: str) -> Optional[int]:
        """The plan's value of ``field``; None where the plan has none to hold a command to (the
        accumulation and global batch of a profile that states neither)."""
        if field in ("gradient_accumulation_steps", "global_batch_size") and not (
                self.follows_nodes or self.accumulation != 1):
            return None
        return {"micro_batch_size": self.micro_batch_size, "sequence_length": self.sequence_length,
                "zero_stage": self.zero_stage, "gradient_accumulation_steps": self.accumulation,
                "global_batch_size": self.global_batch}[field]


def batch_of(plan) -> Batch:
    j = plan.job
    return Batch(micro_batch_size=j.micro_batch_size, sequence_length=j.sequence_length, zero_stage=j.zero_stage,
                 accumulation=j.gradient_accumulation_steps, data_parallel=j.parallel.data_parallel,
                 global_batch_size=j.global_batch_size)


@dataclass(frozen=True)
class Elastic:
    """torchrun elastic (a multi-node self-healing plan, trainstack.layout.spot_pool): every node joins
    a c10d rendezvous hosted by node 0 at its fixed address, with a fixed world size; node ranks come
    from the rendezvous, each node names its own address at run time (``local_addr``)."""

    port: int
    run_id: str
    max_restarts: int
    join_timeout_seconds: int
    local_addr: str = "TRAINSTACK_LOCAL_ADDR"  # the launch script sets it from the metadata service


@dataclass(frozen=True)
class Topology:
    """Nodes x processes per node, where node 0 listens, and on which platform."""

    nnodes: int
    nproc_per_node: int
    platform: Literal["ecs", "dlc"] = "ecs"
    hosts: tuple[str, ...] = field(default=())  # ECS: each node's private address, by rank
    master_port: int = DEFAULT_MASTER_PORT
    rdzv_timeout_seconds: int = 1800
    degrees: Degrees = field(default=Degrees())
    elastic: Optional[Elastic] = None  # ECS only: then ``hosts`` names node 0 alone
    batch: Optional[Batch] = None  # the batch the plan is sized for (launchers/intent.py); None: not checked

    def __post_init__(self) -> None:
        if self.nnodes < 1 or self.nproc_per_node < 1:
            raise ValueError("a topology needs at least one node and one process per node")
        if self.elastic is not None and (self.platform != "ecs" or len(self.hosts) != 1):
            raise ValueError("an elastic topology is an ECS one that names node 0's address alone")
        if self.platform == "ecs" and self.elastic is None and len(self.hosts) != self.nnodes:
            raise ValueError(f"an ECS topology names every node's address ({self.nnodes}), got {len(self.hosts)}")

    @property
    def rendezvous_endpoint(self) -> Optional[str]:
        """node0:port of the c10d rendezvous (elastic topologies)."""
        return f"{self.hosts[0]}:{self.elastic.port}" if self.elastic else None

    @property
    def world_size(self) -> int:
        return self.nnodes * self.nproc_per_node

    @property
    def master_addr(self) -> Optional[str]:
        """Node 0's address when known before run time (ECS), else None."""
        return self.hosts[0] if self.hosts else None

    def node(self, rank: Optional[int] = None) -> NodeValues:
        """The values for node ``rank`` (ECS) or for whichever pod runs the command (DLC)."""
        if self.platform == "dlc":
            # defaults: a one-pod job, should PAI leave the variables unset for it
            return NodeValues(nnodes=(Ref(DLC_NODE_COUNT, "1"),), node_rank=(Ref(DLC_NODE_RANK, "0"),),
                              nproc_per_node=lit(self.nproc_per_node),
                              master_addr=(Ref(DLC_MASTER_ADDR, "127.0.0.1"),),
                              master_port=(Ref(DLC_MASTER_PORT, str(self.master_port)),))
        if rank is None or not 0 <= rank < self.nnodes:
            raise ValueError(f"node rank {rank} is outside 0..{self.nnodes - 1}")
        return NodeValues(nnodes=lit(self.nnodes), node_rank=lit(rank), nproc_per_node=lit(self.nproc_per_node),
                          master_addr=lit(self.hosts[0]), master_port=lit(self.master_port))


def topology_from_plan(plan, master_port: int = DEFAULT_MASTER_PORT, rdzv_timeout_seconds: int = 1800,
                       hosts: Optional[tuple[str, ...]] = None) -> Topology:
    """The topology of a resolved Plan (``hosts``: the ECS node addresses, if not the plan's)."""
    pool = getattr(plan, "spot_pool", None)
    if plan.target == "ecs" and pool is not None and pool.anchor:
        nproc = plan.job.nproc_per_node if "nproc_per_node" in plan.job.model_fields_set else plan.gpus_per_node
        return Topology(nnodes=plan.nodes, nproc_per_node=nproc, platform="ecs", hosts=(plan.node_private_ips()[0],),
                        master_port=master_port, rdzv_timeout_seconds=rdzv_timeout_seconds,
                        degrees=degrees_of(plan),
                        elastic=Elastic(port=pool.rendezvous_port, run_id=elastic_run_id(plan),
                                        max_restarts=pool.max_restarts,
                                        join_timeout_seconds=pool.join_timeout_seconds), batch=batch_of(plan))
    degrees = degrees_of(plan)
    if plan.target == "dlc":
        pods = plan.dlc.pod_count if plan.dlc else plan.nodes
        per_pod = plan.dlc.gpus_per_pod if plan.dlc else plan.gpus_per_node
        return Topology(nnodes=pods, nproc_per_node=per_pod, platform="dlc", master_port=master_port,
                        rdzv_timeout_seconds=rdzv_timeout_seconds, degrees=degrees, batch=batch_of(plan))
    nproc = plan.job.nproc_per_node if "nproc_per_node" in plan.job.model_fields_set else plan.gpus_per_node
    return Topology(nnodes=plan.nodes, nproc_per_node=nproc, platform="ecs",
                    hosts=tuple(hosts if hosts is not None else plan.node_private_ips()),
                    master_port=master_port, rdzv_timeout_seconds=rdzv_timeout_seconds, degrees=degrees,
                    batch=batch_of(plan))


def elastic_run_id(plan) -> str:
    """The rendezvous id of a self-healing plan: its name and a digest of what the job runs (command,
    code, env, layout, node count; not the budget guard's limits). A changed job reaches only the pool
    nodes ESS launches next (a running one keeps the settings it was launched with), so nodes with
    other settings must never join the running group and mix two configurations: they wait for their own."""
    # global_batch_size: reflected by gradient_accumulation_steps (kept out so the id did not change when it was added)
    job = plan.job.model_dump(mode="json", exclude={"max_total_cost_cny", "deadline_hours", "max_runtime_hours",
                                                    "global_batch_size"})
    text = json.dumps({"job": job, "nodes": plan.nodes, "gpus_per_node": plan.gpus_per_node}, sort_keys=True)
    return f"{plan.name}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def degrees_of(plan) -> Degrees:
    """The plan's layout (plan.job.parallel) as the launchers pass it."""
    lay = plan.job.parallel
    return Degrees(tensor=lay.tensor_parallel, pipeline=lay.pipeline_parallel, context=lay.context_parallel,
                   data=lay.data_parallel, expert=lay.expert_parallel, virtual=lay.virtual_pipeline_stages,
                   micro_batches=plan.job.gradient_accumulation_steps, sharded=plan.job.zero_stage >= 3,
                   layers_per_stage=plan.parallelism.layers_per_chunk)
