"""When nothing is feasible: the smallest changes to the profile that make it feasible.

Each suggestion is tested, not guessed: the profile is changed in one way and resolved
again; only changes that produce a feasible plan are offered, each with what it would cost.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from ..catalog import Catalog
from ..plan import Candidate
from ..profile import TrainingProfile
from .ecs import considered
from .engine import best as best_of


def _variant(profile: TrainingProfile, section: str, extra: Optional[dict] = None, **changes: Any) -> TrainingProfile:
    """``profile`` with ``changes`` in ``section`` (and ``extra``: {section: changes})."""
    data = profile.model_dump()
    data[section].update(changes)
    for sec, more in (extra or {}).items():
        data[sec].update(more)
    return TrainingProfile.model_validate(data)


def _best(profile: TrainingProfile, catalog: Catalog) -> Optional[Candidate]:
    return best_of(considered(profile, catalog).candidates, profile.resources.objective)


def _describe(c: Candidate) -> str:
    cost = f"{c.total_cost_cny:,.0f} CNY" if c.total_cost_cny is not None else f"{c.hourly_cost_cny:,.2f} CNY/h"
    return f"{c.nodes} x {c.instance_type}{' (spot)' if c.spot else ''}, {cost}"


def suggestions_for(profile: TrainingProfile, catalog: Catalog) -> list[str]:
    t, r = profile.training, profile.resources
    tries: list[tuple[str, Callable[[], TrainingProfile]]] = []
    if not t.gradient_checkpointing:
        tries.append(("enable gradient checkpointing (training.gradient_checkpointing: true)",
                      lambda: _variant(profile, "training", gradient_checkpointing=True)))
    if t.method in ("full", "pretrain"):
        tries.append(("train LoRA adapters instead of all weights (training.method: lora)",
                      lambda: _variant(profile, "training", method="lora")))
        tries.append(("train QLoRA adapters on a 4-bit base (training.method: qlora)",
                      lambda: _variant(profile, "training", method="qlora")))
        if t.zero_stage < 3:
            tries.append(("shard weights, gradients and optimizer with ZeRO-3 (training.zero_stage: 3, gpus: auto)",
                          lambda: _variant(profile, "training", {"resources": {"gpus": "auto"}}, zero_stage=3)))
    if r.max_nodes < 64:
        tries.append((f"allow more nodes (resources.max_nodes: {min(64, r.max_nodes * 4)})",
                      lambda: _variant(profile, "resources", max_nodes=min(64, r.max_nodes * 4))))
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
    out: list[str] = []
    for text, make in tries:
        try:
            variant = make()
        except ValueError:  # the change conflicts with another field: not a one-step fix
            continue
        best = _best(variant, catalog)
        if best is not None:
            out.append(f"{text}: {_describe(best)}")
    # Budget and deadline: how far they would have to move.
    if r.max_total_cost is not None or r.max_hourly_cost is not None or r.deadline_hours is not None:
        relaxed = _variant(profile, "resources", max_total_cost=None, max_hourly_cost=None, deadline_hours=None)
        best = _best(relaxed, catalog)
        if best is not None:
            if r.max_total_cost is not None and best.total_cost_cny is not None and best.total_cost_cny > r.max_total_cost:
                out.append(f"raise resources.max_total_cost to {best.total_cost_cny:,.0f} CNY: {_describe(best)}")
            if r.max_hourly_cost is not None and best.hourly_cost_cny is not None and best.hourly_cost_cny > r.max_hourly_cost:
                out.append(f"raise resources.max_hourly_cost to {best.hourly_cost_cny:,.2f} CNY/h: {_describe(best)}")
            if r.deadline_hours is not None and best.estimated_hours is not None and best.estimated_hours > r.deadline_hours:
                out.append(f"extend resources.deadline_hours to {best.estimated_hours:,.1f}: {_describe(best)}")
    return list(dict.fromkeys(out))
