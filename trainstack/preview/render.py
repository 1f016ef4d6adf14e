"""Render a plan document as text (terminal), markdown (PR comments) or JSON (machines).

Every renderer reads only the document, so a plan saved as JSON renders exactly like a fresh one.
Everything in the document is already redacted by the planner; JSON is passed through
:func:`~trainstack.preview.values.public` once more so a hand-edited file cannot leak either.
"""

from __future__ import annotations

import json
from typing import Any, Optional

from ..calibration_effect import CalibrationEffect
from ..redaction import redact_string
from ..textable import render_table
from . import topology
from .cost_chart import cost_chart
from .render_capacity import capacity_markdown, capacity_text
from .render_cost import BREAKDOWN_HEADER, breakdown_notes, breakdown_rows
from .render_cost import breakdown_markdown as cost_table_markdown
from .text_format import finite_number, md_escape, money, num, number_pair  # noqa: F401 - also the diff renderer's
from .values import public

FORMATS = ("text", "markdown", "json")


# ---- small formatters shared with the diff renderer ----------------------------------------------

def pricing(summary: dict) -> str:
    if summary.get("spot"):
        limit = summary.get("spot_price_limit")
        return "spot" + (f" (price limit {limit} CNY/h)" if limit is not None else "")
    return "on-demand"


def summary_rows(doc: dict) -> list[tuple[str, str]]:
    """(label, value) rows of the plan summary, the same in every format."""
    s, cost = doc.get("summary") or {}, doc.get("cost") or {}
    od, spot = cost.get("on_demand") or {}, cost.get("spot") or {}
    est = " est." if spot.get("estimate", True) else ""  # the quote's flag (cost.spot.estimate); old plans: est.
    gpu = f" ({s['gpu_model']})" if s.get("gpu_model") else ""
    plan = doc.get("plan") if isinstance(doc.get("plan"), dict) else {}
    if "breakdown" in cost:  # all-in, with the GPU instances' share
        basis = ("all-in (GPU instances {}; ", "all-in (GPU instances {}; ")
        hourly_basis = basis[0].format(money(cost.get("compute_hourly_cny")))
        total_basis = basis[1].format(money(cost.get("compute_total_cny")))
    else:  # a plan saved before the breakdown: its figures count the GPU instances only
        hourly_basis = total_basis = "GPU instances only, saved by an older trainstack ("
    alerts = (plan.get("job") or {}).get("alerts") if isinstance(plan.get("job"), dict) else None
    return [
        ("target", str(s.get("target") or "unknown")),
        ("instance type", f"{s.get('instance_type') or 'quota (no ECS type)'}{gpu}"),
        ("nodes", f"{s.get('nodes')} x {s.get('gpus_per_node')} GPU"),
        ("zone", str(s.get("zone") or "chosen at deploy time")),
        ("pricing", pricing(s)),
        ("memory margin", f"{num(s.get('memory_margin_gib'), 2)} GiB per GPU"),
        *interval_rows(plan.get("estimate")),
        ("tokens/s", num(s.get("tokens_per_second"))),
        ("hours", num(s.get("estimated_hours"))),
        ("hourly cost", f"{money(s.get('hourly_cost_cny'))} {hourly_basis}on-demand {money(od.get('hourly_cny'))}, "
                        f"spot {money(spot.get('hourly_cny'))}{est if spot.get('hourly_cny') is not None else ''})"),
        ("total cost", f"{money(s.get('total_cost_cny'))} {total_basis}on-demand {money(od.get('total_cny'))}, "
                       f"spot {money(spot.get('total_cny'))}{est if spot.get('total_cny') is not None else ''})"),
        *([("after destroy", f"{money(cost.get('after_destroy_monthly_cny'))} per month (what `pulumi destroy` "
                             "keeps)")] if "breakdown" in cost else []),
        *exception_rows(plan),
    ] + ([("alerts", alerts_text(alerts))] if isinstance(alerts, dict) else [])


def alerts_text(a: dict) -> str:
    """The plan's alerts in words: by the secret's name (the URL is never in a plan)."""
    via = f"relay {a.get('relay')}" if a.get("via") == "relay" else "NAT gateway"
    return (f"{a.get('format')} to the webhook in KMS secret {a.get('kms_secret')} on "
            f"{', '.join(a.get('events') or [])}, via {via}")


def exception_rows(plan: dict) -> list[tuple[str, str]]:
    """One row per policy-config exception the plan rests on (``plan.policy_exceptions``); entries a hand
    edit made unreadable are skipped."""
    rows = []
    listed = plan.get("policy_exceptions")
    for e in listed if isinstance(listed, list) else []:
        if isinstance(e, dict):
            how = "allowed_types" if e.get("setting") == "allowed_types" else "disabled"
            rows.append(("policy exception", f"{e.get('instance_type')} allowed by {e.get('policy')} ({how}) "
                                             f"in {e.get('source')}"))
    return rows


def cost_text(cost: dict) -> list[str]:
    """The text format's cost table (every billed line; unpriced ones say why below it)."""
    rows = breakdown_rows(cost)
    if not rows:
        return []
    table = render_table(list(BREAKDOWN_HEADER), rows, align="llrrrr")
    return ["", "Cost (CNY)"] + ["  " + ln for ln in table.splitlines()] + [f"  - {n}" for n in breakdown_notes(cost)]


def breakdown_markdown(cost: dict) -> list[str]:
    return cost_table_markdown(cost)


FIT_WORDS = {"fits": "fits", "at_risk": "AT RISK (nothing fits with the interval's upper end)",
             "does_not_fit": "does not fit"}


def interval_rows(est: object) -> list[tuple[str, str]]:
    """The estimate's 80 % intervals and memory verdict (issue 32); none for a plan saved without them
    (or with values a hand edit made unreadable)."""
    if not isinstance(est, dict):
        return []
    rows = []
    fit, req, usable = est.get("fit"), est.get("required_gib_per_gpu"), est.get("usable_gib_per_gpu")
    if isinstance(fit, str) and finite_number(req) and finite_number(usable):
        iv = number_pair(est.get("required_gib_interval"))
        rows.append(("memory fit", f"{FIT_WORDS.get(fit, fit)}: needs {req:,.1f} GiB per GPU"
                                   + (f" (80 % interval {iv[0]:.1f}-{iv[1]:.1f})" if iv else "") + f" of {usable:,.1f} usable"))
    iv, tps = number_pair(est.get("tokens_per_second_per_gpu_interval")), est.get("tokens_per_second_per_gpu")
    if iv and finite_number(tps):
        rows.append(("tokens/s/GPU", f"{tps:,.0f} (80 % interval {iv[0]:,.0f}-{iv[1]:,.0f}; class "
                                     f"{est.get('interval_class')})"))
    return rows






def prices_line(prices: Optional[dict]) -> str:
    """The price provenance headline (``prices.headline``) of a plan document, or why it is missing."""
    if not prices:
        return "prices: provenance not recorded (a plan saved by an older trainstack)"
    return str(prices.get("headline") or f"prices: {prices.get('source')} as of {prices.get('as_of')}")


def calibration_lines(doc: dict) -> list[str]:
    """What the calibration overlay changed in the plan, with and without it (none: no change)."""
    found = doc.get("calibration")
    if not isinstance(found, dict):
        return []
    try:
        return CalibrationEffect.model_validate(found).lines(str((doc.get("plan") or {}).get("region") or "the region"))
    except ValueError:
        return ["calibration changes this plan (its record in this document is unreadable)"]


def calibration_callout(doc: dict) -> list[str]:
    lines = calibration_lines(doc)
    return [] if not lines else ["> [!WARNING]", *(f"> {md_escape(x)}  " for x in lines), ""]


def resource_tree(doc: dict) -> list[str]:
    """`type  name` lines as a tree (parents from the recording), with protect/retain markers."""
    resources = doc.get("resources") or []
    kids: dict[Optional[str], list[dict]] = {}
    urns = {r["urn"] for r in resources}
    for r in resources:
        kids.setdefault(r.get("parent_urn") if r.get("parent_urn") in urns else None, []).append(r)
    out = [f"pulumi:pulumi:Stack  {doc.get('project')}-{doc.get('stack')}"]

    def walk(parent: Optional[str], prefix: str) -> None:
        rows = kids.get(parent, [])
        for i, r in enumerate(rows):
            last = i == len(rows) - 1
            marks = [m for m, on in (("protected", r.get("protect")), ("retained on destroy", r.get("retain_on_delete")),
                                     ("read", r.get("read"))) if on]
            out.append(f"{prefix}{'└─ ' if last else '├─ '}{r['type']}  {r['name']}"
                       + (f"  [{', '.join(marks)}]" if marks else ""))
            walk(r["urn"], prefix + ("   " if last else "│  "))

    walk(None, "")
    return out


def policy_counts(doc: dict) -> tuple[int, int]:
    verdicts = doc.get("policy") or []
    mandatory = sum(1 for v in verdicts if v.get("level") == "mandatory")
    return mandatory, len(verdicts) - mandatory


def title(doc: dict) -> str:
    return str((doc.get("plan") or {}).get("name") or doc.get("stack") or "plan")


# ---- text ------------------------------------------------------------------------------------------

def render_text(doc: dict) -> str:
    mandatory, advisory = policy_counts(doc)
    lines = [f"trainstack plan: {title(doc)} (stack {doc.get('stack')}, catalog {doc.get('catalog_date') or 'unknown'})",
             *calibration_lines(doc), prices_line(doc.get("prices")), "", "Summary"]
    lines += ["  " + ln for ln in render_table(["", ""], summary_rows(doc)).splitlines()[1:]]
    lines += cost_text(doc.get("cost") or {})
    lines += capacity_text((doc.get("plan") or {}).get("capacity"))
    resources = doc.get("resources") or []
    lines += ["", f"Resources ({len(resources)})"] + ["  " + ln for ln in resource_tree(doc)]
    lines += ["", f"Policies: {mandatory} mandatory, {advisory} advisory violation(s)"]
    if doc.get("policy"):
        rows = [(v["level"].upper() if v["level"] == "mandatory" else v["level"], v["policy"], v.get("resource") or "-",
                 v["message"]) for v in doc["policy"]]
        lines += ["  " + ln for ln in render_table(["LEVEL", "POLICY", "RESOURCE", "MESSAGE"], rows).splitlines()]
    else:
        lines.append("  all policies passed")
    lines += ["", "Topology"] + ["  " + ln for ln in topology.text(topology.build(resources))]
    if doc.get("dlc_request"):
        body = json.dumps(doc["dlc_request"]["body"], indent=2, sort_keys=True)
        lines += ["", f"PAI-DLC CreateJob request ({doc['dlc_request']['resource']}, redacted)"]
        lines += ["  " + ln for ln in body.splitlines()]
    labels = (doc.get("plan") or {}).get("labels") or []
    if labels or doc.get("notes") or doc.get("logs"):
        lines += ["", "Labels and notes"] + [f"  - {redact_string(str(x))}" for x in [*labels, *doc.get("notes", [])]]
        lines += [f"  - {log['level']}: {log['message']}" for log in doc.get("logs", [])]
    return "\n".join(lines) + "\n"


# ---- markdown ----------------------------------------------------------------------------------------

def prices_callout(prices: Optional[dict]) -> list[str]:
    """The prices headline as a markdown callout: a warning when stale or unknown."""
    alert = "WARNING" if not prices or prices.get("stale") or prices.get("source") == "none" else "NOTE"
    return [f"> [!{alert}]", f"> {md_escape(prices_line(prices))}", ""]


def render_markdown(doc: dict) -> str:
    mandatory, advisory = policy_counts(doc)
    resources = doc.get("resources") or []
    out = [f"## trainstack plan: `{title(doc)}`", "",
           f"Stack `{doc.get('stack')}` · catalog {doc.get('catalog_date') or 'unknown'} · "
           f"{len(resources)} resources · {mandatory} mandatory / {advisory} advisory policy violation(s)", "",
           *calibration_callout(doc), *prices_callout(doc.get("prices")), "| | |", "|---|---|"]
    out += [f"| {label} | {md_escape(value)} |" for label, value in summary_rows(doc)]
    out += ["", *breakdown_markdown(doc.get("cost") or {})]
    out += [*capacity_markdown((doc.get("plan") or {}).get("capacity"))]
    out += chart_section(doc.get("plan") or {})
    out += ["### Policies", ""]
    if doc.get("policy"):
        out += ["| Level | Policy | Resource | Message |", "|---|---|---|---|"]
        out += [f"| {'**mandatory**' if v['level'] == 'mandatory' else v['level']} | `{v['policy']}` | "
                f"{md_escape(v.get('resource') or '-')} | {md_escape(v['message'])} |" for v in doc["policy"]]
    else:
        out.append("All policies passed.")
    out += ["", "### Topology", "", "```mermaid", topology.mermaid(topology.build(resources)), "```", "",
            f"<details><summary>Resources ({len(resources)})</summary>", "", "```", *resource_tree(doc), "```", "",
            "</details>"]
    if doc.get("dlc_request"):
        out += ["", f"<details><summary>PAI-DLC CreateJob request (<code>{doc['dlc_request']['resource']}</code>, "
                    "redacted)</summary>", "", "```json", json.dumps(doc["dlc_request"]["body"], indent=2, sort_keys=True),
                "```", "", "</details>"]
    labels = (doc.get("plan") or {}).get("labels") or []
    notes = [*labels, *doc.get("notes", []), *(f"{x['level']}: {x['message']}" for x in doc.get("logs", []))]
    if notes:
        out += ["", "<details><summary>Labels and notes</summary>", ""] + [f"- {md_escape(redact_string(str(n)))}"
                                                                            for n in notes]
        out += ["", "</details>"]
    return "\n".join(out) + "\n"


def chart_section(plan: dict) -> list[str]:
    """Cost against hours of the plan and its feasible alternatives (trainstack.preview.cost_chart)."""
    if not plan:
        return []
    chosen = {k: plan.get(k) for k in ("target", "instance_type", "gpu_model", "nodes", "gpus_per_node", "spot",
                                       "estimated_hours", "total_cost_cny")}
    alternatives = plan.get("alternatives") if isinstance(plan.get("alternatives"), list) else []
    lines = cost_chart([chosen, *(a for a in alternatives if isinstance(a, dict))], chosen)
    return ["### Cost against hours", "", *lines, ""] if lines else []


# ---- json --------------------------------------------------------------------------------------------

def render_json(doc: dict) -> str:
    return json.dumps(public(doc), indent=2, sort_keys=False) + "\n"


def render(doc: dict, fmt: str) -> str:
    return {"text": render_text, "markdown": render_markdown, "json": render_json}[fmt](doc)
