"""What the GitHub workflows run: which stacks a change touches, and the sticky PR comment.

``python -m trainstack.preview.ci changed-stacks FILES`` reads changed paths (one per line, as
``git diff --name-only`` prints them) and prints the affected stacks (``--json`` for a matrix).
``python -m trainstack.preview.ci policy-config STACK`` prints the stack's policy config file
(``trainstack:policyConfig``, checked), which the workflows pass to ``pulumi preview/up
--policy-pack-config``: the same file ``validate``, ``plan`` and ``diff`` read.
``python -m trainstack.preview.ci comment --base-plans DIR STACK...`` plans each stack on this
checkout, diffs it against ``DIR/<stack>.json`` (saved on the base branch; missing means the
stack is new there or could not be planned) and writes one markdown comment headed by
:data:`MARKER`, the tag the workflows use to find and update the same comment. Exit 4 when a
stack violates a mandatory policy, 2 when a change is an impossible update (after writing the
comment), so the check fails.

``deploy-gate --stack S --plan-out FILE`` and ``record-deployed --stack S --plan FILE`` are the deploy
workflow's gate before `pulumi up` and its record after it (:mod:`.deploy_gate`).

Kept here (not in workflow YAML) so the logic is tested like the rest of trainstack.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Iterable, Optional, Sequence

from ..errors import TrainstackError
from ..fsutil import MIB, read_text_file
from ..outputs import atomic_write_text
from ..rules.policy_config import load_policy_config
from ..stack_config import policy_config_path
from .sources import Project, Source, find_project, load_saved_plan, stack_config

MARKER = "<!-- trainstack-diff -->"
#: A change under one of these can change every stack's plan.
ALL_STACKS_PREFIXES = ("components/", "policies/", "trainstack/", "__main__.py", "Pulumi.yaml",
                       "requirements.txt")


def changed_stacks(paths: Iterable[str], project: Project, warn=None) -> list[str]:
    """Stacks whose plan a change to ``paths`` (repository-relative) can affect.

    A stack whose file cannot be read (malformed, too large, not a regular file) is listed as
    affected, so its PR comment says why it cannot be planned; it never stops the listing.
    ``warn(message)`` hears about each such stack."""
    stacks = project.stacks()
    stacks_dir = project.stacks_dir.resolve().relative_to(project.root.resolve()).as_posix()
    prefix = "" if stacks_dir == "." else stacks_dir + "/"
    paths = [p.strip() for p in paths if p.strip()]
    if any(p.startswith(ALL_STACKS_PREFIXES) for p in paths):
        return stacks
    hit: set[str] = set()
    profiles = {(project.root / p).resolve() for p in paths}
    for p in paths:
        name = p[len(prefix):] if p.startswith(prefix) else None
        if name and name.startswith("Pulumi.") and name.endswith(".yaml") and "/" not in name:
            hit.add(name[len("Pulumi."):-len(".yaml")])
    for stack in stacks:
        try:
            config, _ = stack_config(project, stack)
        except TrainstackError as err:
            if warn:
                warn(f"stack {stack}: {err.lines()[0]} (listed as affected)")
            hit.add(stack)
            continue
        for key in ("profile", "policyConfig"):  # the profile and the policy config a stack names
            value = config.get(f"{project.name}:{key}")
            named = _profile_file(value, project) if isinstance(value, str) and value else None
            if named is not None and named in profiles:
                hit.add(stack)
    return sorted(s for s in hit if s in stacks)


def stack_policy_config(stack: str, project: Project) -> str:
    """The stack's ``trainstack:policyConfig``, checked (confined to stacks/, a valid config) and relative to
    the project root, for ``pulumi preview/up --policy-pack-config``; "" when the stack sets none."""
    config, _ = stack_config(project, stack)
    path = policy_config_path(config, project.name, project.root)
    if path is None:
        return ""
    load_policy_config(path)
    try:
        return path.resolve().relative_to(project.root.resolve()).as_posix()
    except ValueError:
        return str(path)


def _profile_file(value: str, project: Project) -> Optional[Path]:
    p = Path(value)
    try:
        return (p if p.is_absolute() else project.stacks_dir / p).resolve()
    except (OSError, RuntimeError, ValueError):
        return None


def comment(stacks: Sequence[str], base_plans: Path, project: Project,
            policy_config: Optional[dict] = None) -> tuple[str, int]:
    """``(markdown, exit code)`` for the PR comment covering ``stacks``."""
    # each CI step loads only what it runs (the planner brings Pulumi's engine)
    from .diff import diff_documents, diff_exit_code, empty_plan
    from .planner import plan_source
    from .render_diff import render_markdown

    parts = [MARKER, "## trainstack plan diff", ""]
    code = 0
    if not stacks:
        parts.append("No stack is affected by this change.")
    for stack in stacks:
        saved = base_plans / f"{stack}.json"
        try:
            base = load_saved_plan(saved) if saved.is_file() else empty_plan()
        except TrainstackError as err:  # a base plan we cannot read: compare with nothing, say so
            parts += [f"> `{stack}`: the base plan cannot be read ({err.lines()[0]}); everything below is new.", ""]
            base = empty_plan()
        try:
            head = plan_source(Source("stack", stack, project.stack_file(stack), stack=stack), project,
                               policy_config=policy_config)
        except TrainstackError as err:
            parts += [f"### `{stack}`: cannot be planned (exit {err.exit_code})", "", "```",
                      *err.lines(), "```", ""]
            code = max(code, err.exit_code)
            continue
        d = diff_documents(base, head, base_label=f"{stack} (base)", head_label=f"{stack} (this PR)")
        if not saved.is_file():
            parts += [f"> `{stack}` has no plan on the base branch (new stack, or the base could not plan it): "
                      "everything below is new.", ""]
        parts.append(render_markdown(d))
        code = max(code, diff_exit_code(d))
    return "\n".join(parts).rstrip() + "\n", code


def deploy(args: argparse.Namespace, project: Project, plans=None) -> int:
    """The deploy workflow's gate and record steps (trainstack.preview.deploy_gate)."""
    # each CI step loads only what it runs (the planner brings Pulumi's engine)
    from .deploy_gate import PlanStore, gate, record, store_from_environment

    plans = plans or PlanStore(store_from_environment())
    if args.cmd == "record-deployed":
        where = record(args.stack, project, plans, args.plan)
        print(f"trainstack: recorded the deployed plan of {args.stack} at {where}")
        return 0

    text, code = gate(args.stack, project, plans, args.plan_out, load_policy_config(args.policy_config))
    if args.summary:
        with open(args.summary, "a", encoding="utf-8") as out:
            out.write(text + "\n")
    if code:
        print(f"trainstack: the deploy of {args.stack} stops before `pulumi up` (exit {code}): see the job summary",
              file=sys.stderr)
    return code


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainstack.preview.ci")
    sub = parser.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("changed-stacks", help="stacks affected by the changed paths in FILE ('-' = stdin)")
    c.add_argument("file")
    c.add_argument("--json", action="store_true", help="print a JSON list (for a job matrix)")
    m = sub.add_parser("comment", help="write the sticky PR comment for STACKs")
    m.add_argument("stacks", nargs="*")
    m.add_argument("--base-plans", type=Path, required=True, help="directory of <stack>.json from the base branch")
    m.add_argument("--out", type=Path, required=True)
    g = sub.add_parser("deploy-gate", help="diff the last deployed plan of STACK against its plan now; exit 2 on "
                                           "an impossible update (the store: $PULUMI_BACKEND_URL's bucket)")
    g.add_argument("--stack", required=True)
    g.add_argument("--plan-out", type=Path, required=True, help="where to write the plan now (for record-deployed)")
    g.add_argument("--summary", type=Path, help="append the diff (markdown) here, e.g. $GITHUB_STEP_SUMMARY")
    g.add_argument("--policy-config", metavar="FILE",
                   help="policy config JSON (as --policy-pack-config); replaces the stack's trainstack:policyConfig")
    r = sub.add_parser("record-deployed", help="record the plan deploy-gate wrote, after `pulumi up` succeeded")
    r.add_argument("--stack", required=True)
    r.add_argument("--plan", type=Path, required=True)
    m.add_argument("--policy-config", metavar="FILE",
                   help="policy config JSON (as --policy-pack-config); replaces each stack's trainstack:policyConfig")
    pc = sub.add_parser("policy-config", help="the stack's policy config file (trainstack:policyConfig), or nothing")
    pc.add_argument("stack")
    args = parser.parse_args(argv)
    project = find_project()
    try:
        if args.cmd == "changed-stacks":
            text = sys.stdin.read() if args.file == "-" else read_text_file(args.file, what="list of changed paths",
                                                                            limit=16 * MIB)
            lines = text.splitlines()
            stacks = changed_stacks(lines, project, warn=lambda m: print(f"trainstack: warning: {m}",
                                                                         file=sys.stderr))
            print(json.dumps(stacks) if args.json else "\n".join(stacks))
            return 0
        if args.cmd in ("deploy-gate", "record-deployed"):
            return deploy(args, project)
        if args.cmd == "policy-config":
            print(stack_policy_config(args.stack, project))
            return 0
        text, code = comment(args.stacks, args.base_plans, project, load_policy_config(args.policy_config))
        atomic_write_text(args.out, text)
        return code
    except TrainstackError as err:
        for line in err.lines():
            print(f"trainstack: {line}", file=sys.stderr)
        return err.exit_code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
