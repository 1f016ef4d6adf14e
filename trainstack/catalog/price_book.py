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

Every entry names exactly one of ``instance_type``, ``dlc_spec`` or ``resource_id``. The catalog's
``quote()`` prefers a price-book price over every public figure and labels it as the team's price.
Loading is typed and bounded: a broken file or entry is an :class:`~trainstack.errors.InputError`
(exit 2) naming the file and the entry (``prices[3].instance_type``).
"""

from __future__ import annotations

import datetime as _dt
import functools
import re
from pathlib import Path
from typing import Any, Iterable, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import InputError, Problem, did_you_mean, short_repr, value_at

#: Most entries one price book may hold: every GPU type of the catalog in ten regions, within the
#: user-file reader's bound on values (trainstack.profile.yamlfile.MAX_NODES).
MAX_ENTRIES = 1500
#: No GPU node or quota GPU costs this much per hour; a larger figure is a typo (CNY/h).
MAX_CNY_PER_HOUR = 100_000.0
RESOURCE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")
Kind = Literal["instance_type", "dlc_spec", "resource_id"]
KINDS: tuple[Kind, ...] = ("instance_type", "dlc_spec", "resource_id")
#: What one price is for: an ECS node or a DLC pod per hour, or one GPU of a quota per hour.
UNIT = {"instance_type": "node", "dlc_spec": "pod", "resource_id": "GPU"}


class PriceBookEntry(BaseModel):
    """One price the team set: for an ECS type, a DLC spec or a PAI resource quota in one region."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=False)

    region: str = Field(min_length=1, max_length=64)
    instance_type: Optional[str] = Field(None, min_length=1, max_length=128, description="ECS type (per node-hour)")
    dlc_spec: Optional[str] = Field(None, min_length=1, max_length=128,
                                    description="PAI-DLC spec: an ECS type name or a Lingjun spec (per pod-hour)")
    resource_id: Optional[str] = Field(None, min_length=1, max_length=128,
                                       description="PAI resource quota id (per GPU-hour)")
    on_demand_cny_per_hour: float = Field(gt=0, le=MAX_CNY_PER_HOUR, strict=True)
    spot_cny_per_hour: Optional[float] = Field(None, gt=0, le=MAX_CNY_PER_HOUR, strict=True)
    as_of: _dt.date
    source: str = Field(min_length=1, max_length=500, description="Who set the price and why (free text)")

    @field_validator("source")
    @classmethod
    def _one_line(cls, v: str) -> str:
        if any(ord(c) < 32 for c in v):
            raise ValueError("must be one line of text (no control characters)")
        if not v.strip():
            raise ValueError("must say who set the price and why")
        return v.strip()

    @field_validator("resource_id")
    @classmethod
    def _quota_id(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and not RESOURCE_ID.fullmatch(v):
            raise ValueError("a PAI resource quota id is letters, digits, '-' and '_' (e.g. quota1a2b3c4d)")
        return v

    @model_validator(mode="after")
    def _one_subject(self) -> "PriceBookEntry":
        named = [k for k in KINDS if getattr(self, k) is not None]
        if len(named) != 1:
            raise ValueError(f"name exactly one of instance_type, dlc_spec, resource_id (got {', '.join(named) or 'none'})")
        if self.spot_cny_per_hour is not None:
            if self.resource_id is not None:
                raise ValueError("spot_cny_per_hour does not apply to a resource quota (a subscription)")
            if self.spot_cny_per_hour > self.on_demand_cny_per_hour:
                raise ValueError(f"spot_cny_per_hour {self.spot_cny_per_hour:g} is above on_demand_cny_per_hour "
                                 f"{self.on_demand_cny_per_hour:g}: a spot bid never exceeds on-demand")
        return self

    @property
    def kind(self) -> Kind:
        return next(k for k in KINDS if getattr(self, k) is not None)

    @property
    def subject(self) -> str:
        return str(getattr(self, self.kind))

    @property
    def unit(self) -> str:
        return UNIT[self.kind]

    def describe(self, book_path: str) -> str:
        """How an output names this price: whose it is, where it is written and why."""
        return (f"the team's price from price book {book_path} ({self.on_demand_cny_per_hour:g} CNY per "
                f"{self.unit}-hour, as of {self.as_of.isoformat()}; source: {short_repr(self.source, 80)})")


class _PriceBookFile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    prices: tuple[PriceBookEntry, ...] = Field(max_length=MAX_ENTRIES)


class PriceBook:
    """The validated entries of one price book, looked up by (kind, region, subject)."""

    def __init__(self, path: str, entries: Iterable[PriceBookEntry]):
        self.path = path
        self.entries = tuple(entries)
        self._by_key = {(e.kind, e.region, e.subject): e for e in self.entries}

    def get(self, kind: Kind, region: str, subject: str) -> Optional[PriceBookEntry]:
        return self._by_key.get((kind, region, subject))

    def __len__(self) -> int:
        return len(self.entries)

    def __repr__(self) -> str:
        return f"PriceBook({self.path!r}, {len(self.entries)} entries)"


def _loc_path(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _problems_from(exc: ValidationError, doc: Any, file: str) -> list[Problem]:
    out = []
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if p not in ("function-after[_one_subject(), PriceBookEntry]",))
        has, given = value_at(doc, loc)
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            allowed = sorted(PriceBookEntry.model_fields) if len(loc) > 2 else ["prices"]
            out.append(Problem(path=_loc_path(loc), message="unknown field", file=file, given=loc[-1],
                               has_given=True, allowed=", ".join(allowed),
                               suggestions=did_you_mean(str(loc[-1]), allowed)))
            continue
        out.append(Problem(path=_loc_path(loc), message=message, file=file, given=given if has else None,
                           has_given=has and not isinstance(given, (dict, list))))
    return out


@functools.lru_cache(maxsize=16)
def _parse_cached(path: str, _mtime_ns: int, _size: int) -> tuple[tuple[PriceBookEntry, ...], tuple[Problem, ...]]:
    from ..profile.yamlfile import read_yaml_document  # the one reader of user YAML files

    doc = read_yaml_document(path, what="price book")
    try:
        parsed = _PriceBookFile.model_validate(doc)
    except ValidationError as exc:
        return (), tuple(_problems_from(exc, doc, path))
    return parsed.prices, ()


def read_price_book(path: str | Path, catalog, *, display: Optional[str] = None,
                    today: Optional[_dt.date] = None) -> PriceBook:
    """Read and check a price book against ``catalog``; every problem at once as an InputError.

    ``display`` is how the file is named in messages and labels (default: ``path`` as given).
    """
    from ..clock import today as clock_today

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
                         hint="price book format: README, \"Prices\"") from None
    problems = [Problem(path=q.path, message=q.message, given=q.given, has_given=q.has_given, allowed=q.allowed,
                        suggestions=q.suggestions, file=name) for q in problems]
    if not problems:
        problems = entry_problems(entries, catalog, name, today or clock_today())
    if problems:
        raise InputError(f"{name}: {len(problems)} problem(s) in the price book", problems=problems,
                         hint="price book format: README, \"Prices\"")
    return PriceBook(name, entries)


def entry_problems(entries: Iterable[PriceBookEntry], catalog, file: str, today: _dt.date) -> list[Problem]:
    """What the catalog says is wrong with valid-looking entries: unknown names, duplicates, future dates."""
    from .dlc_specs import dlc_facts

    regions = catalog.regions()
    lingjun = [s.name for s in dlc_facts().lingjun_specs]
    seen: dict[tuple, int] = {}
    out: list[Problem] = []
    for i, e in enumerate(entries):
        at = f"prices[{i}]"
        if e.region not in regions:
            out.append(Problem(path=f"{at}.region", message="unknown region", given=e.region, has_given=True,
                               file=file, suggestions=did_you_mean(e.region, regions)))
        if e.instance_type is not None and not catalog.knows(e.instance_type):
            out.append(Problem(path=f"{at}.instance_type", message="instance type not in the catalog",
                               given=e.instance_type, has_given=True, file=file,
                               suggestions=did_you_mean(e.instance_type, [r.name for r in catalog.resolved_instances()])))
        if e.dlc_spec is not None and not (catalog.knows(e.dlc_spec) or e.dlc_spec in lingjun):
            pool = [r.name for r in catalog.resolved_instances()] + lingjun
            out.append(Problem(path=f"{at}.dlc_spec", file=file, given=e.dlc_spec, has_given=True,
                               message="not a DLC spec trainstack knows (an ECS type of the catalog or a Lingjun "
                                       "spec of dlc_specs.yaml)", suggestions=did_you_mean(e.dlc_spec, pool)))
        if e.as_of > today:
            out.append(Problem(path=f"{at}.as_of", message=f"is after today ({today.isoformat()}): a price is "
                                                           "dated when it was set", given=e.as_of.isoformat(),
                               has_given=True, file=file))
        key = (e.kind, e.region, e.subject)
        if key in seen:
            out.append(Problem(path=f"{at}.{e.kind}", file=file, given=e.subject, has_given=True,
                               message=f"priced twice in {e.region} (also prices[{seen[key]}]); keep one"))
        else:
            seen[key] = i
    return out


def display_path(path: Path) -> str:
    """``path`` as a user finds it: relative to the working directory when under it."""
    import os

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
