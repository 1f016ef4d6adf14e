"""The cost parts of the PR comment and of the plan's own outputs: the headline, the before/after table,
the Infracost-style table of each billed resource (diff), and the plan's cost breakdown (plan).

Every figure comes from the documents (``cost`` of a plan, of a diff); nothing is priced here.
"""

from __future__ import annotations

from typing import Any, Optional

from .text_format import finite_number, md_escape, money, num, number_pair


def val(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:,.4g}" if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)


def signed(v: Optional[float], unit: str = " CNY", digits: int = 2) -> str:
    if v is None:
        return "unknown"
    return f"{'+' if v > 0 else '−' if v < 0 else '±'}{abs(v):,.{digits}f}{unit}"


def pct(p: Optional[float]) -> str:
    return "" if p is None else f", {'+' if p > 0 else '−' if p < 0 else '±'}{abs(p):,.1f}%"


def arrow(delta: Optional[float]) -> str:
    return "" if not delta else (" 📈" if delta > 0 else " 📉")


def headline(d: dict) -> str:
    c = d["cost"]
    total, hourly = c["total"], c["hourly"]
    if not c.get("comparable", True):  # the base counted the GPU instances only
        ct = c.get("compute_total") or {}
        return (f"**Total cost (all-in) {money(total['after'])}; the base plan counted the GPU instances only "
                f"(saved by an older trainstack), so only those compare: {money(ct.get('before'))} → "
                f"{money(ct.get('after'))} ({signed(ct.get('delta'))}{pct(ct.get('percent'))})**")
    if total["before"] is None and total["after"] is None:
        return f"**Cost unknown offline** · hourly {money(hourly['before'])} → {money(hourly['after'])}"
    if total["before"] is None or total["after"] is None:
        side = "after" if total["after"] is None else "before"
        return (f"**Total cost {money(total['before'])} → {money(total['after'])}: the {side} side's cost is unknown "
                f"offline (e.g. PAI-DLC), so no delta** · hourly {money(hourly['before'])} → {money(hourly['after'])}")
    verb = ("increased" if (total["delta"] or 0) > 0 else "decreased" if (total["delta"] or 0) < 0 else "unchanged")
    line = (f"**Total cost (all-in) {verb}: {money(total['before'])} → {money(total['after'])} "
            f"({signed(total['delta'])}{pct(total['percent'])}){arrow(total['delta'])}**")
    return line + f" · hourly {money(hourly['before'])} → {money(hourly['after'])} ({signed(hourly['delta'])})"


_EMPTY = {"before": None, "after": None, "delta": None}


def cny(v: Optional[float]) -> str:
    """A CNY figure in a table whose header names the unit."""
    return "unknown" if v is None else f"{v:,.2f}"


def _contingent_hourly(row: dict) -> str:
    """A contingent line's one figure, per hour (before → after when it changed)."""
    h = row["hourly"]
    if row["status"] == "changed":
        return f"{money(h['before'], 'CNY/h')} → {money(h['after'], 'CNY/h')}"
    return money(h["before"] if row["status"] == "removed" else h["after"], "CNY/h")


def _line_money(v: dict, side: str, row: dict) -> str:
    if row.get(f"unpriced_{side}"):
        return "unpriced"
    if row.get("contingent"):  # priced per hour only; never a run or a month (the name cell says)
        return "—"
    if side == "before" and row["status"] == "base-unknown":
        return "—"
    return cny(v[side])


def cost_table(d: dict) -> list[str]:
    """Infracost-style: each billed resource's monthly cost before and after, the run's, and the totals."""
    c = d["cost"]
    rows = c.get("resources") or []
    if not rows:
        return []
    out = ["#### Cost by resource (CNY)", "",
           "| Resource | Monthly before | Monthly after | Monthly Δ | Run before | Run after | Run Δ |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        mark = {"added": " (new)", "removed": " (removed)"}.get(r["status"], "")
        keep = " · kept after destroy" if r.get("retained") else ""
        if r.get("contingent"):
            keep += f" · contingent, not in the totals: {_contingent_hourly(r)}"
        m, run = r["monthly"], r["run"]
        deltas = ("—", "—") if r.get("contingent") else (signed(m["delta"], ""), signed(run["delta"], ""))
        out.append(f"| {md_escape(r['name'])}{mark}{keep} | {_line_money(m, 'before', r)} | "
                   f"{_line_money(m, 'after', r)} | {deltas[0]} | {_line_money(run, 'before', r)} | "
                   f"{_line_money(run, 'after', r)} | {deltas[1]} |")
    mon, tot, kept = c.get("monthly") or _EMPTY, c["total"], c.get("after_destroy_monthly") or _EMPTY
    out.append(f"| **Total (all-in)** | {cny(mon['before'])} | {cny(mon['after'])} | {signed(mon['delta'], '')} | "
               f"{cny(tot['before'])} | {cny(tot['after'])} | {signed(tot['delta'], '')} |")
    out.append(f"| Kept after `pulumi destroy` (per month) | {cny(kept['before'])} | {cny(kept['after'])} "
               f"| {signed(kept['delta'], '')} | | | |")
    unpriced = sorted({(r["name"], r.get("unpriced_after") or r.get("unpriced_before")) for r in rows
                       if r.get("unpriced_after") or r.get("unpriced_before")})
    if unpriced:
        out += ["", "Unpriced (left out of the totals): " + "; ".join(f"{md_escape(n)}: {md_escape(why)}"
                                                                   for n, why in unpriced)]
    if c.get("note"):
        out += ["", f"Note: {md_escape(c['note'])}."]
    return out + [""]


def _nodes(side: dict) -> str:
    s = side["summary"]
    return "—" if s.get("nodes") is None else f"{s.get('nodes')} × {s.get('gpus_per_node')} GPU"


def _estimate(side: dict) -> dict:
    e = side.get("estimate")
    return e if isinstance(e, dict) else {}






def _speed(side: dict) -> str:
    e = _estimate(side)
    v, iv = e.get("tokens_per_second_per_gpu"), number_pair(e.get("tokens_per_second_per_gpu_interval"))
    return "—" if not finite_number(v) else f"{v:,.0f}" + (f" ({iv[0]:,.0f}–{iv[1]:,.0f})" if iv else "")


def _fit(side: dict) -> str:
    e = _estimate(side)
    fit, req, iv = e.get("fit"), e.get("required_gib_per_gpu"), number_pair(e.get("required_gib_interval"))
    if not isinstance(fit, str):
        return "—"
    return (val(fit.replace("_", " ")) + (f": {req:.2f} GiB" if finite_number(req) else "")
            + (f" ({iv[0]:.1f}–{iv[1]:.1f})" if iv else ""))


def cost_summary_table(d: dict) -> list[str]:
    c, b, h = d["cost"], d["base"], d["head"]
    # "(estimate)" unless every side with a plan has its spot price from a price book or a refresh
    flags = [p.get("spot_estimated") if isinstance(p := side.get("prices"), dict) else None
             for side in (b, h) if side.get("summary")]
    est = " (estimate)" if not flags or any(f is not False for f in flags) else ""
    rows = [
        ("Hourly cost (all-in, chosen pricing)", c["hourly"], True),
        ("Total cost (all-in, chosen pricing)", c["total"], True),
        ("Hourly GPU instances", c.get("compute_hourly") or _EMPTY, True),
        ("Total GPU instances", c.get("compute_total") or _EMPTY, True),
        ("Monthly after `pulumi destroy`", c.get("after_destroy_monthly") or _EMPTY, True),
        ("Hourly on-demand", c["on_demand_hourly"], True),
        ("Total on-demand", c["on_demand_total"], True),
        (f"Hourly spot{est}", c["spot_hourly"], True),
        (f"Total spot{est}", c["spot_total"], True),
        ("Hours", c["hours"], False),
    ]
    out = ["| | Before | After | Delta |", "|---|---:|---:|---:|"]
    for label, v, is_money in rows:
        if is_money:
            out.append(f"| {label} | {money(v['before'])} | {money(v['after'])} | {signed(v['delta'])} |")
        else:
            out.append(f"| {label} | {num(v['before'])} | {num(v['after'])} | {signed(v['delta'], '', 1)} |")
    counts, pol = d["counts"], d["policy"]
    out += [
        f"| Instance type | {val(b['summary'].get('instance_type'))} | {val(h['summary'].get('instance_type'))} | |",
        f"| Nodes | {_nodes(b)} | {_nodes(h)} | |",
        f"| Tokens/s per GPU (80 % interval) | {_speed(b)} | {_speed(h)} | |",
        f"| Memory fit (required, 80 % interval) | {_fit(b)} | {_fit(h)} | |",
        f"| Pricing | {val(b.get('pricing'))} | {val(h.get('pricing'))} | |",
        f"| Resources | {counts['before']} | {counts['after']} | {signed(counts['after'] - counts['before'], '', 0)} |",
        f"| Mandatory policy violations | {pol['mandatory_before']} | {pol['mandatory_after']} | "
        f"{signed(pol['mandatory_after'] - pol['mandatory_before'], '', 0)} |",
    ]
    return out




# ---- the plan's own cost breakdown ------------------------------------------------------------------

def _size(item: dict) -> str:
    count, qty, unit = item.get("count"), item.get("quantity"), item.get("unit")
    if unit == "GiB" and qty is not None:
        return f"{count} x {qty:,.0f} GiB" if count and count > 1 else f"{qty:,.2f} GiB".replace(".00 GiB", " GiB")
    return f"{count} {unit}{'s' if count != 1 and unit in ('node', 'pod', 'GPU', 'resource') else ''}"


def _cell(item: dict, key: str) -> str:
    if item.get("unpriced") and key != "after_destroy_monthly_cny":
        return "unpriced"
    v = item.get(key)
    return "—" if v is None else f"{v:,.2f}"


def breakdown_rows(cost: dict) -> list[tuple[str, ...]]:
    """One row per billed line: resource, size, hourly, run, monthly, after destroy (CNY), and the total."""
    rows = []
    for i in cost.get("breakdown") or []:
        name = i["name"] + (f" ({i['pricing']})" if i.get("pricing") and "(" not in i["name"] else "")
        name += " [contingent: not in totals]" if i.get("contingent") else ""
        rows.append((name, _size(i), _cell(i, "hourly_cny"), _cell(i, "run_cny"), _cell(i, "monthly_cny"),
                     _cell(i, "after_destroy_monthly_cny")))
    if rows:
        rows.append(("total (all-in)", "", cny(cost.get("hourly_cny")), cny(cost.get("total_cny")),
                     cny(cost.get("monthly_cny")), cny(cost.get("after_destroy_monthly_cny"))))
    return rows


BREAKDOWN_HEADER = ("RESOURCE", "SIZE", "HOURLY", "RUN", "MONTHLY", "AFTER DESTROY /MONTH")


def breakdown_notes(cost: dict) -> list[str]:
    """Why a line is unpriced and what is billed on top, one sentence each."""
    out = [f"{i['name']}: {i['unpriced']}" for i in cost.get("breakdown") or [] if i.get("unpriced")]
    out += [f"{i['name']}: {i['note']}" for i in cost.get("breakdown") or [] if i.get("note")]
    return out


def breakdown_markdown(cost: dict) -> list[str]:
    """The plan's cost table (the PR comment of `plan`, docs/cost.md's sample)."""
    rows = breakdown_rows(cost)
    if not rows:
        return []
    out = ["### Cost (CNY)", "", "| Resource | Size | Hourly | Run | Monthly | After destroy / month |",
           "|---|---|---:|---:|---:|---:|"]
    out += [f"| {' | '.join(md_escape(c) for c in r)} |" for r in rows[:-1]]
    out.append(f"| **{rows[-1][0]}** | | **{rows[-1][2]}** | **{rows[-1][3]}** | **{rows[-1][4]}** | **{rows[-1][5]}** |")
    notes = breakdown_notes(cost)
    if notes:
        out += [""] + [f"- {md_escape(n)}" for n in notes]
    return out + [""]
