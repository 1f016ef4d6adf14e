"""Placement: from a profile to the cheapest (or fastest) correct place to run it, with reasons.

One engine (``engine.py``: size, price, check and rank a candidate) and two strategies on it:
ECS GPU nodes (``ecs.py``) and PAI-DLC jobs (``dlc.py``), which only enumerate, size and rank; the
one Plan assembler (``assemble.py``) turns the winner into the Plan. When nothing is feasible the same engine
tests one-step changes of the profile (``suggest.py``) and the error lists those that work.
"""

from __future__ import annotations

from typing import Optional

from ..catalog import Catalog, load_catalog
from ..catalog.price_book import catalog_for
from ..errors import InfeasibleError
from ..plan import Plan
from ..profile import TrainingProfile
from ..reasons import BUDGET_CODES, ReasonCode
from .allowances import NO_ALLOWANCES, PolicyAllowances
from .dlc import resolve_dlc, wants_dlc
from .ecs import considered, resolve_ecs
from .engine import SPOT_RESTART_ALLOWANCE, Resolution, rank_key, ranked
from .suggest import dlc_suggestions, suggestions_for

__all__ = ["NO_ALLOWANCES", "PolicyAllowances", "Resolution", "SPOT_RESTART_ALLOWANCE", "considered", "rank_key", "ranked", "resolve", "resolve_all",
           "wants_dlc"]


def resolve(profile: TrainingProfile, catalog: Optional[Catalog] = None,
            allowances: PolicyAllowances = NO_ALLOWANCES) -> Plan:
    """The plan for ``profile``; :class:`InfeasibleError` (exit 3) when nothing fits, InputError (exit 2)
    with every problem the Plan assembler found. ``allowances``: the policy config's exceptions."""
    plan = resolve_all(profile, catalog, allowances).plan
    assert plan is not None
    return plan


def resolve_all(profile: TrainingProfile, catalog: Optional[Catalog] = None,
                allowances: PolicyAllowances = NO_ALLOWANCES) -> Resolution:
    """The plan and everything considered on the way; InfeasibleError when nothing fits, InputError
    when the winner's plan cannot be assembled (every problem at once). Suggestions are tested under
    the same ``allowances``."""
    catalog = catalog_for(profile, catalog or load_catalog())
    if wants_dlc(profile):
        ecs_res = considered(profile, catalog, allowances) if profile.resources.target == "auto" else None
        try:
            return assembled(resolve_dlc(profile, catalog, ecs_res, allowances))
        except InfeasibleError as exc:  # tested fixes, chosen by the rejections' reason codes
            codes = {ReasonCode(c) for c in exc.details.get("reason_codes", ())}
            exc.suggestions = dlc_suggestions(profile, catalog, codes, allowances)
            raise
    res = resolve_ecs(profile, catalog, allowances=allowances)
    if res.plan is None and res.error is None:
        raise infeasible(profile, catalog, res, allowances)
    return assembled(res)


def assembled(res: Resolution) -> Resolution:
    """``res``, or the InputError with every problem of its plan."""
    if res.error is not None:
        raise res.error
    return res


def infeasible(profile: TrainingProfile, catalog: Catalog, res: Resolution,
               allowances: PolicyAllowances = NO_ALLOWANCES) -> InfeasibleError:
    return InfeasibleError(
        f"no feasible placement for {profile.name} in {profile.region}: {summarise(res)}",
        suggestions=suggestions_for(profile, catalog, res, allowances),
        details={"rejected": [r.model_dump(mode="json") for r in res.rejected],
                 "candidates_considered": len(res.candidates)})


_KINDS = (("exceed the budget", BUDGET_CODES), ("miss the deadline", {ReasonCode.DEADLINE}),
          ("do not fit in GPU memory", {ReasonCode.MEMORY}), ("have no known price", {ReasonCode.PRICE_UNKNOWN}),
          ("need more than one GPU", {ReasonCode.ZERO_NEEDS_GPUS}),
          ("cannot run the parallel layout there", {ReasonCode.LAYOUT_WORLD_SIZE, ReasonCode.LAYOUT_NO_LINK,
                                                    ReasonCode.TENSOR_PARALLEL_ACROSS_NODES,
                                                    ReasonCode.TENSOR_PARALLEL_WITHOUT_NVLINK,
                                                    ReasonCode.NO_FEASIBLE_LAYOUT}))


def summarise(res: Resolution) -> str:
    """Counts per kind of rejection, most decisive first (budget and deadline before memory)."""
    codes = [c.reason_code for c in res.candidates if c.reason_code is not None]
    if not codes:
        return "every instance family was rejected (see below)" if res.rejected else "the catalog has no candidates"
    parts = [f"{n} candidates {text}" for text, kind in _KINDS if (n := sum(c in kind for c in codes))]
    known = set().union(*(kind for _, kind in _KINDS))
    if (rest := sum(c not in known for c in codes)):
        parts.append(f"{rest} candidates rejected for other reasons (`resolve --all` lists them)")
    return "; ".join(parts)
