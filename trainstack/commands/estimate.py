"""`trainstack estimate PROFILE [--gpu MODEL] [--gpus N] [--json]`: memory, fit, speed, hours, cost.

A job that fits no GPU is not an error here (exit 0, every ``fits`` false, plus suggestions);
the resolver is the command that refuses infeasible jobs.
"""

from __future__ import annotations

import json
import math
from typing import Any, Optional

from ..catalog import Catalog, GpuModel, load_catalog
from ..catalog.models import TRAINING_INTERCONNECTS, TRAINING_RDMA
from ..catalog.price_book import catalog_for
from ..placement.prices import provenance
from ..errors import InputError, Problem
from ..profile import TrainingProfile, load_profile
from ..rules import check_profile
from ..sizing import Estimate, GpuHourPrice, estimate, fit_suggestions, gpu_hour_price
from ..sizing import constants as K
from ..sizing.estimate import NodeLayout, min_margin_gib
from ..sizing.frameworks import attention_kind, searchable_degrees
from ..sizing.memory import COMPONENTS, PHASE_LABELS
from ..textable import render_table


def register(sub) -> None:
    p = sub.add_parser("estimate", help="predict peak GPU memory, fit, speed, hours and cost of a profile")
    p.add_argument("profile", help="path to a profile YAML")
    p.add_argument("--gpu", metavar="MODEL", help="one catalog GPU model (e.g. H200); default: every GPU")
    p.add_argument("--gpus", metavar="N", type=int,
                   help="total GPUs, data parallel; ZeRO shards over them (default: resources.gpus, else 1)")
    p.add_argument("--network-gbps", metavar="N", type=float,
                   help="node network in Gbit/s per node for multi-node speed (a fabric the catalog does not sell, "
                        "or the one you have); default: the instance type's")
    p.add_argument("--json", action="store_true", help="print JSON (contract: README and docs/sizing.md)")
    p.set_defaults(func=run)


def run(args) -> int:
    profile = load_profile(args.profile)
    catalog = load_catalog()
    check_profile(profile, catalog, file=args.profile)
    catalog = catalog_for(profile, catalog)  # the team's prices first (price_book)
    gpus = [catalog.gpu(args.gpu, path="--gpu")] if args.gpu else list(catalog.gpus.values())
    count = _gpu_count(args.gpus, profile)
    _check_world(profile, count)
    gbps = _network_gbps(getattr(args, "network_gbps", None))
    layouts = {g.name: node_layout(catalog, g, count, profile.region, gbps) for g in gpus}
    allocator = allocator_of(profile)
    margin = memory_margin_fraction(profile)
    est = estimate(profile.architecture, profile.training, gpus, gpu_count=count, layouts=layouts,
                   allocator=allocator, min_margin_fraction=margin)
    est, calibrations = with_calibration(profile, est, gpus, margin)
    prices = ({g.name: gpu_hour_price(catalog, profile.region, g.name) for g in gpus}
              if profile.training.tokens else {})
    suggestions: list[str] = []
    if not est.fits_anywhere:
        roomiest = max(gpus, key=lambda g: g.usable_gib)
        suggestions = fit_suggestions(profile.architecture, profile.training,
                                      roomiest.usable_gib - min_margin_gib(roomiest.usable_gib, margin), count)
    doc = to_json(profile, est, prices, layouts, suggestions)
    doc["prices"] = prices_block(catalog, profile.region, doc, prices)
    doc["calibration"] = [{"gpu": e.key.gpu, "throughput_factor": e.throughput_factor,
                           "memory_factor": e.applied_memory_factor, "measured_by": f"{e.source.stack} {e.source.node}",
                           "heartbeat_at": e.source.heartbeat_at, "calibrated_at": e.calibrated_at}
                          for e in calibrations]
    doc["assumptions"] = [e.label() for e in calibrations] + doc["assumptions"]
    if suggestions or not est.fits_anywhere:
        doc["suggestions_for"] = f"{roomiest.name}, {roomiest.usable_gib:g} GiB"
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print(render_text(doc))
    return 0


def prices_block(catalog: Catalog, region: str, doc: dict[str, Any],
                 prices: dict[str, GpuHourPrice]) -> Optional[dict[str, Any]]:
    """Whose price the costs rest on (``prices.as_of``, ``age_days``, ``source``, ``headline``): the type
    that prices the reference GPU, else the cheapest GPU that fits. Each ``per_gpu`` row gets its own
    ``price_source`` and ``price_as_of``."""
    for row in doc["per_gpu"]:
        price = prices.get(row["gpu"])
        quote = catalog.quote(region, price.instance_type) if price and price.instance_type else None
        row["price_source"] = quote.source_kind if quote else "none"
        row["price_as_of"] = quote.as_of if quote else None
    gpu = (doc.get("cost") or {}).get("gpu") if (doc.get("cost") or {}).get("instance_type") else \
        (doc.get("cheapest") or {}).get("gpu")
    price = prices.get(gpu) if gpu else None
    if price is None or price.instance_type is None:
        return None
    return provenance(catalog, catalog.quote(region, price.instance_type)).model_dump(mode="json")


def _check_world(profile: TrainingProfile, count: int) -> None:
    """--gpus must hold the profile's tensor x pipeline x context degrees (the world size is their product
    times data parallel)."""
    mp = profile.training.model_parallel
    if count % mp:
        raise InputError(f"--gpus {count} cannot hold the profile's layout", problems=[Problem(
            path="--gpus", given=count, has_given=True,
            message=f"tensor x pipeline x context parallel = {mp} must divide the GPU count",
            allowed=f"a multiple of {mp}")])


def with_calibration(profile: TrainingProfile, est: Estimate, gpus: list[GpuModel], margin: float):
    """``est`` with the calibration overlay's entries for this workload applied per GPU model (their
    speed; their fit, and the memory itself when one GPU is asked for), and the entries used."""
    from .. import calibration_overlay as cal
    from ..sizing.estimate import gpu_fit

    overlay, used = cal.load_overlay(), []
    speeds, fits, memory = list(est.throughput), list(est.fits), est.memory
    for i, gpu in enumerate(gpus):
        entry = overlay.find(cal.workload_key(profile.architecture, profile.training, gpu.name))
        if entry is None:
            continue
        used.append(entry)
        speeds = [cal.calibrated_speed(t, entry.throughput_factor) if t.gpu == gpu.name else t for t in speeds]
        adjusted = cal.calibrated_memory(est.memory, entry.applied_memory_factor)
        fits = [gpu_fit(adjusted, gpu, margin) if f.gpu == gpu.name else f for f in fits]
        if len(gpus) == 1:
            memory = adjusted
    if not used:
        return est, []
    return est.model_copy(update={"throughput": tuple(speeds), "fits": tuple(fits), "memory": memory}), used


def _network_gbps(flag: Optional[float]) -> Optional[float]:
    if flag is None:
        return None
    if not (flag == flag and 1 <= flag <= 100_000):  # NaN-safe
        raise InputError(f"--network-gbps {flag} is out of range", problems=[Problem(
            path="--network-gbps", message="must be a number of Gbit/s per node from 1 to 100000", given=flag,
            has_given=True)])
    return float(flag)


def allocator_of(profile: TrainingProfile) -> str:
    """The caching allocator the job runs with: ``expandable`` when job.env sets
    PYTORCH_CUDA_ALLOC_CONF with expandable_segments:True, else PyTorch's default."""
    conf = profile.job.env.get("PYTORCH_CUDA_ALLOC_CONF", "")
    options = {k.strip(): v.strip() for k, _, v in (part.partition(":") for part in conf.split(","))}
    return "expandable" if options.get("expandable_segments", "").lower() == "true" else "default"


def memory_margin_fraction(profile: TrainingProfile) -> float:
    percent = getattr(profile.resources, "memory_margin_percent", None)
    return K.MIN_MARGIN_FRACTION if percent is None else percent / 100.0


def _gpu_count(flag: Optional[int], profile: TrainingProfile) -> int:
    if flag is not None:
        if not 1 <= flag <= 8192:
            raise InputError(f"--gpus {flag} is out of range", problems=[Problem(
                path="--gpus", message="must be a whole number from 1 to 8192", given=flag, has_given=True)])
        return flag
    return profile.resources.gpus if isinstance(profile.resources.gpus, int) else 1


def node_layout(catalog: Catalog, gpu: GpuModel, count: int, region: Optional[str] = None,
                network_gbps: Optional[float] = None) -> NodeLayout:
    """How ``count`` GPUs of ``gpu`` would sit: the largest trainable catalog node with that GPU,
    preferring types with a known price in ``region`` and a verified GPU (the ones a plan could use).
    ``network_gbps`` replaces the node network's bandwidth (a what-if fabric)."""
    lay = _node_layout(catalog, gpu, count, region)
    if network_gbps is None or count <= 1:
        return lay
    network = lay.network if lay.network in TRAINING_RDMA else "roce"
    return lay.model_copy(update={"network_gbps": network_gbps, "network": network,
                                  "label": (lay.label or "") + f"; node network {network_gbps:g} Gbit/s per node "
                                                               "(--network-gbps, what-if)"})


def _node_layout(catalog: Catalog, gpu: GpuModel, count: int, region: Optional[str] = None) -> NodeLayout:
    if count <= 1:
        return NodeLayout(gpus_per_node=1)
    nodes = [i for i in catalog.resolved_instances()
             if i.trainable and i.gpu is not None and i.gpu.name == gpu.name
             and (i.gpu_count == 1 or i.interconnect in TRAINING_INTERCONNECTS)]
    if not nodes:
        return NodeLayout(gpus_per_node=min(count, 8), interconnect="nvlink", network="erdma",
                          label=f"no catalog type carries {gpu.name}: assumed 8-GPU NVLink nodes on eRDMA")
    def usable(i) -> tuple[bool, bool]:
        priced = region is None or catalog.quote(region, i.name).on_demand_cny_per_hour is not None
        return priced, "gpu" not in i.family.unverified

    best = max(nodes, key=lambda i: (usable(i), i.gpu_count, i.type.rdma_bandwidth_gbps or 0, i.rdma != "none"))
    per_node = min(count, best.gpu_count)
    rdma = best.rdma if best.rdma in TRAINING_RDMA else "tcp"
    gbps = best.type.rdma_bandwidth_gbps if rdma != "tcp" else best.type.network_bandwidth_gbps
    return NodeLayout(gpus_per_node=per_node, interconnect=best.interconnect, network=rdma,
                      network_gbps=gbps, label=f"{count} x {gpu.name} laid out as {math.ceil(count / per_node)} "
                                               f"x {best.name} ({best.interconnect}, {rdma})")


def _round(v: Optional[float], nd: int = 2) -> Optional[float]:
    return None if v is None else round(v, nd)


def to_json(profile: TrainingProfile, est: Estimate, prices: dict[str, GpuHourPrice],
            layouts: dict[str, NodeLayout], suggestions: list[str]) -> dict[str, Any]:
    """The ``estimate --json`` document."""
    t, mem = profile.training, est.memory
    dp = t.data_parallel(est.gpu_count)
    ref = est.reference_gpu()
    speed = est.speed(ref) if ref else None
    per_gpu, labels = [], list(est.assumptions)
    for fit in est.fits:
        s, hours, price = est.speed(fit.gpu), est.hours(fit.gpu), prices.get(fit.gpu)
        per_gpu.append({
            "gpu": fit.gpu, "usable_gib": fit.usable_gib, "fits": fit.fits, "fit": fit.fit, "margin_gib": fit.margin_gib,
            "min_margin_gib": fit.min_margin_gib,
            "precision_supported": _precision_ok(fit.gpu, t.precision),
            "tokens_per_second_per_gpu": s.tokens_per_second_per_gpu if s else None,
            "tokens_per_second_per_gpu_interval": s.tokens_per_second_per_gpu_interval if s else None,
            "layout": s.layout if s else mem.layout,
            "hours": _round(hours, 3), **_costs(price, hours, est.gpu_count)})
    if speed is not None:
        labels += [lab for lab in speed.labels if lab not in labels]
    if ref and layouts.get(ref) and layouts[ref].label:
        labels.append(layouts[ref].label)
    arch = profile.architecture
    doc: dict[str, Any] = {
        "profile": profile.name, "model": model_json(profile), "params": mem.params,
        "trainable_params": mem.trainable_params, "gpus": est.gpu_count,
        "training": {"method": t.method, "precision": t.precision, "optimizer": t.optimizer,
                     "framework": t.framework, "loss": t.loss, "attention": attention_kind(t),
                     "fp8_recipe": t.fp8_recipe, "sharding": t.sharding or "full",
                     "micro_batch_size": t.micro_batch_size, "sequence_length": t.sequence_length,
                     "gradient_checkpointing": t.gradient_checkpointing, "zero_stage": t.zero_stage,
                     "gradient_accumulation_steps": t.accumulation_steps(dp),
                     "global_batch_size": t.global_batch(dp),
                     "tokens_per_step": t.global_batch(dp) * t.sequence_length,
                     "expert_parallel": t.expert_parallel if arch.is_moe else 1,
                     "tensor_parallel": t.tensor_parallel or 1, "pipeline_parallel": t.pipeline_parallel or 1,
                     "context_parallel": t.context_parallel or 1, "data_parallel": dp,
                     "virtual_pipeline_stages": t.virtual_pipeline_stages, "layout": mem.layout,
                     "lora": t.adapters.model_dump() if t.adapters else None, "tokens": t.tokens},
        "memory": {"peak_gib_per_gpu": mem.peak_gib_per_gpu, "reserved_gib_per_gpu": mem.reserved_gib_per_gpu,
                   "peak_stage": mem.peak_stage, "micro_batches_in_flight": mem.micro_batches_in_flight,
                   "required_gib_per_gpu": mem.required_gib_per_gpu, "allocator": mem.allocator,
                   "breakdown_gib": mem.breakdown_gib, "peak_phase": mem.peak_phase,
                   "phases_gib": mem.phases_gib, "peak_gib_interval": mem.peak_gib_interval,
                   "required_gib_interval": mem.required_gib_interval, "interval_class": mem.interval_class,
                   "fits": [f.model_dump() for f in est.fits]},
        "throughput": None if speed is None else {
            "gpu": speed.gpu, "gpus": speed.gpus, "tokens_per_second_per_gpu": speed.tokens_per_second_per_gpu,
            "tokens_per_second": speed.tokens_per_second, "step_seconds": speed.step_seconds,
            "flops_per_token": speed.flops_per_token, "model_flops_per_token": speed.model_flops_per_token,
            "mfu": speed.mfu, "hfu": speed.hfu, "accumulation_steps": speed.accumulation_steps,
            "tokens_per_step": speed.tokens_per_step,
            "scaling_efficiency": speed.scaling_efficiency,
            "communication_seconds": speed.communication_seconds,
            "bubble_fraction": speed.bubble_fraction, "layout": speed.layout,
            "tokens_per_second_per_gpu_interval": speed.tokens_per_second_per_gpu_interval,
            "interval_class": speed.interval_class},
        "per_gpu": per_gpu, "fits_any_gpu": est.fits_anywhere, "suggestions": suggestions,
    }
    if t.tokens is not None and ref is not None:
        hours = est.hours(ref)
        price = prices.get(ref)
        doc["hours"] = _round(hours, 3)
        doc["cost"] = {"gpu": ref, "instance_type": price.instance_type if price else None,
                       "on_demand_cny_per_gpu_hour": price.on_demand_cny if price else None,
                       "spot_cny_per_gpu_hour": price.spot_cny if price else None,
                       **_costs(price, hours, est.gpu_count)}
        if price:
            labels += [lab for lab in price.labels if lab not in labels]
        priced = [g for g in per_gpu if g["fits"] and g["precision_supported"] and g["on_demand_cny"] is not None]
        if priced:
            best = min(priced, key=lambda g: g["on_demand_cny"])
            doc["cheapest"] = {k: best[k] for k in ("gpu", "hours", "on_demand_cny", "spot_cny")}
    unset = sorted(searchable_degrees(t))
    if unset:
        labels.append(f"{', '.join(d + '_parallel' for d in unset)} unset: sized as 1; `trainstack resolve` "
                      f"chooses the layout per candidate ({t.framework} runs them)")
    doc["assumptions"] = labels
    return doc


def model_json(profile: TrainingProfile) -> dict[str, Any]:
    """``model`` in the JSON: what was named and the counts model cards publish."""
    a = profile.architecture
    return {
        "name": profile.model.label, "parameters": a.params, "active_parameters": a.active_params,
        "layers": a.num_layers, "hidden_size": a.hidden_size, "vocab_size": a.vocab_size,
        "moe": None if not a.is_moe else {
            "experts": a.num_experts, "experts_per_token": a.num_experts_per_token,
            "expert_intermediate_size": a.expert_width, "shared_experts": a.num_shared_experts,
            "moe_layers": a.moe_layers, "expert_parameters": a.expert_total_params},
        "vision": None if a.vision is None else {
            "parameters": a.vision.params, "layers": a.vision.num_layers, "tokens_per_image": a.vision.tokens_per_image},
    }


def _costs(price: Optional[GpuHourPrice], hours: Optional[float], gpus: int) -> dict[str, Optional[float]]:
    def total(unit: Optional[float]) -> Optional[float]:
        return None if unit is None or hours is None else round(unit * gpus * hours, 2)
    return {"on_demand_cny": total(price.on_demand_cny if price else None),
            "spot_cny": total(price.spot_cny if price else None)}


def _precision_ok(gpu_name: str, precision: str) -> bool:
    """BF16 needs Ampere or newer, FP8 Hopper or Ada (memory fit alone does not make a GPU usable)."""
    gpu = load_catalog().gpu(gpu_name)
    if precision in ("bf16", "bf16-mixed"):
        return gpu.supports_bf16
    if precision == "fp8-mixed":
        return gpu.supports_fp8
    return True


# ---- text ------------------------------------------------------------------------------------

FIT_WORDS = {"fits": "yes", "at_risk": "at risk"}


def _num(v: Optional[float], fmt: str = "{:,.1f}") -> str:
    return "-" if v is None else fmt.format(v)


def _interval(v: Optional[float], iv: Optional[list]) -> str:
    return _num(v, "{:,.0f}") + (f" ({iv[0]:,.0f}-{iv[1]:,.0f})" if v is not None and iv else "")


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
    lines.append("")
    lines.append(f"Fit and speed per GPU model ({doc['gpus']} GPU(s); costs for all of them)")
    fit_rows = [[g["gpu"], f"{g['usable_gib']:.1f}", FIT_WORDS.get(g["fit"]) or ("tight" if g["margin_gib"] >= 0 else "no"),
                 f"{g['margin_gib']:+.1f}", _interval(g["tokens_per_second_per_gpu"], g["tokens_per_second_per_gpu_interval"]),
                 _num(g["hours"], "{:,.2f}"),
                 _num(g["on_demand_cny"], "{:,.0f}"), _num(g["spot_cny"], "{:,.0f}"),
                 "" if g["precision_supported"] else f"no {t['precision'].split('-')[0].upper()}"]
                for g in doc["per_gpu"]]
    lines.append(render_table(["GPU", "USABLE GiB", "FITS", "MARGIN GiB", "TOKENS/S/GPU (80 % INTERVAL)", "HOURS",
                               "CNY ON-DEMAND", "CNY SPOT (EST.)", "NOTE"], fit_rows, align="lrlrrrrrl"))
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
        lines.append(f"Fits no listed GPU model with {doc['gpus']} GPU(s). What would make it fit "
                     f"(sized for the roomiest, {doc['suggestions_for']}):")
        lines += [f"  - {s}" for s in doc["suggestions"]] or ["  - nothing the model knows of; split the model "
                                                              "(tensor/pipeline parallelism)"]
    if doc["assumptions"]:
        lines.append("")
        lines.append("Rests on (not confirmed by the H200 calibration):")
        lines += [f"  - {a}" for a in doc["assumptions"]]
    return "\n".join(lines)
