"""The price book's entries as typed records, and the lookups the quote makes in them.

Two kinds of entry share the book's ``prices:`` list:

* an **absolute price** (:class:`PriceBookEntry`): one ECS type, DLC spec or PAI quota in one region,
  ``on_demand_cny_per_hour`` and optionally ``spot_cny_per_hour``;
* a **discount** (:class:`DiscountEntry`): ``discount_percent`` off Alibaba's list price, for one ECS
  type, one family or every type (region-wide), in one region or every region (``region: '*'``).
  It discounts ECS on-demand prices only, unless ``applies_to`` names ``spot`` (no source says an
  account discount reaches the spot market).

* a **storage price** (:class:`StorageEntry`): ``storage`` (cloud_essd, cloud_auto, cpfs, oss), an optional
  ``performance_level`` (an ESSD PL or a CPFS storage type; none: every level of the kind) and
  ``cny_per_gib_month``;
* a **network price** (:class:`NetworkEntry`): ``network`` (nat_gateway, eip) and ``cny_per_hour``.

An entry with ``discount_percent`` is a discount, one with ``storage`` or ``network`` a storage or network
price; any other entry is an absolute price. Which price a quote takes is :meth:`PriceBook.discount`,
:meth:`PriceBook.resource` and docs/prices.md (the precedence tables).
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Annotated, ClassVar, Iterable, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationInfo, field_validator, model_validator

from ..errors import short_repr
from .resource_prices import NetworkKind, StorageKind, level_problem

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
#: A discount entry's region that means every region.
ANY_REGION = "*"
#: What a discount may apply to: the ECS on-demand price (default) and the spot price.
Applies = Literal["on_demand", "spot"]
#: A discount's subject, most specific first: the order of precedence (docs/prices.md).
DiscountScope = Literal["instance_type", "family", "region"]
SCOPES: tuple[DiscountScope, ...] = ("instance_type", "family", "region")


def _one_line(v: str) -> str:
    if any(ord(c) < 32 for c in v):
        raise ValueError("must be one line of text (no control characters)")
    if not v.strip():
        raise ValueError("must say who set the price and why")
    return v.strip()


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
    def _source_line(cls, v: str) -> str:
        return _one_line(v)

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


class DiscountEntry(BaseModel):
    """A percentage off Alibaba's ECS list price: for one type, one family or a whole region ('*': all)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=False)

    region: str = Field(min_length=1, max_length=64, description="A region, or '*' for every region")
    instance_type: Optional[str] = Field(None, min_length=1, max_length=128)
    family: Optional[str] = Field(None, min_length=1, max_length=64, description="An ECS family (gn7i, ebmgn8is)")
    discount_percent: float = Field(gt=0, lt=100, strict=True, description="Percent off the list price")
    applies_to: tuple[Applies, ...] = Field(("on_demand",), min_length=1, max_length=2,
                                            description="on_demand (default) and/or spot")
    as_of: _dt.date
    source: str = Field(min_length=1, max_length=500, description="Who granted the discount (contract, account)")

    @field_validator("source")
    @classmethod
    def _source_line(cls, v: str) -> str:
        return _one_line(v)

    @model_validator(mode="after")
    def _one_scope(self) -> "DiscountEntry":
        if self.instance_type is not None and self.family is not None:
            raise ValueError("name at most one of instance_type, family (neither: the whole region)")
        if len(set(self.applies_to)) != len(self.applies_to):
            raise ValueError("applies_to lists a value twice")
        return self

    kind: ClassVar[str] = "discount"

    @property
    def scope(self) -> DiscountScope:
        return "instance_type" if self.instance_type else ("family" if self.family else "region")

    @property
    def subject(self) -> str:
        return self.instance_type or self.family or ""

    def factor(self) -> float:
        return 1.0 - self.discount_percent / 100.0

    def describe(self, book_path: str, what: str) -> str:
        """``<what> less N % (the team's <scope> discount from price book P, as of D; source: S)``."""
        scope = {"instance_type": f"discount for {self.subject}", "family": f"discount for family {self.subject}",
                 "region": "region-wide discount"}[self.scope]
        where = "every region" if self.region == ANY_REGION else self.region
        return (f"{what} less {self.discount_percent:g} % (the team's {scope} in {where} from price book "
                f"{book_path}, as of {self.as_of.isoformat()}; source: {short_repr(self.source, 80)})")


#: No storage costs this much per GiB-month; a larger figure is a typo (CNY).
MAX_CNY_PER_GIB_MONTH = 1_000.0


class StorageEntry(BaseModel):
    """What the team pays per GiB-month for one storage kind (and level) in one region."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=False)

    region: str = Field(min_length=1, max_length=64)
    storage: StorageKind = Field(description="cloud_essd | cloud_auto | cpfs | oss")
    performance_level: Optional[str] = Field(
        None, max_length=16, description="cloud_essd: PL0..PL3; cpfs: advance_100 | advance_200; none: every level")
    cny_per_gib_month: float = Field(gt=0, le=MAX_CNY_PER_GIB_MONTH, strict=True)
    as_of: _dt.date
    source: str = Field(min_length=1, max_length=500, description="Who set the price and why (free text)")

    @field_validator("source")
    @classmethod
    def _source_line(cls, v: str) -> str:
        return _one_line(v)

    @field_validator("performance_level")
    @classmethod
    def _level(cls, v: Optional[str], info: ValidationInfo) -> Optional[str]:
        kind = info.data.get("storage")  # absent when storage itself was refused: that error says it
        if kind is not None and (why := level_problem(kind, v)):
            raise ValueError(why)
        return v

    kind: ClassVar[str] = "storage"

    @property
    def subject(self) -> str:
        return self.storage + (f" {self.performance_level}" if self.performance_level else "")

    def describe(self, book_path: str) -> str:
        return (f"the team's price from price book {book_path} ({self.cny_per_gib_month:g} CNY per GiB-month, as of "
                f"{self.as_of.isoformat()}; source: {short_repr(self.source, 80)})")


class NetworkEntry(BaseModel):
    """What the team pays per hour for one NAT gateway or EIP in one region (traffic on top)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=False)

    region: str = Field(min_length=1, max_length=64)
    network: NetworkKind = Field(description="nat_gateway | eip")
    cny_per_hour: float = Field(gt=0, le=MAX_CNY_PER_HOUR, strict=True)
    as_of: _dt.date
    source: str = Field(min_length=1, max_length=500, description="Who set the price and why (free text)")

    @field_validator("source")
    @classmethod
    def _source_line(cls, v: str) -> str:
        return _one_line(v)

    kind: ClassVar[str] = "network"

    @property
    def subject(self) -> str:
        return self.network

    def describe(self, book_path: str) -> str:
        return (f"the team's price from price book {book_path} ({self.cny_per_hour:g} CNY per hour, as of "
                f"{self.as_of.isoformat()}; source: {short_repr(self.source, 80)})")


def _entry_kind(raw: object) -> str:
    if not isinstance(raw, dict):
        return "price"
    for key, tag in (("discount_percent", "discount"), ("storage", "storage"), ("network", "network")):
        if key in raw:
            return tag
    return "price"


AnyEntry = Annotated[Union[Annotated[PriceBookEntry, Tag("price")], Annotated[DiscountEntry, Tag("discount")],
                           Annotated[StorageEntry, Tag("storage")], Annotated[NetworkEntry, Tag("network")]],
                     Discriminator(_entry_kind)]
Entry = Union[PriceBookEntry, DiscountEntry, StorageEntry, NetworkEntry]


class PriceBookFile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    prices: tuple[AnyEntry, ...] = Field(max_length=MAX_ENTRIES)


class PriceBook:
    """The validated entries of one price book: absolute prices by (kind, region, subject), and discounts."""

    def __init__(self, path: str, entries: Iterable[Entry]):
        self.path = path
        self.entries = tuple(entries)
        self._by_key = {(e.kind, e.region, e.subject): e for e in self.entries if isinstance(e, PriceBookEntry)}
        self._resources = {(e.region, e.storage, e.performance_level) if isinstance(e, StorageEntry)
                           else (e.region, e.network, None): e
                           for e in self.entries if isinstance(e, (StorageEntry, NetworkEntry))}
        self.discounts = tuple(e for e in self.entries if isinstance(e, DiscountEntry))
        self._discount = {(d.scope, d.region, d.subject, a): d for d in reversed(self.discounts) for a in d.applies_to}

    def get(self, kind: Kind, region: str, subject: str) -> Optional[PriceBookEntry]:
        return self._by_key.get((kind, region, subject))

    def discount(self, region: str, instance_type: str, family: str, applies: Applies) -> Optional[DiscountEntry]:
        """The discount that prices ``instance_type`` (of ``family``) in ``region`` for ``applies``.

        Most specific first: the type's, then the family's, then the region-wide one; within each,
        the region's own entry before the '*' one. None when no entry applies.
        """
        subjects = {"instance_type": instance_type, "family": family, "region": ""}
        for scope in SCOPES:
            for where in (region, ANY_REGION):
                hit = self._discount.get((scope, where, subjects[scope], applies))
                if hit is not None:
                    return hit
        return None

    def resource(self, region: str, kind: str, level: Optional[str] = None
                 ) -> Optional[Union[StorageEntry, NetworkEntry]]:
        """The team's storage or network price: the entry for the exact level first, then the kind's."""
        return self._resources.get((region, kind, level)) or (
            self._resources.get((region, kind, None)) if level is not None else None)

    def __len__(self) -> int:
        return len(self.entries)

    def __repr__(self) -> str:
        return f"PriceBook({self.path!r}, {len(self.entries)} entries)"


def price_book_schema() -> dict:
    """The price book's JSON Schema (docs/price-book.schema.json, for editors and CI checks)."""
    schema = PriceBookFile.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "trainstack price book",
            "description": "Absolute prices, discounts, storage and network prices a team holds; precedence in "
                           "docs/prices.md.", **schema}
