"""The plan schema version: one number for the Plan (``resolve --json``) and the plan document
(``plan --format json``), and how a saved document of an older version is read.

Bumping it is this one constant plus the fields the new version adds (:data:`FIELDS_ADDED`,
checked by tests/trainstack/test_plan_schema.py): a saved plan of an older version is then still
read by ``diff``, which reports what it lacks as unknown (never as "no change"). A change that is
more than an addition also registers its step in :data:`MIGRATIONS`.
"""

from __future__ import annotations

from typing import Any, Callable

PLAN_SCHEMA_VERSION = 2
#: The oldest saved plan ``diff`` still reads.
OLDEST_READABLE_SCHEMA_VERSION = 1
#: Fields each schema version added to the document (version 1 wrote ``replace_on_changes`` only
#: when set, so its absence there means none).
FIELDS_ADDED: dict[int, tuple[str, ...]] = {
    2: ("profile", "resources[].ignore_changes", "resources[].delete_before_replace", "resources[].provider_urn"),
}
#: ``version -> document of version - 1 made into one of version``, where more than fields were added.
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}


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
