"""What a team's policy config allows beyond the engine's own rules (passed in; never read here).

The engine refuses multi-GPU training on PCIe-only types by default. A team that accepts a case,
such as data-parallel LoRA on L20 PCIe nodes, lists the types it accepts; the policy config that
validate, plan and ``pulumi up`` share will build this object and hand it to the resolver. The engine
never reads a config file itself: this is an explicit input, defaulting to no allowances.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class PolicyAllowances(BaseModel):
    """Exceptions a policy config grants to the engine's hard rules."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pcie_multi_gpu_types: frozenset[str] = Field(
        frozenset(), description="Instance types on which several GPUs of one node may train over PCIe")
    source: str = Field("", description="Where the allowance was granted (the policy config file), for labels")

    def allows_pcie(self, instance_type: str) -> bool:
        return instance_type in self.pcie_multi_gpu_types

    def pcie_label(self, instance_type: str) -> str:
        """The line a plan carries when it rests on this exception."""
        where = f" ({self.source})" if self.source else ""
        return (f"multi-GPU training inside one {instance_type} node over PCIe, without NVLink/NVSwitch, is "
                f"allowed by the policy config's PCIe exception{where}")


#: The engine's default: no exceptions.
NO_ALLOWANCES = PolicyAllowances()
