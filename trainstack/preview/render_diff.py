"""Render a diff document as markdown (the PR comment) or JSON.

Markdown puts first what can hurt a running training job: GPU nodes that are replaced, stopped,
restarted, wiped or destroyed (with the provider source line of each reason, linked at the commit
the facts were read from), then the cost headline and before/after table, then the profile fields
that changed (the cause), then collapsible details (resources, ignored changes, policy verdicts,
plan fields) and what older saved plans could not tell.
Runs of resources with the same change collapse into one row (``node-1 … node-63 (63)``), so a
512-node change stays far below GitHub's 65,536-character comment limit.
"""

from __future__ import annotations

import json
import re
from typing import Any, Optional

from .change_rules import WHEN
from .render import md_escape, money, num, prices_callout, prices_line
from .render_capacity import capacity_markdown
from .values import public

#: A longer comment is cut (GitHub refuses comments over 65,536 characters).
MAX_MARKDOWN_CHARS = 60_000
#: Runs longer than this collapse into one row.
GROUP_AT = 3
#: ``alicloud/resource_x.go:123`` in a reason: linked to the provider source at the facts' commit.
SOURCE_LINE = re.compile(r"\b(alicloud/[\w./-]+\.go):(\d+)")


def _signed(v: Optional[float], unit: str = " CNY", digits: int = 2) -> str:
    if v is None:
        return "unknown"
    return f"{'+' if v > 0 else '−' if v < 0 else '±'}{abs(v):,.{digits}f}{unit}"


def _pct(p: Optional[float]) -> str:
    return "" if p is None else f", {'+' if p > 0 else '−' if p < 0 else '±'}{abs(p):,.1f}%"


def _arrow(delta: Optional[float]) -> str:
    return "" if not delta else (" 📈" if delta > 0 else " 📉")


def _val(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:,.4g}" if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)


def _code(v: Any) -> str:
    text = json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else _val(v)
    text = text if len(text) <= 80 else text[:77] + "..."
    return "`" + md_escape(text).replace("`", "'") + "`"


def headline(d: dict) -> str:
    total, hourly = d["cost"]["total"], d["cost"]["hourly"]
    if total["before"] is None and total["after"] is None:
        return f"**Cost unknown offline** · hourly {money(hourly['before'])} → {money(hourly['after'])}"
    if total["before"] is None or total["after"] is None:
        side = "after" if total["after"] is None else "before"
        return (f"**Total cost {money(total['before'])} → {money(total['after'])}: the {side} side's cost is unknown "
                f"offline (e.g. PAI-DLC), so no delta** · hourly {money(hourly['before'])} → {money(hourly['after'])}")
    verb = ("increased" if (total["delta"] or 0) > 0 else "decreased" if (total["delta"] or 0) < 0 else "unchanged")
    line = (f"**Total cost {verb}: {money(total['before'])} → {money(total['after'])} "
            f"({_signed(total['delta'])}{_pct(total['percent'])}){_arrow(total['delta'])}**")
    return line + f" · hourly {money(hourly['before'])} → {money(hourly['after'])} ({_signed(hourly['delta'])})"


def prices_lines(d: dict) -> list[str]:
    """Whose prices each side rests on, right under the cost headline (a warning when stale or unknown)."""
    base, head = d["base"].get("prices"), d["head"].get("prices")
    lines = prices_callout(head)
    if d["base"].get("name") is not None and prices_line(base) != prices_line(head):
        lines[1:2] = [f"> before: {md_escape(prices_line(base))}", ">", f"> after: {md_escape(prices_line(head))}"]
        if base and (base.get("stale") or base.get("source") == "none"):
            lines[0] = "> [!WARNING]"
    return lines


def _nodes(side: dict) -> str:
    s = side["summary"]
    return "—" if s.get("nodes") is None else f"{s.get('nodes')} × {s.get('gpus_per_node')} GPU"


def _estimate(side: dict) -> dict:
    e = side.get("estimate")
    return e if isinstance(e, dict) else {}


def _pair(iv: object) -> Optional[tuple[float, float]]:
    """An interval as saved ([low, high] numbers), or None for anything else (a hand-edited plan)."""
    if isinstance(iv, (list, tuple)) and len(iv) == 2 and all(_is_num(x) for x in iv):
        return float(iv[0]), float(iv[1])
    return None


def _is_num(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) != float("inf")


def _speed(side: dict) -> str:
    e = _estimate(side)
    v, iv = e.get("tokens_per_second_per_gpu"), _pair(e.get("tokens_per_second_per_gpu_interval"))
    return "—" if not _is_num(v) else f"{v:,.0f}" + (f" ({iv[0]:,.0f}–{iv[1]:,.0f})" if iv else "")


def _fit(side: dict) -> str:
    e = _estimate(side)
    fit, req, iv = e.get("fit"), e.get("required_gib_per_gpu"), _pair(e.get("required_gib_interval"))
    if not isinstance(fit, str):
        return "—"
    return (_val(fit.replace("_", " ")) + (f": {req:.2f} GiB" if _is_num(req) else "")
            + (f" ({iv[0]:.1f}–{iv[1]:.1f})" if iv else ""))


def _table(d: dict) -> list[str]:
    c, b, h = d["cost"], d["base"], d["head"]
    # "(estimate)" unless every side with a plan has its spot price from a price book or a refresh
    flags = [p.get("spot_estimated") if isinstance(p := side.get("prices"), dict) else None
             for side in (b, h) if side.get("summary")]
    est = " (estimate)" if not flags or any(f is not False for f in flags) else ""
    rows = [
        ("Hourly cost (chosen pricing)", c["hourly"], True),
        ("Total cost (chosen pricing)", c["total"], True),
        ("Hourly on-demand", c["on_demand_hourly"], True),
        ("Total on-demand", c["on_demand_total"], True),
        (f"Hourly spot{est}", c["spot_hourly"], True),
        (f"Total spot{est}", c["spot_total"], True),
        ("Hours", c["hours"], False),
    ]
    out = ["| | Before | After | Delta |", "|---|---:|---:|---:|"]
    for label, v, is_money in rows:
        if is_money:
            out.append(f"| {label} | {money(v['before'])} | {money(v['after'])} | {_signed(v['delta'])} |")
        else:
            out.append(f"| {label} | {num(v['before'])} | {num(v['after'])} | {_signed(v['delta'], '', 1)} |")
    counts, pol = d["counts"], d["policy"]
    out += [
        f"| Instance type | {_val(b['summary'].get('instance_type'))} | {_val(h['summary'].get('instance_type'))} | |",
        f"| Nodes | {_nodes(b)} | {_nodes(h)} | |",
        f"| Tokens/s per GPU (80 % interval) | {_speed(b)} | {_speed(h)} | |",
        f"| Memory fit (required, 80 % interval) | {_fit(b)} | {_fit(h)} | |",
        f"| Pricing | {_val(b.get('pricing'))} | {_val(h.get('pricing'))} | |",
        f"| Resources | {counts['before']} | {counts['after']} | {_signed(counts['after'] - counts['before'], '', 0)} |",
        f"| Mandatory policy violations | {pol['mandatory_before']} | {pol['mandatory_after']} | "
        f"{_signed(pol['mandatory_after'] - pol['mandatory_before'], '', 0)} |",
    ]
    return out


def _grouped(rows: list[tuple[str, str, str, str]]) -> list[tuple[str, str, str, str]]:
    """Collapse runs of rows equal except for the name: (mark, name, type, details)."""
    out: list[tuple[str, str, str, str]] = []
    i = 0
    while i < len(rows):
        j = i
        while j + 1 < len(rows) and rows[j + 1][0] == rows[i][0] and rows[j + 1][2:] == rows[i][2:]:
            j += 1
        if j - i + 1 > GROUP_AT:
            mark, first, typ, details = rows[i]
            out.append((mark, f"{first} … {rows[j][1]} ({j - i + 1})", typ, details))
        else:
            out += rows[i:j + 1]
        i = j + 1
    return out


#: ``(36984 bytes, sha256:bc62…)``: a shortened long input (values.shorten)
DIGEST = re.compile(r"^\((\d+) bytes, sha256:[0-9a-f]+\)$")
EFFECTS = {"restart": "stops and restarts the running node", "stop": "stops the running node",
           "wipe": "wipes the node's system disk", "detach": "detaches it from the running node",
           "resize": "resizes the pool of running nodes (a shrink releases some)"}


def _brief_value(v: Any) -> Any:
    m = DIGEST.match(v) if isinstance(v, str) else None
    return f"({int(m.group(1)):,} bytes)" if m else v


def cause(c: dict) -> str:
    """What a knock-on change comes from: the chain up to the resource it changes (the row names
    that one), so rows with the same cause still collapse; empty for a change of its own."""
    steps = (c.get("caused_by") or [])[:-1]
    if not steps:
        return ""
    return " · cause: " + " → ".join(f"`{md_escape(s['name'])}` {_code(s['input'])}: {md_escape(s['outcome'])}"
                                     for s in steps)


def _brief_change(c: dict) -> str:
    """One change in the GPU-node section: what and the deciding provider line, no digests, so
    nodes with the same change collapse into one row."""
    text = f"{_code(c['path'])}: {_code(_brief_value(c['before']))} → {_code(_brief_value(c['after']))}"
    line = SOURCE_LINE.search(c.get("reason", ""))
    where = f" ({line.group(0)})" if line else ""
    if c.get("replace"):
        return text + f" **forces replacement**{where}" + cause(c)
    reason = c.get("reason", "")
    if c.get("unknown_after"):  # "known after apply: it holds an output of `x`, which is replaced; <verdict>"
        reason = reason.split("; ", 1)[-1]
    why = reason.split(": ", 1)[-1].rsplit(" (", 1)[0]
    return text + f" **{EFFECTS.get(c.get('effect'), 'disrupts the running node')}**{where}: {md_escape(why)}" + cause(c)


def _change_text(c: dict) -> str:
    text = f"{_code(c['path'])}: {_code(c['before'])} → {_code(c['after'])}"
    when = c.get("takes_effect")
    if when in ("next_job_start", "new_nodes_only", "disk_grown"):
        text += f" *takes effect {WHEN[when]}*"
    if c.get("replace"):
        return text + f" **forces replacement** ({md_escape(c['reason'])})" + cause(c)
    if c.get("disruptive"):
        return text + f" **disrupts the running node** ({md_escape(c['reason'])})" + cause(c)
    if c.get("action") == "no-api-call":
        return text + " *no API call*" + cause(c)
    if c.get("action") == "unknown":
        return text + f" *unknown* ({md_escape(c['reason'])})" + cause(c)
    return text + cause(c)


def _mark(x: dict) -> str:
    return "±" if x["replace"] else "!" if x["disruptive"] else "~"


MARKS = {"+": "+ add", "~": "~ update", "±": "± replace", "!": "⚠ disrupt", "−": "− destroy"}


def _resource_rows(d: dict) -> list[str]:
    r = d["resources"]
    rows: list[tuple[str, str, str, str]] = []
    rows += [("+", x["name"], x["type"], "") for x in r["added"]]
    for x in r["changed"]:
        parts = [md_escape(m) for m in x.get("reasons", [])] + [_change_text(c) for c in x["changes"]]
        parts += [f"lifecycle `{m['option']}`: {_code(m['before'])} → {_code(m['after'])}"
                  for m in x.get("lifecycle_changes", [])]
        rows.append((_mark(x), x["name"], x["type"], "<br>".join(parts)))
    rows += [("−", x["name"], x["type"], "**protected**" if x.get("protect") else
              "retained in the cloud" if x.get("retain_on_delete") else "") for x in r["removed"]]
    out = ["| | Resource | Type | Changed inputs |", "|---|---|---|---|"]
    out += [f"| {MARKS[m]} | `{md_escape(n)}` | `{t}` | {det} |" for m, n, t, det in _grouped(rows)]
    return out


def _node_rows(d: dict) -> list[str]:
    """GPU nodes (and node attachments) that `pulumi up` replaces, disrupts or destroys."""
    r = d["resources"]
    rows: list[tuple[str, str, str, str]] = []
    for x in r["changed"]:
        if not (x["replace"] or x["disruptive"]) or not (x["node"] or x.get("reasons")):
            continue
        hits = [c for c in x["changes"] if c["replace"]] if x["replace"] else [c for c in x["changes"] if c["disruptive"]]
        how = ("replaced, old one deleted first" if x.get("delete_before_replace") else "replaced (new one created "
               "first)") if x["replace"] else "updated in place"
        parts = [md_escape(m) for m in x.get("reasons", [])] + [_brief_change(c) for c in hits]
        rows.append((_mark(x), x["name"], x["type"], f"{how}: " + "<br>".join(parts)))
    rows += [("−", x["name"], x["type"], "destroyed" + (" (**protected**: refused)" if x.get("protect") else ""))
             for x in r["removed"] if x.get("node")]
    if not rows:
        return []
    out = ["#### GPU nodes replaced, disrupted or destroyed", "",
           "| | Resource | Type | What `pulumi up` does (why: the provider source line; details below) |",
           "|---|---|---|---|"]
    out += [f"| {MARKS[m]} | `{md_escape(n)}` | `{t}` | {det} |" for m, n, t, det in _grouped(rows)]
    return out + [""]


def _impossible_rows(d: dict) -> list[str]:
    """What `pulumi up` cannot do (it would stop part-way), first in the comment, with the fix."""
    items = d.get("impossible") or []
    if not items:
        return []
    n = len(items)
    rows = []
    for x in items:
        what = _code(x["input"]) + (f" ({md_escape(x['compared'])})" if x.get("compared") else "")
        where = ", ".join(s if not s.startswith("https://") else f"[{x['api']} docs]({s})" for s in x["source"])
        rows.append(("x", x["resource"], x["type"],
                     f"{what}: {_code(x['before'])} → {_code(x['after'])}: {md_escape(x['reason'])} ({where}). "
                     f"**Instead:** {md_escape(x['fix'])}"))
    out = ["> [!CAUTION]", f"> **{n} impossible update{'s' if n != 1 else ''}: the cloud API refuses "
           f"{'them' if n != 1 else 'it'}, so `pulumi up` would stop part-way** (what it changed before stays "
           "changed). Change the pull request instead:"]
    out += [f"> - `{md_escape(name)}`: {det}" for _, name, _, det in _grouped(rows)]
    return out + [""]


def _profile_rows(d: dict) -> list[str]:
    changes = d.get("profile_changes")
    if changes is None:
        return ["Profile changes: **unknown** (a side does not record its profile; see the note below)", ""]
    if not changes:
        return []
    rows = ["| Profile field | Before | After |", "|---|---|---|"]
    rows += [f"| `{md_escape(c['path'])}` | {_code(c['before'])} | {_code(c['after'])} |" for c in changes]
    if len(changes) <= 12:
        return ["#### Profile changes", "", *rows, ""]
    return [f"<details open><summary>Profile changes: {len(changes)} fields</summary>", "", *rows, "", "</details>", ""]


def _ignored_rows(d: dict) -> list[str]:
    out = ["| Resource | Input | Before | After | Takes effect |", "|---|---|---|---|---|"]
    for x in d["resources"].get("ignored", []):
        for c in x["changes"]:
            out.append(f"| `{md_escape(x['name'])}` | {_code(c['path'])} | {_code(c['before'])} | {_code(c['after'])} "
                       f"| {WHEN.get(c.get('takes_effect', 'never'), 'never')} |")
    return out


def _unknown_note(d: dict) -> list[str]:
    if not d.get("unknown"):
        return []
    by_side: dict[str, list[str]] = {}
    for u in d["unknown"]:
        by_side.setdefault(u["side"], []).append(f"`{u['field']}`")
    parts = [f"the {side} plan was saved by an older trainstack and does not record {', '.join(f)}"
             for side, f in by_side.items()]
    return ["> [!NOTE]", f"> {'; '.join(parts)}: those are shown as unknown, not as unchanged. Save the plan again "
            "with this version for a complete diff.", ""]


def _link_sources(text: str, d: dict) -> str:
    facts = d.get("provider_facts") or {}
    commit = facts.get("commit")
    if not commit:
        return text
    base = f"https://github.com/aliyun/terraform-provider-alicloud/blob/{commit}"
    return SOURCE_LINE.sub(lambda m: f"[{m.group(1).rsplit('/', 1)[-1]}:{m.group(2)}]({base}/{m.group(1)}#L{m.group(2)})",
                           text)


def _policy_rows(d: dict) -> list[str]:
    out = ["| | Level | Policy | Resource | Message |", "|---|---|---|---|---|"]
    for mark, items in (("new", d["policy"]["new"]), ("resolved", d["policy"]["resolved"])):
        for v in items:
            level = f"**{v['level']}**" if v.get("level") == "mandatory" else v.get("level")
            out.append(f"| {mark} | {level} | `{v.get('policy')}` | {md_escape(v.get('resource') or '-')} | "
                       f"{md_escape(v.get('message'))} |")
    return out


def render_markdown(d: dict) -> str:
    counts, pol = d["counts"], d["policy"]
    new_mandatory = sum(1 for v in pol["new"] if v.get("level") == "mandatory")
    disrupt = counts.get("disrupt", 0)
    out = [f"### trainstack diff: `{d['base']['label']}` → `{d['head']['label']}`", "", *_impossible_rows(d),
           headline(d), "",
           *prices_lines(d),
           f"Resources: **{counts['add']} to add, {counts['change']} to change "
           f"({counts['replace']} replacement{'s' if counts['replace'] != 1 else ''}, {disrupt} disruptive "
           f"update{'s' if disrupt != 1 else ''}), {counts['remove']} to destroy** · "
           f"Policies: {len(pol['new'])} new ({new_mandatory} mandatory), {len(pol['resolved'])} resolved", ""]
    if d.get("warnings"):
        out += ["> [!WARNING]"] + [f"> - {w}" for w in d["warnings"]] + [""]
    if pol["mandatory_after"]:
        out += [f"> [!CAUTION]\n> {pol['mandatory_after']} mandatory policy violation(s) in `{d['head']['label']}`: "
                "`pulumi up` would be refused.", ""]
    out += _node_rows(d)
    out += _table(d) + [""]
    head_cap, base_cap = d["head"].get("capacity"), d["base"].get("capacity")
    out += capacity_markdown(head_cap, note=f" (`{d['head']['label']}`{', changed' if head_cap != base_cap else ''})")
    out += _profile_rows(d)
    if counts["add"] or counts["change"] or counts["remove"]:
        out += [f"<details><summary>Resources: {counts['add']} to add, {counts['change']} to change, "
                f"{counts['remove']} to destroy</summary>", "", *_resource_rows(d), "", "</details>", ""]
    ignored = d["resources"].get("ignored") or []
    if ignored:
        n = sum(len(x["changes"]) for x in ignored)
        out += [f"<details><summary>Ignored by the program (ignore_changes): {n} input change{'s' if n != 1 else ''} "
                f"`pulumi up` will not apply</summary>", "", *_ignored_rows(d), "", "</details>", ""]
    if pol["new"] or pol["resolved"]:
        out += [f"<details><summary>Policy verdicts: {len(pol['new'])} new, {len(pol['resolved'])} resolved</summary>",
                "", *_policy_rows(d), "", "</details>", ""]
    if d["summary"]:
        out += ["<details><summary>Plan changes</summary>", "", "| Field | Before | After |", "|---|---|---|"]
        out += [f"| {s['field']} | {_val(s['before'])} | {_val(s['after'])} |" for s in d["summary"]]
        out += ["", "</details>", ""]
    out += _unknown_note(d)
    catalog = {d["base"].get("catalog_date"), d["head"].get("catalog_date")} - {None}
    facts = d.get("provider_facts") or {}
    out.append(f"<sub>Offline plan: the real Pulumi program under a recording mock engine; prices from the "
               f"catalog of {', '.join(sorted(catalog)) or 'unknown date'}; spot prices are estimates; what "
               f"`pulumi up` does read from {facts.get('provider', 'the provider')} {facts.get('version', '')} "
               f"({str(facts.get('commit', ''))[:10]}), bridged by {facts.get('bridged_by', 'pulumi-alicloud')}.</sub>")
    text = _link_sources("\n".join(out) + "\n", d)
    if len(text) > MAX_MARKDOWN_CHARS:
        text = text[:text.rfind("\n", 0, MAX_MARKDOWN_CHARS)]
        text += "\n\n… (cut: `trainstack diff --format json` has everything)\n"
        text += "\n</details>\n" * (text.count("<details") - text.count("</details>"))
    return text


def render_json(d: dict) -> str:
    return json.dumps(public(d), indent=2) + "\n"


def render(d: dict, fmt: str) -> str:
    return {"markdown": render_markdown, "json": render_json}[fmt](d)
