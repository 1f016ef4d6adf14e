"""The checked entry points of the rule book: :func:`planned` (profile rules, resolution, plan rules)
and :func:`check_plan`, with the per-command memo that lets the offline plan and the recorded
program share one checked Plan (:func:`reusing_plans`).
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import replace
from typing import TYPE_CHECKING, Iterator, Optional

from ..catalog import Catalog, load_catalog
from ..errors import InputError
from ..plan import Plan
from ..profile import TrainingProfile
from .plan_rules import plan_problems
from .profile_rules import check_profile

if TYPE_CHECKING:
    from ..placement.allowances import PolicyAllowances

_reuse_lock = threading.Lock()
_reused: Optional[dict[tuple, tuple[Optional[Catalog], Plan]]] = None


def check_plan(plan: Plan, file: Optional[str] = None) -> Plan:
    """The plan, or InputError (exit 2) with every plan rule it breaks."""
    memo = _reused
    if memo is not None and memo.get(("checked", id(plan)), (None, None))[1] is plan:
        return plan  # this very (frozen) Plan passed already in this command (the program checks it again)
    problems = plan_problems(plan)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise InputError(f"{file or plan.name}: {problems[0].message}{more}",
                         problems=[replace(p, file=file) for p in problems])
    if memo is not None:
        memo[("checked", id(plan))] = (None, plan)
    return plan


def in_file(exc: InputError, file: Optional[str]) -> InputError:
    """``exc`` with its problems placed in ``file`` (the profile's)."""
    if file is None or not exc.problems:
        return exc
    return InputError(exc.message, problems=[replace(p, file=p.file or file) for p in exc.problems], hint=exc.hint)


@contextlib.contextmanager
def reusing_plans() -> Iterator[None]:
    """Within the block, :func:`planned` of the same profile, catalog and file is computed once.
    ``trainstack plan`` plans the profile, then records the real Pulumi program, which plans it
    again in its own thread: same inputs in one command, so the same checked Plan (frozen)."""
    global _reused
    with _reuse_lock:
        outer, _reused = _reused, (_reused if _reused is not None else {})
    try:
        yield
    finally:
        with _reuse_lock:
            _reused = outer


def resolution(profile: TrainingProfile, catalog: Optional[Catalog] = None, file: Optional[str] = None,
               allowances: Optional["PolicyAllowances"] = None):
    """What ``resolve`` shows: the checked Plan and every candidate considered (``placement.Resolution``)."""
    from .. import placement

    catalog = catalog or load_catalog()
    check_profile(profile, catalog, file)
    try:
        res = placement.resolve_all(profile, catalog, allowances or placement.NO_ALLOWANCES)
    except InputError as exc:
        raise in_file(exc, file) from None
    assert res.plan is not None
    check_plan(res.plan, file)
    return res


def planned(profile: TrainingProfile, catalog: Optional[Catalog] = None, file: Optional[str] = None,
            allowances: Optional["PolicyAllowances"] = None) -> Plan:
    """The checked Plan: profile rules, resolution (InfeasibleError, exit 3), plan rules. ``allowances``:
    the policy config's exceptions to the engine's rules (``policy_config.policy_allowances``)."""
    from .. import placement  # the placement engine sits below; read at call time (tests replace resolve)

    catalog = catalog or load_catalog()
    memo = _reused
    key = (profile.model_dump_json(), id(catalog), file, allowances) if memo is not None else None
    if memo is not None and key in memo:
        return memo[key][1]
    check_profile(profile, catalog, file)
    try:
        resolved = (placement.resolve(profile, catalog) if allowances is None or allowances == placement.NO_ALLOWANCES
                    else placement.resolve(profile, catalog, allowances))
    except InputError as exc:  # what the Plan assembler found: name the profile's file
        raise in_file(exc, file) from None
    plan = check_plan(resolved, file)
    if memo is not None:
        memo[key] = (catalog, plan)  # the catalog is kept so its id is not reused
    return plan
