"""`trainstack catalog refresh --region R [--region R2 ...]`: the catalog from Alibaba's ECS API.

Plugs into ``trainstack catalog`` (see ``ACTIONS`` in ``catalog.py``). Fetches GPU type facts,
stock per zone and on-demand / spot prices with the official SDK, prints what changed, and
writes one overlay per region (``data/overlays/<region>.json`` or ``--out-dir``) atomically,
only when every call succeeded. The work is in :mod:`trainstack.refresh`; the SDK is
imported only when the command runs, so the CLI stays fast. User docs: docs/catalog-refresh.md.
"""

from __future__ import annotations

import json
from pathlib import Path


def register(actions) -> None:
    p = actions.add_parser(
        "refresh", help="refresh types, stock and prices from the Alibaba Cloud ECS API",
        description="Fetch GPU instance types (DescribeInstanceTypes), stock per zone "
                    "(DescribeAvailableResource), on-demand prices (DescribePrice) and the latest spot "
                    "prices (DescribeSpotPriceHistory) for each region, print what changed, and write one "
                    "overlay file per region. Credentials come from the standard Alibaba Cloud chain "
                    "(environment, ~/.alibabacloud/credentials.ini, ECS RAM role). Nothing is written unless "
                    "every call succeeds.")
    p.add_argument("--region", dest="regions", action="append", required=True, metavar="REGION",
                   help="region to refresh (repeatable or comma-separated)")
    p.add_argument("--dry-run", action="store_true", help="print the summary, write nothing")
    p.add_argument("--out-dir", metavar="DIR", default=None,
                   help="write the overlays here (default: the catalog's overlay directory, "
                        "$TRAINSTACK_CATALOG_OVERLAYS or trainstack/catalog/data/overlays)")
    p.add_argument("--usd-rate", type=float, metavar="CNY_PER_USD", default=None,
                   help="for accounts billed in USD: the CNY per USD rate to convert prices with (stated "
                        "in the overlay); without it USD prices are recorded but not used")
    p.add_argument("--price-book", metavar="PATH", default=None,
                   help="also write the account's trade prices (DescribePrice TradePrice, after discounts) into "
                        "this price book: created, or its refresh-written rows of these regions replaced "
                        "(hand-written rows are kept)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=run)


def check_usd_rate(value):
    """``--usd-rate``: a finite CNY-per-USD rate within the overlay's bounds (never nan or inf)."""
    import math

    from ..catalog.overlay import MAX_USD_TO_CNY
    from ..errors import InputError, Problem

    if value is not None and (not math.isfinite(value) or not 0 < value <= MAX_USD_TO_CNY):
        raise InputError(f"--usd-rate {value} is not a usable rate", problems=[Problem(
            path="--usd-rate", message="must be a positive, finite CNY-per-USD rate",
            given=value, has_given=True, allowed=f"(0, {MAX_USD_TO_CNY:g}]")])
    return value


def run(args) -> int:
    check_usd_rate(args.usd_rate)
    from .. import refresh
    from ..catalog import loader

    out_dir = Path(args.out_dir) if args.out_dir else loader.overlay_dir()
    book = Path(args.price_book) if getattr(args, "price_book", None) else None
    from ..progress import Progress

    # one line on a terminal (the API calls of each region, as they go), none with --json or in a pipe
    result = refresh.refresh(args.regions, out_dir=out_dir, dry_run=args.dry_run, usd_rate=args.usd_rate,
                             client_factory=refresh.make_client, price_book=book,
                             progress=Progress(label="catalog refresh", quiet=args.json))
    if args.json:
        data = result.summary.to_dict(result.after)
        data["dry_run"] = bool(args.dry_run)
        data["catalog_date"] = result.after.newest_price_date
        if book is not None:
            data["price_book"] = {"file": str(book), "trade_prices": result.price_book_rows,
                                  "notes": result.price_book_notes}
        print(json.dumps(data, indent=2))
    else:
        print(refresh.render_summary(result.summary, result.after, dry_run=args.dry_run))
        if book is not None:
            verb = "would write" if args.dry_run else "wrote"
            print(f"price book: {verb} {result.price_book_rows} trade price(s) to {book}")
            for note in result.price_book_notes:
                print(f"  note: {note}")
    return 0
