"""What storage and network resources cost in a region, and whose figure it is (``Catalog.resource_quote``).

The public figures are data (``data/resource_prices.yaml``, each with its source and date); a team's
price book wins over them. Precedence, highest first (docs/prices.md):

1. the price book's entry for the region and the exact kind (``storage: cloud_essd`` with its
   ``performance_level``), then the book's entry for the kind without a level;
2. the public figure of the region;
3. in mainland China: the median of the other mainland regions' public figures, labelled as borrowed;
4. a level with a sourced ratio to another level of its kind (ESSD PL2/PL3 to PL1: ``level_factors``):
   that ratio x the other level's quote in the region (by this same precedence), labelled as an estimate;
5. nothing: unpriced, with why and how to price it (never 0).

Discount entries of the price book touch ECS prices only.
"""

from __future__ import annotations

import datetime as _dt
import functools
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..datafile import load_data_yaml
from .errors import CatalogError

RESOURCE_PRICES_FILE = Path(__file__).parent / "data" / "resource_prices.yaml"
StorageKind = Literal["cloud_essd", "cloud_auto", "cpfs", "oss"]
NetworkKind = Literal["nat_gateway", "eip"]
STORAGE_KINDS: tuple[str, ...] = ("cloud_essd", "cloud_auto", "cpfs", "oss")
NETWORK_KINDS: tuple[str, ...] = ("nat_gateway", "eip")
#: The levels a storage kind has (a price may name one; none for a kind with none).
LEVELS: dict[str, tuple[str, ...]] = {"cloud_essd": ("PL0", "PL1", "PL2", "PL3"), "cloud_auto": (),
                                      "cpfs": ("advance_100", "advance_200"), "oss": ()}
#: What each kind is called in outputs.
WHAT = {"cloud_essd": "ESSD", "cloud_auto": "ESSD AutoPL", "cpfs": "CPFS", "oss": "OSS standard storage",
        "nat_gateway": "NAT gateway", "eip": "EIP"}
#: Where the price book format is documented.
PRICES_DOC = "docs/prices.md"


def level_problem(kind: str, level: Optional[str]) -> Optional[str]:
    """Why ``level`` does not belong to storage ``kind`` (None: it does, or no level is named)."""
    if level is None:
        return None
    allowed = LEVELS.get(kind, ())
    if not allowed:
        return f"{kind} has no performance level: leave performance_level out"
    if level not in allowed:
        return f"performance_level of {kind} is one of {', '.join(allowed)}"
    return None


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class BillingHours(_Frozen):
    hours: int = Field(gt=0, le=744)
    source: str
    basis: str


class StoragePrice(_Frozen):
    region: str
    storage: StorageKind
    performance_level: Optional[str] = None
    cny_per_gib_month: float = Field(gt=0)
    published: str = Field(min_length=1, description="The figure as the source writes it")
    as_of: _dt.date
    source: str

    @model_validator(mode="after")
    def _level(self) -> "StoragePrice":
        if why := level_problem(self.storage, self.performance_level):
            raise ValueError(why)
        return self


class NetworkPrice(_Frozen):
    regions: tuple[str, ...] = Field(min_length=1)
    network: NetworkKind
    cny_per_hour: float = Field(gt=0)
    published: str = Field(min_length=1)
    traffic: str = Field(min_length=1, description="What traffic costs on top (unknown offline)")
    as_of: _dt.date
    source: str


class LevelFactor(_Frozen):
    storage: StorageKind
    base_level: str
    factors: dict[str, float]
    mainland_only: bool = True
    quote: str = Field(min_length=1)
    as_of: _dt.date
    source: str

    @model_validator(mode="after")
    def _levels(self) -> "LevelFactor":
        for level in (self.base_level, *self.factors):
            if why := level_problem(self.storage, level):
                raise ValueError(why)
        if self.base_level in self.factors or any(f <= 0 for f in self.factors.values()):
            raise ValueError("factors are > 0 and for levels other than the base level")
        return self


class Unpublished(_Frozen):
    storage: StorageKind
    performance_level: Optional[str] = None
    searched: str = Field(min_length=1)


class ResourcePrices(_Frozen):
    """The data file, validated (regions and sources are checked with the catalog: :func:`price_errors`)."""

    billing_hours_per_month: dict[StorageKind, BillingHours]
    storage: tuple[StoragePrice, ...]
    network: tuple[NetworkPrice, ...]
    level_factors: tuple[LevelFactor, ...] = ()
    unpublished: tuple[Unpublished, ...] = ()

    @model_validator(mode="after")
    def _complete(self) -> "ResourcePrices":
        missing = [k for k in STORAGE_KINDS if k not in self.billing_hours_per_month]
        if missing:
            raise ValueError(f"billing_hours_per_month lacks {', '.join(missing)}")
        seen: set[tuple] = set()
        keys = [("storage", p.region, p.storage, p.performance_level) for p in self.storage]
        keys += [("network", r, p.network, None) for p in self.network for r in p.regions]
        for key in keys:
            if key in seen:
                raise ValueError(f"priced twice: {key[1]} {key[2]} {key[3] or ''}".rstrip())
            seen.add(key)
        priced = {(p.storage, p.performance_level) for p in self.storage}
        priced |= {(f.storage, lv) for f in self.level_factors for lv in f.factors}
        for u in self.unpublished:
            if (u.storage, u.performance_level) in priced:
                raise ValueError(f"{u.storage} {u.performance_level} is both priced and listed as unpublished")
        return self

    def storage_figure(self, region: str, kind: str, level: Optional[str]) -> Optional[StoragePrice]:
        return next((p for p in self.storage if (p.region, p.storage, p.performance_level) == (region, kind, level)),
                    None)

    def network_figure(self, region: str, kind: str) -> Optional[NetworkPrice]:
        return next((p for p in self.network if p.network == kind and region in p.regions), None)

    def level_factor(self, kind: str, level: Optional[str]) -> Optional[tuple[LevelFactor, float]]:
        return next(((f, f.factors[level]) for f in self.level_factors if f.storage == kind and level in f.factors),
                    None)

    def searched(self, kind: str, level: Optional[str]) -> Optional[str]:
        return next((u.searched for u in self.unpublished if (u.storage, u.performance_level) == (kind, level)), None)


@functools.lru_cache(maxsize=4)
def load_resource_prices(path: Path = RESOURCE_PRICES_FILE) -> ResourcePrices:
    try:
        return ResourcePrices.model_validate(load_data_yaml(path))
    except ValidationError as exc:
        raise CatalogError(f"{path.name}: {exc}") from None


def no_public_prices() -> ResourcePrices:
    """The billing rules without a single public figure (a catalog built from other data)."""
    return load_resource_prices().model_copy(update={"storage": (), "network": (), "level_factors": (),
                                                     "unpublished": ()})


def price_errors(prices: ResourcePrices, tags: set[str], regions: set[str]) -> list[str]:
    """What the catalog finds wrong with the data: unknown sources and regions."""
    out = []
    for b in prices.billing_hours_per_month.values():
        if b.source not in tags:
            out.append(f"resource_prices.yaml billing hours cite unknown source {b.source!r}")
    rows = [(p.source, (p.region,), f"{p.region} {p.storage} {p.performance_level or ''}") for p in prices.storage]
    rows += [(p.source, p.regions, f"{p.network} {'/'.join(p.regions)}") for p in prices.network]
    rows += [(f.source, (), f"{f.storage} level factors") for f in prices.level_factors]
    for source, where, what in rows:
        if source not in tags:
            out.append(f"resource price {what.strip()} cites unknown source {source!r}")
        out += [f"resource price {what.strip()} names unknown region {r!r}" for r in where if r not in regions]
    return out


class ResourceQuote(_Frozen):
    """A storage or network price as the cost model uses it, and how much to trust it."""

    kind: str
    level: Optional[str] = None
    region: str
    unit: Literal["GiB-month", "hour"]
    #: CNY per GiB-month (storage) or per hour (network); None: unpriced
    cny: Optional[float] = None
    hours_per_month: int = 730
    source_kind: Literal["price-book", "public", "borrowed-region", "derived", "none"] = "none"
    source: str = Field("", description="Whose figure it is, in words (the breakdown's price_source)")
    as_of: Optional[str] = None
    borrowed_from: Optional[str] = None
    label: Optional[str] = Field(None, description="What an estimate rests on, for the plan's labels")
    extra: Optional[str] = Field(None, description="What is billed on top and not counted (traffic)")
    unpriced: Optional[str] = Field(None, description="Why no price is known and how to set one")

    @property
    def hourly_per_unit(self) -> Optional[float]:
        """CNY per hour of one GiB (storage) or of one resource (network)."""
        if self.cny is None:
            return None
        return self.cny / self.hours_per_month if self.unit == "GiB-month" else self.cny


def _mainland(region: str) -> bool:
    return region.startswith("cn-") and region != "cn-hongkong"


def _what(kind: str, level: Optional[str]) -> str:
    return f"{WHAT.get(kind, kind)}{' ' + level if level else ''}"


def quote_resource(cat: Any, region: str, kind: str, level: Optional[str] = None) -> ResourceQuote:
    """The quote of storage ``kind`` (at ``level``) or network ``kind`` in ``region`` (``cat``: the
    Catalog, its price book in front), by the precedence in the module docstring."""
    data: ResourcePrices = cat.resource_prices
    storage = kind in STORAGE_KINDS
    unit: Literal["GiB-month", "hour"] = "GiB-month" if storage else "hour"
    hours = data.billing_hours_per_month[kind].hours if storage else 730  # type: ignore[index]
    what = _what(kind, level)
    base = dict(kind=kind, level=level, region=region, unit=unit, hours_per_month=hours)
    book = cat.price_book
    entry = book.resource(region, kind, level) if book is not None and hasattr(book, "resource") else None
    if entry is not None:
        figure = entry.cny_per_gib_month if storage else entry.cny_per_hour
        return ResourceQuote(**base, cny=figure, source_kind="price-book", as_of=entry.as_of.isoformat(),
                             source=entry.describe(book.path))

    def public(r: str):
        return data.storage_figure(r, kind, level) if storage else data.network_figure(r, kind)

    local = public(region)
    if local is not None:
        figure = local.cny_per_gib_month if storage else local.cny_per_hour
        return ResourceQuote(**base, cny=figure, source_kind="public", as_of=local.as_of.isoformat(),
                             extra=getattr(local, "traffic", None),
                             source=f"Alibaba's public price [{local.source}] of {local.as_of.isoformat()}: "
                                    f"{local.published}")
    if _mainland(region):
        donors = sorted((p.cny_per_gib_month if storage else p.cny_per_hour, r, p)
                        for r in sorted(cat.regions()) if r != region and _mainland(r)
                        for p in (public(r),) if p is not None)
        if donors:
            figure, donor, row = donors[len(donors) // 2]
            per = "CNY/GiB-month" if storage else "CNY/h"
            return ResourceQuote(
                **base, cny=figure, source_kind="borrowed-region", as_of=row.as_of.isoformat(), borrowed_from=donor,
                extra=getattr(row, "traffic", None),
                source=f"an estimate borrowed from {donor}'s public price [{row.source}] of {row.as_of.isoformat()} "
                       f"({figure:g} {per}); {region} lists none",
                label=f"{what} price in {region} estimated from {donor} ({figure:g} {per}, {row.as_of.isoformat()})")
    derived = data.level_factor(kind, level) if storage else None
    if derived is not None and (_mainland(region) or not derived[0].mainland_only):
        rule, factor = derived
        base_quote = cat.resource_quote(region, kind, rule.base_level)
        if base_quote.cny is not None:
            figure = round(base_quote.cny * factor, 4)
            as_of = min(base_quote.as_of or rule.as_of.isoformat(), rule.as_of.isoformat())
            base_what = _what(kind, rule.base_level)
            return ResourceQuote(
                **base, cny=figure, source_kind="derived", as_of=as_of, borrowed_from=base_quote.borrowed_from,
                source=f"an estimate: {factor:g} x the {base_what} price ({base_quote.cny:g} CNY/GiB-month: "
                       f"{base_quote.source}), the ratio of their SCU deductions [{rule.source}]",
                label=f"{what} price in {region} estimated as {factor:g} x the {base_what} price "
                      f"({figure:g} CNY/GiB-month; SCU deduction ratio [{rule.source}])")
    searched = data.searched(kind, level) if storage else None
    why = (f"no public price of {what} found ({searched})" if searched
           else f"no public price of {what} in {region}")
    entry_words = f"storage: {kind}" + (f", performance_level: {level}" if level else "") if storage \
        else f"network: {kind}"
    fix = (f"add a `{entry_words}` entry to price book {book.path}" if book is not None
           else f"add a `{entry_words}` entry to a price book ({PRICES_DOC})")
    return ResourceQuote(**base, unpriced=f"{why}; {fix}", source=f"unpriced: {why}")
