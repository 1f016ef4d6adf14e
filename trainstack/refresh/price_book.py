"""A price book from a refresh: the account's DescribePrice ``TradePrice`` per type, as team prices.

``OriginalPrice`` (the list price) stays in the overlay, where the resolver takes it as the public
figure; ``TradePrice`` is what this account pays after its discounts, which is exactly what a price
book holds. Pure: records in, YAML text out; :func:`merged_entries` keeps every entry the refresh
did not touch (other regions, DLC specs, quotas, types the API did not price).
"""

from __future__ import annotations

from typing import Any, Iterable

import yaml

from ..catalog.price_book import PriceBookEntry

HEADER = ("# The team's prices (trainstack price book; docs/prices.md). Rows with a source starting\n"
          "# \"DescribePrice TradePrice\" were written by `trainstack catalog refresh --price-book`; edit or add\n"
          "# rows by hand (DLC specs, quotas, negotiated prices): a refresh replaces only its own regions' ECS rows.\n")
SOURCE_PREFIX = "DescribePrice TradePrice"


def trade_entries(record: dict[str, Any]) -> tuple[list[PriceBookEntry], list[str]]:
    """Entries for one refresh overlay record's trade prices, and notes for the types left out."""
    notes: list[str] = []
    currency, rate = record.get("currency"), record.get("usd_to_cny_rate")
    fetched = str(record["fetched_at"])
    out: list[PriceBookEntry] = []
    for name, row in sorted((record.get("prices") or {}).items()):
        trade = row.get("trade")
        if not trade:  # null (no pay-as-you-go price) or 0 (free trial credit): not a price to plan with
            continue
        if currency == "USD":
            if not rate:
                notes.append(f"{name}: trade price in USD and no --usd-rate: not written to the price book")
                continue
            trade = trade * rate
        elif currency != "CNY":
            continue
        listed = row.get("on_demand")
        out.append(PriceBookEntry(
            region=record["region"], instance_type=name, on_demand_cny_per_hour=round(float(trade), 4),
            as_of=fetched[:10],
            source=(f"{SOURCE_PREFIX} of the account, `trainstack catalog refresh` at {fetched}"
                    + (f"; list price {listed:g}" if listed else "")
                    + (f"; converted at {rate:g} CNY/USD" if currency == "USD" else ""))))
    return out, notes


def merged_entries(existing: Iterable[PriceBookEntry], fresh: Iterable[PriceBookEntry],
                   regions: Iterable[str]) -> list[PriceBookEntry]:
    """``existing`` with the refreshed regions' refresh-written ECS rows replaced by ``fresh``.

    A hand-written row (its source does not start with :data:`SOURCE_PREFIX`) always survives, and
    wins over a fresh trade price for the same type: the team said so.
    """
    regions = set(regions)
    kept = [e for e in existing
            if not (e.kind == "instance_type" and e.region in regions and e.source.startswith(SOURCE_PREFIX))]
    manual = {(e.kind, e.region, e.subject) for e in kept}
    return kept + [e for e in fresh if (e.kind, e.region, e.subject) not in manual]


def dumps(entries: Iterable[PriceBookEntry]) -> str:
    rows = [e.model_dump(mode="json", exclude_none=True) for e in entries]
    order = ("region", "instance_type", "family", "dlc_spec", "resource_id", "on_demand_cny_per_hour",
             "spot_cny_per_hour", "discount_percent", "applies_to", "as_of", "source")  # discounts survive too
    rows = [{k: r[k] for k in order if k in r} for r in rows]
    return HEADER + yaml.safe_dump({"prices": rows}, sort_keys=False, allow_unicode=True, width=120)
