"""`trainstack diff BASE HEAD`: what a change to a profile or stack does to resources, cost and policies.

Each side is a profile, a stack name, or a saved `trainstack plan --format json` file (for example
one produced on the base branch in CI). The diff is always printed; then exit 2 when an update is
impossible (the cloud API refuses it: `pulumi up` would stop part-way; docs/preview.md), else 4 when
HEAD violates a mandatory policy, else 0, so CI and the deploy gate can stop on it.
"""

from __future__ import annotations

import sys

from ..outputs import add_out_argument, check_out_argument, emit
from ..rules.policy_config import load_policy_config


def register(sub) -> None:
    p = sub.add_parser("diff", help="compare two plans: resources, replacements, cost and policy verdicts")
    p.add_argument("base", help="profile path, stack name or saved plan JSON")
    p.add_argument("head", help="profile path, stack name or saved plan JSON")
    p.add_argument("--format", choices=("markdown", "json"), default="markdown")
    add_out_argument(p)
    p.add_argument("--policy-config", metavar="FILE",
                   help="policy levels and settings for sides planned now (JSON, as --policy-pack-config; "
                        "replaces a stack's trainstack:policyConfig)")
    p.set_defaults(func=run)


def run(args) -> int:
    # preview/ loads only for the commands that plan or read a stack
    from ..preview.diff import diff_documents, diff_exit_code
    from ..preview.planner import load_side
    from ..preview.render_diff import render
    from ..preview.sources import find_project

    check_out_argument(args)
    project = find_project()
    config = load_policy_config(args.policy_config)
    base, head = load_side(args.base, project, config), load_side(args.head, project, config)
    d = diff_documents(base, head, base_label=args.base, head_label=args.head)
    text = render(d, args.format)
    emit(args, text)
    if d["impossible"]:
        print(f"trainstack: {len(d['impossible'])} impossible update(s) from {args.base} to {args.head}: "
              "the cloud API refuses them, `pulumi up` would stop part-way (see `impossible` in the diff)",
              file=sys.stderr)
    if d["policy"]["mandatory_after"]:
        print(f"trainstack: {args.head} has {d['policy']['mandatory_after']} mandatory policy violation(s)",
              file=sys.stderr)
    return diff_exit_code(d)
