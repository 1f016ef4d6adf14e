"""Refresh overlays: schema validation, GPU matching, and how they merge with the curated catalog."""

from __future__ import annotations

import copy
import datetime as dt
import json

import pytest

from trainstack import cli
from trainstack.catalog import loader
from trainstack.catalog.loader import CatalogError, build_catalog
from trainstack.catalog.overlay import (
    OverlayError, SOURCE, apply_overlays, dumps, match_gpu, read_overlays, validate_overlay,
)
from trainstack.commands import catalog as catalog_cmd


def record(**over) -> dict:
    rec = {
        "schema_version": 1, "region": "cn-shenzhen", "source": SOURCE, "source_tag": "ECS-API",
        "fetched_at": "2025-03-01T12:00:00Z", "currency": "CNY", "usd_to_cny_rate": None,
        "instance_types": [
            {"name": "ecs.gn7i-c8g1.2xlarge", "family": "gn7i", "gpu_count": 1, "gpu_spec": "NVIDIA A10",
             "gpu_memory_gib": 24.0, "gpu": "A10", "vcpu": 8, "memory_gib": 31.0, "eri_count": 0,
             "network_card_count": 1, "network_bandwidth_gbps": 20.0},
            {"name": "ecs.gn7e-c16g1.64xlarge", "family": "gn7e", "gpu_count": 8, "gpu_spec": "NVIDIA A100",
             "gpu_memory_gib": 80.0, "gpu": "A100-80G", "vcpu": 256, "memory_gib": 2000.0, "eri_count": 0,
             "network_card_count": 1, "network_bandwidth_gbps": 64.0},
            {"name": "ecs.gn9x-c16g1.8xlarge", "family": "gn9x", "gpu_count": 2, "gpu_spec": "NVIDIA H20",
             "gpu_memory_gib": 96.0, "gpu": "H20", "vcpu": 32, "memory_gib": 256.0, "eri_count": 0,
             "network_card_count": 1, "network_bandwidth_gbps": None},
            {"name": "ecs.gn9x-c16g1.2xlarge", "family": "gn9x", "gpu_count": 1, "gpu_spec": "NVIDIA H20",
             "gpu_memory_gib": 96.0, "gpu": "H20", "vcpu": 8, "memory_gib": 64.0, "eri_count": 0,
             "network_card_count": 1, "network_bandwidth_gbps": 8.0},
        ],
        "prices": {
            "ecs.gn7i-c8g1.2xlarge": {"on_demand": 10.0, "trade": 9.0, "zones": ["cn-shenzhen-e"],
                                      "spot_zones": ["cn-shenzhen-d", "cn-shenzhen-e"],
                                      "spot_by_zone": {"cn-shenzhen-d": 2.5, "cn-shenzhen-e": 2.1}},
            "ecs.gn9x-c16g1.8xlarge": {"on_demand": 60.0, "trade": None, "zones": [], "spot_zones": [],
                                       "spot_by_zone": {}},
        },
    }
    rec.update(over)
    return rec


# ---- validation -------------------------------------------------------------------------------------

def test_a_good_overlay_validates():
    assert validate_overlay(record()) == []
    assert validate_overlay(record(currency="USD", usd_to_cny_rate=7.2)) == []


@pytest.mark.parametrize("change,expect", [
    (lambda r: r.pop("instance_types"), "instance_types must be a list"),
    (lambda r: r.update(schema_version=2), "schema_version must be 1"),
    (lambda r: r.update(region="Shenzhen"), "region must be a region id"),
    (lambda r: r.update(fetched_at="yesterday"), "fetched_at must be an ISO 8601"),
    (lambda r: r.update(fetched_at="2025-03-01T12:00:00+08:00"), "must be in UTC"),
    (lambda r: r.update(currency="EUR"), "currency must be one of CNY, USD"),
    (lambda r: r.update(usd_to_cny_rate=7.2), "only meaningful for USD"),
    (lambda r: r.update(currency="USD", usd_to_cny_rate=0), "usd_to_cny_rate must be a positive"),
    (lambda r: r.update(surprise=1), "unknown keys: surprise"),
    (lambda r: r["instance_types"][0].update(gpu_count=0), "gpu_count must be a whole number >= 1"),
    (lambda r: r["instance_types"][0].update(gpu_count=True), "gpu_count must be a whole number >= 1"),
    (lambda r: r["instance_types"][0].update(vcpu=-8), "vcpu must be a whole number >= 1"),
    (lambda r: r["instance_types"][0].update(memory_gib=0), "memory_gib must be a number > 0"),
    (lambda r: r["instance_types"][0].update(family="gn7e"), "does not match the type name"),
    (lambda r: r["instance_types"].append(dict(r["instance_types"][0])), "listed twice"),
    (lambda r: r["prices"]["ecs.gn7i-c8g1.2xlarge"].update(on_demand=-1.0), "on_demand must be a positive"),
    (lambda r: r["prices"]["ecs.gn7i-c8g1.2xlarge"].update(on_demand=0), "on_demand must be a positive"),
    (lambda r: r["prices"]["ecs.gn7i-c8g1.2xlarge"].update(trade=-0.5), "trade must be a price >= 0"),
    (lambda r: r["prices"]["ecs.gn7i-c8g1.2xlarge"].update(zones=["cn-beijing-a"]), "not zones of cn-shenzhen"),
    (lambda r: r["prices"]["ecs.gn7i-c8g1.2xlarge"]["spot_by_zone"].update({"cn-shenzhen-f": 1.0}),
     "not in spot_zones"),
    (lambda r: r["prices"]["ecs.gn7i-c8g1.2xlarge"]["spot_by_zone"].update({"cn-shenzhen-d": -2}),
     "must be positive"),
    (lambda r: r["prices"].update({"ecs.gn7i-c4g1.xlarge": {"on_demand": 5.0}}), "not listed in instance_types"),
])
def test_validation_names_each_problem(change, expect):
    rec = record()
    change(rec)
    problems = validate_overlay(rec)
    assert any(expect in p for p in problems), problems


def test_validation_rejects_non_objects():
    assert validate_overlay([]) == ["an overlay must be a JSON object"]


def test_usd_without_prices_may_have_no_currency():
    assert validate_overlay(record(currency=None, prices={})) == []
    assert validate_overlay(record(currency=None)) != []


# ---- GPU matching -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def curated():
    return build_catalog(overlays=[])


@pytest.mark.parametrize("spec,mem,expect", [
    ("NVIDIA A10", 24, "A10"),
    ("NVIDIA A10", None, "A10"),
    ("NVIDIA A100", 80, "A100-80G"),
    ("NVIDIA A100", 40, "A100-40G"),
    ("NVIDIA A100", None, None),              # 40 or 80 GB: ambiguous
    ("NVIDIA V100", 32, "V100-32G"),
    ("Tesla T4", 16, "T4"),
    ("NVIDIA H20", 96, "H20"),
    ("NVIDIA H100", 80, None),                # SXM or PCIe: ambiguous
    ("NVIDIA H100 PCIe", 80, "H100-PCIe"),
    ("NVIDIA A10", 6, None),                  # a vGPU slice's memory: not the A10
    ("NVIDIA B200", 180, None),               # a GPU the catalog lacks
    ("", 24, None),
    (None, None, None),
])
def test_match_gpu(curated, spec, mem, expect):
    assert match_gpu(spec, mem, curated.gpus.values()) == expect


# ---- merging ------------------------------------------------------------------------------------------

def test_api_wins_for_what_it_knows_and_curated_facts_stay(curated):
    cat = build_catalog(overlays=[record()])
    t = cat.instance_types["ecs.gn7i-c8g1.2xlarge"]
    before = curated.instance_types["ecs.gn7i-c8g1.2xlarge"]
    assert (t.vcpu, t.memory_gib, t.network_bandwidth_gbps) == (8, 31.0, 20.0)  # API values
    assert t.sources == before.sources + ("ECS-API",)
    r = cat.instance("ecs.gn7i-c8g1.2xlarge")
    assert r.family == curated.families["gn7i"] and r.gpu.name == "A10"  # interconnect, GPU facts curated
    assert r.gpu.bf16_tflops == curated.gpus["A10"].bf16_tflops


def test_a_new_family_is_added_with_an_unverified_interconnect():
    cat = build_catalog(overlays=[record()])
    fam = cat.families["gn9x"]
    assert fam.interconnect == "unverified" and fam.gpu == "H20" and fam.rdma == "none"
    assert fam.sources == ("ECS-API",) and {"interconnect", "boot_mode"} <= set(fam.unverified)
    assert "refresh" in fam.notes and "cn-shenzhen" in fam.notes
    big = cat.instance("ecs.gn9x-c16g1.8xlarge")
    assert big.gpu_count == 2 and not big.multi_gpu_training_ok and big.trainable
    assert big.type.unverified == ("network_bandwidth_gbps",)
    small = cat.instance("ecs.gn9x-c16g1.2xlarge")
    assert small.family is fam or small.family == fam


def test_a_new_size_of_a_curated_family_does_not_inherit_its_interconnect(curated):
    cat = build_catalog(overlays=[record()])
    r = cat.instance("ecs.gn7e-c16g1.64xlarge")
    assert curated.families["gn7e"].interconnect == "nvlink"
    assert r.family.name == "gn7e-c16g1.64xlarge" and r.interconnect == "unverified"
    assert r.gpu.name == "A100-80G" and not r.multi_gpu_training_ok  # 8 GPUs: refused for training
    assert cat.families["gn7e"] == curated.families["gn7e"]  # the curated family is unchanged


def test_new_types_of_one_family_with_different_gpus_get_a_family_each():
    rec = record()
    rec["instance_types"][3].update(gpu_spec="NVIDIA L20", gpu_memory_gib=48.0, gpu="L20")
    cat = build_catalog(overlays=[rec])
    assert cat.instance("ecs.gn9x-c16g1.2xlarge").gpu.name == "L20"
    assert cat.instance("ecs.gn9x-c16g1.8xlarge").gpu.name == "H20"


def test_unmatched_gpu_means_not_trainable():
    rec = record()
    for t in rec["instance_types"][2:]:
        t["gpu"] = None
    cat = build_catalog(overlays=[rec])
    r = cat.instance("ecs.gn9x-c16g1.8xlarge")
    assert r.gpu is None and not r.trainable and "gpu" in r.family.unverified


def test_overlay_prices_replace_the_regions_snapshot_rows(curated):
    cat = build_catalog(overlays=[record()])
    rows = cat.prices["cn-shenzhen"]
    assert set(rows) == {"ecs.gn7i-c8g1.2xlarge", "ecs.gn9x-c16g1.8xlarge"}
    a10 = rows["ecs.gn7i-c8g1.2xlarge"]
    assert (a10.on_demand_cny_per_hour, a10.trade_cny_per_hour, a10.spot_cny_per_hour) == (10.0, 9.0, 2.1)
    assert a10.source == "ECS-API" and a10.as_of == "2025-03-01" and a10.zones == ("cn-shenzhen-e",)
    assert a10.spot_zones == ("cn-shenzhen-d", "cn-shenzhen-e")
    assert cat.prices["cn-beijing"] == curated.prices["cn-beijing"]  # other regions untouched
    # a type the region no longer offers: borrowed from another mainland region, labelled
    q = cat.quote("cn-shenzhen", "ecs.gn7i-c16g1.4xlarge")
    assert q.on_demand_from_region and not q.seen_in_region


def test_usd_overlays_convert_only_with_a_stated_rate(curated):
    usd = record(currency="USD")
    cat = build_catalog(overlays=[usd])
    assert cat.prices["cn-shenzhen"] == curated.prices["cn-shenzhen"]  # USD never read as CNY
    assert cat.knows("ecs.gn9x-c16g1.8xlarge")  # type facts still merge
    cat = build_catalog(overlays=[record(currency="USD", usd_to_cny_rate=7.0)])
    row = cat.prices["cn-shenzhen"]["ecs.gn7i-c8g1.2xlarge"]
    assert (row.on_demand_cny_per_hour, row.trade_cny_per_hour, row.spot_cny_per_hour) == (70.0, 63.0, 14.7)
    assert row.currency == "CNY"


def test_the_newest_overlay_of_a_region_wins():
    old = record(fetched_at="2025-01-01T00:00:00Z")
    old["prices"]["ecs.gn7i-c8g1.2xlarge"]["on_demand"] = 8.0
    new = record()
    for order in ([old, new], [new, old]):
        cat = build_catalog(overlays=copy.deepcopy(order))
        assert cat.prices["cn-shenzhen"]["ecs.gn7i-c8g1.2xlarge"].on_demand_cny_per_hour == 10.0


def test_two_regions_merge_and_a_type_added_twice_is_one_type():
    bj = record(region="cn-beijing")
    bj["prices"] = {"ecs.gn9x-c16g1.8xlarge": {"on_demand": 58.0, "trade": 50.0, "zones": ["cn-beijing-l"],
                                               "spot_zones": [], "spot_by_zone": {}}}
    cat = build_catalog(overlays=[record(), bj])
    assert cat.prices["cn-beijing"]["ecs.gn9x-c16g1.8xlarge"].on_demand_cny_per_hour == 58.0
    assert cat.prices["cn-shenzhen"]["ecs.gn9x-c16g1.8xlarge"].on_demand_cny_per_hour == 60.0
    assert list(cat.families).count("gn9x") == 1


def test_apply_overlays_is_pure(curated):
    fams, types, prices = list(curated.families.values()), list(curated.instance_types.values()), \
        [p for rows in curated.prices.values() for p in rows.values()]
    snapshot = (list(fams), list(types), list(prices))
    apply_overlays([record()], fams, types, prices)
    assert (fams, types, prices) == snapshot


def test_an_invalid_overlay_is_a_catalog_error_naming_the_file():
    bad = record()
    bad["prices"]["ecs.gn7i-c8g1.2xlarge"]["on_demand"] = -1
    bad["_file"] = "/somewhere/cn-shenzhen.json"
    with pytest.raises(CatalogError, match=r"/somewhere/cn-shenzhen.json: prices\[ecs.gn7i-c8g1.2xlarge\]"):
        build_catalog(overlays=[bad])


# ---- files and the loader ---------------------------------------------------------------------------

def test_read_overlays_and_dumps_round_trip(tmp_path):
    (tmp_path / "cn-shenzhen.json").write_text(dumps(record(_file="ignored")), encoding="utf-8")
    [rec] = read_overlays(tmp_path)
    assert rec.pop("_file").endswith("cn-shenzhen.json") and rec == record()
    assert read_overlays(tmp_path / "absent") == []
    (tmp_path / "cn-beijing.json").write_text("[1, 2", encoding="utf-8")
    with pytest.raises(OverlayError, match="cn-beijing.json"):
        read_overlays(tmp_path)
    (tmp_path / "cn-beijing.json").write_text(json.dumps(record(region="cn-beijing", schema_version=9)),
                                              encoding="utf-8")
    with pytest.raises(OverlayError, match="schema_version"):
        read_overlays(tmp_path)


@pytest.fixture()
def overlay_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(loader.OVERLAY_DIR_ENV, str(tmp_path))
    loader._cached.cache_clear()
    yield tmp_path
    loader._cached.cache_clear()


def test_catalog_command_dates_count_the_overlay(capsys, overlay_dir, monkeypatch):
    (overlay_dir / "cn-shenzhen.json").write_text(dumps(record()), encoding="utf-8")
    monkeypatch.setattr(catalog_cmd, "_today", lambda: dt.date(2025, 3, 11))
    assert cli.main(["catalog", "--json"]) == 0
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert data["price_date"] == "2025-03-01" and data["price_age_days"] == 10 and not data["prices_stale"]
    assert data["oldest_price_date"] == "2024-11-07" and err == ""  # the rows of the snapshot [PRICE-VS]
    row = next(r for r in data["rows"] if r["instance_type"] == "ecs.gn7i-c8g1.2xlarge")
    assert row["on_demand_cny_per_hour"] == 10.0 and row["spot_cny_per_hour"] == 2.1 and not row["spot_estimated"]
    # stale once the overlay is older than price_max_age_days
    monkeypatch.setattr(catalog_cmd, "_today", lambda: dt.date(2025, 9, 1))
    assert cli.main(["catalog"]) == 0
    _, err = capsys.readouterr()
    assert "warning" in err and "2025-03-01" in err


def test_catalog_table_shows_the_added_type(capsys, overlay_dir, monkeypatch):
    (overlay_dir / "cn-shenzhen.json").write_text(dumps(record()), encoding="utf-8")
    monkeypatch.setattr(catalog_cmd, "_today", lambda: dt.date(2025, 3, 2))
    assert cli.main(["catalog", "--interconnect", "unverified", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = {r["instance_type"]: r for r in data["rows"]}
    assert rows["ecs.gn9x-c16g1.8xlarge"]["multi_gpu_training_ok"] is False
    assert rows["ecs.gn9x-c16g1.8xlarge"]["on_demand_cny_per_hour"] == 60.0
