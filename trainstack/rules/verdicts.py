"""Policy verdicts over a stack view: the pack's decisions, run the way the Pulumi engine runs them.

:data:`CHECKS` says, per policy, which pure function of :mod:`.checks` decides it and which parts of
the view it judges. :func:`policy_verdicts` runs them all with a policy config's levels and
settings: resource policies per resource, stack policies once; a policy that cannot run (a value
unknown at preview, a node without a price) gives an advisory "can't run policy" verdict, one that
does not apply gives none. ``validate`` and ``resolve`` call it on the plan's view
(:mod:`.plan_view`); ``policies/`` calls the same checks on the resources Pulumi sends.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Optional

from pydantic import BaseModel, ConfigDict

from ..catalog import Catalog, load_catalog
from ..plan import Plan
from . import policy_book as B
from .checks import Finding, cost, gpu, instance, network, ram, storage, tags
from .policy_config import resolve_policy_config
from .stack_view import NotApplicable, StackView, ValueUnknown


@dataclass(frozen=True)
class CheckSpec:
    """A policy's decision and what it judges: view parts (resource policies), or the whole view."""

    run: Callable[..., Iterator[Finding]]
    parts: Optional[tuple[str, ...]] = None  # None: a stack check

    def findings(self, view: StackView, settings: dict, cat: Catalog) -> Iterator[Finding]:
        if self.parts is None:
            return self.run(view, settings, cat)
        return self.run(*[getattr(view, p) for p in self.parts], settings, cat)


CHECKS: dict[str, CheckSpec] = {
    B.NO_PCIE_MULTI_GPU_TRAINING: CheckSpec(gpu.no_pcie_multi_gpu_training, ("nodes",)),
    B.MULTI_NODE_REQUIRES_RDMA: CheckSpec(gpu.multi_node_requires_rdma),
    B.SPOT_REQUIRES_CHECKPOINT_STORAGE: CheckSpec(storage.spot_requires_checkpoint_storage),
    B.ESSD_MINIMUM_SIZE: CheckSpec(storage.essd_minimum_size, ("disks",)),
    B.NO_PUBLIC_SSH: CheckSpec(network.no_public_ssh, ("ingress",)),
    B.GPU_HOURLY_BUDGET: CheckSpec(cost.gpu_hourly_budget),
    B.KNOWN_INSTANCE_TYPE: CheckSpec(gpu.known_instance_type, ("nodes",)),
    B.NO_SPOT_IN_DEPLOYMENT_SET: CheckSpec(instance.no_spot_in_deployment_set, ("instances",)),
    B.CHECKPOINT_STORAGE_PROTECTED: CheckSpec(storage.checkpoint_storage_protected, ("storage",)),
    B.REQUIRED_TAGS: CheckSpec(tags.required_tags, ("tagged",)),
    B.NO_WILDCARD_OSS_ACCESS: CheckSpec(ram.no_wildcard_oss_access, ("ram_policies", "ram_attachments")),
    B.METADATA_TOKENS_REQUIRED: CheckSpec(instance.metadata_tokens_required, ("instances",)),
    B.SELF_HEALING_OVER_TCP: CheckSpec(gpu.self_healing_over_tcp),
}
assert list(CHECKS) == [s.name for s in B.POLICY_SPECS], "a check for every policy, in pack order"


class Verdict(BaseModel):
    """One policy violation, as ``plan --format json`` lists it under ``policy``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    policy: str
    level: str  # mandatory | advisory
    resource: Optional[str] = None
    message: str

    @property
    def blocking(self) -> bool:
        return self.level == "mandatory"


def collect(findings: Iterable[Finding]) -> tuple[list[Finding], Optional[ValueUnknown], Optional[NotApplicable]]:
    """(findings before it stopped, why it could not run, why it does not apply)."""
    out: list[Finding] = []
    try:
        for f in findings:
            out.append(f)
    except ValueUnknown as exc:
        return out, exc, None
    except NotApplicable as exc:
        return out, None, exc
    return out, None, None


def unknown_message(exc: ValueUnknown) -> str:
    if exc.reason:
        return exc.reason
    path = ".".join(exc.value.path) if exc.value else ""
    return f"a value at .{path} can't be known during preview"


def _by_resource(view: StackView, parts: tuple[str, ...]) -> list[StackView]:
    """One view per resource (in the order the view lists them) holding that resource's items."""
    order: dict[str, dict[str, list]] = {}
    for part in parts:
        for item in getattr(view, part):
            name = getattr(item, "resource", None) or getattr(item, "name")
            order.setdefault(name, {p: [] for p in parts})[part].append(item)
    return [StackView(**{p: tuple(v) for p, v in items.items()}) for items in order.values()]


def policy_verdicts(view: StackView, config: Optional[Mapping[str, Any]] = None,
                    catalog: Optional[Catalog] = None) -> list[Verdict]:
    """Every verdict of every enabled policy on ``view`` (sorted: mandatory first, then by policy, resource)."""
    cat = catalog or load_catalog()
    settings = resolve_policy_config(config)
    out: list[Verdict] = []
    for name, check in CHECKS.items():
        level, props = settings[name]
        if level == "disabled":
            continue
        shown = "mandatory" if level in ("mandatory", "remediate") else "advisory"
        views = [view] if check.parts is None else _by_resource(view, check.parts)
        for part in views:
            found, unknown, _ = collect(check.findings(part, dict(props), cat))
            out += [Verdict(policy=name, level=shown, resource=f.resource, message=f.message) for f in found]
            if unknown is not None:
                resource = None if check.parts is None else _only_resource(part)
                where = f"{resource}: " if resource else ""
                out.append(Verdict(policy=name, level="advisory", resource=resource,
                                   message=f"{where}can't run policy '{name}' during preview: {unknown_message(unknown)}"))
    return sorted(out, key=lambda v: (v.level != "mandatory", v.policy, v.resource or "", v.message))


def _only_resource(view: StackView) -> Optional[str]:
    for part in ("nodes", "disks", "ingress", "ram_policies", "ram_attachments", "tagged", "instances", "storage"):
        for item in getattr(view, part):
            return getattr(item, "resource", None) or getattr(item, "name")
    return None


def plan_verdicts(plan: Plan, config: Optional[Mapping[str, Any]] = None) -> list[Verdict]:
    """The verdicts ``plan`` and ``pulumi up`` give this Plan under ``config`` (validate, resolve)."""
    # the plan view brings dlc_job and launchers/: loaded only when verdicts are asked
    from .plan_view import plan_view

    return policy_verdicts(plan_view(plan), config)
