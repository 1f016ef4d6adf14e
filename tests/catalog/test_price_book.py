"""The price book: typed, bounded loading (exit 2 naming file and entry), and quotes that prefer it."""

from __future__ import annotations

import datetime as dt
import textwrap

import pytest

from trainstack.catalog import load_catalog
from trainstack.catalog.price_book import MAX_ENTRIES, read_price_book
from trainstack.errors import EXIT_BAD_INPUT, InputError

TODAY = dt.date(2026, 3, 1)
GOOD = """\
prices:
  - region: cn-beijing
    instance_type: ecs.gn8v-8x.48xlarge
    on_demand_cny_per_hour: 160.0
    spot_cny_per_hour: 48
    as_of: 2026-01-15
    source: "account manager quote, contract 2026-017"
  - region: cn-shenzhen
    instance_type: ecs.gn7i-c8g1.2xlarge
    on_demand_cny_per_hour: 7.5
    as_of: "2026-02-01"
    source: enterprise discount 20%
  - region: cn-wulanchabu
    dlc_spec: ml.gu7xf.c96m1600.8-gu108
    on_demand_cny_per_hour: 210
    as_of: 2026-01-15
    source: PAI console order page
  - region: cn-wulanchabu
    resource_id: quota1a2b3c4d
    on_demand_cny_per_hour: 19.5
    as_of: 2026-01-01
    source: subscription / 730 h
"""


def book_file(tmp_path, text, name="prices.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def problems_of(tmp_path, text):
    with pytest.raises(InputError) as err:
        read_price_book(book_file(tmp_path, text), load_catalog(), display="prices.yaml", today=TODAY)
    assert err.value.exit_code == EXIT_BAD_INPUT
    return err.value.problems


def test_a_good_book_loads_and_is_looked_up_by_kind_region_and_name(tmp_path):
    book = read_price_book(book_file(tmp_path, GOOD), load_catalog(), display="prices.yaml", today=TODAY)
    assert len(book) == 4 and book.path == "prices.yaml"
    e = book.get("instance_type", "cn-beijing", "ecs.gn8v-8x.48xlarge")
    assert (e.on_demand_cny_per_hour, e.spot_cny_per_hour, e.as_of, e.unit) == (160.0, 48.0, dt.date(2026, 1, 15), "node")
    assert book.get("instance_type", "cn-shenzhen", "ecs.gn8v-8x.48xlarge") is None  # another region: no price
    assert book.get("dlc_spec", "cn-wulanchabu", "ml.gu7xf.c96m1600.8-gu108").unit == "pod"
    assert book.get("resource_id", "cn-wulanchabu", "quota1a2b3c4d").unit == "GPU"


@pytest.mark.parametrize("entry, path, words", [
    ("{region: cn-beijing, instance_type: ecs.gn8v-8x.48xlarge, on_demand: 1, as_of: 2026-01-01, source: x}",
     "prices[0].on_demand", "unknown field"),
    ("{region: cn-beijing, instance_type: ecs.gn8v-8x.48xlarge, on_demand_cny_per_hour: true, as_of: 2026-01-01, "
     "source: x}", "prices[0].on_demand_cny_per_hour", "number"),
    ("{region: cn-beijing, instance_type: ecs.gn8v-8x.48xlarge, dlc_spec: ecs.gn8v-8x.48xlarge, "
     "on_demand_cny_per_hour: 1, as_of: 2026-01-01, source: x}", "prices[0]", "exactly one of"),
    ("{region: cn-beijing, on_demand_cny_per_hour: 1, as_of: 2026-01-01, source: x}", "prices[0]", "exactly one of"),
    ("{region: cn-beijing, instance_type: ecs.gn8v-8x.48xlarge, on_demand_cny_per_hour: 10, spot_cny_per_hour: 11, "
     "as_of: 2026-01-01, source: x}", "prices[0]", "never exceeds on-demand"),
    ("{region: cn-beijing, resource_id: quota1, on_demand_cny_per_hour: 10, spot_cny_per_hour: 5, "
     "as_of: 2026-01-01, source: x}", "prices[0]", "does not apply to a resource quota"),
    ("{region: cn-beijing, instance_type: ecs.gn8v-8x.48xlarge, on_demand_cny_per_hour: 0, as_of: 2026-01-01, "
     "source: x}", "prices[0].on_demand_cny_per_hour", "greater than 0"),
    ("{region: cn-beijing, instance_type: ecs.gn8v-8x.48xlarge, on_demand_cny_per_hour: 1.0e+9, as_of: 2026-01-01, "
     "source: x}", "prices[0].on_demand_cny_per_hour", "less than or equal"),
    ("{region: cn-beijing, instance_type: ecs.gn8v-8x.48xlarge, on_demand_cny_per_hour: 1, as_of: last week, "
     "source: x}", "prices[0].as_of", "date"),
    ("{region: cn-beijing, instance_type: ecs.gn8v-8x.48xlarge, on_demand_cny_per_hour: 1, as_of: 2026-01-01, "
     "source: '  '}", "prices[0].source", "who set the price"),
    ("{region: cn-beijing, instance_type: ecs.gn8v-8x.48xlarge, on_demand_cny_per_hour: 1, as_of: 2026-01-01}",
     "prices[0].source", "Field required"),
    ("{region: cn-beijing, resource_id: 'quota 1; rm', on_demand_cny_per_hour: 1, as_of: 2026-01-01, source: x}",
     "prices[0].resource_id", "quota id"),
])
def test_a_bad_entry_names_the_file_the_entry_and_the_field(tmp_path, entry, path, words):
    problems = problems_of(tmp_path, f"prices:\n  - {entry}\n")
    assert any(p.path == path and words in p.message for p in problems), [p.render() for p in problems]
    assert all(p.file == "prices.yaml" for p in problems)


def test_catalog_checks_name_regions_types_specs_dates_and_duplicates(tmp_path):
    text = """\
    prices:
      - {region: cn-bejing, instance_type: ecs.gn8v-8x.48xlarge, on_demand_cny_per_hour: 1, as_of: 2026-01-01, source: a}
      - {region: cn-beijing, instance_type: ecs.gn8v-8x.48xlrge, on_demand_cny_per_hour: 1, as_of: 2026-01-01, source: b}
      - {region: cn-beijing, dlc_spec: ml.gu7xf.c96m1600.8-gu10, on_demand_cny_per_hour: 1, as_of: 2026-01-01, source: c}
      - {region: cn-beijing, instance_type: ecs.gn7i-c8g1.2xlarge, on_demand_cny_per_hour: 1, as_of: 2026-04-01, source: d}
      - {region: cn-beijing, instance_type: ecs.gn7i-c8g1.2xlarge, on_demand_cny_per_hour: 2, as_of: 2026-01-01, source: e}
    """
    problems = {p.path: p for p in problems_of(tmp_path, text)}
    assert problems["prices[0].region"].suggestions[0] == "cn-beijing"
    assert "ecs.gn8v-8x.48xlarge" in problems["prices[1].instance_type"].suggestions
    assert "ml.gu7xf.c96m1600.8-gu108" in problems["prices[2].dlc_spec"].suggestions
    assert "after today (2026-03-01)" in problems["prices[3].as_of"].message
    assert "also prices[3]" in problems["prices[4].instance_type"].message
    assert all(p.file == "prices.yaml" for p in problems.values())


@pytest.mark.parametrize("text, words", [
    ("", "is empty"), ("- a\n- b\n", "must be a YAML mapping"), ("prices: [\n", "not valid YAML"),
    ("prices: {a: 1}\n", "valid"), ("other: []\n", "unknown field"),
])
def test_a_broken_file_is_exit_2_naming_it(tmp_path, text, words):
    with pytest.raises(InputError) as err:
        read_price_book(book_file(tmp_path, text), load_catalog(), display="team/prices.yaml", today=TODAY)
    assert any(words in p.render() for p in err.value.problems), [p.render() for p in err.value.problems]
    assert all(p.file == "team/prices.yaml" for p in err.value.problems)


def test_missing_file_and_size_bounds(tmp_path):
    with pytest.raises(InputError, match="price book file not found"):
        read_price_book(tmp_path / "nope.yaml", load_catalog())
    rows = "".join(f"  - {{region: cn-beijing, resource_id: q{i}, on_demand_cny_per_hour: 1, as_of: 2026-01-01, "
                   f"source: s}}\n" for i in range(MAX_ENTRIES + 1))
    (p,) = problems_of(tmp_path, "prices:\n" + rows)
    assert p.path == "prices" and f"at most {MAX_ENTRIES}" in p.message


def test_quote_prefers_the_book_and_says_whose_price_it_is(tmp_path):
    cat = load_catalog()
    book = read_price_book(book_file(tmp_path, GOOD), cat, display="prices.yaml", today=TODAY)
    priced = cat.with_price_book(book)
    assert cat.price_book is None and priced.price_book is book  # the shared catalog is untouched
    q = priced.quote("cn-beijing", "ecs.gn8v-8x.48xlarge")
    assert (q.on_demand_cny_per_hour, q.spot_cny_per_hour, q.spot_estimated) == (160.0, 48.0, False)
    assert q.source_kind == "price-book" and q.as_of == "2026-01-15"
    assert "the team's price from price book prices.yaml" in q.source and "contract 2026-017" in q.source
    assert not q.seen_in_region  # availability still comes from the snapshot
    public = cat.quote("cn-shenzhen", "ecs.gn7i-c8g1.2xlarge")
    q = priced.quote("cn-shenzhen", "ecs.gn7i-c8g1.2xlarge")
    assert q.on_demand_cny_per_hour == 7.5 != public.on_demand_cny_per_hour
    # the spot estimate derives from the list price, never from the team's discounted one
    frac = cat.settings["spot_estimate_fraction"]
    assert q.spot_estimated and q.spot_cny_per_hour == pytest.approx(public.on_demand_cny_per_hour * frac, abs=1e-4)
    assert q.list_on_demand_cny_per_hour == public.on_demand_cny_per_hour
    assert any("not of the team's price" in label for label in q.spot_labels)
    assert q.seen_in_region and q.zones == public.zones
    assert public.source_kind == "snapshot" and "public list price" in public.source


def test_pai_specs_and_quotas_are_priced_only_by_the_book(tmp_path):
    cat = load_catalog()
    priced = cat.with_price_book(read_price_book(book_file(tmp_path, GOOD), cat, today=TODAY))
    spec = priced.quote("cn-wulanchabu", "ml.gu7xf.c96m1600.8-gu108", service="dlc")
    assert (spec.on_demand_cny_per_hour, spec.per, spec.source_kind) == (210.0, "pod", "price-book")
    quota = priced.quote("cn-wulanchabu", "quota1a2b3c4d", service="dlc-quota")
    assert (quota.on_demand_cny_per_hour, quota.per) == (19.5, "GPU")
    # an ECS type's public price is never taken for its DLC price
    dlc = cat.quote("cn-shenzhen", "ecs.gn7i-c8g1.2xlarge", service="dlc")
    assert dlc.on_demand_cny_per_hour is None and dlc.source_kind == "none"
    assert "Alibaba publishes no per-spec PAI price" in dlc.source and "dlc_spec" in dlc.labels[0]


def test_borrowed_and_unknown_prices_are_labelled_as_such():
    cat = load_catalog()
    borrowed = [q for r in cat.resolved_instances() if (q := cat.quote("cn-hangzhou", r.name)).on_demand_from_region]
    assert borrowed and all(q.source_kind == "borrowed-region" and "borrowed from" in q.source for q in borrowed)
    q = cat.quote("cn-beijing", "ecs.gn8v-8x.48xlarge")
    assert q.on_demand_cny_per_hour is None and q.source_kind == "none" and "price book" in q.labels[0]
