"""`trainstack catalog [show]`: the GPU instance catalog as a table, in the style of `sky show-gpus`.

One row per instance type: GPU, GPUs per node, type, usable GiB per GPU, vCPU, RAM, the
intra-node GPU link, RDMA, the boot mode the family doc states (with its source tag; ``--json``
carries the quote), and the on-demand and spot price (CNY/h) in ``--region``. Unknown is
shown as ``-`` (never 0); a price borrowed from another mainland region carries ``*``; a spot
price that is only an estimate reads ``~X (est.)``. The price date and its age are printed, with
a warning on stderr when the prices are older than ``--max-age-days``.

Sub-actions live under ``catalog``: ``show`` (the default, here) and ``refresh``, which is added
by ``trainstack/commands/catalog_refresh.py`` (see ``ACTIONS``).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import difflib
import importlib
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any, Optional

from ..catalog import Catalog, GpuModel, ResolvedInstance, load_catalog
from ..catalog.price_book import display_path, read_price_book
from ..clock import today
from ..errors import InputError, Problem, did_you_mean
from ..textable import render_table

#: Optional ``catalog`` sub-actions, each in ``trainstack/commands/catalog_<name>.py`` exposing
#: ``register(actions)`` (like a top-level command). ``refresh`` plugs in here.
ACTIONS = ("refresh",)

INTERCONNECTS = ("nvlink", "nvswitch", "pcie", "unverified")
_LINK_LABEL = {"nvlink": "NVLink", "nvswitch": "NVSwitch", "pcie": "PCIe", "unverified": "unverified"}
_STATUS_NOTE = {"not-recommended": "not recommended", "contact-sales": "contact sales",
                "invitational-preview": "invitational preview"}


def register(sub) -> None:
    p = sub.add_parser(
        "catalog", help="list GPU instance types with prices (catalog [show])",
        description="List the GPU instance types of the catalog with usable GPU memory, "
                    "interconnect, RDMA and on-demand / spot prices for one region.")
    _add_show_options(p, suppress=False)
    p.set_defaults(func=run_show, catalog_command="show")

    actions = p.add_subparsers(dest="catalog_command", metavar="[ACTION]", parser_class=type(p))
    show = actions.add_parser("show", help="the catalog table (default)",
                              description="List the catalog's GPU instance types (the default action).")
    # SUPPRESS: options given before `show` (`catalog --gpu A10 show`) are not reset by show's defaults
    _add_show_options(show, suppress=True)
    show.set_defaults(func=run_show)

    # ---- further actions: `catalog refresh` registers itself here --------------------------
    for name in ACTIONS:
        module = f"{__package__}.catalog_{name}"
        if importlib.util.find_spec(module) is not None:
            importlib.import_module(module).register(actions)


def _add_show_options(p: argparse.ArgumentParser, *, suppress: bool) -> None:
    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    p.add_argument("--gpu", action="append", metavar="MODEL", default=default(None),
                   help="only this GPU model (repeatable or comma-separated; A100 = every A100)")
    p.add_argument("--min-gpu-memory", type=float, metavar="GIB", default=default(None),
                   help="only GPUs with at least this much memory per GPU, as sold (an 80 GB A100 counts as 80)")
    p.add_argument("--interconnect", action="append", choices=INTERCONNECTS, default=default(None),
                   help="only this intra-node GPU link (repeatable)")
    p.add_argument("--region", default=default(None),
                   help="region for prices (default: the catalog's default_region, cn-shenzhen)")
    p.add_argument("--all", action="store_true", default=default(False),
                   help="also list families not meant for training (inference-only parts, "
                        "GPUs no source names)")
    p.add_argument("--max-age-days", type=int, metavar="DAYS", default=default(None),
                   help="warn when prices are older than this (default: settings price_max_age_days)")
    p.add_argument("--price-book", metavar="PATH", default=default(None),
                   help="the team's price book (YAML, docs/prices.md): its prices and discounts replace the public ones "
                        "and are marked as the team's; its PAI-DLC spec and quota prices are listed below")
    p.add_argument("--json", action="store_true", default=default(False),
                   help="print machine-readable JSON")


# ---- the command ----------------------------------------------------------------------------

def run_show(args) -> int:
    catalog = load_catalog()
    if getattr(args, "price_book", None):
        catalog = catalog.with_price_book(read_price_book(args.price_book, catalog,
                                                          display=display_path(Path(args.price_book))))
    region = args.region or catalog.settings.get("default_region", "cn-shenzhen")
    catalog.check_region(region, path="--region")
    gpus = _gpu_filter(catalog, args.gpu)
    if args.min_gpu_memory is not None and args.min_gpu_memory < 0:
        raise InputError("--min-gpu-memory must be >= 0",
                         problems=[Problem(path="--min-gpu-memory", message="must be >= 0",
                                           given=args.min_gpu_memory, has_given=True)])
    max_age = args.max_age_days if args.max_age_days is not None else int(
        catalog.settings.get("price_max_age_days", 90))
    if max_age < 0:
        raise InputError("--max-age-days must be >= 0",
                         problems=[Problem(path="--max-age-days", message="must be >= 0",
                                           given=max_age, has_given=True)])

    rows = [r for r in catalog.resolved_instances() if _keep(r, args, gpus)]
    quotes = {r.name: catalog.quote(region, r.name) for r in rows}
    rows.sort(key=lambda r: _sort_key(r, quotes[r.name]))

    price_date = catalog.newest_price_date
    age = _age_days(price_date)
    stale = age is None or age > max_age
    if stale:
        how_old = "of unknown age" if age is None else f"{age} days old"
        print(f"trainstack: warning: catalog prices are {how_old} (as of {price_date}; limit "
              f"{max_age} days); refresh them with `trainstack catalog refresh`", file=sys.stderr)

    if args.json:
        out = {
            "region": region,
            "price_date": price_date,
            "oldest_price_date": catalog.snapshot_date,
            "price_age_days": age,
            "max_age_days": max_age,
            "prices_stale": stale,
            "spot_estimate_fraction": float(catalog.settings["spot_estimate_fraction"]),
            "count": len(rows),
            "rows": [_json_row(r, quotes[r.name]) for r in rows],
            "price_book": _book_json(catalog, region),
        }
        print(json.dumps(out, indent=2))
        return 0

    age_text = "unknown age" if age is None else f"{age} days old"
    print(f"GPU instance types, prices in {region} (CNY/h, on-demand as of {price_date}, {age_text})")
    if not rows:
        print("No instance types match the filters.")
        unsold = sorted(g for g in gpus or () if catalog.gpus[g].estimate_only)
        if unsold:
            print(f"{', '.join(unsold)}: not sold as an ECS instance type in this catalog "
                  "(kept for estimates only).")
        return 0
    headers = ["GPU", "QTY", "INSTANCE TYPE", "GiB/GPU", "vCPU", "RAM GiB", "INTERCONNECT",
               "RDMA", "BOOT", "ON-DEMAND", "SPOT", "NOTE"]
    print(render_table(headers, [_text_row(r, quotes[r.name]) for r in rows], align="lrlrrrlllrrl"))
    frac = float(catalog.settings["spot_estimate_fraction"])
    notes = ["GiB/GPU: usable GPU memory (GiB = 2^30 B); '-' = unknown."]
    if any(q.on_demand_from_region for q in quotes.values()):
        notes.append(f"*: {region} lists no price; median of the other mainland-China regions (estimate).")
    if any(q.source_kind == "price-book" for q in quotes.values()):
        notes.append(f"+: the team's price from price book {catalog.price_book.path} (its date and source: "
                     "`--json` or `trainstack resolve`).")
    if any(q.spot_estimated and q.spot_cny_per_hour is not None for q in quotes.values()):
        notes.append(f"~X (est.): spot estimated at {frac:.0%} of the list on-demand price (an assumption); real "
                     "spot prices come from `trainstack catalog refresh`.")
    if any(r.family.boot_mode for r in rows):
        notes.append("BOOT: the boot mode the family doc states [source tag; `--json` has its words]; '-': "
                     "not stated, the default image family is used.")
    notes.append("Multi-GPU training inside one node needs NVLink or NVSwitch.")
    print()
    print("\n".join(notes))
    _print_book_extras(catalog, region)
    return 0


def _book_json(catalog: Catalog, region: str) -> Optional[dict[str, Any]]:
    book = catalog.price_book
    if book is None:
        return None
    def row(e) -> dict[str, Any]:
        common = {"region": e.region, "kind": e.kind, "name": e.subject, "as_of": e.as_of.isoformat(),
                  "age_days": _age_days(e.as_of.isoformat()), "source": e.source,
                  "in_region": e.region in (region, "*")}
        if e.kind == "discount":
            return {**common, "scope": e.scope, "discount_percent": e.discount_percent,
                    "applies_to": list(e.applies_to)}
        return {**common, "per": e.unit, "on_demand_cny_per_hour": e.on_demand_cny_per_hour,
                "spot_cny_per_hour": e.spot_cny_per_hour}

    return {"path": book.path, "entries": [row(e) for e in book.entries]}


def _print_book_extras(catalog: Catalog, region: str) -> None:
    """The price book's PAI-DLC spec and quota prices (no ECS row shows them)."""
    book = catalog.price_book
    if book is None:
        return
    rows = [[e.region, "DLC spec" if e.kind == "dlc_spec" else "quota", e.subject, e.unit,
             _num(e.on_demand_cny_per_hour), _num(e.spot_cny_per_hour), e.as_of.isoformat(),
             str(_age_days(e.as_of.isoformat())), e.source] for e in book.entries
            if e.kind not in ("instance_type", "discount")]
    cuts = [[e.region, e.scope, e.subject or "(every type)", f"{e.discount_percent:g} %", ", ".join(e.applies_to),
             e.as_of.isoformat(), e.source] for e in book.discounts]
    dates = sorted(e.as_of for e in book.entries)
    print()
    print(f"Price book {book.path}: {len(book.entries)} team price(s), as of "
          f"{dates[0].isoformat()}..{dates[-1].isoformat()}" if dates else f"Price book {book.path}: empty")
    if rows:
        print(render_table(["REGION", "KIND", "NAME", "PER", "ON-DEMAND", "SPOT", "AS OF", "AGE DAYS", "SOURCE"],
                           rows, align="lllrrrlrl"))
    if cuts:
        print("Discounts off the list price (precedence: docs/prices.md):")
        print(render_table(["REGION", "SCOPE", "NAME", "DISCOUNT", "APPLIES TO", "AS OF", "SOURCE"], cuts,
                           align="lllrlll"))


# ---- filters --------------------------------------------------------------------------------

def _gpu_filter(catalog: Catalog, given: Optional[list[str]]) -> Optional[set[str]]:
    """GPU names selected by ``--gpu``; a bare family name (A100, V100) selects every variant."""
    if not given:
        return None
    chosen: set[str] = set()
    for raw in given:
        for name in (n.strip() for n in raw.split(",")):
            if not name:
                continue
            key = _gpu_key(name)
            exact = [g for g in catalog.gpus if _gpu_key(g) == key]
            variants = [g for g in catalog.gpus if g.lower().startswith(key + "-")]
            if exact or variants:
                chosen.update(exact or variants)
                continue
            raise InputError(
                f"unknown GPU model {name!r}",
                problems=[Problem(path="--gpu", message="unknown GPU model", given=name, has_given=True,
                                  allowed=", ".join(sorted(catalog.gpus)),
                                  suggestions=_suggest(key, catalog.gpus))])
    return chosen


def _gpu_key(name: str) -> str:
    """``NVIDIA A100 80GB`` -> ``a100-80g``: how a user may spell a catalog GPU name."""
    key = name.strip().lower()
    for prefix in ("nvidia ", "nvidia-", "tesla ", "tesla-"):
        key = key.removeprefix(prefix)
    key = "-".join(key.replace("_", " ").split())
    return key[:-1] if key.endswith("gb") else key


def _suggest(given: str, names) -> list[str]:
    """did_you_mean, with a looser second try so short model names still get an answer."""
    names = list(names)
    hits = did_you_mean(given, names)
    if not hits:
        pool = {n.lower(): n for n in names}
        hits = [pool[h] for h in difflib.get_close_matches(given.lower(), list(pool), n=3, cutoff=0.4)]
    return hits


def _keep(r: ResolvedInstance, args, gpus: Optional[set[str]]) -> bool:
    if not args.all and not r.trainable:
        return False
    if gpus is not None and (r.gpu is None or r.gpu.name not in gpus):
        return False
    if args.min_gpu_memory is not None and (r.gpu is None or r.gpu.memory_gb < args.min_gpu_memory):
        return False
    if args.interconnect and r.interconnect not in args.interconnect:
        return False
    return True


def _sort_key(r: ResolvedInstance, q) -> tuple:
    price = q.on_demand_cny_per_hour
    return (r.gpu is None, r.gpu.name if r.gpu else r.family.name, r.gpu_count,
            price is None, price or 0.0, r.name)


# ---- rendering ------------------------------------------------------------------------------

def _age_days(date_text: str) -> Optional[int]:
    try:
        as_of = _dt.date.fromisoformat(date_text)
    except (TypeError, ValueError):
        return None
    return (_today() - as_of).days


def _today() -> _dt.date:  # a seam for tests; the shared clock (TRAINSTACK_TODAY pins it)
    return today()


def _num(value: Optional[float], digits: int = 2, *, trim: bool = False) -> str:
    """``value`` with ``digits`` decimals; ``-`` for unknown (never 0)."""
    if value is None:
        return "-"
    text = f"{value:.{digits}f}"
    if trim and "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def _rdma_text(r: ResolvedInstance) -> str:
    kind = r.rdma
    if kind == "none":
        return "-"
    if kind == "unverified":
        return "unverified"
    label = {"erdma": "eRDMA", "roce": "RoCE"}.get(kind, kind)
    bw = r.type.rdma_bandwidth_gbps
    if bw is None:
        return label
    bound = "<=" if "rdma_bandwidth_gbps" in r.type.unverified else ""
    return f"{label} {bound}{_num(bw, 0)}G"


def _note(r: ResolvedInstance, q) -> str:
    notes = []
    if r.family.status in _STATUS_NOTE:
        notes.append(_STATUS_NOTE[r.family.status])
    if not r.family.training:
        notes.append("not for training")
    if r.gpu is None or "gpu" in r.family.unverified or "name" in r.gpu.unverified:
        notes.append("GPU unverified")
    if not q.seen_in_region:
        notes.append("not seen in region")
    return "; ".join(notes)


def _boot_text(r: ResolvedInstance) -> str:
    mode, cite = r.family.boot_mode, r.family.cite("boot_mode")
    if mode is None:
        return "-"
    label = mode.upper() if mode != "uefi-preferred" else mode
    return label + (f" [{cite.source}]" if cite else "")


def _boot_json(r: ResolvedInstance) -> Optional[dict[str, Any]]:
    cite = r.family.cite("boot_mode")
    return None if cite is None else {"tag": cite.source, "quote": cite.quote, "url": cite.url}


def _text_row(r: ResolvedInstance, q) -> list[str]:
    g: Optional[GpuModel] = r.gpu
    on_demand = _num(q.on_demand_cny_per_hour)
    if q.on_demand_from_region and q.on_demand_cny_per_hour is not None:
        on_demand += "*"
    if q.source_kind == "price-book":
        on_demand += "+"
    if q.spot_cny_per_hour is None:
        spot = "-"
    elif q.spot_estimated:
        spot = f"~{_num(q.spot_cny_per_hour)} (est.)"
    else:
        spot = _num(q.spot_cny_per_hour)
    return [
        g.name if g else "-",
        str(r.gpu_count),
        r.name,
        _num(g.usable_gib) if g else "-",
        "-" if r.type.vcpu is None else str(r.type.vcpu),
        _num(r.type.memory_gib, 1, trim=True),
        _LINK_LABEL.get(r.interconnect, r.interconnect),
        _rdma_text(r),
        _boot_text(r),
        on_demand,
        spot,
        _note(r, q),
    ]


def _json_row(r: ResolvedInstance, q) -> dict[str, Any]:
    g = r.gpu
    return {
        "gpu": g.name if g else None,
        "gpu_count": r.gpu_count,
        "instance_type": r.name,
        "family": r.family.name,
        "usable_gib_per_gpu": g.usable_gib if g else None,
        "gpu_memory_gb": g.memory_gb if g else None,
        "vcpu": r.type.vcpu,
        "memory_gib": r.type.memory_gib,
        "interconnect": r.interconnect,
        "multi_gpu_training_ok": r.multi_gpu_training_ok,
        "rdma": r.rdma,
        "boot_mode": r.family.boot_mode,
        "boot_mode_source": _boot_json(r),
        "eri_count": r.type.eri_count,
        "rdma_bandwidth_gbps": r.type.rdma_bandwidth_gbps,
        "network_bandwidth_gbps": r.type.network_bandwidth_gbps,
        "status": r.family.status,
        "trainable": r.trainable,
        "on_demand_cny_per_hour": q.on_demand_cny_per_hour,
        "on_demand_from_region": q.on_demand_from_region,
        "spot_cny_per_hour": q.spot_cny_per_hour,
        "spot_estimated": q.spot_estimated,
        "seen_in_region": q.seen_in_region,
        "zones": list(q.zones),
        "price_as_of": q.as_of,
        "price_source": q.source_kind,
        "price_source_text": q.source,
        "labels": list(q.labels),
        "unverified": {"type": list(r.type.unverified), "family": list(r.family.unverified),
                       "gpu": list(g.unverified) if g else []},
    }
