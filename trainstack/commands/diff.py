"""`trainstack diff BASE HEAD`: what a change to a profile or stack does to resources, cost and policies.

Each side is a profile, a stack name, or a saved `trainstack plan --format json` file (for example
one produced on the base branch in CI). A side that cannot be planned (exit 3) is named: base or
head, its file, the infeasible reason and its suggestions (JSON ``side``, ``file``, ``reason``,
``sides[]``); both sides are tried, so two infeasible sides are reported at once. The diff is always printed; then exit 2 when an update is
impossible (the cloud API refuses it: `pulumi up` would stop part-way; docs/preview.md), else 4 when
HEAD violates a mandatory policy, else 0, so CI and the deploy gate can stop on it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

from ..errors import InfeasibleError


def register(sub) -> None:
    from ..outputs import add_out_argument

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
    from ..outputs import emit
    from ..preview.diff import diff_documents, diff_exit_code
    from ..preview.planner import load_side
    from ..preview.render_diff import render
    from ..preview.sources import find_project
    from ..rules.policy_config import load_policy_config

    from ..outputs import check_out_argument

    check_out_argument(args)
    project = find_project()
    from ..progress import step

    config = load_policy_config(args.policy_config)
    with step("diff", quiet=args.format == "json") as progress:
        sides = {}
        for which, arg in (("base", args.base), ("head", args.head)):
            progress.update(f"diff: planning {which} {arg}")
            sides[which] = _planned_side(which, arg, project, config, load_side)
        failed = [s for s in sides.values() if isinstance(s, SideInfeasible)]
        if failed:
            raise SideInfeasible.of(failed)
        progress.update("diff: comparing")
        d = diff_documents(sides["base"], sides["head"], base_label=args.base, head_label=args.head)
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


class SideInfeasible(InfeasibleError):
    """One side (or both) of a diff cannot be planned: which side, its file, the reason and the
    suggestions, in the message, the lines and the JSON (``side``, ``file``, ``reason``, ``sides[]``)."""

    @classmethod
    def side(cls, which: str, label: str, file: str, exc: InfeasibleError) -> "SideInfeasible":
        details = dict(exc.details, side=which, label=label, file=file, reason=exc.message)
        named = label if label == file else f"{label} ({file})"
        return cls(f"{which} {named} cannot be planned: {exc.message}", suggestions=exc.suggestions,
                   details=details)

    @classmethod
    def of(cls, failed: list["SideInfeasible"]) -> "SideInfeasible":
        if len(failed) == 1:
            one = failed[0]
            return cls(one.message, suggestions=one.suggestions,
                       details=dict(one.details, sides=[_side_dict(one)]))
        first = failed[0]
        return cls("neither side can be planned: " + "; ".join(f.message for f in failed),
                   suggestions=first.suggestions,
                   details=dict(first.details, sides=[_side_dict(f) for f in failed]))

    def lines(self) -> list[str]:
        sides = self.details.get("sides") or []
        if len(sides) < 2:
            return super().lines()
        out: list[str] = []
        for side in sides:
            named = side["label"] if side["label"] == side["file"] else f"{side['label']} ({side['file']})"
            out.append(f"{side['side']} {named} cannot be planned: {side['reason']}")
            out += [f"  rejected {r['family']:<10} {r['reason']}" for r in side.get("rejected") or []]
            if side.get("suggestions"):
                out.append("  what would make it feasible:")
                out += [f"    - {s}" for s in side["suggestions"]]
        return out


def _side_dict(exc: SideInfeasible) -> dict[str, Any]:
    d = exc.details
    return {"side": d["side"], "label": d["label"], "file": d["file"], "reason": d["reason"],
            "reason_codes": d.get("reason_codes", sorted({c for r in d.get("rejected") or []
                                                          for c in r.get("reason_codes", ())})),
            "suggestions": list(exc.suggestions), "rejected": d.get("rejected") or []}


def _planned_side(which: str, arg: str, project, config: Optional[dict], load_side):
    """The side's plan document, or the :class:`SideInfeasible` naming it (raised by the caller, after
    the other side was tried too, so both sides' reasons are said at once)."""
    from ..preview.sources import classify

    try:
        return load_side(arg, project, config)
    except InfeasibleError as exc:
        source = classify(arg, project)
        return SideInfeasible.side(which, arg, _shown(source.path), exc)


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
