"""`trainstack estimate PROFILE [--gpu MODEL] [--gpus N] [--json]`: memory, fit, speed, hours, cost.

Every GPU model is sized by the resolver's own engine (trainstack.placement.sizing_table, issue 36):
the node counts, the layout search, the calibration overlay and the fit rule ``resolve`` applies, so
the two never disagree on a layout or on the memory it needs. A job that fits no GPU is not an error
here (exit 0, every ``fits`` false, plus suggestions); the resolver is the command that refuses
infeasible jobs.
"""

from __future__ import annotations

import json
from typing import Optional

from .. import calibration_overlay as cal
from ..catalog import load_catalog
from ..catalog.models import TRAINING_RDMA
from ..catalog.price_book import catalog_for
from ..errors import InputError, Problem
from ..placement.sizing_table import GpuSizing, describes, sizing_table
from ..profile import TrainingProfile, load_profile
from ..rules import check_profile
from ..sizing import assumptions, fit_suggestions, throughput_estimate
from ..sizing import constants as K
from ..sizing.estimate import min_margin_gib
from .estimate_json import prices_block, row_price, to_json
from .estimate_text import render_text


def register(sub) -> None:
    p = sub.add_parser("estimate", help="predict peak GPU memory, fit, speed, hours and cost of a profile")
    p.add_argument("profile", help="path to a profile YAML")
    p.add_argument("--gpu", metavar="MODEL", help="one catalog GPU model (e.g. H200); default: every GPU")
    p.add_argument("--gpus", metavar="N", type=int,
                   help="total GPUs (default: resources.gpus; `auto`: the node counts resolve tries, up to max_nodes)")
    p.add_argument("--network-gbps", metavar="N", type=float,
                   help="node network in Gbit/s per node for multi-node speed (a fabric the catalog does not sell, "
                        "or the one you have); default: the instance type's")
    p.add_argument("--json", action="store_true", help="print JSON (contract: docs/sizing.md)")
    p.set_defaults(func=run)


def run(args) -> int:
    profile = load_profile(args.profile)
    catalog = load_catalog()
    check_profile(profile, catalog, file=args.profile)
    catalog = catalog_for(profile, catalog)  # the team's prices first (price_book)
    gpus = [catalog.gpu(args.gpu, path="--gpu")] if args.gpu else list(catalog.gpus.values())
    count = _gpu_count(args.gpus, profile)
    if count is not None:
        _check_world(profile, count)
    gbps = _network_gbps(getattr(args, "network_gbps", None))
    rows = sizing_table(profile, catalog, gpus, count)
    if gbps is not None:
        rows = [what_if_network(profile, catalog, r, gbps) for r in rows]
    desc, why = describes(rows, gpus[0].name if args.gpu else None)
    margin = memory_margin_fraction(profile)
    prices = {r.gpu.name: row_price(catalog, profile.region, r) for r in rows} if profile.training.tokens else {}
    suggestions: list[str] = []
    fits_anywhere = any(r.fit != "does_not_fit" for r in rows)
    roomiest = max(gpus, key=lambda g: g.usable_gib)
    if not fits_anywhere:
        suggestions = fit_suggestions(profile.architecture, profile.training,
                                      roomiest.usable_gib - min_margin_gib(roomiest.usable_gib, margin), desc.gpus)
    labels = list(assumptions(profile.architecture, profile.training, desc.gpus, "default")) + list(desc.labels)
    if allocator_of(profile) == "expandable":
        labels.append("job.env sets expandable_segments:True: sized, like `trainstack resolve`, with PyTorch's "
                      "default allocator (the safe side; expandable segments usually cache less)")
    doc = to_json(profile, rows, desc, why, prices, margin, suggestions, labels)
    doc["prices"] = prices_block(catalog, profile.region, doc, prices)
    overlay = cal.load_overlay()
    calibrations = [e for e in (overlay.find(cal.workload_key(profile.architecture, profile.training, r.gpu.name))
                                for r in rows) if e is not None] if overlay.entries else []
    doc["calibration"] = [{"gpu": e.key.gpu, "throughput_factor": e.throughput_factor,
                           "memory_factor": e.applied_memory_factor, "measured_by": f"{e.source.stack} {e.source.node}",
                           "heartbeat_at": e.source.heartbeat_at, "calibrated_at": e.calibrated_at}
                          for e in calibrations]
    doc["assumptions"] = list(dict.fromkeys([e.label() for e in calibrations] + doc["assumptions"]))
    if suggestions or not fits_anywhere:
        doc["suggestions_for"] = f"{roomiest.name}, {roomiest.usable_gib:g} GiB"
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print(render_text(doc))
    return 0


def what_if_network(profile: TrainingProfile, catalog, row: GpuSizing, gbps: float) -> GpuSizing:
    """``row`` with its speed re-sized on a ``--network-gbps`` node network (its layout, chosen by the engine
    on the real network, is kept; a what-if, labelled)."""
    if row.nodes < 2:
        return row
    inst = catalog.instance(row.instance_type) if row.instance_type else None
    network = inst.rdma if inst is not None and inst.rdma in TRAINING_RDMA else "roce"
    thr = throughput_estimate(profile.architecture, profile.training, row.gpu, gpus_per_node=row.gpus_per_node,
                              nodes=row.nodes, interconnect=inst.interconnect if inst else "nvlink", network=network,
                              network_gbps=gbps, layout=row.sizing_layout)
    _, thr, _ = cal.adjust(profile.architecture, profile.training, row.gpu.name, row.memory, thr)
    label = f"node network {gbps:g} Gbit/s per node (--network-gbps, what-if; layout kept from the real network)"
    return GpuSizing(**{**row.__dict__, "throughput": thr, "labels": (*row.labels, label)})


def _check_world(profile: TrainingProfile, count: int) -> None:
    """--gpus must hold the profile's tensor x pipeline x context degrees (the world size is their product
    times data parallel)."""
    mp = profile.training.model_parallel
    if count % mp:
        raise InputError(f"--gpus {count} cannot hold the profile's layout", problems=[Problem(
            path="--gpus", given=count, has_given=True,
            message=f"tensor x pipeline x context parallel = {mp} must divide the GPU count",
            allowed=f"a multiple of {mp}")])


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


def _gpu_count(flag: Optional[int], profile: TrainingProfile) -> Optional[int]:
    """``--gpus``, else resources.gpus; None for ``auto`` (the engine tries every node count)."""
    if flag is not None:
        if not 1 <= flag <= 8192:
            raise InputError(f"--gpus {flag} is out of range", problems=[Problem(
                path="--gpus", message="must be a whole number from 1 to 8192", given=flag, has_given=True)])
        return flag
    return profile.resources.gpus if isinstance(profile.resources.gpus, int) else None
