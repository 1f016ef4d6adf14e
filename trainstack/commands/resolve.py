"""`trainstack resolve PROFILE [--json] [--all]`: the chosen placement and why, and the policy verdicts
the plan gets (``--policy-config FILE``; exit 4 on a mandatory one, the plan still printed)."""

from __future__ import annotations

import json

from ..catalog import load_catalog
from ..plan import Candidate, Plan
from ..profile import load_profile
from ..placement import rank_key
from ..progress import step
from ..rules import plan_verdicts, resolution
from ..textable import render_table
from . import _policy


def register(sub) -> None:
    p = sub.add_parser("resolve", help="choose where and how to run a profile")
    p.add_argument("profile", help="path to a profile YAML")
    p.add_argument("--json", action="store_true", help="print the Plan as JSON (= --format json)")
    p.add_argument("--format", choices=("text", "markdown", "json"), default=None,
                   help="text (default), markdown (a table and a cost-against-hours chart GitHub renders) or json")
    p.add_argument("--all", action="store_true", help="list every candidate considered, feasible or not")
    _policy.add_argument(p)
    p.set_defaults(func=run)


def _money(v):
    return "-" if v is None else f"{v:,.2f}"


def _row(c: Candidate, chosen: bool) -> list[str]:
    return ["*" if chosen else "", c.target, c.instance_type or "(quota)", c.gpu_model or "-", str(c.nodes),
            str(c.gpus_per_node), c.layout.label if c.layout else "-", "spot" if c.spot else "on-demand",
            "-" if c.memory_margin_gib is None else f"{c.memory_margin_gib:.1f}",
            "-" if c.tokens_per_second is None else f"{c.tokens_per_second:,.0f}",
            "-" if c.estimated_hours is None else f"{c.estimated_hours:,.1f}",
            _money(c.hourly_cost_cny), _money(c.total_cost_cny), c.reason or ""]


HEADERS = ["", "TARGET", "INSTANCE TYPE", "GPU", "NODES", "GPU/NODE", "LAYOUT", "PRICING", "MARGIN GiB", "TOKENS/S",
           "HOURS", "CNY/H", "TOTAL CNY", "REJECTED BECAUSE"]


def render_text(plan: Plan, candidates: list[Candidate], show_all: bool) -> str:
    lines = [f"{plan.name}: {plan.target.upper()} {plan.instance_type or plan.dlc and plan.dlc.resource_id} "
             f"x {plan.nodes} node(s), {plan.gpus_per_node} {plan.gpu_model} per node, "
             f"{'spot' if plan.spot else 'on-demand'}, zone {plan.zone or '(chosen at deploy time)'}",
             f"  estimate: {plan.estimate.required_gib_per_gpu:.1f} GiB/GPU needed (margin "
             f"{plan.estimate.memory_margin_gib} GiB), {plan.estimate.tokens_per_second or '-'} tokens/s, "
             f"{plan.estimated_hours if plan.estimated_hours is not None else '-'} h, "
             f"{_money(plan.hourly_cost_cny)} CNY/h, {_money(plan.total_cost_cny)} CNY total"]
    if plan.prices is not None:
        lines.append(f"  {plan.prices.headline}")
    if plan.spot:
        lines.append(f"  spot price limit: {plan.spot_price_limit} CNY/h per node")
    lines.append("")
    rows = [_row(Plan_candidate(plan), True)]
    others = (sorted(candidates, key=lambda c: (not c.feasible, rank_key(c, plan.objective))) if show_all
              else list(plan.alternatives))
    rows += [_row(c, False) for c in others if not _same(c, plan)]
    lines.append("Considered resources (* = chosen)" + ("" if show_all else "; --all lists every candidate"))
    lines.append(render_table(HEADERS, rows))
    p = plan.parallelism
    if len(p.considered) > 1 and (show_all or p.chosen_by == "resolver"):
        lines.append("")
        lines.append(f"Layouts sized for {plan.nodes} x {plan.instance_type or plan.gpu_model} (* = chosen, "
                     f"{p.chosen_by}; {p.micro_batches} micro-batch(es) per step)"
                     + ("" if show_all else "; --all lists them all"))
        shown = p.considered if show_all else [o for o in p.considered if o.fits][:8]
        lines.append(render_table(["", "LAYOUT", "REQUIRED GiB/GPU", "FITS", "TOKENS/S"], [
            ["*" if o.chosen else "", o.layout.label, f"{o.required_gib_per_gpu:.1f}", "yes" if o.fits else "no",
             "-" if o.tokens_per_second is None else f"{o.tokens_per_second:,.0f}"] for o in shown]))
    if plan.reasons:
        lines.append("")
        lines.append("Why:")
        lines += [f"  - {r}" for r in plan.reasons]
    if plan.policy_exceptions:
        lines.append("")
        lines.append("Allowed by the policy config (not by the engine's own rules):")
        lines += [f"  - {e.instance_type}: {e.policy} "
                  f"{'allowed_types lists it' if e.setting == 'allowed_types' else 'is disabled'} in {e.source}"
                  for e in plan.policy_exceptions]
    if plan.rejected:
        lines.append("")
        lines.append("Rejected families:")
        lines += [f"  {r.family:<10} {r.reason}" for r in plan.rejected]
    if plan.labels:
        lines.append("")
        lines.append("Rests on (estimates and unverified facts):")
        lines += [f"  - {lab}" for lab in plan.labels]
    lines.append("")
    lines.append(f"catalog prices as of {plan.catalog_date}")
    return "\n".join(lines)


def render_markdown(plan: Plan, candidates: list[Candidate], show_all: bool) -> str:
    """The choice as markdown (a PR comment, a wiki page): summary, the cost-against-hours chart of the
    feasible candidates (every one with ``--all``, else the alternatives), the considered table, why."""
    from ..preview.cost_chart import cost_chart

    def cell(text: str) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    chosen = Plan_candidate(plan)
    pool = [c for c in candidates if c.feasible] if show_all else list(plan.alternatives)
    others = (sorted(candidates, key=lambda c: (not c.feasible, rank_key(c, plan.objective))) if show_all
              else list(plan.alternatives))
    rows = [_row(chosen, True)] + [_row(c, False) for c in others if not _same(c, plan)]
    out = [f"## trainstack resolve: `{plan.name}`", "",
           f"{plan.target.upper()} {cell(plan.instance_type or (plan.dlc and plan.dlc.resource_id))} x {plan.nodes} "
           f"node(s), {plan.gpus_per_node} {plan.gpu_model} per node, {'spot' if plan.spot else 'on-demand'}: "
           f"{_money(plan.hourly_cost_cny)} CNY/h, {_money(plan.total_cost_cny)} CNY total, "
           f"{plan.estimated_hours if plan.estimated_hours is not None else '-'} h", ""]
    if plan.prices is not None:
        out += [f"> {cell(plan.prices.headline)}", ""]
    out += ["### Cost against hours", "",
            *cost_chart([c.model_dump(mode="json") for c in pool], chosen.model_dump(mode="json")), "",
            "### Considered resources (* = chosen)" + ("" if show_all else "; `--all` lists every candidate"), "",
            "| " + " | ".join(h or " " for h in HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    out += ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]
    if plan.policy_exceptions:
        out += ["", "### Allowed by the policy config", ""]
        out += [f"- `{e.instance_type}`: `{e.policy}` {e.setting} in `{e.source}`" for e in plan.policy_exceptions]
    if plan.reasons:
        out += ["", "### Why", ""] + [f"- {cell(r)}" for r in plan.reasons]
    if plan.labels:
        out += ["", "<details><summary>Rests on (estimates and unverified facts)</summary>", ""]
        out += [f"- {cell(lab)}" for lab in plan.labels] + ["", "</details>"]
    return "\n".join(out) + "\n"


def Plan_candidate(plan: Plan) -> Candidate:  # noqa: N802 - reads like a constructor
    return Candidate(target=plan.target, instance_type=plan.instance_type, gpu_model=plan.gpu_model,
                     nodes=plan.nodes, gpus_per_node=plan.gpus_per_node, spot=plan.spot, zone=plan.zone,
                     layout=plan.parallelism.layout,
                     hourly_cost_cny=plan.hourly_cost_cny, estimated_hours=plan.estimated_hours,
                     total_cost_cny=plan.total_cost_cny, memory_margin_gib=plan.estimate.memory_margin_gib,
                     tokens_per_second=plan.estimate.tokens_per_second)


def _same(c: Candidate, plan: Plan) -> bool:
    return (c.instance_type, c.nodes, c.spot, c.target) == (plan.instance_type, plan.nodes, plan.spot, plan.target)


def run(args) -> int:
    profile = load_profile(args.profile)
    config = _policy.policy_config(args)
    fmt = "json" if args.json else (args.format or "text")
    with step(f"resolve {profile.name}", quiet=fmt == "json"):  # the layout search of every candidate
        res = resolution(profile, load_catalog(), file=args.profile, allowances=_policy.allowances(config))
    plan = res.plan
    assert plan is not None
    verdicts = plan_verdicts(plan, config)
    if fmt == "markdown":
        print(render_markdown(plan, res.candidates, args.all), end="")
    elif fmt == "json":
        doc = plan.model_dump(mode="json")
        if args.all:
            doc["considered"] = [c.model_dump(mode="json") for c in res.candidates]
        doc["policy"] = [v.model_dump() for v in verdicts]
        print(json.dumps(doc, indent=2))
    else:
        print(render_text(plan, res.candidates, args.all))
    return _policy.report(verdicts, args.profile)
