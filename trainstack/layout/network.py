"""Network around a placement: VPC and vSwitches, RDMA interfaces, MTU, NCCL environment, deployment sets.

Address plan (day two: a replaced node must get its fixed IP back, and nothing else may hold it):

* the **node vSwitch** (``vswitch_cidr``) carries only the nodes' fixed primary IPs (host 10, 11, ...);
* the **ERI vSwitch** (``eri_vswitch_cidr``, eRDMA plans with a second ERI) carries the secondary
  ERIs, whose addresses Alibaba allocates at random;
* the **services vSwitch** (``services_vswitch_cidr``) carries CPFS, its protocol service (up to 32
  random addresses, data/service_limits.yaml cpfs.protocol_service.vswitch_addresses) and the NAT
  gateway (one random address, vpc.nat_gateway.vswitch_addresses). A retained CPFS then pins the
  services vSwitch, never the cluster's;
* the **pool vSwitch** (``pool_vswitch_cidr``, multi-node self-healing plans) carries the ESS
  pool's nodes, whose addresses ESS picks: a replacement can never take node 0's fixed IP.

Every block derives from the VPC CIDR and fixed preferred sizes only (never from the node count), so
adding a node or a service never moves a vSwitch (``cidr_block`` is ForceNew).
vSwitch CIDR reservations were the alternative; Alibaba documents them for IP prefixes only
(vpc.vswitch.cidr_reservation.kind), so trainstack does not rely on a fixed IP inside one.
"""

from __future__ import annotations

import ipaddress
import math
from typing import Iterable, Optional

from ..catalog.limits import service_limits
from ..catalog.models import TRAINING_RDMA, ResolvedInstance
from ..errors import InputError
from ..plan import DEPLOYMENT_SET_MAX, NetworkPlan, Plan
from ..profile import TrainingProfile
from .spot_pool import heals_multi_node

_LIMITS = service_limits()
#: NCCL over eRDMA as PAI-DLC configures it on eRDMA types (data/service_limits.yaml, [PAI-ERDMA]).
ERDMA_NCCL_ENV: dict[str, str] = dict(_LIMITS.value("pai.erdma.nccl_env"))  # type: ignore[arg-type]
MTU_DEFAULT = int(_LIMITS.number("ecs.mtu.default"))
MTU_ERDMA_JUMBO = int(_LIMITS.number("ecs.erdma_gpu.mtu_with_jumbo_ll128"))
MTU_ERDMA_NO_JUMBO = int(_LIMITS.number("ecs.erdma_gpu.mtu_otherwise"))
RESERVED_PER_VSWITCH = int(_LIMITS.number("vpc.vswitch.reserved_addresses"))
PROTOCOL_SERVICE_ADDRESSES = int(_LIMITS.number("cpfs.protocol_service.vswitch_addresses"))
NAT_ADDRESSES = int(_LIMITS.number("vpc.nat_gateway.vswitch_addresses"))
VSWITCH_MASK_MAX = int(_LIMITS.number("vpc.vswitch.mask_max"))
#: ERIs an instance declares itself: the primary ENI and one ``network_interfaces`` block. Further
#: ERIs would be ``alicloud_ecs_network_interface``, which has no queue_pair_number in the provider
#: source the facts are read from, so they could not get one (an ERI without it takes the type's
#: whole maximum and blocks the others: ecs.eri.queue_pairs_shared_per_instance).
MAX_ERIS_PER_NODE = 2
#: A multi-node self-healing plan runs eRDMA where the family has ERIs: ESS's CreateScalingConfiguration takes
#: ``NetworkInterfaces.N`` (InstanceType Primary|Secondary, NetworkInterfaceTrafficMode Standard|HighPerformance,
#: SecurityGroupIds) in place of SecurityGroupId(s), and HighPerformance there is an ERI
#: (alibabacloud-ess20220222 1.13.3 models/_create_scaling_configuration_request.py:973-1014). The model has
#: no QueuePairNumber and no NetworkCardIndex, so a pool node gets one ERI on an index it cannot choose.
#: RoCE (SCC) cannot be asked of ESS at all: those plans talk TCP.
POOL_WITHOUT_RDMA = ("self-healing: no {rdma} on any node (an ESS scaling configuration cannot ask for it): NCCL "
                     "talks TCP over the VPC ({gbps} Gbit/s per node), and the estimate uses that bandwidth")
#: eRDMA is sized at what one ERI is sure to give: the type's ERI bandwidth over its ERIs (ebmgn7ex reaches
#: 160 Gbit/s only with two ERIs on different card indexes, families.yaml; no source states one ERI's own
#: figure, so its even share is assumed).
POOL_SINGLE_ERI = ("self-healing over eRDMA: each pool node has one ERI (ESS cannot set a second one or its card "
                   "index), so the whole ring is sized at one ERI's bandwidth: {gbps:g} Gbit/s = the type's "
                   "{total:g} Gbit/s over its {eris} ERI(s) (assumed even share: no source gives one ERI's figure)")
#: Preferred sizes: the node and ERI vSwitches a /20 (4,092 addresses), the services vSwitch a /24.
NODE_PREFIX, ERI_PREFIX, SERVICES_PREFIX, POOL_PREFIX = 20, 20, 24, 20
#: Addresses the services vSwitch must offer at least: protocol service + NAT + the file system's own.
SERVICES_MIN_ADDRESSES = PROTOCOL_SERVICE_ADDRESSES + NAT_ADDRESSES + 8


def ssh_rule_cidrs(net: NetworkPlan) -> list[str]:
    """The sources of the SSH ingress rules (one rule each, tcp/22): ``access.ssh_cidrs``, normalised."""
    return [str(ipaddress.ip_network(c, strict=False)) for c in net.ssh_cidrs]


def default_vswitch_cidr(vpc_cidr: str) -> str:
    """The first /20 of the VPC (4,091 usable hosts), or the whole VPC when it is smaller."""
    net = ipaddress.ip_network(vpc_cidr)
    return str(next(net.subnets(new_prefix=NODE_PREFIX))) if net.prefixlen < NODE_PREFIX else str(net)


def free_block(vpc_cidr: str, taken: Iterable[str], prefix: int, min_addresses: int) -> Optional[str]:
    """The first block of ``vpc_cidr`` at ``prefix`` (or, when none is free, the first smaller one that
    still offers ``min_addresses`` usable addresses) overlapping none of ``taken``."""
    vpc = ipaddress.ip_network(vpc_cidr)
    used = [ipaddress.ip_network(t) for t in taken]
    for p in range(max(prefix, vpc.prefixlen), VSWITCH_MASK_MAX + 1):
        if 2 ** (32 - p) - RESERVED_PER_VSWITCH < min_addresses:
            break
        for block in vpc.subnets(new_prefix=p) if p > vpc.prefixlen else [vpc]:
            if not any(block.overlaps(u) for u in used):
                return str(block)
    return None


def queue_pairs_per_eri(max_queue_pairs: int, eris: int) -> int:
    """Each ERI's queue pairs: the type's maximum split evenly (all ERIs of an instance share it;
    ecs.eri.queue_pairs_shared_per_instance). Also used at deploy time on the value DescribeInstanceTypes
    returns when the catalog does not know it."""
    if eris < 1 or max_queue_pairs < eris:
        raise ValueError(f"{max_queue_pairs} queue pairs cannot be split over {eris} ERI(s)")
    return max_queue_pairs // eris


def mtu_for(rdma: str, jumbo_frames: bool) -> int:
    """MTU 8500 only with sourced jumbo frames; 1400 on eRDMA without them (a wrong MTU corrupts NCCL
    traffic [ERDMA-GPU]); 1500 otherwise (ecs.mtu.default)."""
    if rdma == "erdma":
        return MTU_ERDMA_JUMBO if jumbo_frames else MTU_ERDMA_NO_JUMBO
    return MTU_DEFAULT


def plan_network(profile: TrainingProfile, inst: Optional[ResolvedInstance], nodes: int, spot: bool,
                 services: bool = False) -> NetworkPlan:
    """``services``: the plan has CPFS (ECS) and so needs the services vSwitch; NAT egress does too."""
    n = profile.network
    notes: list[str] = []
    rdma, eri, jumbo, env = "none", 0, False, {}
    qp_max = qp = None
    dset, groups = None, 0
    healing = heals_multi_node(profile, nodes, spot)
    if inst is not None and nodes > 1:
        rdma = inst.rdma if inst.rdma in TRAINING_RDMA and not (healing and inst.rdma != "erdma") else "none"
        if tcp_note := pool_tcp_note(profile, inst, nodes, spot):
            notes.append(tcp_note)
        if rdma == "erdma":
            eri = 1 if healing else max(1, inst.type.eri_count or 1)
            if healing:
                notes.append(pool_eri_note(inst))
            if eri > MAX_ERIS_PER_NODE:
                notes.append(f"{MAX_ERIS_PER_NODE} of the type's {eri} ERIs: further ERIs could not get a queue pair "
                             "number in pulumi-alicloud 4.0 (alicloud_ecs_network_interface has none)")
                eri = MAX_ERIS_PER_NODE
            # ESS has no jumbo-frame setting (CreateScalingConfigurationRequest): one MTU on every node of a ring
            jumbo = bool(inst.family.jumbo_frames) and not healing
            env = dict(ERDMA_NCCL_ENV)
            qp_max = inst.type.queue_pair_number_max
            if qp_max:
                qp = queue_pairs_per_eri(qp_max, eri)
                notes.append(f"{qp} queue pairs per ERI: the type's {qp_max} split over {eri} ERI(s)")
            else:
                notes.append(f"queue pairs per ERI: the type's maximum (DescribeInstanceTypes QueuePairNumber) split "
                             f"over {eri} ERI(s), read once at deploy time (the catalog does not know it)")
            if jumbo:
                notes.append(f"eRDMA with jumbo frames (MTU {MTU_ERDMA_JUMBO}): family {inst.family.name} documents "
                             "them, and Alibaba advises 8500 for NCCL LL128 [ERDMA-GPU]")
            else:
                notes.append(f"eRDMA without jumbo frames (MTU {MTU_ERDMA_NO_JUMBO}): jumbo frames are not documented "
                             f"for family {inst.family.name} [ECS-MTU][ERDMA-GPU]")
        elif rdma == "roce":
            env = {"NCCL_SOCKET_IFNAME": "eth0"}
            notes.append("RoCE NCCL device names are not in the catalog (unverified): NCCL autodetects them")
        if spot:
            notes.append("no deployment set: Alibaba does not allow spot instances in a deployment set")
        elif inst.family.deployment_set_low_latency:
            dset, groups = "LowLatency", math.ceil(nodes / DEPLOYMENT_SET_MAX)
            if groups > 1:
                notes.append(f"{nodes} nodes exceed the {DEPLOYMENT_SET_MAX}-instance limit of a deployment "
                             f"set: split into {groups} LowLatency sets")
        else:
            notes.append(f"no deployment set: LowLatency support of family {inst.family.name} is unverified "
                         "offline; nodes share one zone and vSwitch")
    node_cidr = n.vswitch_cidr or default_vswitch_cidr(n.vpc_cidr)
    eri_cidr = services_cidr = None
    # the ERI block is kept free on a self-healing plan too (one ERI per node there: no ERI vSwitch), so turning
    # healing on or off moves neither the services vSwitch (CPFS) nor the pool's
    block_eri = eri
    if healing and inst is not None and inst.rdma == "erdma":
        block_eri = min(max(1, inst.type.eri_count or 1), MAX_ERIS_PER_NODE)
    eri_block = None
    if block_eri >= 2:
        eri_block = _block(n.vpc_cidr, [node_cidr], ERI_PREFIX, profile.resources.max_nodes * (block_eri - 1), "ERI")
        eri_cidr = eri_block if eri >= 2 else None
    if services or n.internet_egress:
        taken = [node_cidr] + ([eri_block] if eri_block else [])
        services_cidr = _block(n.vpc_cidr, taken, SERVICES_PREFIX, SERVICES_MIN_ADDRESSES, "services")
    pool_cidr = None
    if healing:  # taken last: adding it moves no other block
        taken = [c for c in (node_cidr, eri_block, services_cidr) if c]
        pool_cidr = _block(n.vpc_cidr, taken, POOL_PREFIX, profile.resources.max_nodes * 2, "self-healing pool")
    return NetworkPlan(
        vpc_cidr=n.vpc_cidr, vswitch_cidr=node_cidr, eri_vswitch_cidr=eri_cidr, services_vswitch_cidr=services_cidr,
        pool_vswitch_cidr=pool_cidr,
        rdma=rdma, eri_per_node=eri, queue_pair_number=qp, queue_pair_number_max=qp_max, jumbo_frames=jumbo,
        deployment_set=dset, deployment_set_groups=groups, mtu=mtu_for(rdma, jumbo),
        internet_egress=n.internet_egress, ssh_cidrs=tuple(profile.access.ssh_cidrs),
        key_pair=profile.access.key_pair, nccl_env=env, notes=tuple(notes))


def pool_tcp_note(profile: TrainingProfile, inst: Optional[ResolvedInstance], nodes: int, spot: bool
                  ) -> Optional[str]:
    """Why a multi-node self-healing plan has no RDMA its type offers (None: nothing given up)."""
    if inst is None or not heals_multi_node(profile, nodes, spot) or inst.rdma not in TRAINING_RDMA:
        return None
    if inst.rdma == "erdma":
        return None  # the pool gets one ERI (pool_eri_note)
    return POOL_WITHOUT_RDMA.format(rdma=inst.rdma, gbps=inst.type.network_bandwidth_gbps or "?")


def pool_eri_gbps(inst: ResolvedInstance) -> Optional[float]:
    """The eRDMA bandwidth of a pool node's single ERI (see POOL_SINGLE_ERI); None when unknown."""
    total = inst.type.rdma_bandwidth_gbps or inst.type.network_bandwidth_gbps
    if total is None:
        return None
    return round(total / max(1, inst.type.eri_count or 1), 3)


def pool_eri_note(inst: ResolvedInstance) -> str:
    total = inst.type.rdma_bandwidth_gbps or inst.type.network_bandwidth_gbps or 0
    return POOL_SINGLE_ERI.format(gbps=pool_eri_gbps(inst) or 0, total=total, eris=max(1, inst.type.eri_count or 1))


def healing_network(inst: ResolvedInstance) -> tuple[str, Optional[float]]:
    """(RDMA kind, Gbit/s) a multi-node self-healing ring runs at: one ERI where the family has eRDMA,
    else TCP over the VPC (an ESS pool node cannot get RoCE)."""
    if inst.rdma == "erdma":
        return "erdma", pool_eri_gbps(inst)
    return "none", inst.type.network_bandwidth_gbps


def _block(vpc: str, taken: list[str], prefix: int, need: int, what: str) -> str:
    found = free_block(vpc, taken, prefix, need)
    if found is None:
        raise InputError(f"network.vpc_cidr {vpc} has no room for the {what} vSwitch next to {', '.join(taken)} "
                         f"(needs {need} addresses): use a larger VPC such as a /16",
                         hint="trainstack keeps random address allocations out of the node vSwitch (docs/day-two.md)")
    return found


def deployment_set_layout(plan: Plan) -> list[int]:
    """Deployment-set group of each node ([] = none). Groups hold at most DEPLOYMENT_SET_MAX
    instances; nodes are split into contiguous, balanced groups."""
    net = plan.network
    if net.deployment_set != "LowLatency" or plan.nodes < 2:
        return []
    if plan.spot or plan.spot_strategy != "NoSpot":
        return []  # a deployment set cannot hold spot instances (facts §I)
    groups = max(net.deployment_set_groups, math.ceil(plan.nodes / DEPLOYMENT_SET_MAX))
    layout = [i * groups // plan.nodes for i in range(plan.nodes)]
    if max(layout.count(g) for g in range(groups)) > DEPLOYMENT_SET_MAX:
        raise InputError(f"{plan.nodes} nodes do not fit {groups} deployment set(s) of {DEPLOYMENT_SET_MAX}")
    return layout
