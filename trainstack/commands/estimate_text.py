"""The text output of ``trainstack estimate``: the memory breakdown of the described GPU row, then one
line per GPU model with the nodes and layout the resolver's engine sized it on."""

from __future__ import annotations

from typing import Any, Optional

from ..sizing import constants as K
from ..sizing.memory import COMPONENTS, PHASE_LABELS
from ..textable import render_table

FIT_WORDS = {"fits": "yes", "at_risk": "at risk"}


def _num(v: Optional[float], fmt: str = "{:,.1f}") -> str:
    return "-" if v is None else fmt.format(v)


def _interval(v: Optional[float], iv: Optional[list]) -> str:
    return _num(v, "{:,.0f}") + (f" ({iv[0]:,.0f}-{iv[1]:,.0f})" if v is not None and iv else "")


def _note(g: dict[str, Any], precision: str) -> str:
    """The row's instance type, or in a word why resolve would not plan it (the reason follows the table)."""
    if not g["precision_supported"]:
        return f"no {precision.split('-')[0].upper()}"
    if g["sized_on"] == "assumed nodes":
        return "assumed nodes (below)"
    if not g["resolve_feasible"] and g["reason"]:
        return f"{g['instance_type']}, rejected (below)"
    return g["instance_type"] or ""


def render_text(doc: dict[str, Any]) -> str:
    t, mem = doc["training"], doc["memory"]
    lora = f", LoRA rank {t['lora']['rank']} on {t['lora']['targets']}" if t["lora"] else ""
    m = doc["model"]
    active = (f", {m['active_parameters'] / 1e9:.2f}B active per token ({m['moe']['experts_per_token']} of "
              f"{m['moe']['experts']} experts)") if m["moe"] else f", {m['active_parameters'] / 1e9:.2f}B active"
    ckpt = t["gradient_checkpointing"]
    ckpt = "selective" if ckpt == "selective" else ("on" if ckpt else "off")
    lines = [
        f"{doc['profile']}: {m['name']}, {m['parameters'] / 1e9:.2f}B params{active} "
        f"({doc['trainable_params'] / 1e9:.3g}B trainable), {t['method']}{lora}, {t['precision']}, {t['optimizer']}",
        f"  micro-batch {t['micro_batch_size']} x {t['sequence_length']} tokens, gradient checkpointing "
        f"{ckpt}, ZeRO {t['zero_stage']}, {doc['gpus']} GPU(s) as {t['layout']}, framework {t['framework']}, "
        f"attention {t['attention']}",
        f"  {t['gradient_accumulation_steps']} micro-batch(es) per optimizer step: global batch "
        f"{t['global_batch_size']} sequences = {t['tokens_per_step']:,} tokens per step"
        + (f"; experts split over {t['expert_parallel']} GPUs" if t["expert_parallel"] > 1 else ""),
        "",
        "Memory per GPU at the peak (GiB = 2^30 bytes)",
    ]
    rows = [[k.replace("_", " "), f"{v:.2f}"] for k, v in ((k, mem["breakdown_gib"][k]) for k in COMPONENTS) if v]
    rows.append(["peak of allocated tensors", f"{mem['peak_gib_per_gpu']:.2f}"])
    alloc = "expandable segments, assumed" if mem["allocator"] == "expandable" else "PyTorch default"
    rows.append([f"reserved by the caching allocator ({alloc})", f"{mem['reserved_gib_per_gpu']:.2f}"])
    nccl = f", +{K.NCCL_BUFFERS_GIB:g} GiB NCCL buffers" if doc["gpus"] > 1 else ""
    rows.append(["required (reserved, +{:g} GiB CUDA context{})".format(K.CUDA_CONTEXT_GIB, nccl),
                 f"{mem['required_gib_per_gpu']:.2f}"])
    lines.append(render_table(["COMPONENT", "GiB"], rows, align="lr"))
    lines.append(f"  peak at: {PHASE_LABELS.get(mem['peak_phase'], mem['peak_phase'])}")
    if mem["required_gib_interval"]:
        lo, hi = mem["required_gib_interval"]
        lines.append(f"  required, 80 % interval: {lo:.1f}-{hi:.1f} GiB (class {mem['interval_class']}; "
                     "fits: its upper end plus the margin is within usable memory, at risk: only the estimate is)")
    d = mem["describes"]
    lines.append(f"  described above: {d['gpu']} on {d['nodes']} x {d['gpus_per_node']} GPU(s)"
                 + (f" ({d['instance_type']})" if d["instance_type"] else " (assumed nodes)") + f", {d['why']}")
    lines.append("")
    lines.append("Fit and speed per GPU model, each on the nodes and layout `trainstack resolve` would size it on "
                 "(costs for all its GPUs)")
    fit_rows = [[g["gpu"], f"{g['nodes']} x {g['gpus_per_node']}", g["layout"], f"{g['usable_gib']:.1f}",
                 f"{g['required_gib_per_gpu']:.1f}",
                 FIT_WORDS.get(g["fit"]) or ("tight" if g["margin_gib"] >= 0 else "no"),
                 f"{g['margin_gib']:+.1f}", _interval(g["tokens_per_second_per_gpu"], g["tokens_per_second_per_gpu_interval"]),
                 _num(g["hours"], "{:,.2f}"),
                 _num(g["on_demand_cny"], "{:,.0f}"), _num(g["spot_cny"], "{:,.0f}"), _note(g, t["precision"])]
                for g in doc["per_gpu"]]
    lines.append(render_table(["GPU", "NODES", "LAYOUT", "USABLE GiB", "NEEDS GiB", "FITS", "MARGIN GiB",
                               "TOKENS/S/GPU (80 % INTERVAL)", "HOURS", "CNY ON-DEMAND", "CNY SPOT (EST.)", "NOTE"],
                              fit_rows, align="llrrrlrrrrrl"))
    lines += [f"  {g['gpu']}: " + ("sized on assumed nodes: " if g["sized_on"] == "assumed nodes" else "") + g["reason"]
              for g in doc["per_gpu"] if g["precision_supported"] and not g["resolve_feasible"] and g["reason"]]
    thr = doc["throughput"]
    if thr and thr["tokens_per_second_per_gpu"]:
        lines.append("")
        lines.append(f"Speed on {thr['gpu']}: {thr['tokens_per_second_per_gpu']:,.0f} tokens/s per GPU, "
                     f"{thr['tokens_per_second']:,.0f} in all, MFU {thr['mfu']:.0%} (model FLOPs; "
                     f"{thr['hfu']:.0%} with recomputation), {thr['model_flops_per_token'] / 1e9:,.1f} GFLOPs/token"
                     + (f", scaling efficiency {thr['scaling_efficiency']:.0%}" if doc["gpus"] > 1 else ""))
        if "hours" in doc:
            c = doc["cost"]
            lines.append(f"  {doc['training']['tokens']:,.0f} tokens: {_num(doc['hours'], '{:,.2f}')} h; "
                         f"{_num(c['on_demand_cny'], '{:,.0f}')} CNY on demand, "
                         f"{_num(c['spot_cny'], '{:,.0f}')} CNY at the estimated spot price")
        if "cheapest" in doc:
            c = doc["cheapest"]
            lines.append(f"  cheapest GPU that fits: {c['gpu']}, {_num(c['hours'], '{:,.2f}')} h, "
                         f"{_num(c['on_demand_cny'], '{:,.0f}')} CNY on demand")
    if doc.get("prices"):
        lines.append(f"  {doc['prices']['headline']}")
    if not doc["fits_any_gpu"]:
        lines.append("")
        lines.append(f"Fits no listed GPU model on the nodes and layouts the resolver considers. What would make it fit "
                     f"(sized for the roomiest, {doc['suggestions_for']}):")
        lines += [f"  - {s}" for s in doc["suggestions"]] or ["  - nothing the model knows of; split the model "
                                                              "(tensor/pipeline parallelism)"]
    if doc["assumptions"]:
        lines.append("")
        lines.append("Rests on (not confirmed by the H200 calibration):")
        lines += [f"  - {a}" for a in doc["assumptions"]]
    return "\n".join(lines)
