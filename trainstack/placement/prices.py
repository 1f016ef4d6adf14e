"""Where a plan's price comes from, in one block every output prints first (``Plan.prices``).

The quote (``Catalog.quote``) knows whose figure it is (the team's price book, a refresh of the
account's API answers, Alibaba's public snapshot, another region's snapshot price) and its date;
this module adds what a reader decides with: the price's age on the day the plan is made (from
:mod:`trainstack.clock`, so tests and CI can pin it), whether it is stale, and whether the type and
the zone were seen offered.
"""

from __future__ import annotations

from typing import Optional

from ..catalog import Catalog, PriceQuote
from ..clock import age_days
from ..plan import PriceProvenance

_WHAT = {"ecs": "", "dlc": "PAI-DLC spec ", "dlc-quota": "resource quota "}


def provenance(catalog: Catalog, quote: PriceQuote, *, zone: Optional[str] = None,
               spot: bool = False) -> PriceProvenance:
    """The ``prices`` block for a plan priced by ``quote`` (in zone ``zone``, spot or not)."""
    max_age = int(catalog.settings.get("price_max_age_days", 90))
    age = age_days(quote.as_of)
    stale = quote.source_kind != "none" and (age is None or age > max_age)
    ecs = quote.service == "ecs"
    zone_seen = None if (zone is None or not ecs) else (zone in quote.zones if quote.zones else False)
    parts = [whose_line(quote, age, stale, max_age)]
    if ecs:
        if quote.seen_in_region:
            parts.append(f"{quote.instance_type} seen offered in {quote.region}")
        else:
            parts.append(f"{quote.instance_type} not seen offered in {quote.region} (availability unverified)")
        if zone is None:
            parts.append("zone chosen at deploy time")
        elif zone_seen:
            parts.append(f"zone {zone} seen offered")
        else:
            parts.append(f"zone {zone} not seen offered for it")
    else:
        parts.append("PAI stock is not known offline")
    if spot:
        parts.append("spot price estimated" if quote.spot_estimated else "spot price from the same source")
    return PriceProvenance(
        source=quote.source_kind, as_of=quote.as_of, age_days=age, stale=stale, max_age_days=max_age,
        priced=quote.instance_type, service=quote.service, per=quote.per, whose=quote.source,
        borrowed_from=quote.on_demand_from_region, type_seen_in_region=quote.seen_in_region if ecs else None,
        zone=zone, zone_seen=zone_seen,
        # one flag for every output that prints a spot figure ("est."), spot plan or not
        spot_estimated=quote.spot_estimated if (spot or quote.spot_cny_per_hour is not None) else None,
        headline="; ".join(parts))


def whose_line(quote: PriceQuote, age: Optional[int], stale: bool, max_age: int) -> str:
    """``prices for <what>: <whose figure, dated>, <age>``, with the staleness warning."""
    what = f"{_WHAT[quote.service]}{quote.instance_type}"
    if quote.source_kind == "none":
        return f"prices for {what}: UNKNOWN ({quote.source.removeprefix(f'no price known for {what} in {quote.region}: ')})"
    old = "" if age is None else f", {age} day{'s' if age != 1 else ''} old"
    fix = ("update the price book" if quote.source_kind == "price-book"
           else "run `trainstack catalog refresh` or set a price book")
    warn = f" (STALE: older than {max_age} days; {fix})" if stale else ""
    return f"prices for {what}: {quote.source}{old}{warn}"
