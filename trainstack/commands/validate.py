"""`trainstack validate PROFILE | --stack NAME`: exit 0, or exit 2 with one line per problem.

Runs the whole rule book (``trainstack.rules``): the profile's own rules, the names the catalog must
know, and, by resolving, the rules that depend on the plan (ESSD sizes, tag counts, the node
bootstrap, the DLC request). A profile nothing can run (infeasible) is still valid: ``resolve``
and ``plan`` report that with exit 3 and suggestions.
"""

from __future__ import annotations

import json
import sys

from ..catalog import load_catalog
from ..errors import InfeasibleError, InputError
from ..plan import Plan
from ..profile import load_profile
from ..rules import check_plan, check_profile
from ..stack_config import plan_for_config


def register(sub) -> None:
    p = sub.add_parser("validate", help="check a training profile (or a stack) against every rule")
    p.add_argument("profile", nargs="?", help="path to a profile YAML")
    p.add_argument("--stack", help="check a stack (stacks/Pulumi.<stack>.yaml): its config and its profile")
    p.add_argument("--json", action="store_true", help="print the normalised profile as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    if bool(args.profile) == bool(args.stack):
        raise InputError("validate needs a profile path or --stack NAME (one of them)")
    if args.stack:
        return _validate_stack(args)
    profile = load_profile(args.profile)
    catalog = load_catalog()
    warnings = check_profile(profile, catalog, file=args.profile)
    for w in warnings:
        print(f"warning: {w.render()}", file=sys.stderr)
    from ..placement import resolve

    plan, note = None, None
    try:
        plan = check_plan(resolve(profile, catalog), file=args.profile)
    except InfeasibleError as exc:
        note = f"nothing can run it as it stands ({exc.message}); `trainstack resolve` shows what would"
    if args.json:
        print(json.dumps({"valid": True, "feasible": plan is not None, "warnings": [w.to_dict() for w in warnings],
                          "profile": profile.model_dump(mode="json")}, indent=2))
    else:
        arch = profile.architecture
        print(f"{args.profile}: ok ({profile.name}: {profile.model.label}, {arch.params / 1e9:.2f}B params, "
              f"{profile.training.method}, {profile.training.precision}, region {profile.region})")
        if note:
            print(f"note: {note}")
    return 0


def _validate_stack(args) -> int:
    from ..preview.sources import find_project, stack_config

    project = find_project()
    config, secret_keys = stack_config(project, args.stack)
    plan, note = None, None
    try:
        plan = plan_for_config(config, project.name, project.root, secret_keys)
    except InfeasibleError as exc:
        note = f"nothing can run it as it stands ({exc.message})"
    if args.json:
        print(json.dumps({"valid": True, "stack": args.stack, "feasible": plan is not None,
                          "plan": plan.summary() if isinstance(plan, Plan) else None}, indent=2))
    else:
        print(f"stack {args.stack}: ok" + (f" ({plan.target} {plan.instance_type or ''} x {plan.nodes})" if plan else ""))
        if note:
            print(f"note: {note}")
    return 0
