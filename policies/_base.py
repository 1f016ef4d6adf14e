"""What every policy module shares: the policy names, their default enforcement levels, the
catalog, and the policy config reader. Imported first by each of them: when the pack runs from a
checkout without ``pip install -e ..``, it puts the checkout's ``trainstack`` on ``sys.path``.

Importable as ``policies._base`` and as ``_base`` (Pulumi runs the pack from inside policies/).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

try:
    import trainstack  # noqa: F401  (installed into the pack's virtualenv by requirements.txt)
except ModuleNotFoundError:  # a checkout without `pip install -e ..`: use the checkout's copy
    _ROOT = Path(__file__).resolve().parents[1]
    if (_ROOT / "trainstack" / "__init__.py").is_file():
        sys.path.insert(0, str(_ROOT))

from pulumi_policy import EnforcementLevel

from trainstack.catalog import Catalog, load_catalog

MANDATORY = EnforcementLevel.MANDATORY
ADVISORY = EnforcementLevel.ADVISORY

NO_PCIE_MULTI_GPU_TRAINING = "no-pcie-multi-gpu-training"
MULTI_NODE_REQUIRES_RDMA = "multi-node-requires-rdma"
SPOT_REQUIRES_CHECKPOINT_STORAGE = "spot-requires-checkpoint-storage"
ESSD_MINIMUM_SIZE = "essd-minimum-size"
NO_PUBLIC_SSH = "no-public-ssh"
GPU_HOURLY_BUDGET = "gpu-hourly-budget"
KNOWN_INSTANCE_TYPE = "known-instance-type"
NO_SPOT_IN_DEPLOYMENT_SET = "no-spot-in-deployment-set"
CHECKPOINT_STORAGE_PROTECTED = "checkpoint-storage-protected"
REQUIRED_TAGS = "required-tags"
NO_WILDCARD_OSS_ACCESS = "no-wildcard-oss-access"
METADATA_TOKENS_REQUIRED = "metadata-tokens-required"
SELF_HEALING_OVER_TCP = "self-healing-over-tcp"

#: Each policy's level when the policy config does not set one.
DEFAULT_ENFORCEMENT: dict[str, EnforcementLevel] = {
    NO_PCIE_MULTI_GPU_TRAINING: MANDATORY,
    MULTI_NODE_REQUIRES_RDMA: MANDATORY,
    SPOT_REQUIRES_CHECKPOINT_STORAGE: MANDATORY,
    ESSD_MINIMUM_SIZE: MANDATORY,
    NO_PUBLIC_SSH: MANDATORY,
    GPU_HOURLY_BUDGET: MANDATORY,  # not applicable until max_hourly_cost_cny is configured
    KNOWN_INSTANCE_TYPE: MANDATORY,
    NO_SPOT_IN_DEPLOYMENT_SET: MANDATORY,
    CHECKPOINT_STORAGE_PROTECTED: ADVISORY,
    REQUIRED_TAGS: ADVISORY,
    NO_WILDCARD_OSS_ACCESS: MANDATORY,
    # advisory: the ESS scaling configuration of self-healing spot pools cannot require tokens
    # (docs/policies.md "Metadata tokens"); set it mandatory to refuse such pools
    METADATA_TOKENS_REQUIRED: ADVISORY,
    # advisory: a multi-node self-healing cluster (an ESS pool) talks TCP, since ESS pool nodes cannot get
    # eRDMA through pulumi-alicloud 4.0 (docs/self-healing.md); set it mandatory to refuse such clusters
    SELF_HEALING_OVER_TCP: ADVISORY,
}


def catalog() -> Catalog:
    """The trainstack catalog (loaded once per process)."""
    return load_catalog()


def level_or_default(name: str, level: Optional[EnforcementLevel]) -> EnforcementLevel:
    return level if level is not None else DEFAULT_ENFORCEMENT[name]


def config_value(args: Any, key: str, default: Any = None) -> Any:
    value = (args.get_config() or {}).get(key)
    return default if value is None else value
