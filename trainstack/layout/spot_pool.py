"""The self-healing spot pool of a placement (profile ``resources.self_healing``)."""

from __future__ import annotations

from typing import Optional

from ..plan import SpotPoolPlan, ess_price_limit
from ..profile import TrainingProfile


def plan_spot_pool(profile: TrainingProfile, nodes: int, spot: bool,
                   price_limit: Optional[float]) -> tuple[Optional[SpotPoolPlan], list[str]]:
    """The self-healing spot pool (``resources.self_healing``) and the labels that explain it.

    Applied only to a 1-node spot plan: ESS gives a replacement node a new private IP, and a
    multi-node torchrun cluster is rendered with fixed IPs (hostfile, MASTER_ADDR), so for several
    nodes plain instances stay and a label says why. The pool keeps exactly one node (min = max =
    desired = 1), all spot (on-demand base 0: a base of 1 in a 1-node pool would mean no spot);
    with ``spot: allow`` ESS may start an on-demand node while no spot node can be had, with
    ``spot: require`` it never does. Checkpoints are on OSS or CPFS (the profile validator refuses
    ESSD), and the bootstrap restores the latest one, so a replacement node resumes.
    """
    if not profile.resources.self_healing:
        return None, []
    if not spot:
        return None, ["self-healing not applied: the chosen plan is on-demand (nothing to replace on reclaim)"]
    if nodes > 1:  # the rule book refuses this plan (trainstack.rules): never silently ignored
        return None, []
    if price_limit is None:
        return None, ["self-healing not applied: the spot plan has no price limit"]
    compensate = profile.resources.spot == "allow"
    limit = ess_price_limit(price_limit)
    notes = [f"self-healing: an ESS scaling group keeps 1 spot node running and replaces it when reclaimed "
             f"(spot price limit {limit} CNY/h)",
             "self-healing: the node is not stopped when the job ends (ESS would replace it); run "
             "`pulumi destroy --exclude-protected` to stop paying"]
    if compensate:
        notes.append("self-healing: with spot: allow, ESS starts an on-demand node while no spot node can be had "
                     "(on-demand price)")
    return SpotPoolPlan(compensate_with_on_demand=compensate, price_limit=limit, notes=tuple(notes)), notes
