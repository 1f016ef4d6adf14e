"""Network around a placement: VPC and vSwitch, RDMA interfaces, MTU, NCCL environment, deployment sets."""

from __future__ import annotations

import ipaddress
import math
from typing import Optional

from ..catalog.limits import service_limits
from ..catalog.models import TRAINING_RDMA, ResolvedInstance
from ..errors import InputError
from ..plan import DEPLOYMENT_SET_MAX, NetworkPlan, Plan
from ..profile import TrainingProfile

#: NCCL over eRDMA as PAI-DLC configures it on eRDMA types (data/service_limits.yaml, [PAI-ERDMA]).
ERDMA_NCCL_ENV: dict[str, str] = dict(service_limits().value("pai.erdma.nccl_env"))  # type: ignore[arg-type]


def default_vswitch_cidr(vpc_cidr: str) -> str:
    """The first /20 of the VPC (4,091 usable hosts), or the whole VPC when it is smaller."""
    net = ipaddress.ip_network(vpc_cidr)
    return str(next(net.subnets(new_prefix=20))) if net.prefixlen < 20 else str(net)


def plan_network(profile: TrainingProfile, inst: Optional[ResolvedInstance], nodes: int, spot: bool) -> NetworkPlan:
    n = profile.network
    notes: list[str] = []
    rdma, eri, mtu, env = "none", 0, 1500, {}
    dset, groups = None, 0
    if inst is not None and nodes > 1:
        rdma = inst.rdma if inst.rdma in TRAINING_RDMA else "none"
        if rdma == "erdma":
            eri = max(1, inst.type.eri_count or 1)
            mtu = 8500
            env = dict(ERDMA_NCCL_ENV)
            notes.append("eRDMA with jumbo frames (MTU 8500) as Alibaba advises for NCCL LL128 [ERDMA-GPU]")
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
    return NetworkPlan(
        vpc_cidr=n.vpc_cidr, vswitch_cidr=n.vswitch_cidr or default_vswitch_cidr(n.vpc_cidr), rdma=rdma,
        eri_per_node=eri, deployment_set=dset, deployment_set_groups=groups, mtu=mtu,
        internet_egress=n.internet_egress, ssh_cidrs=tuple(profile.access.ssh_cidrs),
        key_pair=profile.access.key_pair, nccl_env=env, notes=tuple(notes))


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
