"""The ``trainstack estimate --json`` document (contract: docs/sizing.md, "estimate --json").

Every GPU row comes from the resolver's engine (trainstack.placement.sizing_table): its layout, nodes,
instance type, memory, fit and speed; the top-level ``memory``, ``throughput``, ``hours`` and ``cost``
describe one row, named by ``memory.describes``.
"""

from __future__ import annotations

from typing import Any, Optional

from ..catalog import Catalog, load_catalog
from ..placement.engine import hourly_price
from ..placement.prices import provenance
from ..placement.sizing_table import GpuSizing
from ..profile import TrainingProfile
from ..sizing import GpuHourPrice, gpu_hour_price
from ..sizing.estimate import gpu_fit
from ..sizing.frameworks import attention_kind, searchable_degrees


def _round(v: Optional[float], nd: int = 2) -> Optional[float]:
    return None if v is None else round(v, nd)


def row_price(catalog: Catalog, region: str, row: GpuSizing) -> GpuHourPrice:
    """Per-GPU-hour prices of the row's own instance type (engine.hourly_price: per node or per GPU);
    a row on assumed nodes: the cheapest type of its GPU model, as before issue 36."""
    if row.instance_type is None:
        return gpu_hour_price(catalog, region, row.gpu.name)
    quote, n = catalog.quote(region, row.instance_type), row.gpus_per_node
    on_demand, spot = hourly_price(quote, n, 1, False), hourly_price(quote, n, 1, True)
    if on_demand is None:
        return GpuHourPrice(gpu=row.gpu.name, region=region, instance_type=row.instance_type, gpus_per_instance=n,
                            labels=(f"no price known for {row.instance_type} in {region}",))
    labels = (f"{row.gpu.name} priced per GPU-hour from {row.instance_type} ({n} GPU, {on_demand:g} CNY/h on "
              "demand per node)",) + quote.labels + quote.spot_labels
    return GpuHourPrice(gpu=row.gpu.name, region=region, instance_type=row.instance_type, gpus_per_instance=n,
                        on_demand_cny=round(on_demand / n, 4), spot_cny=None if spot is None else round(spot / n, 4),
                        labels=labels)


def _hours(tokens: Optional[float], row: GpuSizing) -> Optional[float]:
    tps = row.throughput.tokens_per_second
    return tokens / tps / 3600 if tokens and tps else None


def per_gpu_row(profile: TrainingProfile, row: GpuSizing, price: Optional[GpuHourPrice],
                margin_fraction: float) -> dict[str, Any]:
    t, s, fit = profile.training, row.throughput, gpu_fit(row.memory, row.gpu, margin_fraction)
    hours = _hours(t.tokens, row)
    return {
        "gpu": row.gpu.name, "usable_gib": fit.usable_gib, "fits": fit.fits, "fit": fit.fit,
        "margin_gib": fit.margin_gib, "min_margin_gib": fit.min_margin_gib,
        "precision_supported": _precision_ok(row.gpu.name, t.precision),
        "tokens_per_second_per_gpu": s.tokens_per_second_per_gpu,
        "tokens_per_second_per_gpu_interval": s.tokens_per_second_per_gpu_interval, "layout": s.layout,
        "hours": _round(hours, 3), **_costs(price, hours, row.gpus),
        # issue 36: where the row was sized, by the resolver's engine
        "parallel_layout": row.layout.model_dump(mode="json"), "gpus": row.gpus, "nodes": row.nodes,
        "gpus_per_node": row.gpus_per_node, "instance_type": row.instance_type, "sized_on": row.sized_on,
        "required_gib_per_gpu": round(row.memory.required_gib_per_gpu, 2),
        "required_gib_interval": row.memory.required_gib_interval,
        "resolve_feasible": row.feasible, "reason": row.reason, "reason_code": row.reason_code,
    }


def to_json(profile: TrainingProfile, rows: list[GpuSizing], desc: GpuSizing, why: str,
            prices: dict[str, GpuHourPrice], margin_fraction: float, suggestions: list[str],
            labels: list[str]) -> dict[str, Any]:
    """The ``estimate --json`` document; ``desc``: the row the top level describes (``why``)."""
    t, mem, speed = profile.training, desc.memory, desc.throughput
    lay = desc.layout
    dp = lay.data_parallel
    per_gpu = [per_gpu_row(profile, r, prices.get(r.gpu.name), margin_fraction) for r in rows]
    fits = [gpu_fit(r.memory, r.gpu, margin_fraction) for r in rows]
    labels = list(dict.fromkeys(labels + list(speed.labels)))
    arch = profile.architecture
    doc: dict[str, Any] = {
        "profile": profile.name, "model": model_json(profile), "params": mem.params,
        "trainable_params": mem.trainable_params, "gpus": desc.gpus,
        "training": {"method": t.method, "precision": t.precision, "optimizer": t.optimizer,
                     "framework": t.framework, "loss": t.loss, "attention": attention_kind(t),
                     "fp8_recipe": t.fp8_recipe, "sharding": t.sharding or "full",
                     "micro_batch_size": t.micro_batch_size, "sequence_length": t.sequence_length,
                     "gradient_checkpointing": t.gradient_checkpointing, "zero_stage": t.zero_stage,
                     "gradient_accumulation_steps": t.accumulation_steps(dp),
                     "global_batch_size": t.global_batch(dp),
                     "tokens_per_step": t.global_batch(dp) * t.sequence_length,
                     "expert_parallel": t.expert_parallel if arch.is_moe else 1,
                     "tensor_parallel": lay.tensor_parallel, "pipeline_parallel": lay.pipeline_parallel,
                     "context_parallel": lay.context_parallel, "data_parallel": dp,
                     "virtual_pipeline_stages": lay.virtual_pipeline_stages, "layout": mem.layout,
                     "lora": t.adapters.model_dump() if t.adapters else None, "tokens": t.tokens},
        "memory": {"peak_gib_per_gpu": mem.peak_gib_per_gpu, "reserved_gib_per_gpu": mem.reserved_gib_per_gpu,
                   "peak_stage": mem.peak_stage, "micro_batches_in_flight": mem.micro_batches_in_flight,
                   "required_gib_per_gpu": mem.required_gib_per_gpu, "allocator": mem.allocator,
                   "breakdown_gib": mem.breakdown_gib, "peak_phase": mem.peak_phase,
                   "phases_gib": mem.phases_gib, "peak_gib_interval": mem.peak_gib_interval,
                   "required_gib_interval": mem.required_gib_interval, "interval_class": mem.interval_class,
                   "fits": [f.model_dump() for f in fits],
                   "describes": {"gpu": desc.gpu.name, "layout": lay.model_dump(mode="json"), "nodes": desc.nodes,
                                 "gpus_per_node": desc.gpus_per_node, "instance_type": desc.instance_type,
                                 "why": why}},
        "throughput": {
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
        "per_gpu": per_gpu, "fits_any_gpu": any(f.fits for f in fits), "suggestions": suggestions,
    }
    if t.tokens is not None:
        hours, price = _hours(t.tokens, desc), prices.get(desc.gpu.name)
        doc["hours"] = _round(hours, 3)
        doc["cost"] = {"gpu": desc.gpu.name, "instance_type": price.instance_type if price else None,
                       "on_demand_cny_per_gpu_hour": price.on_demand_cny if price else None,
                       "spot_cny_per_gpu_hour": price.spot_cny if price else None,
                       **_costs(price, hours, desc.gpus)}
        if price:
            labels += [lab for lab in price.labels if lab not in labels]
        priced = [g for g in per_gpu if g["fits"] and g["precision_supported"] and g["on_demand_cny"] is not None
                  and g["sized_on"] != "assumed nodes"]  # a real instance type, not an assumed node
        if priced:
            best = min(priced, key=lambda g: g["on_demand_cny"])
            doc["cheapest"] = {k: best[k] for k in ("gpu", "hours", "on_demand_cny", "spot_cny")}
    unset = sorted(searchable_degrees(t))
    if unset:
        labels.append(f"{', '.join(d + '_parallel' for d in unset)} unset: chosen per GPU model by the layout "
                      f"search `trainstack resolve` runs (per_gpu[].parallel_layout; {t.framework} runs them)")
    doc["assumptions"] = labels
    return doc


def prices_block(catalog: Catalog, region: str, doc: dict[str, Any],
                 prices: dict[str, GpuHourPrice]) -> Optional[dict[str, Any]]:
    """Whose price the costs rest on (``prices.as_of``, ``age_days``, ``source``, ``headline``): the type
    that prices the described GPU, else the cheapest GPU that fits. Each ``per_gpu`` row gets its own
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
