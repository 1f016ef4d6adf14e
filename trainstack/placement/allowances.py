"""What a team's policy config allows beyond the engine's own rules (passed in; never read here).

The engine refuses multi-GPU training on PCIe-only types by default: the product's promise. A team
that accepts a case, such as data-parallel LoRA on L20 PCIe nodes, lists the types in the policy
config's ``no-pcie-multi-gpu-training.allowed_types`` (or disables that policy: then every PCIe
type is allowed). ``trainstack.rules.policy_config.policy_allowances`` builds this object from the
one config that validate, resolve, plan and ``pulumi up`` share, so the resolver plans exactly the
types the pack lets through. The engine never reads a config file: an explicit input, defaulting to
no allowances. An interconnect no source states (``unverified``) is never lifted.
"""

from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, ConfigDict, Field

from ..catalog import ResolvedInstance
from ..plan import PolicyException


class PolicyAllowances(BaseModel):
    """Exceptions a policy config grants to the engine's hard rules."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pcie_multi_gpu_types: frozenset[str] = Field(
        frozenset(), description="Instance types on which several GPUs of one node may train over PCIe")
    every_pcie_type: bool = Field(False, description="The policy is disabled: every PCIe type is allowed")
    policy: str = Field("no-pcie-multi-gpu-training", description="The policy whose setting grants it")
    source: str = Field("", description="Where the allowance was granted (the policy config file), for labels")

    def grants(self) -> tuple[bool, frozenset[str]]:
        """What it lets the resolver plan, whichever file granted it (two configs plan alike iff equal)."""
        return self.every_pcie_type, self.pcie_multi_gpu_types

    def allows_pcie(self, instance_type: str) -> bool:
        return self.every_pcie_type or instance_type in self.pcie_multi_gpu_types

    def lifts(self, inst: ResolvedInstance) -> bool:
        """Whether this config lets several GPUs of ``inst`` train together although it has no NVLink:
        a stated PCIe link only (the engine's rule otherwise stands)."""
        return (inst.gpu_count > 1 and not inst.multi_gpu_training_ok and inst.interconnect == "pcie"
                and self.allows_pcie(inst.name))

    def exception_for(self, inst: ResolvedInstance) -> Optional[PolicyException]:
        """The exception a plan on ``inst`` rests on, or None when the engine's rules allow it anyway."""
        if not self.lifts(inst):
            return None
        setting = "allowed_types" if inst.name in self.pcie_multi_gpu_types else "enforcementLevel"
        return PolicyException(policy=self.policy, instance_type=inst.name, setting=setting,
                               source=self.source or "the policy config")

    def pcie_label(self, instance_type: str) -> str:
        """The line a plan (and each candidate) on an allowed PCIe type carries."""
        where = f" in {self.source}" if self.source else ""
        how = (f"{self.policy}.allowed_types lists it" if instance_type in self.pcie_multi_gpu_types
               else f"{self.policy} is disabled")
        return (f"multi-GPU training inside one {instance_type} node over PCIe, without NVLink/NVSwitch, is "
                f"allowed by the policy config's PCIe exception: {how}{where}")


#: The engine's default: no exceptions.
NO_ALLOWANCES = PolicyAllowances()
