"""The plan schema version: one number for the Plan (``resolve --json``) and the plan document
(``plan --format json``), and how a saved document of an older version is read.

Bumping it is this one constant plus the fields the new version adds (:data:`FIELDS_ADDED`,
checked by tests/trainstack/test_plan_schema.py): a saved plan of an older version is then still
read by ``diff``, which reports what it lacks as unknown (never as "no change"). A change that is
more than an addition also registers its step in :data:`MIGRATIONS`.
"""

from __future__ import annotations

from typing import Any, Callable

PLAN_SCHEMA_VERSION = 3
#: The oldest saved plan ``diff`` still reads.
OLDEST_READABLE_SCHEMA_VERSION = 1
#: Fields each schema version added to the document (version 1 wrote ``replace_on_changes`` only
#: when set, so its absence there means none).
FIELDS_ADDED: dict[int, tuple[str, ...]] = {
    2: ("profile", "resources[].ignore_changes", "resources[].delete_before_replace", "resources[].provider_urn"),
    3: ("cost.breakdown", "cost.monthly_cny", "cost.after_destroy_monthly_cny", "plan.cost"),
}
#: What the cost figures of a document count: every billed resource (3 on), or the GPU nodes only (1, 2).
COST_BASIS_ALL_IN, COST_BASIS_COMPUTE = "all-in", "compute-only"


def cost_basis(doc: dict[str, Any]) -> str:
    """What ``cost.hourly_cny`` / ``cost.total_cny`` of a plan document count (a document read as saved,
    migrated or not)."""
    cost = doc.get("cost") or {}
    if cost.get("basis"):
        return str(cost["basis"])
    version = doc.get("schema_version")
    return COST_BASIS_COMPUTE if isinstance(version, int) and version < 3 else COST_BASIS_ALL_IN


def cost_to_v3(doc: dict[str, Any]) -> dict[str, Any]:
    """Version 2's cost counted the GPU nodes only: its figures become the compute ones, and the all-in
    ones (hourly, total, per pricing) are unknown, so a diff never compares them with a later plan's."""
    cost = doc.get("cost")
    if not isinstance(cost, dict) or cost.get("basis"):
        return dict(doc)
    out = dict(cost, basis=COST_BASIS_COMPUTE, compute_hourly_cny=cost.get("hourly_cny"),
               compute_total_cny=cost.get("total_cny"), hourly_cny=None, total_cny=None)
    for kind in ("on_demand", "spot"):
        if isinstance(cost.get(kind), dict):
            sub = cost[kind]
            out[kind] = dict(sub, compute_hourly_cny=sub.get("hourly_cny"), compute_total_cny=sub.get("total_cny"),
                             hourly_cny=None, total_cny=None)
    return dict(doc, cost=out)


#: ``version -> document of version - 1 made into one of version``, where more than fields were added.
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {3: cost_to_v3}


def readable_versions() -> tuple[int, ...]:
    return tuple(range(OLDEST_READABLE_SCHEMA_VERSION, PLAN_SCHEMA_VERSION + 1))


def migrated(doc: dict[str, Any]) -> dict[str, Any]:
    """A readable saved document brought up to :data:`PLAN_SCHEMA_VERSION`'s shape: each step's
    migration applied, and ``unknown_fields`` listing what the saved version did not record."""
    version = doc["schema_version"]
    out, unknown = dict(doc), []
    for step in range(version + 1, PLAN_SCHEMA_VERSION + 1):
        unknown += FIELDS_ADDED[step]
        out = MIGRATIONS.get(step, dict)(out)
    return dict(out, unknown_fields=unknown)
