"""A team's own prices (the price book): negotiated, discounted or simply newer than the snapshot.

A YAML file the team keeps in its repository and names with the profile's top-level
``price_book: PATH`` (relative to the profile file; a stack may set ``trainstack:priceBook``)::

    prices:
      - region: cn-beijing
        instance_type: ecs.gn8v-8x.48xlarge      # an ECS type: CNY per node-hour
        on_demand_cny_per_hour: 160.0
        spot_cny_per_hour: 48.0                  # optional
        as_of: 2026-01-15
        source: "account manager quote, contract 2026-017"
      - region: cn-wulanchabu
        dlc_spec: ml.gu7xf.c96m1600.8-gu108      # a PAI-DLC spec (ECS name or Lingjun spec): per pod-hour
        on_demand_cny_per_hour: 210.0
        as_of: 2026-01-15
        source: "PAI console job-creation page"
      - region: cn-wulanchabu
        resource_id: quota1a2b3c4d               # a PAI resource quota: CNY per GPU-hour
        on_demand_cny_per_hour: 19.5
        as_of: 2026-01-01
        source: "subscription 12 x 8 GPU / 730 h, finance"
      - region: "*"                              # a discount: every region (or one region)
        family: gn7i                             # or instance_type: T, or neither (region-wide)
        discount_percent: 15                     # off Alibaba's list price
        applies_to: [on_demand]                  # the default; add spot to discount spot too
        as_of: 2026-01-01
        source: "enterprise agreement 2026, clause 4"

      - region: cn-shenzhen                      # storage: CNY per GiB-month
        storage: cloud_essd                      # cloud_essd | cloud_auto | cpfs | oss
        performance_level: PL3                   # optional: an ESSD PL or a CPFS storage type
        cny_per_gib_month: 3.0
        as_of: 2026-01-10
        source: "account manager quote"
      - region: cn-shenzhen                      # network: CNY per hour of one resource (traffic on top)
        network: nat_gateway                     # nat_gateway | eip
        cny_per_hour: 0.46
        as_of: 2026-01-10
        source: "list price, checked on the console"

An absolute entry names exactly one of ``instance_type``, ``dlc_spec`` or ``resource_id``; an entry
with ``discount_percent`` is a discount, one with ``storage`` or ``network`` a storage or network
price (:mod:`.price_book_models`). The catalog's ``quote()`` takes
the highest-precedence figure (docs/prices.md) and labels it as the team's price.
Loading is typed and bounded: a broken file or entry is an :class:`~trainstack.errors.InputError`
(exit 2) naming the file and the entry (``prices[3].instance_type``).
"""

from __future__ import annotations

import datetime as _dt
import functools
import os
from pathlib import Path
from typing import Any, Iterable, Optional

from pydantic import ValidationError

from ..clock import today as clock_today
from ..errors import InputError, Problem, did_you_mean, value_at
from ..profile.yamlfile import read_yaml_document  # the one reader of user YAML files
from .dlc_specs import dlc_facts
from .price_book_models import (  # noqa: F401  (the price book's public names, read from here)
    ANY_REGION, KINDS, MAX_CNY_PER_GIB_MONTH, MAX_CNY_PER_HOUR, MAX_ENTRIES, RESOURCE_ID, UNIT, DiscountEntry, Entry,
    Kind, NetworkEntry, PriceBook, PriceBookEntry, PriceBookFile, StorageEntry,
)

#: The fields each entry kind allows (for "unknown field" errors).
_FIELDS = {"price": sorted(PriceBookEntry.model_fields), "discount": sorted(DiscountEntry.model_fields),
           "storage": sorted(StorageEntry.model_fields), "network": sorted(NetworkEntry.model_fields)}


def _loc_path(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _problems_from(exc: ValidationError, doc: Any, file: str) -> list[Problem]:
    out = []
    for err in exc.errors():
        raw = tuple(err["loc"])
        tag = next((p for p in raw[2:3] if p in _FIELDS), None)  # the entry kind the discriminator chose
        loc = tuple(p for i, p in enumerate(raw) if not (i == 2 and tag) and not str(p).startswith("function-"))
        has, given = value_at(doc, loc)
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            allowed = _FIELDS[tag or "price"] if len(loc) > 2 else ["prices"]
            out.append(Problem(path=_loc_path(loc), message="unknown field", file=file, given=loc[-1],
                               has_given=True, allowed=", ".join(allowed),
                               suggestions=did_you_mean(str(loc[-1]), allowed)))
            continue
        out.append(Problem(path=_loc_path(loc), message=message, file=file, given=given if has else None,
                           has_given=has and not isinstance(given, (dict, list))))
    return out


@functools.lru_cache(maxsize=16)
def _parse_cached(path: str, _mtime_ns: int, _size: int) -> tuple[tuple[Entry, ...], tuple[Problem, ...]]:
    doc = read_yaml_document(path, what="price book")
    try:
        parsed = PriceBookFile.model_validate(doc)
    except ValidationError as exc:
        return (), tuple(_problems_from(exc, doc, path))
    return parsed.prices, ()


def read_price_book(path: str | Path, catalog, *, display: Optional[str] = None,
                    today: Optional[_dt.date] = None) -> PriceBook:
    """Read and check a price book against ``catalog``; every problem at once as an InputError.

    ``display`` is how the file is named in messages and labels (default: ``path`` as given).
    """
    p = Path(path)
    name = display or str(path)
    try:
        st = p.stat()
    except OSError:
        raise InputError(f"{name}: price book file not found", problems=[Problem(
            path="price_book", message="price book file not found (paths are relative to the profile file)",
            given=str(path), has_given=True)]) from None
    if not p.is_file():
        raise InputError(f"{name}: price book is not a file", problems=[Problem(
            path="price_book", message="not a file", given=str(path), has_given=True)])
    try:
        entries, problems = _parse_cached(str(p.resolve()), st.st_mtime_ns, st.st_size)
    except InputError as exc:  # unreadable, not YAML, not a mapping: name the file as the user wrote it
        raise InputError(exc.message.replace(str(p.resolve()), name),
                         problems=[Problem(path=q.path, message=q.message, file=name) for q in exc.problems],
                         hint="price book format: docs/prices.md") from None
    problems = [Problem(path=q.path, message=q.message, given=q.given, has_given=q.has_given, allowed=q.allowed,
                        suggestions=q.suggestions, file=name) for q in problems]
    if not problems:
        problems = entry_problems(entries, catalog, name, today or clock_today())
    if problems:
        raise InputError(f"{name}: {len(problems)} problem(s) in the price book", problems=problems,
                         hint="price book format: docs/prices.md")
    return PriceBook(name, entries)


def entry_problems(entries: Iterable[Entry], catalog, file: str, today: _dt.date) -> list[Problem]:
    """What the catalog says is wrong with valid-looking entries: unknown names, duplicates, future dates."""
    regions = catalog.regions()
    lingjun = [s.name for s in dlc_facts().lingjun_specs]
    types = [r.name for r in catalog.resolved_instances()]
    seen: dict[tuple, int] = {}
    out: list[Problem] = []

    def problem(at: str, message: str, given: Any, suggestions: Optional[list[str]] = None, allowed=None) -> None:
        out.append(Problem(path=at, message=message, given=given, has_given=True, file=file,
                           suggestions=suggestions or [], allowed=allowed))

    for i, e in enumerate(entries):
        at = f"prices[{i}]"
        discount = isinstance(e, DiscountEntry)
        resource = isinstance(e, (StorageEntry, NetworkEntry))
        if e.region == ANY_REGION and not discount:
            problem(f"{at}.region", f"'{ANY_REGION}' (every region) is for discount entries only: an absolute "
                                    "price names its region", e.region)
        elif e.region != ANY_REGION and e.region not in regions:
            problem(f"{at}.region", "unknown region", e.region, did_you_mean(e.region, regions),
                    allowed=f"a region of the catalog{' or * (every region)' if discount else ''}")
        if e.as_of > today:
            problem(f"{at}.as_of", f"is after today ({today.isoformat()}): a price is dated when it was set",
                    e.as_of.isoformat())
        if resource:
            key = (e.kind, e.region, e.subject)
            if key in seen:
                field = "performance_level" if isinstance(e, StorageEntry) and e.performance_level else e.kind
                problem(f"{at}.{field}", f"priced twice in {e.region} (also prices[{seen[key]}]); keep one", e.subject)
            seen.setdefault(key, i)
            continue
        if e.instance_type is not None and not catalog.knows(e.instance_type):
            problem(f"{at}.instance_type", "instance type not in the catalog", e.instance_type,
                    did_you_mean(e.instance_type, types))
        if discount and e.family is not None and e.family not in catalog.families:
            problem(f"{at}.family", "instance family not in the catalog", e.family,
                    did_you_mean(e.family, list(catalog.families)))
        if not discount and e.dlc_spec is not None and not (catalog.knows(e.dlc_spec) or e.dlc_spec in lingjun):
            problem(f"{at}.dlc_spec", "not a DLC spec trainstack knows (an ECS type of the catalog or a Lingjun "
                                      "spec of dlc_specs.yaml)", e.dlc_spec, did_you_mean(e.dlc_spec, types + lingjun))
        keys = ([("discount", e.scope, e.region, e.subject, a) for a in e.applies_to] if discount
                else [(e.kind, e.region, e.subject)])
        twice = next((seen[k] for k in keys if k in seen), None)
        if twice is not None:
            field = e.scope if discount and e.scope != "region" else ("region" if discount else e.kind)
            what = "discounted" if discount else "priced"
            problem(f"{at}.{field}", f"{what} twice in {e.region} (also prices[{twice}]); keep one",
                    e.subject or e.region)
        for k in keys:
            seen.setdefault(k, i)
    return out


def display_path(path: Path) -> str:
    """``path`` as a user finds it: relative to the working directory when under it."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return str(path)
    return rel if not rel.startswith("..") else str(path)


def catalog_for(profile: Any, catalog):
    """``catalog`` with the profile's price book (``profile.price_book``) in front; unchanged without one.

    Duck-typed on the profile (``price_book_file()``) so the catalog layer does not import the profile.
    """
    path = profile.price_book_file() if hasattr(profile, "price_book_file") else None
    if path is None:
        return catalog
    name = display_path(Path(path))
    current = catalog.price_book
    if current is not None and current.path == name:
        return catalog
    return catalog.with_price_book(read_price_book(path, catalog, display=name))
