"""trainstack's CrossGuard policy pack: every policy, in pack order.

``ALL_POLICIES`` is what the pack (``__main__.py``) and the offline planner (``runner.py``) run;
``DEFAULT_ENFORCEMENT`` is each policy's level unless the policy config overrides it. The policies
live one module per resource family, each a small factory per policy:

* ``gpu_rules``: GPU nodes against the catalog (NVLink, RDMA in one zone, known types);
* ``cost_rules``: the stack's hourly GPU budget;
* ``instance_rules``: instance settings (no spot in deployment sets, metadata tokens);
* ``storage_rules``: disks and checkpoint storage (spot needs it, ESSD sizes, protect);
* ``network_rules``: security group rules (no public SSH);
* ``ram_rules``: RAM policies (no wildcard OSS access);
* ``tag_rules``: required tags.

Each policy's decision is a pure function of the rule book (``trainstack.rules.checks``) over a
typed view of the resources (``_view``, ``_nodes``); ``_base`` runs it the engine's way and holds the
names and levels (from ``trainstack.rules.policy_book``). ``validate`` and ``resolve`` run the same
functions on the Plan's view, so they give the pack's verdicts. Facts about instance types (GPUs,
interconnect, RDMA, prices) come from ``trainstack.catalog``, the same catalog the resolver uses;
nothing about a type is written here.

Importable both as ``policies.rules`` (from the repository root: tests, the planner) and as
``rules`` (Pulumi runs the pack with ``policies/`` as the program directory).
"""

from __future__ import annotations

from typing import Any, Callable

if __package__:
    from ._base import (  # noqa: F401  (the pack's names, levels and catalog, as before the split)
        ADVISORY, CHECKPOINT_STORAGE_PROTECTED, DEFAULT_ENFORCEMENT, ESSD_MINIMUM_SIZE, GPU_HOURLY_BUDGET,
        KNOWN_INSTANCE_TYPE, MANDATORY, METADATA_TOKENS_REQUIRED, MULTI_NODE_REQUIRES_RDMA, NO_PCIE_MULTI_GPU_TRAINING,
        NO_PUBLIC_SSH, NO_SPOT_IN_DEPLOYMENT_SET, NO_WILDCARD_OSS_ACCESS, REQUIRED_TAGS,
        SPOT_REQUIRES_CHECKPOINT_STORAGE, SELF_HEALING_OVER_TCP, catalog,
    )
    from .cost_rules import BudgetUnverified, gpu_hourly_budget  # noqa: F401
    from .gpu_rules import (  # noqa: F401
        RDMA_KINDS, known_instance_type, multi_node_requires_rdma, no_pcie_multi_gpu_training, self_healing_over_tcp,
    )
    from .instance_rules import metadata_tokens_required, no_spot_in_deployment_set
    from .network_rules import no_public_ssh
    from .ram_rules import (  # noqa: F401
        ALL_BUCKET_SYSTEM_POLICIES, RAM_ATTACHMENTS, RAM_POLICY, no_wildcard_oss_access, wildcard_oss_resources,
    )
    from .storage_rules import checkpoint_storage_protected, essd_minimum_size, spot_requires_checkpoint_storage
    from .tag_rules import DEFAULT_REQUIRED_TAGS, required_tags  # noqa: F401
else:  # run by Pulumi from inside policies/
    from _base import (  # type: ignore[no-redef]  # noqa: F401
        ADVISORY, CHECKPOINT_STORAGE_PROTECTED, DEFAULT_ENFORCEMENT, ESSD_MINIMUM_SIZE, GPU_HOURLY_BUDGET,
        KNOWN_INSTANCE_TYPE, MANDATORY, METADATA_TOKENS_REQUIRED, MULTI_NODE_REQUIRES_RDMA, NO_PCIE_MULTI_GPU_TRAINING,
        NO_PUBLIC_SSH, NO_SPOT_IN_DEPLOYMENT_SET, NO_WILDCARD_OSS_ACCESS, REQUIRED_TAGS,
        SPOT_REQUIRES_CHECKPOINT_STORAGE, SELF_HEALING_OVER_TCP, catalog,
    )
    from cost_rules import BudgetUnverified, gpu_hourly_budget  # type: ignore[no-redef]  # noqa: F401
    from gpu_rules import (  # type: ignore[no-redef]  # noqa: F401
        RDMA_KINDS, known_instance_type, multi_node_requires_rdma, no_pcie_multi_gpu_training, self_healing_over_tcp,
    )
    from instance_rules import metadata_tokens_required, no_spot_in_deployment_set  # type: ignore[no-redef]
    from network_rules import no_public_ssh  # type: ignore[no-redef]
    from ram_rules import (  # type: ignore[no-redef]  # noqa: F401
        ALL_BUCKET_SYSTEM_POLICIES, RAM_ATTACHMENTS, RAM_POLICY, no_wildcard_oss_access, wildcard_oss_resources,
    )
    from storage_rules import (  # type: ignore[no-redef]
        checkpoint_storage_protected, essd_minimum_size, spot_requires_checkpoint_storage,
    )
    from tag_rules import DEFAULT_REQUIRED_TAGS, required_tags  # type: ignore[no-redef]  # noqa: F401

#: Factories in pack order (the order policies are listed and run in).
FACTORIES: list[Callable[..., Any]] = [
    no_pcie_multi_gpu_training,
    multi_node_requires_rdma,
    spot_requires_checkpoint_storage,
    essd_minimum_size,
    no_public_ssh,
    gpu_hourly_budget,
    known_instance_type,
    no_spot_in_deployment_set,
    checkpoint_storage_protected,
    required_tags,
    no_wildcard_oss_access,
    metadata_tokens_required,
    self_healing_over_tcp,
]

ALL_POLICIES: list[Any] = [factory() for factory in FACTORIES]
POLICIES_BY_NAME: dict[str, Any] = {p.name: p for p in ALL_POLICIES}
assert list(POLICIES_BY_NAME) == list(DEFAULT_ENFORCEMENT), "DEFAULT_ENFORCEMENT must list every policy"
