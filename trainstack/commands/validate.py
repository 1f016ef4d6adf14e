"""`trainstack validate PROFILE | --stack NAME`: exit 0, 2 (one line per problem) or 4 (a mandatory policy).

Runs the whole rule book (``trainstack.rules``): the profile's own rules, the names the catalog must
know, and, by resolving, the rules that depend on the plan (ESSD sizes, tag counts, the node
bootstrap, the DLC request) and the policy pack's verdicts on what the plan would declare, under
``--policy-config FILE`` or the stack's ``trainstack:policyConfig`` (the verdicts ``plan`` and
``pulumi up`` give: each printed with its policy and level, exit 4 on a mandatory one; a problem
that is exit 2 wins). A profile nothing can run (infeasible) is still valid: ``resolve`` and
``plan`` report that with exit 3 and suggestions.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from typing import Optional

from ..catalog import load_catalog
from ..errors import InfeasibleError, InputError
from ..plan import Plan
from ..profile import load_profile
from ..rules import plan_verdicts, planned, profile_warnings
from ..stack_config import plan_for_config, policy_config_path
from . import _policy


def register(sub) -> None:
    p = sub.add_parser("validate", help="check a training profile (or a stack) against every rule and policy")
    p.add_argument("profile", nargs="?", help="path to a profile YAML")
    p.add_argument("--stack", help="check a stack (stacks/Pulumi.<stack>.yaml): its config and its profile")
    p.add_argument("--json", action="store_true", help="print the normalised profile and the verdicts as JSON")
    _policy.add_argument(p)
    p.set_defaults(func=run)


def run(args) -> int:
    if bool(args.profile) == bool(args.stack):
        raise InputError("validate needs a profile path or --stack NAME (one of them)")
    if args.stack:
        return _validate_stack(args)
    profile = load_profile(args.profile)
    config = _policy.policy_config(args)
    catalog = load_catalog()
    plan, note = None, None
    try:
        plan = planned(profile, catalog, file=args.profile, allowances=_policy.allowances(config))
    except InfeasibleError as exc:
        note = f"nothing can run it as it stands ({exc.message}); `trainstack resolve` shows what would"
    warnings = [replace(w, file=args.profile) for w in profile_warnings(profile, catalog)]
    for w in warnings:
        print(f"warning: {w.render()}", file=sys.stderr)
    verdicts = plan_verdicts(plan, config) if plan is not None else []
    if args.json:
        print(json.dumps({"valid": True, "feasible": plan is not None, "warnings": [w.to_dict() for w in warnings],
                          "policy": [v.model_dump() for v in verdicts],
                          "profile": profile.model_dump(mode="json")}, indent=2))
    else:
        arch = profile.architecture
        print(f"{args.profile}: {_state(verdicts)} ({profile.name}: {profile.model.label}, {arch.params / 1e9:.2f}B "
              f"params, {profile.training.method}, {profile.training.precision}, region {profile.region})")
        if note:
            print(f"note: {note}")
    return _policy.report(verdicts, args.profile)


def _state(verdicts) -> str:
    return "refused by a mandatory policy" if any(v.blocking for v in verdicts) else "ok"


def _validate_stack(args) -> int:
    from ..preview.sources import find_project, stack_config

    project = find_project()
    config, secret_keys = stack_config(project, args.stack)
    policy = _policy.policy_config(args, policy_config_path(config, project.name, project.root))
    plan: Optional[Plan] = None
    note = None
    try:
        plan = plan_for_config(config, project.name, project.root, secret_keys,
                               policy_file=getattr(policy, "path", None))
    except InfeasibleError as exc:
        note = f"nothing can run it as it stands ({exc.message})"
    verdicts = plan_verdicts(plan, policy) if plan is not None else []
    if args.json:
        print(json.dumps({"valid": True, "stack": args.stack, "feasible": plan is not None,
                          "plan": plan.summary() if isinstance(plan, Plan) else None,
                          "policy": [v.model_dump() for v in verdicts]}, indent=2))
    else:
        print(f"stack {args.stack}: {_state(verdicts)}"
              + (f" ({plan.target} {plan.instance_type or ''} x {plan.nodes})" if plan else ""))
        if note:
            print(f"note: {note}")
    return _policy.report(verdicts, f"stack {args.stack}")
