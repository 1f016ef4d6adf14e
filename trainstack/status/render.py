"""``trainstack status`` as text: a few lines a person reads at a glance, then the nodes."""

from __future__ import annotations

from typing import Optional

from ..textable import render_table
from .view import Comparison, StatusView


def _n(value: Optional[float], fmt: str = ",.0f", unit: str = "") -> str:
    return "unknown" if value is None else f"{value:{fmt}}{unit}"


def _vs(c: Comparison, fmt: str, unit: str = "") -> str:
    if c.measured is None:
        return f"not measured yet (plan {_n(c.predicted, fmt, unit)})"
    ratio = f", measured/plan {c.ratio:.2f}" if c.ratio is not None else ""
    return f"{_n(c.measured, fmt, unit)} (plan {_n(c.predicted, fmt, unit)}{ratio})"


def _tokens(n: float) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:,.2f}{unit}"
    return f"{n:,.0f}"


def _age(seconds: Optional[float]) -> str:
    if seconds is None:
        return "none"
    if seconds < 120:
        return f"{seconds:.0f} s ago"
    return f"{seconds / 60:.0f} min ago" if seconds < 7200 else f"{seconds / 3600:.1f} h ago"


def render_text(v: StatusView) -> str:
    p, j, g, s, e, b, m = v.plan, v.job, v.progress, v.spend, v.eta, v.budget, v.predicted_vs_measured
    what = f"{p.nodes} x {p.instance_type or 'DLC quota'}, {'spot' if p.spot else 'on-demand'}"
    lines = [f"{v.stack} ({v.target}: {what}) in {v.region} at {v.observed_at}"]
    job = j.state + (f" (PAI {j.dlc_status}, job {j.dlc_job_id})" if j.dlc_status else "")
    if j.exit_code is not None:
        job += f", exit {j.exit_code}"
    if j.stop is not None:
        if j.stop.reason in ("budget", "deadline", "max_runtime"):
            job += f", stopped by trainstack: {j.stop.reason} ({j.stop.message})"
        else:  # a self-healing cluster's run: the pool went to 0 and node 0 stopped after it
            job += f", ended: {j.stop.reason} ({j.stop.message}" + (f", at {j.stop.at})" if j.stop.at else ")")
    lines.append(f"job       {job}")
    if g.tokens_done is not None:
        of = f" of {_tokens(g.tokens_total)}" if g.tokens_total else ""
        pct = f" ({g.fraction:.1%})" if g.fraction is not None else ""
        step = f"step {g.step:,}, " if g.step is not None else ""
        lines.append(f"progress  {step}{_tokens(g.tokens_done)}{of} tokens{pct}")
    else:
        lines.append("progress  no progress reported yet (docs/status.md: report it from the training loop)")
    if g.tokens_per_second is not None:
        lines.append(f"speed     {g.tokens_per_second:,.0f} tokens/s; per GPU "
                     f"{_vs(m.tokens_per_second_per_gpu, ',.0f')}")
    else:
        lines.append(f"speed     not measured yet (plan {_n(m.tokens_per_second_per_gpu.predicted)} tokens/s per GPU)")
    source = {"trainer": " (reported by the trainer)", "nvidia-smi": " (nvidia-smi)"}.get(m.memory_source or "", "")
    lines.append(f"memory    peak allocated {_vs(m.peak_allocated_gib, '.1f', ' GiB')}; reserved "
                 f"{_vs(m.peak_reserved_gib, '.1f', ' GiB')}{source}")
    hourly = f" at {s.hourly_cny:,.2f} CNY/h" if s.hourly_cny is not None else ""
    lines.append(f"spend     {_n(s.spent_cny, ',.2f', ' CNY')} so far (estimate{hourly}: {s.price_source})")
    if e.remaining_hours is not None:
        left = "left" if e.finish_at or j.state not in ("stopped", "finished", "failed") else "left when it stopped"
        eta = f"{e.remaining_hours:,.1f} h of training {left} ({'measured speed' if e.basis == 'measured' else 'plan speed'})"
        if e.finish_at:
            eta += f", done about {e.finish_at}"
        if e.deadline_at:
            track = "" if e.on_track is None else ("; on track" if e.on_track else "; LATE")
            eta += f"; deadline {e.deadline_at}{track}"
        lines.append(f"eta       {eta}")
    if b.max_total_cost_cny is not None or b.projected_total_cny is not None:
        limit = f" of max_total_cost {b.max_total_cost_cny:,.0f} CNY" if b.max_total_cost_cny is not None else ""
        verdict = "" if b.within_budget is None else ("; within budget" if b.within_budget else "; OVER BUDGET")
        lines.append(f"budget    projected {_n(b.projected_total_cny, ',.2f', ' CNY')}{limit}{verdict}")
    if v.nodes:
        rows = [[n.name, n.instance_id or "-", n.state, "-" if n.spot is None else ("yes" if n.spot else "no"),
                 n.job_state or "-", _age(n.heartbeat_age_seconds) + (" (stale)" if n.stale else ""),
                 str(n.interruptions), str(n.replacements)] for n in v.nodes]
        lines.append("")
        lines.append(render_table(["NODE", "INSTANCE", "STATE", "SPOT", "JOB", "HEARTBEAT", "INTERRUPTIONS",
                                   "REPLACED"], rows, align="llllllrr"))
    if v.labels:
        lines.append("")
        lines.append("notes:")
        lines += [f"  - {label}" for label in v.labels]
    return "\n".join(lines) + "\n"
