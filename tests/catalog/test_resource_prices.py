"""Storage and network prices: the data file is sourced and checked with the catalog; a quote takes the
price book's entry (the exact level before the kind's), else the region's public figure, else (mainland
China) the median of the other mainland regions' figures, labelled, else nothing: unpriced with why and
how to fix it, never 0. Price-book storage and network entries fail like every other entry: file, entry
path, field, value, what is allowed."""

from __future__ import annotations

import datetime as dt
import statistics
import textwrap

import pytest
from hypothesis import given, settings, strategies as st

from trainstack.catalog import load_catalog
from trainstack.catalog.price_book import read_price_book
from trainstack.catalog.resource_prices import (
    LEVELS, NETWORK_KINDS, STORAGE_KINDS, load_resource_prices, no_public_prices, price_errors,
)
from trainstack.errors import EXIT_BAD_INPUT, InputError

TODAY = dt.date(2026, 3, 1)
CAT = load_catalog()
DATA = load_resource_prices()
REGIONS = CAT.regions()
KINDS = [(k, lv) for k in STORAGE_KINDS for lv in (LEVELS[k] or (None,))] + [(k, None) for k in NETWORK_KINDS]


def mainland(region: str) -> bool:
    return region.startswith("cn-") and region != "cn-hongkong"


def public(region: str, kind: str, level):
    if kind in STORAGE_KINDS:
        row = DATA.storage_figure(region, kind, level)
        return None if row is None else row.cny_per_gib_month
    row = DATA.network_figure(region, kind)
    return None if row is None else row.cny_per_hour


def book(tmp_path, text):
    path = tmp_path / "prices.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return read_price_book(path, CAT, display="prices.yaml", today=TODAY)


# ---- the data ---------------------------------------------------------------------------------

def test_every_figure_cites_a_known_source_and_region_and_is_positive():
    assert price_errors(DATA, set(CAT.sources), set(REGIONS)) == []
    assert DATA.storage and DATA.network
    assert all(p.cny_per_gib_month > 0 for p in DATA.storage) and all(p.cny_per_hour > 0 for p in DATA.network)
    assert all(p.as_of <= TODAY for p in (*DATA.storage, *DATA.network))


def test_a_wrong_source_or_region_is_a_catalog_error():
    broken = DATA.model_copy(update={"storage": (DATA.storage[0].model_copy(update={"source": "NOPE",
                                                                                     "region": "cn-nowhere"}),)})
    errors = price_errors(broken, set(CAT.sources), set(REGIONS))
    assert any("unknown source 'NOPE'" in e for e in errors) and any("unknown region 'cn-nowhere'" in e for e in errors)


def test_essd_is_billed_per_hour_and_cpfs_and_oss_by_the_month_over_30_days():
    hours = {k: v.hours for k, v in DATA.billing_hours_per_month.items()}
    assert hours == {"cloud_essd": 730, "cloud_auto": 730, "cpfs": 720, "oss": 720}
    # the ESSD figure is the published hourly one x 730, so the quote gives it back exactly
    assert CAT.resource_quote("cn-hangzhou", "cloud_essd", "PL1").hourly_per_unit == pytest.approx(0.0021)
    assert CAT.resource_quote("cn-hangzhou", "cloud_essd", "PL0").hourly_per_unit == pytest.approx(0.0010)


@pytest.mark.parametrize("kind, level", [(u.storage, u.performance_level) for u in DATA.unpublished])
def test_what_no_source_states_is_unpriced_with_what_was_searched_and_the_fix(kind, level):
    for region in ("cn-hangzhou", "cn-shenzhen", "ap-southeast-1"):
        q = CAT.resource_quote(region, kind, level)
        assert q.cny is None and q.source_kind == "none"
        assert "no public price" in q.unpriced and "price book" in q.unpriced and "docs/prices.md" in q.unpriced
        assert f"storage: {kind}, performance_level: {level}" in q.unpriced


# ---- the quote, by group ------------------------------------------------------------------------

@settings(max_examples=150, derandomize=True, deadline=None)
@given(region=st.sampled_from(REGIONS), kind=st.sampled_from(KINDS))
def test_the_public_precedence_for_every_region_and_kind(region, kind):
    name, level = kind
    q = CAT.resource_quote(region, name, level)
    local = public(region, name, level)
    donors = [public(r, name, level) for r in REGIONS if r != region and mainland(r)]
    donors = [d for d in donors if d is not None]
    if local is not None:
        assert (q.cny, q.source_kind, q.borrowed_from) == (local, "public", None)
    elif mainland(region) and donors:
        assert q.source_kind == "borrowed-region" and q.cny == sorted(donors)[len(donors) // 2]
        assert q.cny in donors and min(donors) <= q.cny <= max(donors)
        assert q.borrowed_from and q.borrowed_from != region and region in q.label and q.borrowed_from in q.label
        assert q.cny == pytest.approx(statistics.median_high(donors))
    elif (rule := DATA.level_factor(name, level)) and mainland(region) and \
            CAT.resource_quote(region, name, rule[0].base_level).cny is not None:
        base = CAT.resource_quote(region, name, rule[0].base_level)
        assert q.source_kind == "derived" and q.cny == pytest.approx(base.cny * rule[1])
        assert f"{rule[1]:g} x the" in q.label and "SCU-OFFSET" in q.source and base.source in q.source
    else:
        assert q.cny is None and q.unpriced and q.source_kind == "none"
    assert q.cny is None or q.cny > 0  # unknown is never 0


def test_essd_levels_cost_more_the_faster_they_are_in_every_mainland_region():
    for region in (r for r in REGIONS if mainland(r)):
        figures = [CAT.resource_quote(region, "cloud_essd", lv).cny for lv in LEVELS["cloud_essd"]]
        assert None not in figures and figures == sorted(figures), region


@settings(max_examples=80, derandomize=True, deadline=None)
@given(region=st.sampled_from([r for r in REGIONS if r != "*"]), kind=st.sampled_from(KINDS),
       exact=st.booleans(), whole=st.booleans(), price=st.floats(0.01, 50, allow_nan=False))
def test_the_price_book_wins_the_exact_level_first(tmp_path_factory, region, kind, exact, whole, price):
    name, level = kind
    field = "storage" if name in STORAGE_KINDS else "network"
    figure = "cny_per_gib_month" if field == "storage" else "cny_per_hour"
    entries = []
    if exact and level is not None:
        entries.append(f"- {{region: {region}, {field}: {name}, performance_level: {level}, {figure}: {price}, "
                       "as_of: 2026-01-01, source: exact}")
    if whole:
        entries.append(f"- {{region: {region}, {field}: {name}, {figure}: {price * 2}, as_of: 2026-01-01, "
                       "source: whole kind}")
    if not entries:
        return
    tmp = tmp_path_factory.mktemp("book")
    b = book(tmp, "prices:\n" + "\n".join("  " + e for e in entries) + "\n")
    q = CAT.with_price_book(b).resource_quote(region, name, level)
    want = price if (exact and level is not None) else price * 2
    assert q.source_kind == "price-book" and q.cny == pytest.approx(want)
    assert "the team's price from price book prices.yaml" in q.source
    # another region keeps the public precedence, and the public catalog is untouched
    assert CAT.resource_quote(region, name, level).source_kind != "price-book"


def test_a_catalog_without_the_data_prices_nothing():
    assert no_public_prices().storage == () and no_public_prices().network == ()


# ---- price-book storage and network entries: the same exact errors --------------------------------

def problems(tmp_path, entry: str):
    with pytest.raises(InputError) as err:
        book(tmp_path, f"prices:\n  - {entry}\n")
    assert err.value.exit_code == EXIT_BAD_INPUT and "prices.yaml" in err.value.message
    return {(p.path, p.message, p.given if p.has_given else None) for p in err.value.problems}


@pytest.mark.parametrize("entry, want", [
    ("{region: cn-shenzhen, storage: cloud_essd, performance_level: PL9, cny_per_gib_month: 1, as_of: 2026-01-01, "
     "source: x}", ("prices[0].performance_level", "performance_level of cloud_essd is one of PL0, PL1, PL2, PL3",
                    "PL9")),
    ("{region: cn-shenzhen, storage: oss, performance_level: PL1, cny_per_gib_month: 1, as_of: 2026-01-01, source: x}",
     ("prices[0].performance_level", "oss has no performance level: leave performance_level out", "PL1")),
    ("{region: cn-shenzhen, storage: nas, cny_per_gib_month: 1, as_of: 2026-01-01, source: x}",
     ("prices[0].storage", "Input should be 'cloud_essd', 'cloud_auto', 'cpfs' or 'oss'", "nas")),
    ("{region: cn-shenzhen, storage: cpfs, cny_per_gib_month: 0, as_of: 2026-01-01, source: x}",
     ("prices[0].cny_per_gib_month", "Input should be greater than 0", 0)),
    ("{region: cn-shenzhen, network: nat, cny_per_hour: 1, as_of: 2026-01-01, source: x}",
     ("prices[0].network", "Input should be 'nat_gateway' or 'eip'", "nat")),
    ("{region: cn-shenzhen, network: eip, cny_per_hour: '1', as_of: 2026-01-01, source: x}",
     ("prices[0].cny_per_hour", "Input should be a valid number", "1")),
    ("{region: '*', storage: oss, cny_per_gib_month: 1, as_of: 2026-01-01, source: x}",
     ("prices[0].region", "'*' (every region) is for discount entries only: an absolute price names its region", "*")),
    ("{region: cn-shenzen, storage: oss, cny_per_gib_month: 1, as_of: 2026-01-01, source: x}",
     ("prices[0].region", "unknown region", "cn-shenzen")),
    ("{region: cn-shenzhen, storage: oss, cny_per_gib_month: 1, as_of: 2027-01-01, source: x}",
     ("prices[0].as_of", "is after today (2026-03-01): a price is dated when it was set", "2027-01-01")),
])
def test_a_broken_entry_names_its_path_field_and_value(tmp_path, entry, want):
    assert want in problems(tmp_path, entry)


def test_an_unknown_field_lists_what_the_entry_kind_allows(tmp_path):
    with pytest.raises(InputError) as err:
        book(tmp_path, "prices:\n  - {region: cn-shenzhen, storage: oss, cny_per_gib_mont: 1, as_of: 2026-01-01, "
                       "source: x}\n")
    (extra,) = [p for p in err.value.problems if p.message == "unknown field"]
    assert extra.path == "prices[0].cny_per_gib_mont" and "cny_per_gib_month" in extra.allowed
    assert extra.suggestions == ["cny_per_gib_month"]


def test_a_storage_price_set_twice_is_refused_with_both_entries(tmp_path):
    entry = "{region: cn-shenzhen, storage: cloud_essd, performance_level: PL3, cny_per_gib_month: 3, " \
            "as_of: 2026-01-01, source: x}"
    with pytest.raises(InputError) as err:
        book(tmp_path, f"prices:\n  - {entry}\n  - {entry}\n")
    (p,) = err.value.problems
    assert p.path == "prices[1].performance_level" and "also prices[0]" in p.message
    # the kind without a level and one level of it are different entries
    book(tmp_path, f"prices:\n  - {entry}\n  - {{region: cn-shenzhen, storage: cloud_essd, cny_per_gib_month: 2, "
                   "as_of: 2026-01-01, source: y}\n")


def test_a_team_pl1_price_carries_to_the_levels_estimated_from_it(tmp_path):
    b = book(tmp_path, "prices:\n  - {region: cn-shenzhen, storage: cloud_essd, performance_level: PL1, "
                       "cny_per_gib_month: 1.0, as_of: 2026-01-01, source: contract}\n")
    q = CAT.with_price_book(b).resource_quote("cn-shenzhen", "cloud_essd", "PL3")
    assert q.source_kind == "derived" and q.cny == 4.0 and "the team's price from price book prices.yaml" in q.source
