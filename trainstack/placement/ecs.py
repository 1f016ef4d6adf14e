"""The ECS strategy: GPU instance types x node counts x pricing (on-demand, spot).

Every catalog instance type in the region (and types seen only in other mainland regions,
labelled "availability unverified") becomes options; the engine sizes, prices and checks each.
The feasible ones with a known price are ranked by the objective; the winner goes to the one Plan
assembler (``assemble.py``).
"""

from __future__ import annotations

from typing import Optional

from ..catalog import Catalog, load_catalog
from ..plan import Candidate
from ..profile import TrainingProfile
from ..reasons import Reason, ReasonCode, reason
from .allowances import NO_ALLOWANCES, PolicyAllowances
from .assemble import Choice, assemble
from .healing import compare, spot_fraction
from .engine import (
    Option, Resolution, closest, evaluate, family_rejection, node_counts, ranked, size, static_rejection,
    unverified_labels, zone_for,
)

ALTERNATIVES_SHOWN = 8
SPOT_OPTIONS = {"never": (False,), "allow": (False, True), "require": (True,)}


def considered(profile: TrainingProfile, catalog: Optional[Catalog] = None,
               allowances: PolicyAllowances = NO_ALLOWANCES) -> Resolution:
    """Every ECS candidate with its verdict, and the families none of whose types can run the job
    (``allowances``: the policy config's exceptions to the engine's rules; a candidate resting on one
    carries its label)."""
    catalog = catalog or load_catalog()
    arch = profile.architecture
    spot_options = SPOT_OPTIONS[profile.resources.spot]
    cands: list[Candidate] = []
    by_family: dict[str, list[tuple[str, Reason]]] = {}
    feasible_families: set[str] = set()
    for inst in catalog.resolved_instances():
        why = static_rejection(profile, inst, allowances)
        nodes_list: list[int] = []
        if why is None:
            nodes_list, why = node_counts(profile, inst)
        if why is not None:
            by_family.setdefault(inst.family.name, []).append((inst.name, why))
            continue
        type_labels = tuple(unverified_labels(inst)) + ((allowances.pcie_label(inst.name),)
                                                       if allowances.lifts(inst) else ())
        placements = {spot: zone_for(profile, catalog, inst, spot) for spot in spot_options}
        quote = catalog.quote(profile.region, inst.name)
        rows = []
        for nodes in nodes_list:
            sized = size(profile, inst, nodes, arch)
            for spot in spot_options:
                zone, zlabels, blocked = placements[spot]
                rows.append(evaluate(profile, catalog, Option(inst, nodes, spot, zone, tuple(zlabels) + type_labels,
                                                              blocked, quote=quote), sized))
        cands.extend(rows)
        if any(c.feasible for c in rows):
            feasible_families.add(inst.family.name)
        else:
            near = closest(rows)
            by_family.setdefault(inst.family.name, []).append(
                (inst.name, reason(near.reason_code or ReasonCode.NO_FEASIBLE_LAYOUT, near.reason or "no feasible layout")))
    rejected = [family_rejection(f, rows) for f, rows in sorted(by_family.items()) if f not in feasible_families]
    return Resolution(plan=None, candidates=cands, rejected=rejected)


def healing_labels(profile: TrainingProfile, catalog: Catalog, feasible: list) -> list[str]:
    """Self-healing next to the same nodes on-demand, with the break-even spot fraction (trainstack.placement.healing)."""
    if not profile.resources.self_healing:
        return []
    def fraction_of(instance_type: str) -> Optional[float]:
        return spot_fraction(catalog.quote(profile.region, instance_type))
    found = compare(profile, feasible, fraction_of)
    if found is None:
        return []
    return [found.label(fraction_of(found.healing.instance_type or ""))]


def resolve_ecs(profile: TrainingProfile, catalog: Catalog, res: Optional[Resolution] = None,
                allowances: PolicyAllowances = NO_ALLOWANCES) -> Resolution:
    """The cheapest (or fastest) feasible ECS plan; ``res.plan`` is None when nothing is feasible (or,
    with ``res.problems``, when the plan cannot be assembled)."""
    res = res or considered(profile, catalog, allowances)
    feasible = ranked(res.candidates, profile.resources.objective)
    if feasible:
        best = feasible[0]
        inst = catalog.instance(best.instance_type or "")
        quote = catalog.quote(profile.region, inst.name)
        res.assembled(assemble(profile, catalog, Choice(
            target="ecs", best=best, inst=inst, quote=quote,
            alternatives=tuple(feasible[1:ALTERNATIVES_SHOWN + 1]), rejected=tuple(res.rejected),
            labels=tuple(healing_labels(profile, catalog, feasible)),
            exceptions=tuple(e for e in [allowances.exception_for(inst)] if e is not None))))
    return res
