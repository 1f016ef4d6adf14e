"""GPU training nodes against the catalog: multi-GPU nodes need NVLink, multi-node training needs
RDMA in one zone, every GPU type must be one the catalog knows, a self-healing cluster talks TCP.
The decisions are trainstack.rules.checks.gpu's; this module hands them what the engine sends.
"""

from __future__ import annotations

from typing import Optional

# _base before trainstack: from a bare checkout it puts the checkout's trainstack on sys.path
if __package__:
    from . import _base as B
    from . import _view as V
else:  # run by Pulumi from inside policies/
    import _base as B  # type: ignore[no-redef]
    import _view as V  # type: ignore[no-redef]

from pulumi_policy import EnforcementLevel, ResourceValidationPolicy, StackValidationPolicy

from trainstack.catalog import TRAINING_RDMA

RDMA_KINDS = TRAINING_RDMA


def no_pcie_multi_gpu_training(level: Optional[EnforcementLevel] = None) -> ResourceValidationPolicy:
    return B.resource_policy(B.NO_PCIE_MULTI_GPU_TRAINING, level, lambda args: V.resource_view(args, "nodes"))


def multi_node_requires_rdma(level: Optional[EnforcementLevel] = None) -> StackValidationPolicy:
    return B.stack_policy(B.MULTI_NODE_REQUIRES_RDMA, level, lambda args: V.stack_view(args.resources))


def self_healing_over_tcp(level: Optional[EnforcementLevel] = None) -> StackValidationPolicy:
    return B.stack_policy(B.SELF_HEALING_OVER_TCP, level, lambda args: V.stack_view(args.resources))


def known_instance_type(level: Optional[EnforcementLevel] = None) -> ResourceValidationPolicy:
    return B.resource_policy(B.KNOWN_INSTANCE_TYPE, level, lambda args: V.resource_view(args, "nodes"))
