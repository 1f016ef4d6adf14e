"""What one ECS type costs in one region, and whose figure it is (``Catalog.quote`` for ECS).

On-demand, highest precedence first (docs/prices.md):

1. the price book's absolute price for the type in the region;
2. the book's discount for the type, then for its family, then region-wide (each: the region's own
   entry before the ``'*'`` one), applied to the list price;
3. the list price: a refresh's API price or the public snapshot in the region, else (mainland China)
   the median of the other mainland regions' snapshot prices, labelled as borrowed.

Spot: the book's absolute spot price; else the market price a refresh saw; else an estimate, the
configured fraction of the **list** price (an assumption, labelled: no source says account discounts
reach spot). A discount touches spot only when its ``applies_to`` names ``spot``. The spot bid limit
(placement) stays at the team's own on-demand price.
"""

from __future__ import annotations

from typing import Any, Optional

from .models import PriceQuote, RegionPrice

#: Where the price-book format is documented (every "add a price" hint points here).
PRICES_DOC = "docs/prices.md"


def is_mainland_china(region: str) -> bool:
    """Mainland-China regions share price levels closely enough to borrow an estimate."""
    return region.startswith("cn-") and region != "cn-hongkong"


class _List:
    """The public list price of a type in a region, with where it came from."""

    def __init__(self, cat: Any, region: str, name: str, local: Optional[RegionPrice]):
        self.price: Optional[float] = local.on_demand_cny_per_hour if local else None
        self.as_of: Optional[str] = local.as_of if local else None
        self.borrowed: Optional[str] = None
        self.kind, self.words = cat.price_source(local) if self.price is not None else ("none", "")
        self.label: Optional[str] = None
        if self.price is None and is_mainland_china(region):
            donors = sorted((p.on_demand_cny_per_hour, r, p.as_of) for r, rows in cat.prices.items()
                            if r != region and is_mainland_china(r)
                            for n, p in rows.items() if n == name and p.on_demand_cny_per_hour is not None)
            if donors:  # median of the other mainland regions: robust to one odd listing
                self.price, self.borrowed, self.as_of = donors[len(donors) // 2]
                self.kind = "borrowed-region"
                self.words = (f"an estimate borrowed from {self.borrowed}'s public price ({self.price:g} CNY/h, "
                              f"{self.as_of}); {region} lists none")
                self.label = (f"on-demand price of {name} estimated from {self.borrowed} ({self.price:g} CNY/h, "
                              f"{self.as_of}); {region} has no listed price")


def ecs_quote(cat: Any, region: str, name: str) -> PriceQuote:
    """The quote of ECS type ``name`` in ``region`` (``cat`` is the Catalog, its price book in front)."""
    book = cat.price_book
    local = cat.seen_in(region, name)
    listed = _List(cat, region, name, local)
    t = cat.instance_types.get(name)
    family = t.family if t is not None else ""
    entry = book.get("instance_type", region, name) if book is not None else None
    cut = book.discount(region, name, family, "on_demand") if book is not None and entry is None else None
    labels: list[str] = []
    on_demand, as_of, kind, words = listed.price, listed.as_of, listed.kind, listed.words
    if entry is not None:
        on_demand, as_of, kind = entry.on_demand_cny_per_hour, entry.as_of.isoformat(), "price-book"
        words = entry.describe(book.path)
        labels.append(f"on-demand price of {name} in {region} is {words}")
    elif cut is not None and listed.price is not None:
        on_demand, kind = round(listed.price * cut.factor(), 4), "price-book"
        as_of = min(listed.as_of or cut.as_of.isoformat(), cut.as_of.isoformat())  # the older ingredient
        words = cut.describe(book.path, f"{listed.words} ({listed.price:g} CNY/h)")
        labels += [x for x in (listed.label,) if x]
        labels.append(f"on-demand price of {name} in {region} is {on_demand:g} CNY/h: {words}")
    else:
        labels += [x for x in (listed.label,) if x]
        if cut is not None:
            labels.append(f"the price book's {cut.discount_percent:g} % discount for {cut.subject or region} has "
                          f"no list price of {name} in {region} to apply to")
    if on_demand is None:
        words = f"no price known for {name} in {region}"
        labels.append(words + (f": add it to a price book ({PRICES_DOC})" if book is None
                               else f": add it to price book {book.path}"))
    if local is None:
        labels.append(f"availability of {name} in {region} unverified: run `trainstack catalog refresh`")
    spot, spot_estimated, spot_cut, spot_labels = _spot(cat, region, name, family, entry, local, listed, on_demand)
    return PriceQuote(
        instance_type=name, region=region, on_demand_cny_per_hour=on_demand, spot_cny_per_hour=spot,
        on_demand_from_region=listed.borrowed if (entry is None and on_demand is not None) else None,
        list_on_demand_cny_per_hour=listed.price,
        discount_percent=cut.discount_percent if (cut is not None and entry is None and listed.price) else None,
        spot_discount_percent=spot_cut, spot_estimated=spot_estimated,
        seen_in_region=local is not None, zones=local.zones if local else (),
        labels=tuple(labels), spot_labels=tuple(spot_labels), as_of=as_of, source_kind=kind, source=words)


def _spot(cat: Any, region: str, name: str, family: str, entry: Any, local: Optional[RegionPrice],
          listed: _List, on_demand: Optional[float]) -> tuple[Optional[float], bool, Optional[float], list[str]]:
    """(spot CNY/h, estimated?, spot discount %, labels) by the precedence in the module docstring."""
    book = cat.price_book
    if entry is not None and entry.spot_cny_per_hour is not None:
        return entry.spot_cny_per_hour, False, None, [
            f"spot price of {name} is the team's price from price book {book.path} ({entry.spot_cny_per_hour:g} CNY/h)"]
    cut = book.discount(region, name, family, "spot") if book is not None else None
    labels: list[str] = []
    if local is not None and local.spot_cny_per_hour is not None:
        spot, estimated = local.spot_cny_per_hour, False  # observed by a refresh: the market's price
    else:
        base = listed.price if listed.price is not None else on_demand
        if base is None:
            return None, True, None, []
        frac = float(cat.settings["spot_estimate_fraction"])
        spot, estimated = round(base * frac, 4), True
        if listed.price is None:
            of = "of the team's on-demand price: no list price is known"
        elif book is None or base == on_demand:
            of = "of on-demand"
        else:
            of = f"of the list on-demand price {base:g} CNY/h, not of the team's price; an assumption"
        labels.append(f"spot price of {name} is an estimate ({frac:.0%} {of}); real spot prices come from "
                      "`trainstack catalog refresh`")
    if cut is None:
        return spot, estimated, None, labels
    spot = round(spot * cut.factor(), 4)
    labels.append(f"spot price of {name} is {spot:g} CNY/h: "
                  + cut.describe(book.path, "the " + ("estimated" if estimated else "market") + " spot price"))
    return spot, estimated, cut.discount_percent, labels
