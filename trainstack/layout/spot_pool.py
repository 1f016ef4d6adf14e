"""The self-healing spot pool of a placement (profile ``resources.self_healing``).

Two shapes (docs/self-healing.md):

* **1 node**: an ESS scaling group keeps the plan's single spot node (min = max = desired = 1); the
  job rendezvous on loopback, so a replacement with a new private IP simply reruns it.
* **several nodes** (``anchor``): node 0 stays a plain instance at its fixed private IP, on-demand
  (a reclaimed node 0 would take the rendezvous with it), and hosts torchrun's c10d rendezvous;
  nodes 1.. are spot nodes of an ESS group (min = max = desired = nodes - 1) in a vSwitch of their
  own. Every node runs torchrun elastic with a fixed world size (``--nnodes N:N``): when ESS
  replaces a reclaimed node, the survivors' agents restart their workers and the new node joins
  the next rendezvous round; the job resumes from the latest checkpoint on CPFS.

torchrun facts (torch 2.13.0, git cf30153c, torch/distributed/elastic): the c10d rendezvous port
defaults to 29400 (rendezvous/c10d_rendezvous_backend.py DEFAULT_PORT); ``join_timeout`` defaults
to 600 s (rendezvous/dynamic_rendezvous.py RendezvousTimeout); a node joining a running group
restarts the workers without using up a restart, a failed worker group uses one
(agent/server/api.py ``_invoke_run``); ranks are given in the sorted order of the members'
addresses (dynamic_rendezvous.py ``_mark_rendezvous_complete``), so after a replacement a
surviving node may take another rank.
"""

from __future__ import annotations

from typing import Optional

from ..plan import SpotPoolPlan, ess_price_limit
from ..profile import TrainingProfile

#: torchrun's own default c10d port (see above); node 0 listens there
RENDEZVOUS_PORT = 29400
#: A replacement spot node boots, installs the GPU driver and PyTorch before it joins: 600 s (torchrun's
#: default) is too short for that, an hour is the wait trainstack chooses before the agents give up.
JOIN_TIMEOUT_SECONDS = 3600
#: Worker-group failures each agent survives: a lost node fails the survivors' workers once (their
#: collectives break) before the replacement joins; 10 covers 10 reclaims in one job.
MAX_RESTARTS = 10


def heals_multi_node(profile: TrainingProfile, nodes: int, spot: bool) -> bool:
    """A multi-node self-healing ECS plan: node 0 on-demand (the anchor), the rest in the pool, TCP between
    them (trainstack.layout.network). The one test the network layout, pricing and the pool share."""
    return bool(profile.resources.self_healing and spot and nodes > 1 and profile.resources.target != "dlc")


def plan_spot_pool(profile: TrainingProfile, nodes: int, spot: bool,
                   price_limit: Optional[float]) -> tuple[Optional[SpotPoolPlan], list[str]]:
    """The self-healing spot pool (``resources.self_healing``) and the labels that explain it.

    The pool is all spot (on-demand base 0); with ``spot: allow`` ESS may start an on-demand node
    while no spot node can be had, with ``spot: require`` it never does. Checkpoints are on OSS or
    CPFS (the profile validator refuses ESSD; the rule book asks CPFS of several nodes), so a
    replacement node resumes. Whether the plan can take a pool (launcher, checkpoints, spot
    setting) is the rule book's call (trainstack.rules): never silently ignored.
    """
    if not profile.resources.self_healing:
        return None, []
    if not spot:
        return None, ["self-healing not applied: the chosen plan is on-demand (nothing to replace on reclaim)"]
    if price_limit is None:
        return None, ["self-healing not applied: the spot plan has no price limit"]
    compensate = profile.resources.spot == "allow"
    limit = ess_price_limit(price_limit)
    if nodes == 1:
        notes = [f"self-healing: an ESS scaling group keeps 1 spot node running and replaces it when reclaimed "
                 f"(spot price limit {limit} CNY/h)",
                 "self-healing: when the job ends the node executes the pool's scale-to-0 rule (ESS would replace "
                 "a stopped node): nothing bills after the job; the next `pulumi up --refresh` sets the size back"]
        pool = SpotPoolPlan(compensate_with_on_demand=compensate, price_limit=limit, notes=())
    else:
        workers = nodes - 1
        notes = [f"self-healing: node 0 runs on-demand at its fixed IP and hosts torchrun's rendezvous (port "
                 f"{RENDEZVOUS_PORT}); an ESS scaling group keeps nodes 1..{workers} on spot (price limit {limit} "
                 f"CNY/h) and replaces a reclaimed one, which joins the running job",
                 f"self-healing: torchrun elastic with a fixed world size ({nodes}:{nodes} nodes, up to "
                 f"{MAX_RESTARTS} restarts); the survivors wait up to {JOIN_TIMEOUT_SECONDS // 60} min for a "
                 "replacement and resume from the latest checkpoint on CPFS",
                 "self-healing: when the job ends (success, failure, restarts exhausted, budget guard) a pool node "
                 "executes the pool's scale-to-0 rule and node 0 stops itself: nothing bills after the job; "
                 "`pulumi up --refresh` sets the pool's size back, starting node 0 starts the next job"]
        pool = SpotPoolPlan(min_size=workers, max_size=workers, compensate_with_on_demand=compensate,
                            price_limit=limit, anchor=True, rendezvous_port=RENDEZVOUS_PORT,
                            max_restarts=MAX_RESTARTS, join_timeout_seconds=JOIN_TIMEOUT_SECONDS)
    if compensate:
        notes.append("self-healing: with spot: allow, ESS starts an on-demand node while no spot node can be had "
                     "(on-demand price)")
    return pool.model_copy(update={"notes": tuple(notes)}), notes
