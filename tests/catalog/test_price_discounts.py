"""Price-book discounts: schema errors name file, entry, field, value and what is allowed; the quote
takes the highest-precedence figure (docs/prices.md); spot is discounted only where applies_to says
so and is estimated from the list price; the bid never exceeds the team's on-demand price."""

from __future__ import annotations

import datetime as dt
import math
import textwrap

import pytest
from hypothesis import given, settings, strategies as st

from trainstack.catalog import load_catalog
from trainstack.catalog.price_book import (
    ANY_REGION, DiscountEntry, PriceBook, PriceBookEntry, entry_problems, read_price_book,
)
from trainstack.errors import EXIT_BAD_INPUT, InputError
from trainstack.plan import spot_price_limit

TODAY = dt.date(2026, 3, 1)
REGION, TYPE, FAMILY = "cn-shenzhen", "ecs.gn7i-c8g1.2xlarge", "gn7i"


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def load(tmp_path, cat, text):
    path = tmp_path / "prices.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return read_price_book(path, cat, display="prices.yaml", today=TODAY)


def problems_of(tmp_path, cat, entry):
    with pytest.raises(InputError) as err:
        load(tmp_path, cat, f"prices:\n  - {entry}\n")
    assert err.value.exit_code == EXIT_BAD_INPUT
    return err.value.problems


def test_a_family_discount_lowers_on_demand_only(tmp_path, cat):
    book = load(tmp_path, cat, """\
        prices:
          - {region: "*", family: gn7i, discount_percent: 15, as_of: 2026-01-01, source: enterprise agreement}
        """)
    public, q = cat.quote(REGION, TYPE), cat.with_price_book(book).quote(REGION, TYPE)
    assert q.on_demand_cny_per_hour == pytest.approx(public.on_demand_cny_per_hour * 0.85, abs=1e-4)
    assert q.list_on_demand_cny_per_hour == public.on_demand_cny_per_hour and q.discount_percent == 15
    assert q.spot_cny_per_hour == public.spot_cny_per_hour and q.spot_estimated  # no applies_to spot
    assert q.source_kind == "price-book" and "less 15 %" in q.source and "family gn7i" in q.source
    assert q.as_of == min(public.as_of, "2026-01-01")  # the older ingredient dates the price
    assert "list" in q.spot_labels[0] and "not of the team's price" in q.spot_labels[0]


def test_applies_to_spot_discounts_the_estimate_too(tmp_path, cat):
    book = load(tmp_path, cat, f"""\
        prices:
          - {{region: {REGION}, instance_type: {TYPE}, discount_percent: 20, applies_to: [on_demand, spot],
              as_of: 2026-01-01, source: contract}}
        """)
    public, q = cat.quote(REGION, TYPE), cat.with_price_book(book).quote(REGION, TYPE)
    assert q.spot_cny_per_hour == pytest.approx(public.spot_cny_per_hour * 0.8, abs=1e-3)
    assert q.spot_estimated and q.spot_discount_percent == 20


def test_a_discount_without_a_list_price_prices_nothing(tmp_path, cat):
    name = next(r.name for r in cat.resolved_instances()
                if cat.quote("ap-southeast-1", r.name).on_demand_cny_per_hour is None)
    family = cat.instance(name).family.name
    book = load(tmp_path, cat, f"""\
        prices:
          - {{region: ap-southeast-1, family: {family}, discount_percent: 10, as_of: 2026-01-01, source: x}}
        """)
    q = cat.with_price_book(book).quote("ap-southeast-1", name)
    assert q.on_demand_cny_per_hour is None and q.source_kind == "none"
    assert any("no list price" in label for label in q.labels)


@pytest.mark.parametrize("entry, path, words", [
    ("{region: '*', family: gn7i, instance_type: ecs.gn7i-c8g1.2xlarge, discount_percent: 5, as_of: 2026-01-01, "
     "source: x}", "prices[0]", "at most one of instance_type, family"),
    ("{region: '*', family: gn7i, discount_percent: 0, as_of: 2026-01-01, source: x}",
     "prices[0].discount_percent", "greater than 0"),
    ("{region: '*', family: gn7i, discount_percent: 100, as_of: 2026-01-01, source: x}",
     "prices[0].discount_percent", "less than 100"),
    ("{region: '*', family: gn7i, discount_percent: '15%', as_of: 2026-01-01, source: x}",
     "prices[0].discount_percent", "number"),
    ("{region: '*', family: gn7i, discount_percent: 5, applies_to: [reserved], as_of: 2026-01-01, source: x}",
     "prices[0].applies_to[0]", "'on_demand' or 'spot'"),
    ("{region: '*', family: gn7i, discount_percent: 5, applies_to: [spot, spot], as_of: 2026-01-01, source: x}",
     "prices[0]", "twice"),
    ("{region: '*', instance_type: ecs.gn7i-c8g1.2xlarge, on_demand_cny_per_hour: 5, as_of: 2026-01-01, source: x}",
     "prices[0].region", "for discount entries only"),
    ("{region: '*', family: gn7j, discount_percent: 5, as_of: 2026-01-01, source: x}",
     "prices[0].family", "instance family not in the catalog"),
    ("{region: cn-shenzen, discount_percent: 5, as_of: 2026-01-01, source: x}", "prices[0].region", "unknown region"),
    ("{region: '*', family: gn7i, discount_percent: 5, as_of: 2030-01-01, source: x}", "prices[0].as_of",
     "after today"),
])
def test_a_broken_discount_says_where_and_what_is_allowed(tmp_path, cat, entry, path, words):
    problems = problems_of(tmp_path, cat, entry)
    assert any(p.path == path and words in p.message for p in problems), [(p.path, p.message) for p in problems]
    assert all(p.file == "prices.yaml" for p in problems)


def test_an_unknown_discount_field_lists_the_discount_fields(tmp_path, cat):
    (p,) = problems_of(tmp_path, cat, "{region: '*', family: gn7i, discount_percent: 5, percent: 5, "
                                      "as_of: 2026-01-01, source: x}")
    assert p.path == "prices[0].percent" and "discount_percent" in p.allowed and "applies_to" in p.allowed


def test_suggestions_and_duplicates(tmp_path, cat):
    (p,) = problems_of(tmp_path, cat, "{region: '*', family: gn8iss, discount_percent: 5, as_of: 2026-01-01, source: x}")
    assert "gn8is" in p.suggestions and p.given == "gn8iss"
    with pytest.raises(InputError) as err:
        load(tmp_path, cat, """\
            prices:
              - {region: "*", family: gn7i, discount_percent: 5, as_of: 2026-01-01, source: x}
              - {region: "*", family: gn7i, discount_percent: 7, applies_to: [on_demand, spot], as_of: 2026-01-01,
                 source: y}
              - {region: "*", family: gn7i, discount_percent: 3, applies_to: [spot], as_of: 2026-01-01, source: z}
            """)
    twice = [q for q in err.value.problems if "twice" in q.message]
    assert [q.path for q in twice] == ["prices[1].family", "prices[2].family"]


# ---- precedence, for every combination of entries ---------------------------------------------------

SCOPES = ("instance_type", "family", "region")


def discount(scope, where, pct, applies):
    subject = {"instance_type": {"instance_type": TYPE}, "family": {"family": FAMILY}, "region": {}}[scope]
    return DiscountEntry(region=where, discount_percent=pct, applies_to=applies, as_of="2026-01-01",
                         source=f"{scope}@{where}", **subject)


entries = st.fixed_dictionaries({
    "absolute": st.one_of(st.none(), st.tuples(st.floats(1, 50), st.one_of(st.none(), st.floats(0.1, 1)))),
    "discounts": st.lists(st.tuples(st.sampled_from(SCOPES), st.sampled_from((REGION, ANY_REGION)),
                                    st.floats(0.5, 90), st.sampled_from((("on_demand",), ("spot",),
                                                                         ("on_demand", "spot")))),
                          max_size=8, unique_by=lambda d: (d[0], d[1])),
})


@settings(max_examples=200, deadline=None)
@given(spec=entries)
def test_the_quote_is_the_highest_precedence_figure(cat, spec):
    rows = [discount(*d) for d in spec["discounts"]]
    if spec["absolute"] is not None:
        od, spot_share = spec["absolute"]
        rows.append(PriceBookEntry(region=REGION, instance_type=TYPE, on_demand_cny_per_hour=od,
                                   spot_cny_per_hour=None if spot_share is None else math.floor(od * spot_share * 1e4) / 1e4 or None,
                                   as_of="2026-01-01", source="absolute"))
    assert entry_problems(rows, cat, "prices.yaml", TODAY) == []
    q = cat.with_price_book(PriceBook("prices.yaml", rows)).quote(REGION, TYPE)
    listed = cat.quote(REGION, TYPE).on_demand_cny_per_hour
    frac = float(cat.settings["spot_estimate_fraction"])

    def first(applies):
        rank = {(s, w): i for i, (s, w) in enumerate((s, w) for s in SCOPES for w in (REGION, ANY_REGION))}
        hits = sorted((rank[(d.scope, d.region)], d) for d in rows
                      if isinstance(d, DiscountEntry) and applies in d.applies_to)
        return hits[0][1] if hits else None

    absolute = next((r for r in rows if isinstance(r, PriceBookEntry)), None)
    cut = first("on_demand")
    want_od = (absolute.on_demand_cny_per_hour if absolute else
               round(listed * cut.factor(), 4) if cut else listed)
    assert q.on_demand_cny_per_hour == pytest.approx(want_od)
    if absolute is not None and absolute.spot_cny_per_hour is not None:
        assert (q.spot_cny_per_hour, q.spot_estimated) == (absolute.spot_cny_per_hour, False)
    else:
        spot_cut = first("spot")
        want = round(listed * frac, 4) * (spot_cut.factor() if spot_cut else 1.0)
        assert q.spot_estimated and q.spot_cny_per_hour == pytest.approx(want, abs=1e-4)
        assert q.spot_discount_percent == (spot_cut.discount_percent if spot_cut else None)
    # the bid stays at the team's own on-demand price, never above it
    assert spot_price_limit(q.on_demand_cny_per_hour) <= q.on_demand_cny_per_hour
    assert q.on_demand_cny_per_hour - spot_price_limit(q.on_demand_cny_per_hour) < 0.001


def test_the_schema_file_is_the_models_and_accepts_both_kinds(tmp_path):
    import json
    import pathlib

    import jsonschema
    import yaml

    from trainstack.catalog.price_book_models import price_book_schema

    path = pathlib.Path(__file__).resolve().parents[2] / "docs" / "price-book.schema.json"
    schema = json.loads(path.read_text(encoding="utf-8"))
    assert schema == price_book_schema(), "regenerate docs/price-book.schema.json (docs/prices.md)"
    doc = yaml.safe_load(textwrap.dedent(f"""\
        prices:
          - {{region: {REGION}, instance_type: {TYPE}, on_demand_cny_per_hour: 7.5, as_of: "2026-01-01", source: x}}
          - {{region: "*", family: gn7i, discount_percent: 15, applies_to: [spot], as_of: "2026-01-01", source: y}}
        """))
    jsonschema.validate(doc, schema)
    doc["prices"][1]["percent"] = 15
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, schema)


def test_a_refresh_rewrite_of_the_book_keeps_its_discounts(tmp_path, cat):
    import yaml

    from trainstack.refresh.price_book import dumps, merged_entries

    book = load(tmp_path, cat, f"""\
        prices:
          - {{region: "*", family: gn7i, discount_percent: 15, applies_to: [on_demand, spot], as_of: 2026-01-01,
              source: enterprise agreement}}
          - {{region: {REGION}, instance_type: {TYPE}, on_demand_cny_per_hour: 7.5, as_of: 2026-01-01,
              source: "DescribePrice TradePrice of the account"}}
        """)
    kept = merged_entries(book.entries, [], [REGION])
    assert [e.kind for e in kept] == ["discount"]
    again = load(tmp_path, cat, dumps(kept))
    assert again.entries == tuple(kept) and yaml.safe_load(dumps(kept))["prices"][0]["applies_to"] == ["on_demand",
                                                                                                        "spot"]
