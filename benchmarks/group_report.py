"""The leave-one-source-out report: per source, per class and pooled; interval coverage; OOM verdicts.

Printed by benchmarks/group_validation.py. Every interval here is *nested*: a row of source S gets the
band computed from the residuals of the other sources only, so the coverage reported is itself out of
sample. In-sample figures (constants fitted on every row) are printed beside, labelled.
"""

from __future__ import annotations

import statistics
from typing import Optional, Sequence

from benchmarks.error_bar_table import fp8_gpus, table_from
from benchmarks.observations import H200_SOURCE, Obs
from trainstack.sizing import constants as K
from trainstack.sizing import intervals as I

GOALS = {"speed": (0.10, 0.35), "memory": (0.08, 0.25)}


def _q(values: Sequence[float], q: float) -> float:
    v = sorted(values)
    pos = q * (len(v) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def cell(values: Sequence[float]) -> str:
    if not values:
        return "-"
    a = [abs(x) for x in values]
    return f"{statistics.median(a):.1%} / {max(a):.0%} [{_q(values, .1):+.0%}, {_q(values, .9):+.0%}] n={len(a)}"


def _emit(head: list[str], rows: list[list[str]], markdown: bool) -> list[str]:
    if markdown:
        return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    return ["  ".join(str(x).ljust(w) for x, w in zip(r, widths)).rstrip() for r in [head, *rows]]


def nested(loso) -> dict[str, list[tuple]]:
    """Per quantity: (residual, interval, covered) for every scored row, its band from the other sources."""
    out: dict[str, list[tuple]] = {"speed": [], "memory": []}
    by_source: dict[str, list] = {}
    for r in loso.residuals:
        by_source.setdefault(r.obs.source, []).append(r)
    for src, rs in by_source.items():
        for quantity in ("speed", "memory"):
            table = table_from(loso.residuals, quantity, exclude_source=src)
            measured_fp8 = fp8_gpus(loso.residuals, exclude_source=src)
            for r in rs:
                e = r.speed if quantity == "speed" else r.memory
                if e is None:
                    continue
                o = r.obs
                fp8 = I.fp8_unmeasured(o.training, o.gpu.name, measured_fp8) if quantity == "speed" and o.gpu else None
                iv = I.interval(quantity, 1.0 + e, o.cls, fp8_unmeasured_gpu=fp8, digits=6, table=table)
                covered = iv is not None and iv.low <= 1.0 <= iv.high
                out[quantity].append((r, iv, covered))
    return out


def oom_verdicts(loso) -> list[tuple[Obs, float, float, str]]:
    """Every published out-of-memory row: (row, required GiB at its fold's constants, usable GiB, verdict)."""
    out = []
    for r in loso.residuals:
        o = r.obs
        if not o.oom or r.predicted_required_gib is None:
            continue
        usable = o.limit_gib or (o.gpu.usable_gib if o.gpu else None)
        if usable is None:
            continue
        table = table_from(loso.residuals, "memory", exclude_source=o.source)
        high, _ = _high(o, table)
        margin = round(usable * K.MIN_MARGIN_FRACTION, 2)
        out.append((o, r.predicted_required_gib, usable, I.fit_verdict(r.predicted_required_gib, usable, margin, high)))
    return out


def _high(o: Obs, table: dict) -> tuple[float, Optional[I.Interval]]:
    iv = I.interval("memory", 1.0, o.cls, digits=6, table=table)
    return (max(1.0, iv.high) if iv else 1.0), iv


def report(obs: Sequence[Obs], loso, ins, markdown: bool, rows: bool = False) -> list[str]:
    out: list[str] = []
    ins_by_id = {r.obs.id: r for r in ins.residuals}

    def h(title: str) -> None:
        out.extend(["", f"### {title}" if markdown else title, ""])

    h("Leave-one-source-out accuracy per source (median / worst |error| [10th, 90th percentile of the signed "
      "error]; in-sample: constants fitted on every row, for comparison only)")
    srcs = sorted({r.obs.source for r in loso.residuals})
    table = []
    for s in srcs:
        rs = [r for r in loso.residuals if r.obs.source == s]
        ins_rs = [ins_by_id[r.obs.id] for r in rs]
        table.append([s, cell([r.speed for r in rs if r.speed is not None]),
                      cell([r.speed for r in ins_rs if r.speed is not None]),
                      cell([r.memory for r in rs if r.memory is not None]),
                      cell([r.memory for r in ins_rs if r.memory is not None])])
    out += _emit(["source", "tokens/s (held out)", "tokens/s (in-sample)", "memory (held out)", "memory (in-sample)"],
                 table, markdown)

    h("Leave-one-source-out accuracy per class (speed: generation/framework/method/dense-moe; memory: the same "
      "without the generation)")
    for quantity in ("speed", "memory"):
        classes: dict[str, list[float]] = {}
        for r in loso.residuals:
            e = r.speed if quantity == "speed" else r.memory
            if e is not None:
                classes.setdefault(r.obs.cls.key(quantity), []).append(e)
        out += _emit([f"{quantity} class", "held out"], [[k, cell(v)] for k, v in sorted(classes.items())], markdown)
        out.append("")

    h("Pooled, against issue 32's goals (held out; in-sample beside)")
    cov = nested(loso)
    pooled = []
    for quantity, label in (("speed", "tokens/s per GPU"), ("memory", "peak memory per GPU")):
        held = [r.speed if quantity == "speed" else r.memory for r in loso.residuals]
        held = [e for e in held if e is not None]
        inside = [r.speed if quantity == "speed" else r.memory for r in ins.residuals]
        inside = [e for e in inside if e is not None]
        c = cov[quantity]
        covered = sum(1 for _, _, ok in c if ok) / max(1, len(c))
        goal_med, goal_worst = GOALS[quantity]
        pooled.append([label, cell(held), f"median <= {goal_med:.0%}, worst <= {goal_worst:.0%}",
                       f"{covered:.0%} of {len(c)}", cell(inside)])
    h200 = [r.memory for r in loso.residuals if r.obs.source == H200_SOURCE and r.memory is not None]
    pooled.append(["H200 harness peak allocated (leave-one-model-out)", cell(h200), "median <= 1 %", "-",
                   cell([r.memory for r in ins.residuals if r.obs.source == H200_SOURCE and r.memory is not None])])
    out += _emit(["quantity", "held out", "goal", "80 % intervals cover (nested)", "in-sample"], pooled, markdown)

    h("Interval coverage per class (nested: each row's band from the other sources)")
    for quantity in ("speed", "memory"):
        per: dict[str, list[bool]] = {}
        for r, iv, ok in cov[quantity]:
            per.setdefault(r.obs.cls.key(quantity), []).append(ok)
        out += _emit([f"{quantity} class", "covered"],
                     [[k, f"{sum(v)}/{len(v)}"] for k, v in sorted(per.items())], markdown)
        out.append("")

    h("Published out-of-memory configurations (must never be `fits`)")
    verdicts = oom_verdicts(loso)
    out += _emit(["row", "source", "required GiB (held out)", "usable GiB", "verdict"],
                 [[o.id, o.source, f"{req:.1f}", f"{use:.1f}", v] for o, req, use, v in verdicts], markdown)
    out.append(f"{sum(1 for *_, v in verdicts if v == 'fits')} of {len(verdicts)} reported `fits`")

    if rows:
        h("Every row (held out)")
        out += _emit(["row", "source", "class", "tokens/s err", "memory err"],
                     [[r.obs.id, r.obs.source, r.obs.cls.key("speed"),
                       f"{r.speed:+.1%}" if r.speed is not None else "-",
                       f"{r.memory:+.1%}" if r.memory is not None else "-"] for r in loso.residuals], markdown)
    return out
