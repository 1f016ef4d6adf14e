"""`trainstack plan PROFILE | --stack NAME`: the offline preview of what `pulumi up` would create.

Runs the real Pulumi program in-process under a recording mock engine (no cloud, no Pulumi CLI),
runs the policy pack over what it declared (``--policy-config FILE``, else the stack's
``trainstack:policyConfig``), and prints the plan. Exit 4 when a mandatory policy fails (the plan is
still printed or written).
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..errors import EXIT_POLICY, InputError
from . import _policy


def register(sub) -> None:
    from ..outputs import add_out_argument

    p = sub.add_parser("plan", help="offline preview: resources, policy verdicts, cost and topology")
    p.add_argument("profile", nargs="?", help="path to a profile YAML (not needed with --stack)")
    p.add_argument("--stack", help="a stack name: stacks/Pulumi.<NAME>.yaml")
    p.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    add_out_argument(p)
    _policy.add_argument(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..outputs import emit
    from ..preview.planner import plan_source
    from ..preview.render import policy_counts, render
    from ..preview.sources import Source, find_project, unknown_stack

    from ..outputs import check_out_argument

    check_out_argument(args)
    if bool(args.profile) == bool(args.stack):
        raise InputError("give a PROFILE path or --stack NAME" if not args.profile
                         else "give either a PROFILE path or --stack NAME, not both")
    project = find_project()
    if args.stack:
        path = project.stack_file(args.stack)
        if "/" in args.stack or "\x00" in args.stack or not path.name.startswith("Pulumi."):
            raise unknown_stack(project, args.stack.replace("/", "_"))
        try:
            path.lstat()
        except (OSError, ValueError):
            raise unknown_stack(project, args.stack) from None
        source = Source("stack", args.stack, path, stack=args.stack)
    else:
        from ..fsutil import read_regular_file
        from ..profile import MAX_PROFILE_BYTES

        path = Path(args.profile)
        read_regular_file(path, what="profile", limit=MAX_PROFILE_BYTES)  # exists, regular, bounded
        source = Source("profile", args.profile, path)
    from ..progress import step

    with step(f"plan {args.stack or args.profile}", quiet=args.format == "json"):
        doc = plan_source(source, project, policy_config=_policy.policy_config(args))
    text = render(doc, args.format)
    emit(args, text)
    mandatory, _ = policy_counts(doc)
    if mandatory:
        print(f"trainstack: {mandatory} mandatory policy violation(s); `pulumi up` would be refused",
              file=sys.stderr)
        return EXIT_POLICY
    return 0
