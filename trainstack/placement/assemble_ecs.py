"""The ECS parts of a Plan (trainstack.placement.assemble): the nodes' pricing and spot bid, storage,
network and RDMA, image, the self-healing pool, and the labels and reasons a reader checks."""

from __future__ import annotations

from typing import Any, Optional

from ..catalog import Catalog
from ..layout import plan_image, plan_network, plan_spot_pool
from ..layout.capacity import capacity_labels, plan_capacity
from ..layout.network import pool_tcp_note
from ..layout.replacement import estimate_replacement, replacement_labels
from ..plan import SpotPoolPlan, spot_price_limit
from ..profile import TrainingProfile
from .assembly import Choice, Collector, layout_reasons
from .cost import candidate_storage
from .engine import SPOT_RESTART_ALLOWANCE, anchor_nodes
from .healing import node_prices, pool_prices
from .layouts import LayoutPick


def ecs_parts(profile: TrainingProfile, catalog: Catalog, choice: Choice, pick: LayoutPick, mem,
              collect: Collector) -> Optional[dict[str, Any]]:
    best, inst, quote = choice.best, choice.inst, choice.quote
    stated = profile.resources.spot_price_limit
    limit = None
    if best.spot:
        limit = spot_price_limit(stated) if stated else (
            spot_price_limit(quote.on_demand_cny_per_hour) if quote.on_demand_cny_per_hour else None)
    storage = collect.run(lambda: candidate_storage(profile, "ecs", inst, best.nodes, best.spot, mem.trainable_params),
                          "storage")
    network = collect.run(lambda: plan_network(profile, inst, best.nodes, best.spot,
                                               services=storage is not None and storage.cpfs is not None), "network")
    image = collect.run(lambda: plan_image(profile, inst), "image")
    pool = collect.run(lambda: plan_spot_pool(profile, best.nodes, best.spot, limit), "resources.self_healing")
    if storage is None or network is None or image is None or pool is None:
        return None
    spot_pool, pool_labels = pool
    if spot_pool is not None:
        spot_pool, more = with_replacement(spot_pool, best, quote, network.rdma, image.provides, storage)
        pool_labels = [*pool_labels, *more]
    # the fallback order `trainstack up` tries and the capacity reservation (layout/capacity.py)
    capacity = collect.run(lambda: plan_capacity(profile, catalog, best, tuple(choice.alternatives)), "resources.capacity")
    if capacity is None:
        return None
    return {
        "gpu": inst.gpu, "zone": best.zone, "instance_type": inst.name, "spot": best.spot, "spot_price_limit": limit,
        "spot_price_limit_source": ("profile" if stated else "on-demand price") if limit is not None else None,
        "storage": storage, "network": network, "image": image, "spot_pool": spot_pool,
        "self_healing": profile.resources.self_healing,
        "capacity": capacity,
        "labels": tuple(dict.fromkeys(ecs_labels(profile, catalog, choice, limit, storage.notes, pool_labels)
                                      + capacity_labels(capacity))),
        "reasons": tuple(ecs_reasons(profile, choice, pick, mem, network.rdma)),
    }


def with_replacement(pool: SpotPoolPlan, best, quote, rdma: str, provides: tuple[str, ...], storage):
    """The pool with its per-preemption model (trainstack.layout.replacement) and the labels on it."""
    od, spot = node_prices(quote, best.gpus_per_node)
    hours = best.estimated_hours
    est = estimate_replacement(
        nodes=best.nodes, rdma=rdma, provides=provides, storage=storage, node0_hourly=od if pool.anchor else None,
        pool_node_hourly=spot, allowance_hours=hours * (1 - 1 / SPOT_RESTART_ALLOWANCE) if hours else None,
        join_timeout_seconds=pool.join_timeout_seconds if pool.anchor else None)
    return pool.model_copy(update={"replacement": est}), replacement_labels(est)


def ecs_reasons(profile: TrainingProfile, choice: Choice, pick: LayoutPick, mem, rdma: str) -> list[str]:
    best = choice.best
    reasons = [
        f"{best.instance_type}: {best.nodes} x {best.gpus_per_node} {best.gpu_model}, "
        f"{'spot' if best.spot else 'on-demand'}, cheapest feasible by {profile.resources.objective}",
        f"memory: needs {mem.required_gib_per_gpu:.1f} GiB per GPU, margin {best.memory_margin_gib:.1f} GiB",
    ]
    if best.nodes > 1:
        reasons.append(f"{best.nodes} nodes over {rdma} in zone {best.zone or '(chosen at deploy)'}")
    return reasons + layout_reasons(profile, pick, f"{best.nodes} x {best.gpus_per_node} {best.gpu_model}")


def ecs_labels(profile: TrainingProfile, catalog: Catalog, choice: Choice, limit: Optional[float],
               storage_notes: tuple[str, ...], pool_labels: list[str]) -> list[str]:
    best = choice.best
    stated = profile.resources.spot_price_limit
    labels = list(best.labels) + list(choice.labels)
    if best.zone is None:
        labels.append("zone chosen at deploy time from current stock (not seen in the price snapshot)")
    known_zones = sorted({z for p in catalog.prices.get(profile.region, {}).values() for z in p.zones})
    if profile.zone and known_zones and profile.zone not in known_zones:
        labels.append(f"zone {profile.zone} never appears in the catalog for {profile.region} (seen: "
                      f"{', '.join(known_zones)}): check its name before `pulumi up` (`trainstack preflight`)")
    if best.spot:
        labels.append(f"spot hours include a {SPOT_RESTART_ALLOWANCE - 1:.0%} allowance for interruptions and restarts")
        labels.append(f"spot price limit {limit} CNY/h, stated by the profile (resources.spot_price_limit)" if stated
                      else f"spot price limit {limit} CNY/h = the on-demand price (never pay more than on-demand; "
                           "kept after creation, so a catalog refresh never replaces running spot nodes)")
    if profile.training.tokens is None:
        labels.append("training.tokens not set: no hours or total cost; ranked by hourly cost")
    labels += list(storage_notes)
    labels += pool_labels
    if tcp_note := pool_tcp_note(profile, choice.inst, best.nodes, best.spot):
        labels.append(tcp_note)
    if anchor_nodes(profile, best.target, best.nodes, best.spot):
        prices = pool_prices(choice.quote, best.gpus_per_node, best.nodes)
        labels += prices.labels(best.nodes) if prices else []
    return labels
