"""What every policy module shares: the policy names and default levels (trainstack.rules.policy_book),
the catalog, and the adapter that runs a policy's pure check (trainstack.rules.checks) on what the
engine sends. Imported first by each of them: when the pack runs from a checkout without
``pip install -e ..``, it puts the checkout's ``trainstack`` on ``sys.path``.

Importable as ``policies._base`` and as ``_base`` (Pulumi runs the pack from inside policies/).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable, Optional

try:
    import trainstack  # noqa: F401  (installed into the pack's virtualenv by requirements.txt)
except ModuleNotFoundError:  # a checkout without `pip install -e ..`: use the checkout's copy
    _ROOT = Path(__file__).resolve().parents[1]
    if (_ROOT / "trainstack" / "__init__.py").is_file():
        sys.path.insert(0, str(_ROOT))

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError

from trainstack.catalog import Catalog, load_catalog
from trainstack.rules.policy_book import (  # noqa: F401  (the pack's names, as before the rule book held them)
    CHECKPOINT_STORAGE_PROTECTED, ESSD_MINIMUM_SIZE, GPU_HOURLY_BUDGET, KNOWN_INSTANCE_TYPE, METADATA_TOKENS_REQUIRED,
    MULTI_NODE_REQUIRES_RDMA, NO_PCIE_MULTI_GPU_TRAINING, NO_PUBLIC_SSH, NO_SPOT_IN_DEPLOYMENT_SET,
    NO_WILDCARD_OSS_ACCESS, POLICY_SPECS, REQUIRED_TAGS, SELF_HEALING_OVER_TCP, SPECS_BY_NAME,
    SPOT_REQUIRES_CHECKPOINT_STORAGE,
)
from trainstack.rules.stack_view import StackView
from trainstack.rules.verdicts import CHECKS, collect, unknown_message

MANDATORY = EnforcementLevel.MANDATORY
ADVISORY = EnforcementLevel.ADVISORY

#: Each policy's level when the policy config does not set one.
DEFAULT_ENFORCEMENT: dict[str, EnforcementLevel] = {s.name: EnforcementLevel(s.level) for s in POLICY_SPECS}


class BudgetUnverified(UnknownValueError):
    """A price the catalog does not know: the budget can't be checked (reported as advisory)."""

    def __init__(self, message: str):  # noqa: D107 (UnknownValueError wants a sentinel)
        Exception.__init__(self, message)
        self.unknown_type_sentinel = None
        self.props: list[str] = []
        self.message = message


def catalog() -> Catalog:
    """The trainstack catalog (loaded once per process)."""
    return load_catalog()


def level_or_default(name: str, level: Optional[EnforcementLevel]) -> EnforcementLevel:
    return level if level is not None else DEFAULT_ENFORCEMENT[name]


def config_value(args: Any, key: str, default: Any = None) -> Any:
    value = (args.get_config() or {}).get(key)
    return default if value is None else value


def settings(args: Any, name: str) -> dict[str, Any]:
    """The policy's settings: its schema defaults, then what the engine's config sets."""
    schema = SPECS_BY_NAME[name].config_schema
    out = {k: v["default"] for k, v in schema.items() if "default" in v}
    out.update({k: v for k, v in (args.get_config() or {}).items() if v is not None})
    return out


class _CatalogWhenRead:
    """The catalog, loaded when a check first reads it (most checks of most resources never do)."""

    def __getattr__(self, attr: str) -> Any:
        loaded = catalog()
        self.__dict__.update({"_loaded": loaded})
        return getattr(loaded, attr)


def run_check(name: str, view: StackView, args: Any, report: ReportViolation) -> None:
    """The policy's pure check on ``view``, reported the engine's way: each finding, then (when it could
    not run) the engine's unknown-value error, or not applicable."""
    found, unknown, not_applicable = collect(CHECKS[name].findings(view, settings(args, name), _CatalogWhenRead()))
    for f in found:
        if f.urn:
            report(f.message, f.urn)
        else:
            report(f.message)
    if not_applicable is not None:
        args.not_applicable(str(not_applicable))
    if unknown is not None:
        if unknown.value is not None:
            raise UnknownValueError(unknown.value.sentinel, list(unknown.value.path))
        raise BudgetUnverified(unknown_message(unknown))


def _schema(name: str) -> Optional[PolicyConfigSchema]:
    schema = SPECS_BY_NAME[name].config_schema
    return PolicyConfigSchema(properties={k: dict(v) for k, v in schema.items()}) if schema else None


def _policy(cls: Any, name: str, level: Optional[EnforcementLevel], view: Callable[[Any], StackView]) -> Any:
    def validate(args: Any, report: ReportViolation) -> None:
        run_check(name, view(args), args, report)

    return cls(name=name, description=SPECS_BY_NAME[name].description, validate=validate,
               enforcement_level=level_or_default(name, level), config_schema=_schema(name))


def resource_policy(name: str, level: Optional[EnforcementLevel],
                    view: Callable[[ResourceValidationArgs], StackView]) -> ResourceValidationPolicy:
    """A CrossGuard resource policy that runs ``name``'s check on the view of each resource."""
    return _policy(ResourceValidationPolicy, name, level, view)


def stack_policy(name: str, level: Optional[EnforcementLevel],
                 view: Callable[[StackValidationArgs], StackView]) -> StackValidationPolicy:
    """A CrossGuard stack policy that runs ``name``'s check once on the view of the whole stack."""
    return _policy(StackValidationPolicy, name, level, view)
