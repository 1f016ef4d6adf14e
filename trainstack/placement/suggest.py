"""When nothing is feasible: the smallest changes to the profile that make it feasible.

Each suggestion is tested, not guessed: the profile is changed in one way and resolved again;
only changes that produce a feasible plan are offered, each with what it would cost. What to try
is read from the rejections' reason codes (never their messages) and from the job itself:

* precision: an ``fp8-mixed`` job whose FP8 candidates were all rejected for a missing price is
  pointed at a price-book entry for those types, and ``bf16-mixed`` is offered with its best plan;
* size: a job that needs more nodes gets the smallest ``max_nodes`` that makes it feasible;
* method: adapters (LoRA/QLoRA) are offered for fine-tuning (``full``) only, never for
  pre-training, which trains every weight from scratch;
* PAI-DLC public resources over their limit: a resource quota or ECS, each with the plan that works.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Optional

from ..catalog import Catalog
from ..plan import Candidate
from ..profile import TrainingProfile
from ..reasons import ReasonCode
from .allowances import NO_ALLOWANCES, PolicyAllowances
from .ecs import considered
from .engine import Resolution, best as best_of

#: The most nodes a "more nodes" suggestion searches for a job of unset size (the profile allows 512).
MAX_NODES_SEARCHED = 128
#: FP8 types named in a "price-book entry" suggestion.
FP8_TYPES_NAMED = 4


def _variant(profile: TrainingProfile, section: str, extra: Optional[dict] = None, **changes: Any) -> TrainingProfile:
    """``profile`` with ``changes`` in ``section`` (and ``extra``: {section: changes}); relative paths
    (hf_config, price_book) keep starting at the profile's folder."""
    data = profile.model_dump()
    data[section].update(changes)
    for sec, more in (extra or {}).items():
        data[sec].update(more)
    return TrainingProfile.model_validate(data, context={"profile_dir": profile.base_dir})


def _best(profile: TrainingProfile, catalog: Catalog, allowances: PolicyAllowances = NO_ALLOWANCES
          ) -> Optional[Candidate]:
    return best_of(considered(profile, catalog, allowances).candidates, profile.resources.objective)


def describe(c: Candidate) -> str:
    """``2 x ecs.type (spot), 1,234 CNY`` (or its hourly price, or ``cost unknown`` with its hours)."""
    if c.total_cost_cny is not None:
        cost = f"{c.total_cost_cny:,.0f} CNY"
    elif c.hourly_cost_cny is not None:
        cost = f"{c.hourly_cost_cny:,.2f} CNY/h"
    else:
        cost = "cost unknown" + (f", {c.estimated_hours:,.1f} h" if c.estimated_hours is not None else "")
    what = c.instance_type or f"{c.gpus_per_node} {c.gpu_model} per pod (quota)"
    return f"{c.nodes} x {what}{' (spot)' if c.spot else ''}, {cost}"


def adapters_apply(profile: TrainingProfile) -> bool:
    """LoRA/QLoRA are a fine-tuning choice: never offered to pre-training (or to a job already on adapters)."""
    return profile.training.method == "full"


def fp8_types_without_price(res: Optional[Resolution], catalog: Catalog) -> list[str]:
    """FP8-capable types the resolution rejected only because no price is known (reason codes)."""
    if res is None:
        return []
    names = [c.instance_type for c in res.candidates
             if c.reason_code == ReasonCode.PRICE_UNKNOWN and c.instance_type and _fp8(catalog, c.instance_type)]
    by_gpus = sorted(dict.fromkeys(names), key=lambda t: (-catalog.instance(t).gpu_count, t))
    return by_gpus[:FP8_TYPES_NAMED]


def _fp8(catalog: Catalog, name: str) -> bool:
    inst = catalog.instance(name) if catalog.knows(name) else None
    return bool(inst and inst.gpu and inst.gpu.supports_fp8)


def _more_nodes(profile: TrainingProfile, catalog: Catalog, allowances: PolicyAllowances = NO_ALLOWANCES
                ) -> Optional[str]:
    """The smallest ``max_nodes`` that makes the job feasible, with the best plan within it."""
    r = profile.resources
    if isinstance(r.gpus, int):
        ceiling = min(512, max(r.max_nodes + 1, r.gpus))  # one GPU per node is the most nodes a count needs
    else:
        ceiling = min(MAX_NODES_SEARCHED, max(2 * r.max_nodes, 64))
    if ceiling <= r.max_nodes:
        return None
    try:
        relaxed = _variant(profile, "resources", max_nodes=ceiling)
    except ValueError:
        return None
    feasible = [c for c in considered(relaxed, catalog, allowances).candidates if c.feasible and c.nodes > r.max_nodes]
    if not feasible:
        return None
    needed = min(c.nodes for c in feasible)
    best = best_of([c for c in feasible if c.nodes <= needed], r.objective)
    return f"allow {needed} nodes (resources.max_nodes: {needed}): {describe(best)}" if best else None


def suggestions_for(profile: TrainingProfile, catalog: Catalog, res: Optional[Resolution] = None,
                    allowances: PolicyAllowances = NO_ALLOWANCES) -> list[str]:
    """Tested one-step changes that make ``profile`` feasible on ECS (``res``: what was considered), under
    the same policy-config exceptions as the resolution."""
    t, r = profile.training, profile.resources
    out: list[str] = []
    if t.precision == "fp8-mixed":
        unpriced = fp8_types_without_price(res, catalog)
        if unpriced:
            book = f"price book {catalog.price_book.path}" if catalog.price_book is not None else "a price book"
            out.append(f"add the team's price for the FP8 types seen without a public price in {profile.region} "
                       f"to {book} (docs/prices.md): {', '.join(unpriced)}")
    tries = _first_tries(profile)
    if adapters_apply(profile):
        tries.append(("train LoRA adapters instead of all weights (training.method: lora)",
                      lambda: _variant(profile, "training", method="lora")))
        tries.append(("train QLoRA adapters on a 4-bit base (training.method: qlora)",
                      lambda: _variant(profile, "training", method="qlora")))
    if t.method in ("full", "pretrain") and t.zero_stage < 3:
        tries.append(("shard weights, gradients and optimizer with ZeRO-3 (training.zero_stage: 3, gpus: auto)",
                      lambda: _variant(profile, "training", {"resources": {"gpus": "auto"}}, zero_stage=3)))
    if isinstance(r.gpus, int):
        tries.append(("let trainstack choose the GPU count (resources.gpus: auto)",
                      lambda: _variant(profile, "resources", gpus="auto")))
    if t.sequence_length > 512:
        tries.append((f"a shorter sequence (training.sequence_length: {t.sequence_length // 2})",
                      lambda: _variant(profile, "training", sequence_length=t.sequence_length // 2)))
    if t.micro_batch_size > 1:
        tries.append((f"a smaller micro-batch (training.micro_batch_size: {max(1, t.micro_batch_size // 2)}) "
                      "with gradient accumulation",
                      lambda: _variant(profile, "training", micro_batch_size=max(1, t.micro_batch_size // 2))))
    if r.gpu_models:
        tries.append(("allow any GPU model (remove resources.gpu_models)",
                      lambda: _variant(profile, "resources", gpu_models=())))
    if r.spot == "require":
        tries.append(("allow on-demand nodes (resources.spot: allow)", lambda: _variant(profile, "resources", spot="allow")))
    if r.spot == "never":
        tries.append(("allow spot nodes (resources.spot: allow)", lambda: _variant(profile, "resources", spot="allow")))
    for text, make in tries:
        variant = _try(make)
        best = _best(variant, catalog, allowances) if variant is not None else None
        if best is not None:
            out.append(f"{text}: {describe(best)}")
    more = _more_nodes(profile, catalog, allowances)
    if more:
        out.append(more)
    out += _relaxed_limits(profile, catalog, allowances)
    if (pcie := _pcie_exception(profile, catalog, res, allowances)):
        out.append(pcie)
    return list(dict.fromkeys(out))


def _pcie_exception(profile: TrainingProfile, catalog: Catalog, res: Optional[Resolution],
                    allowances: PolicyAllowances) -> Optional[str]:
    """The policy config's PCIe exception, tested: the best plan once the PCIe types the engine refused
    are listed in ``no-pcie-multi-gpu-training.allowed_types`` (offered only when one of them wins)."""
    if res is None:
        return None
    refused = sorted({t for r in res.rejected if ReasonCode.MULTI_GPU_WITHOUT_NVLINK in r.reason_codes
                      for t in r.instance_types if catalog.knows(t) and catalog.instance(t).interconnect == "pcie"})
    if not refused:
        return None
    wider = allowances.model_copy(update={"pcie_multi_gpu_types": allowances.pcie_multi_gpu_types | set(refused)})
    best = _best(profile, catalog, wider)
    if best is None or best.instance_type not in refused:
        return None
    return (f"accept data-parallel training over PCIe on {best.instance_type} (list it in the policy config's "
            f"{allowances.policy}.allowed_types; docs/policies.md): {describe(best)}")


def _relaxed_limits(profile: TrainingProfile, catalog: Catalog, allowances: PolicyAllowances = NO_ALLOWANCES
                    ) -> list[str]:
    """Budget and deadline: how far they would have to move."""
    r = profile.resources
    if r.max_total_cost is None and r.max_hourly_cost is None and r.deadline_hours is None:
        return []
    relaxed = _variant(profile, "resources", max_total_cost=None, max_hourly_cost=None, deadline_hours=None)
    best = _best(relaxed, catalog, allowances)
    out: list[str] = []
    if best is not None:
        if r.max_total_cost is not None and best.total_cost_cny is not None and best.total_cost_cny > r.max_total_cost:
            out.append(f"raise resources.max_total_cost to {math.ceil(best.total_cost_cny):,} CNY: {describe(best)}")
        if r.max_hourly_cost is not None and best.hourly_cost_cny is not None and best.hourly_cost_cny > r.max_hourly_cost:
            out.append(f"raise resources.max_hourly_cost to {best.hourly_cost_cny:,.2f} CNY/h: {describe(best)}")
        if r.deadline_hours is not None and best.estimated_hours is not None and best.estimated_hours > r.deadline_hours:
            out.append(f"extend resources.deadline_hours to {best.estimated_hours:,.1f}: {describe(best)}")
    return out


# ---- PAI-DLC -------------------------------------------------------------------------------------

#: Stands in for a quota id when a "use a quota" suggestion is tested.
QUOTA_PLACEHOLDER = "your-quota-id"


def _dlc_plan_text(profile: TrainingProfile, catalog: Catalog, allowances: PolicyAllowances = NO_ALLOWANCES
                   ) -> Optional[str]:
    """The DLC plan of ``profile`` in a few words, or None when it is infeasible too."""
    from ..errors import InfeasibleError, InputError
    from .dlc import resolve_dlc

    try:
        plan = resolve_dlc(profile, catalog, allowances=allowances).plan
    except (InfeasibleError, InputError):
        return None
    assert plan is not None
    where = plan.instance_type or f"{plan.gpus_per_node} {plan.gpu_model} per pod"
    cost = (f"{plan.total_cost_cny:,.0f} CNY" if plan.total_cost_cny is not None else "cost unknown")
    hours = "" if plan.estimated_hours is None else f", {plan.estimated_hours:,.1f} h"
    return f"{plan.nodes} pod(s) x {where}, {cost}{hours}"


def dlc_suggestions(profile: TrainingProfile, catalog: Catalog, codes: set,
                    allowances: PolicyAllowances = NO_ALLOWANCES) -> list[str]:
    """Tested changes that make a DLC job feasible: a quota or ECS when public resources are too small
    (each with the plan that works), then the job's own levers (precision, checkpointing, sharding,
    adapters for fine-tuning only, GPU count, deadline)."""
    t, r, d = profile.training, profile.resources, profile.dlc
    out: list[str] = []
    if ReasonCode.DLC_PUBLIC_LIMIT in codes and not d.resource_id:
        quota = _try(lambda: _variant(profile, "dlc", resource_id=QUOTA_PLACEHOLDER))
        text = _dlc_plan_text(quota, catalog, allowances) if quota else None
        if text:
            out.append(f"use a PAI resource quota (dlc.resource_id, with the dlc.workspace_id it is attached to): "
                       f"{text} (sized for {r.gpu_models[0] if r.gpu_models else 'A100-80G'} nodes unless "
                       "dlc.quota_spec names the quota's node)")
        ecs = _try(lambda: _variant(profile, "resources", target="ecs"))
        best = _best(ecs, catalog, allowances) if ecs else None
        if best is not None:
            out.append(f"run on ECS GPU nodes (resources.target: ecs): {describe(best)}")
        if not d.public_limits_raised:
            raised = _try(lambda: _variant(profile, "dlc", public_limits_raised=True))
            text = _dlc_plan_text(raised, catalog, allowances) if raised else None
            if text:
                out.append(f"if your account manager raised the public-resource limits (dlc.public_limits_raised: "
                           f"true): {text}")
    tries = _first_tries(profile)
    if ReasonCode.MULTI_NODE_WITHOUT_RDMA in codes and d.enable_rdma is False:
        tries.append(("let the pods talk over RDMA (dlc.enable_rdma: true)",
                      lambda: _variant(profile, "dlc", enable_rdma=True)))
    if t.method in ("full", "pretrain") and t.zero_stage < 3:
        tries.append(("shard with ZeRO-3 (training.zero_stage: 3, gpus: auto)",
                      lambda: _variant(profile, "training", {"resources": {"gpus": "auto"}}, zero_stage=3)))
    if adapters_apply(profile):
        tries.append(("train LoRA adapters instead of all weights (training.method: lora)",
                      lambda: _variant(profile, "training", method="lora")))
    if isinstance(r.gpus, int):
        tries.append(("let trainstack choose the GPU count (resources.gpus: auto)",
                      lambda: _variant(profile, "resources", gpus="auto")))
    if r.deadline_hours is not None:
        tries.append(("drop the deadline (resources.deadline_hours)",
                      lambda: _variant(profile, "resources", deadline_hours=None)))
    for text, make in tries:
        variant = _try(make)
        plan = _dlc_plan_text(variant, catalog, allowances) if variant else None
        if plan:
            out.append(f"{text}: {plan}")
    return list(dict.fromkeys(out))


def _first_tries(profile: TrainingProfile) -> list[tuple[str, Callable[[], TrainingProfile]]]:
    """The changes tried first on ECS and DLC alike: BF16 for an FP8 job, then checkpointing."""
    t = profile.training
    tries: list[tuple[str, Callable[[], TrainingProfile]]] = []
    if t.precision == "fp8-mixed":
        tries.append(("train in BF16 with fp32 master weights (training.precision: bf16-mixed)",
                      lambda: _variant(profile, "training", precision="bf16-mixed")))
    if not t.gradient_checkpointing:
        tries.append(("enable gradient checkpointing (training.gradient_checkpointing: true)",
                      lambda: _variant(profile, "training", gradient_checkpointing=True)))
    return tries


def _try(make: Callable[[], TrainingProfile]) -> Optional[TrainingProfile]:
    try:
        return make()
    except ValueError:  # the change conflicts with another field: not a one-step fix
        return None
