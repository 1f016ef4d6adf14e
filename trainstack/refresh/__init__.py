"""`trainstack catalog refresh`: GPU facts, stock and prices from Alibaba's ECS API, as overlays.

Per region, with the official SDK (``alibabacloud-ecs20140526``) through an injected client:

1. ``DescribeInstanceTypes``: once per curated family (``InstanceTypeFamily=ecs.<family>``) and
   once with ``MinimumGPUAmount=1`` to catch GPU families the catalog lacks; paged with
   ``MaxResults``/``NextToken``. Facts: GPU count, ``GPUSpec``, GPU memory, vCPU, memory,
   ``EriQuantity``, network cards, bandwidth.
2. ``DescribeAvailableResource`` (``DestinationResource=InstanceType``) twice: on-demand
   (``NoSpot``) and spot (``SpotAsPriceGo``): which zones have each type in stock.
3. ``DescribePrice`` per offered GPU type (``ResourceType=instance``, ``PriceUnit=Hour``): list
   (``OriginalPrice``) and trade (``TradePrice``) price of the instance part.
4. ``DescribeSpotPriceHistory`` per offered type and spot zone: the latest price.

Throttling and server errors are retried with capped exponential backoff; anything else stops
the refresh with a :class:`CloudApiError` (exit 5) naming the call and the fix. Every response is
checked (a malformed one is rejected), the overlays are validated and merged into a trial
catalog, and only when every region succeeded are the files written, each atomically. The
decisions are pure functions over plain data; only :func:`make_client` touches the network.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

from ..catalog import overlay as ov
from ..catalog.loader import Catalog, CatalogError, build_catalog, clear_cache
from ..catalog.price_book import read_price_book
from ..cloud.ecs import EcsClient, make_client
from ..cloud.ecs_parse import MalformedResponse
from ..cloud.retry import Sleep
from ..errors import CloudApiError, InputError, Problem, did_you_mean
from ..outputs import atomic_write_text
from .fetch import Progress, RegionFetch, fetch_region
from .price_book import dumps as dumps_book, merged_entries, trade_entries
from .summary import Summary, diff, render_summary

__all__ = ["RefreshResult", "check_regions", "make_client", "refresh", "render_summary"]


def _utcnow() -> _dt.datetime:  # a seam for tests
    return _dt.datetime.now(_dt.timezone.utc)


@dataclass
class RefreshResult:
    summary: Summary
    after: Catalog
    records: dict[str, dict[str, Any]]
    written: list[Path]
    #: ``--price-book PATH``: the book written (or that would be), how many rows, and what was left out
    price_book: Optional[Path] = None
    price_book_rows: int = 0
    price_book_notes: list[str] = field(default_factory=list)


def check_regions(regions: Iterable[str], catalog: Catalog) -> list[str]:
    out: list[str] = []
    for raw in regions:
        for region in (r.strip() for r in raw.split(",")):
            if not region:
                continue
            if region not in catalog.regions():
                raise InputError(
                    f"unknown region {region!r}",
                    problems=[Problem(path="--region", message="unknown region", given=region, has_given=True,
                                      allowed=", ".join(catalog.regions()),
                                      suggestions=did_you_mean(region, catalog.regions()))],
                    hint="a region Alibaba added since: list it under `regions` in "
                         "trainstack/catalog/data/settings.yaml")
            if region not in out:
                out.append(region)
    if not out:
        raise InputError("--region is required", problems=[Problem(path="--region", message="give a region")])
    return out


def refresh(regions: Iterable[str], *, out_dir: Path, dry_run: bool = False, usd_rate: Optional[float] = None,
            client_factory: Optional[Callable[[str], EcsClient]] = None, sleep: Optional[Sleep] = None,
            now: Optional[_dt.datetime] = None, progress: Optional[Progress] = None,
            price_book: Optional[Path] = None) -> RefreshResult:
    """Fetch every region, validate and merge, then (unless ``dry_run``) write one file per region.

    Nothing is written unless every call for every region succeeded and the merged catalog
    validates; each file is replaced atomically. Errors: :class:`CloudApiError` (exit 5).
    ``price_book``: also write the account's trade prices into that price book (created, or its
    refresh-written rows of these regions replaced; hand-written rows are kept).
    """
    if usd_rate is not None and not usd_rate > 0:
        raise InputError("--usd-rate must be a positive number (CNY per USD)",
                         problems=[Problem(path="--usd-rate", message="must be > 0", given=usd_rate,
                                           has_given=True)])
    out_dir = Path(out_dir)
    try:
        existing = ov.read_overlays(out_dir)
    except ov.OverlayError as exc:
        raise InputError(str(exc), hint="fix or delete the file, then refresh again") from None
    curated = build_catalog(overlays=[])
    before = build_catalog(overlays=existing) if existing else curated
    regions = check_regions(regions, before)
    book_before = _existing_book(price_book, before)  # a broken book stops here, before any API call
    factory = client_factory or make_client
    now = now or _utcnow()
    progress = progress or Progress()
    fetches: list[RegionFetch] = []
    try:
        for region in regions:
            client = factory(region)
            try:
                fetches.append(fetch_region(client, region, curated, now=now, usd_rate=usd_rate, sleep=sleep,
                                            progress=progress))
            except MalformedResponse as exc:
                raise CloudApiError(
                    f"{exc.api} ({region}) returned a malformed response: {exc.message}; rejected, nothing was "
                    "written (the previous catalog is unchanged)",
                    hint="retry later; if it persists the API or SDK changed: update trainstack") from None
    except CloudApiError as err:
        if "nothing was written" in err.message:
            raise
        raise CloudApiError(err.message + " (nothing was written; the previous catalog is unchanged)",
                            hint=err.hint) from None
    finally:
        progress.done()

    records = {f.region: f.record for f in fetches}
    for region, rec in records.items():
        problems = ov.validate_overlay(rec)
        if problems:
            raise CloudApiError(f"the API answers for {region} do not form a valid catalog overlay; rejected, "
                                "nothing was written:\n  " + "\n  ".join(problems),
                                hint="retry later; if it persists the API or SDK changed: update trainstack")
    kept = [r for r in existing if r.get("region") not in records]
    try:
        after = build_catalog(overlays=kept + list(records.values()))
    except CatalogError as exc:
        raise CloudApiError(f"the refreshed data would make the catalog inconsistent; rejected, nothing was "
                            f"written: {exc}",
                            hint="review the curated data files against the API answer") from None
    summary = diff(before, after, fetches)
    book_text, book_rows, book_notes = None, 0, []
    if price_book is not None:
        fresh = []
        for rec in records.values():
            rows, notes = trade_entries(rec)
            fresh += rows
            book_notes += notes
        entries = merged_entries(book_before, fresh, records)
        book_text, book_rows = dumps_book(entries), len(fresh)
    written: list[Path] = []
    for rc in summary.regions:
        rc.path = str(ov.overlay_path(out_dir, rc.region))
    if not dry_run:
        for region, rec in records.items():
            path = ov.overlay_path(out_dir, region)
            atomic_write_text(path, ov.dumps(rec))
            written.append(path)
        if price_book is not None and book_text is not None:
            atomic_write_text(Path(price_book), book_text)
            written.append(Path(price_book))
        summary.written = True
        clear_cache()
    return RefreshResult(summary=summary, after=after, records=records, written=written, price_book=price_book,
                         price_book_rows=book_rows, price_book_notes=book_notes)


def _existing_book(path: Optional[Path], catalog: Catalog) -> list:
    """The entries of the price book ``--price-book`` names (none when it does not exist yet)."""
    if path is None or not Path(path).exists():
        return []

    return list(read_price_book(path, catalog).entries)
