"""The catalog data: every correction of the seed documents, sources for every fact, loader checks.

Facts checked here come from shared/reference/alibaba-gpu-facts.md (sections A, B, C, G, H).
"""

from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path

import pytest
import yaml

from trainstack.catalog import (
    Catalog,
    CatalogError,
    GpuModel,
    InstanceFamily,
    InstanceType,
    RegionPrice,
    SourceRef,
    is_mainland_china,
)
from trainstack.catalog.loader import DATA_DIR, build_catalog
from trainstack.errors import InputError

SNAPSHOT = DATA_DIR / "prices" / "alibaba-gpu-on-demand-2024-10.json"
#: ../shared beside the checkout (as laid out for developers and CI)
REFERENCE_SNAPSHOT = Path(__file__).resolve().parents[3] / "shared" / "reference" / "prices" / "alibaba-gpu-on-demand-2024-10.json"

#: The types of facts section B (claims 10-13) and the invented ones after table B.
NON_EXISTENT = {
    "ecs.gn7-xlarge": "gn7",
    "ecs.gn6v-c8g1.large": "gn6v",
    "ecs.gn7i-c4g1.2xlarge": "gn7i",
    "ecs.gn7i-c8g1.24xlarge": "gn7i",
    "ecs.gn7-c16g1.4xlarge": "gn7",
    "ecs.gn7-c32g1.8xlarge": "gn7",
    "ecs.gn6v-c16g1.4xlarge": "gn6v",
}


@pytest.fixture(scope="module")
def cat() -> Catalog:
    return build_catalog(overlays=[])


@pytest.fixture(scope="module")
def snapshot() -> dict:
    return json.loads(SNAPSHOT.read_text(encoding="utf-8"))


def family_of(cat: Catalog, type_name: str) -> str:
    return cat.instance(type_name).family.name


# ---- what is in the catalog ---------------------------------------------------------------------

REQUIRED_GPUS = {"P100", "P4", "T4", "V100-16G", "V100-32G", "A10", "A30", "A100-40G", "A100-80G",
                 "L20", "L40S", "H20", "H100", "H100-PCIe", "H200", "H800"}
REQUIRED_FAMILIES = {
    "gn5", "gn5i", "gn6i", "gn6v", "gn6e", "gn7", "gn7e", "gn7i", "gn7s", "gn7r", "gn8is", "gn8ia",
    "gn8v", "gn9gc", "ebmgn6e", "ebmgn6v", "ebmgn6i", "ebmgn7", "ebmgn7e", "ebmgn7ex", "ebmgn7i",
    "ebmgn7ix", "ebmgn8v", "ebmgn8is", "ebmgn8ia", "ebmgn9g", "ebmgn9ge", "ebmgn9gc", "sccgn7ex"}


def test_required_gpus_and_families_are_present(cat):
    assert REQUIRED_GPUS <= set(cat.gpus)
    assert REQUIRED_FAMILIES <= set(cat.families)
    assert {"sgn6i", "sgn7i", "vgn6i", "vgn7i", "sgn8ia"} <= cat.excluded_families
    assert not cat.excluded_families & set(cat.families)


def test_every_family_has_a_type(cat):
    used = {t.family for t in cat.instance_types.values()}
    assert used == set(cat.families)


def test_gn7i_sizes_are_exactly_the_documented_twelve(cat):
    documented = {f"ecs.gn7i-{s}" for s in (
        "c8g1.2xlarge", "c16g1.4xlarge", "c32g1.8xlarge", "c32g1.16xlarge", "c32g1.32xlarge",
        "c48g1.12xlarge", "c56g1.14xlarge", "2x.8xlarge", "4x.8xlarge", "4x.16xlarge",
        "8x.16xlarge", "8x.32xlarge")}
    assert {n for n, t in cat.instance_types.items() if t.family == "gn7i"} == documented
    small = cat.instance("ecs.gn7i-c8g1.2xlarge").type
    assert (small.vcpu, small.memory_gib, small.gpu_count) == (8, 30, 1)


def test_gn7_and_gn6v_sizes(cat):
    assert {n for n, t in cat.instance_types.items() if t.family == "gn7"} == {
        "ecs.gn7-c12g1.3xlarge", "ecs.gn7-c13g1.13xlarge", "ecs.gn7-c13g1.26xlarge"}
    assert [cat.instance_types[n].gpu_count for n in
            ("ecs.gn7-c12g1.3xlarge", "ecs.gn7-c13g1.13xlarge", "ecs.gn7-c13g1.26xlarge")] == [1, 4, 8]
    smallest = min((t for t in cat.instance_types.values() if t.family == "gn6v"), key=lambda t: t.vcpu)
    assert smallest.name == "ecs.gn6v-c8g1.2xlarge"
    assert (smallest.vcpu, smallest.memory_gib, smallest.gpu_count) == (8, 32, 1)


# ---- the corrections of the seed documents (facts section B) -------------------------------------

def test_gn7i_is_a10_24gb_on_pcie_without_multi_gpu_training(cat):
    fam = cat.families["gn7i"]
    assert fam.gpu == "A10" and fam.interconnect == "pcie"
    a10 = cat.gpus["A10"]
    assert a10.memory_gb == 24 and a10.architecture == "ampere"
    for r in cat.resolved_instances():
        if r.family.name == "gn7i":
            assert r.gpu.name == "A10"
            assert r.multi_gpu_training_ok is False
            assert r.trainable is True


def test_gn7_is_a100_40gb_hbm2_on_nvswitch(cat):
    fam = cat.families["gn7"]
    assert fam.gpu == "A100-40G" and fam.interconnect == "nvswitch"
    gpu = cat.gpus["A100-40G"]
    assert gpu.memory_gb == 40 and gpu.memory_type == "HBM2"
    assert cat.instance("ecs.gn7-c13g1.26xlarge").multi_gpu_training_ok is True


def test_gn7e_is_a100_80gb_hbm2e(cat):
    assert cat.families["gn7e"].gpu == "A100-80G"
    assert cat.families["gn7e"].interconnect == "nvlink"
    gpu = cat.gpus["A100-80G"]
    assert gpu.memory_gb == 80 and gpu.memory_type == "HBM2e"
    # HBM3 only on the 96 GB Hopper-class GPU of gn8v
    assert {g.name for g in cat.gpus.values() if g.memory_type == "HBM3"} & {"A100-40G", "A100-80G"} == set()
    for fam in ("ebmgn7e", "ebmgn7ex"):
        assert cat.families[fam].gpu == "A100-80G"


@pytest.mark.parametrize("name", ["A100-40G", "A100-80G"])
def test_a100_has_no_fp8(cat, name):
    gpu = cat.gpus[name]
    assert gpu.supports_fp8 is False and gpu.fp8_tflops is None
    assert gpu.supports_bf16 is True and gpu.bf16_tflops == 312


def test_gn6v_is_v100_16gb_not_t4_and_gn6e_is_v100_32gb(cat):
    assert cat.families["gn6v"].gpu == "V100-16G"
    assert cat.families["gn6e"].gpu == "V100-32G"
    assert cat.families["gn6i"].gpu == "T4"
    assert cat.gpus["V100-16G"].memory_gb == 16 and cat.gpus["V100-32G"].memory_gb == 32
    assert cat.families["gn6v"].interconnect == cat.families["gn6e"].interconnect == "nvlink"


def test_gn8is_is_l20_48gb(cat):
    assert cat.families["gn8is"].gpu == "L20"
    l20 = cat.gpus["L20"]
    assert l20.memory_gb == 48 and l20.architecture == "ada" and l20.supports_fp8
    assert cat.families["gn8is"].interconnect == "pcie"
    # no L40S family exists: the L40S is kept for estimates only
    assert cat.gpus["L40S"].estimate_only
    assert all(f.gpu != "L40S" for f in cat.families.values())


def test_a10_is_24gb_with_about_22gib_usable(cat):
    a10 = cat.gpus["A10"]
    assert a10.memory_gb == 24
    assert 21.9 <= a10.usable_gib <= 22.5
    assert not any(g.memory_gb == 48 and g.name.startswith("A10") for g in cat.gpus.values())


def test_usable_gib_figures(cat):
    assert cat.gpus["H200"].usable_gib == pytest.approx(139.8)
    assert cat.gpus["A100-80G"].usable_gib == pytest.approx(81251 / 1024, abs=0.01)
    assert cat.gpus["L20"].usable_gib == pytest.approx(45056 / 1024, abs=0.01)
    for g in cat.gpus.values():
        assert 0 < g.usable_gib <= g.memory_gb, g.name


def test_fp8_only_on_hopper_and_ada_bf16_from_ampere(cat):
    for g in cat.gpus.values():
        assert g.supports_fp8 == (g.architecture in ("hopper", "ada")), g.name
        assert g.supports_bf16 == (g.architecture not in ("pascal", "volta", "turing")), g.name
        if g.fp8_tflops is not None:
            assert g.supports_fp8, g.name
        if not g.supports_bf16:
            assert g.bf16_tflops is None, g.name


def test_table_h_dense_figures(cat):
    expect = {  # name: (bandwidth GB/s, dense BF16, dense FP16, dense FP8)
        "V100-16G": (900, None, 125, None), "T4": (320, None, 65, None),
        "A10": (600, 125, 125, None), "A30": (933, 165, 165, None),
        "A100-40G": (1555, 312, 312, None), "L20": (864, 119, 119, 237),
        "L40S": (864, 362, 362, 733), "H20": (4000, 148, 148, 296),
        "H100": (3350, 989, 989, 1979), "H200": (4800, 989, 989, 1979),
        "H100-PCIe": (2000, 756, 756, None),
    }
    for name, (bw, bf16, fp16, fp8) in expect.items():
        g = cat.gpus[name]
        assert (g.memory_bandwidth_gbs, g.bf16_tflops, g.fp16_tflops, g.fp8_tflops) == (bw, bf16, fp16, fp8), name


def test_estimate_only_gpus_are_exactly_those_no_family_sells(cat):
    sold = {f.gpu for f in cat.families.values() if f.gpu}
    for g in cat.gpus.values():
        assert g.estimate_only == (g.name not in sold), g.name
    assert {"H100", "H100-PCIe", "H200", "H800", "L40S"} <= {g.name for g in cat.gpus.values() if g.estimate_only}
    assert not cat.gpus["H20"].estimate_only


def test_gn8v_gpu_is_modelled_as_h20_and_marked_unverified(cat):
    for fam in ("gn8v", "gn8v-tee", "ebmgn8v"):
        f = cat.families[fam]
        assert f.gpu == "H20" and "gpu" in f.unverified, fam
        assert f.interconnect == "nvlink" and f.rdma == "erdma"
    assert "never names" in cat.families["gn8v"].notes
    h20 = cat.gpus["H20"]
    assert (h20.memory_gb, h20.memory_type, h20.memory_bandwidth_gbs) == (96, "HBM3", 4000)
    assert {"name", "bf16_tflops", "fp16_tflops", "fp8_tflops"} <= set(h20.unverified)


def test_gn8ia_and_blackwell_families_have_no_gpu(cat):
    gn8ia = cat.families["gn8ia"]
    assert gn8ia.gpu is None and gn8ia.training is False and "gpu" in gn8ia.unverified
    for fam in ("gn9gc", "ebmgn9g", "ebmgn9ge", "ebmgn9gc"):
        f = cat.families[fam]
        assert f.gpu is None and "gpu" in f.unverified
        assert f.status == "invitational-preview" and f.interconnect == "pcie"
    assert cat.families["gn7r"].training is False
    assert not cat.instance("ecs.gn8ia.8xlarge").trainable


INTERCONNECT = {
    "gn7i": "pcie", "gn7": "nvswitch", "gn6v": "nvlink", "gn6e": "nvlink", "gn7e": "nvlink",
    "ebmgn7e": "nvlink", "ebmgn7ex": "nvlink", "gn8v": "nvlink", "ebmgn8v": "nvlink",
    "sccgn7ex": "nvswitch", "gn8is": "pcie", "ebmgn8is": "pcie", "ebmgn8ia": "pcie", "gn6i": "pcie",
    "ebmgn7i": "pcie", "ebmgn7ix": "pcie", "gn9gc": "pcie", "ebmgn9g": "pcie", "ebmgn9ge": "pcie",
    "ebmgn9gc": "pcie", "ebmgn6e": "nvlink", "gn7s": "unverified", "gn5": "unverified",
    "ebmgn7": "unverified",
}


@pytest.mark.parametrize("family,link", sorted(INTERCONNECT.items()))
def test_interconnect_per_the_facts(cat, family, link):
    f = cat.families[family]
    assert f.interconnect == link
    if link == "unverified":
        assert "interconnect" in f.unverified


def test_rdma_per_section_c(cat):
    erdma = {"gn8v", "gn8v-tee", "gn8is", "ebmgn8v", "ebmgn8is", "ebmgn8ia", "ebmgn7ex", "ebmgn7ix",
             "gn9gc", "ebmgn9g", "ebmgn9ge", "ebmgn9gc"}
    for f in cat.families.values():
        if f.name in erdma:
            assert f.rdma == "erdma", f.name
        elif f.name == "sccgn7ex":
            assert f.rdma == "roce"
        elif f.name == "gn8ia":
            assert f.rdma == "unverified"
        else:
            assert f.rdma == "none", f.name
    ex = cat.instance("ecs.ebmgn7ex.32xlarge")
    assert (ex.type.eri_count, ex.type.rdma_bandwidth_gbps, ex.rdma) == (2, 160, "erdma")
    assert cat.instance("ecs.sccgn7ex.32xlarge").type.rdma_bandwidth_gbps == 800
    assert cat.instance("ecs.gn8is-2x.8xlarge").type.eri_count == 1


def test_uefi_status_and_deployment_sets(cat):
    uefi = {f.name for f in cat.families.values() if f.uefi_required}
    assert uefi == {"ebmgn7ex", "ebmgn8v", "ebmgn8is", "ebmgn8ia", "gn9gc", "ebmgn9g", "ebmgn9ge", "ebmgn9gc"}
    assert all(f.deployment_set_low_latency is None for f in cat.families.values())
    assert {f.name for f in cat.families.values() if f.status == "not-recommended"} == {"gn5", "gn5i", "gn7s"}
    for fam in ("gn8is", "gn8v", "ebmgn8v", "ebmgn8is", "ebmgn8ia"):
        assert cat.families[fam].status == "contact-sales"


# ---- types that do not exist, vGPU slices -----------------------------------------------------------

@pytest.mark.parametrize("name,family", sorted(NON_EXISTENT.items()))
def test_non_existent_types_raise_with_a_same_family_suggestion(cat, name, family):
    assert not cat.knows(name)
    with pytest.raises(InputError) as exc:
        cat.instance(name)
    suggestions = exc.value.problems[0].suggestions
    assert suggestions, name
    assert all(cat.knows(s) for s in suggestions)
    assert any(family_of(cat, s) == family for s in suggestions), suggestions
    assert "did you mean" in exc.value.problems[0].render()


def test_seed_typos_suggest_the_intended_type(cat):
    def first(name):
        with pytest.raises(InputError) as exc:
            cat.instance(name)
        return exc.value.problems[0].suggestions

    assert "ecs.gn7i-c8g1.2xlarge" in first("ecs.gn7i-c8g1.24xlarge")
    assert "ecs.gn6v-c8g1.2xlarge" in first("ecs.gn6v-c8g1.large")


def test_vgpu_slices_are_left_out_and_say_why(cat, snapshot):
    slices = {n for rows in snapshot.values() for n in rows if n.startswith(("ecs.sgn", "ecs.vgn"))}
    assert len(slices) >= 10
    for name in slices:
        assert not cat.knows(name)
        with pytest.raises(InputError) as exc:
            cat.instance(name)
        assert "vGPU slice" in exc.value.message and "not in the catalog" in exc.value.message
    assert not any(name in rows for rows in cat.prices.values() for name in slices)


def test_every_snapshot_gpu_type_is_in_the_catalog_and_agrees(cat, snapshot):
    for region, rows in snapshot.items():
        for name, row in rows.items():
            if name.startswith(("ecs.sgn", "ecs.vgn")):
                continue
            t = cat.instance_types[name]
            assert (t.vcpu, t.memory_gib, t.gpu_count) == (row["vcpu"], row["memory_gib"], row["gpu_count"]), name
            assert "PRICE-CP" in t.sources, name


# ---- every fact has a source -------------------------------------------------------------------------

def _fields(model) -> set[str]:
    return set(type(model).model_fields)


def test_every_record_cites_known_sources(cat):
    tags = set(cat.sources)
    records = [*cat.gpus.values(), *cat.families.values(), *cat.instance_types.values()]
    for rec in records:
        assert rec.sources, rec.name
        assert set(rec.sources) <= tags, rec.name
        assert len(set(rec.sources)) == len(rec.sources), rec.name
        assert set(rec.unverified) <= _fields(rec) - {"sources", "unverified", "notes"}, rec.name
    for rows in cat.prices.values():
        for p in rows.values():
            assert p.source in tags and p.as_of
    for s in cat.sources.values():
        assert s.title
        assert s.url is None or s.url.startswith("https://"), s.tag


def test_nvidia_datasheets_are_one_tag_each(cat):
    nvidia = {t for t in cat.sources if t.startswith("NVIDIA-")}
    assert {"NVIDIA-A100", "NVIDIA-A10", "NVIDIA-A30", "NVIDIA-T4", "NVIDIA-V100", "NVIDIA-L40S",
            "NVIDIA-H100", "NVIDIA-H200"} <= nvidia
    assert "NVIDIA" not in cat.sources


def test_unknown_values_are_listed_as_unverified(cat):
    for g in cat.gpus.values():
        missing = {f for f in ("memory_type", "memory_bandwidth_gbs", "fp16_tflops") if getattr(g, f) is None}
        if g.supports_bf16 and g.bf16_tflops is None:
            missing.add("bf16_tflops")
        if g.supports_fp8 and g.fp8_tflops is None:
            missing.add("fp8_tflops")
        assert missing <= set(g.unverified), (g.name, missing)
    for f in cat.families.values():
        missing = {"gpu"} if f.gpu is None else set()
        missing |= {k for k in ("interconnect", "rdma") if getattr(f, k) == "unverified"}
        assert missing <= set(f.unverified), (f.name, missing)
    for t in cat.instance_types.values():
        missing = {k for k in ("vcpu", "memory_gib", "eri_count", "network_bandwidth_gbps")
                   if getattr(t, k) is None}
        if cat.families[t.family].rdma not in ("none",) and t.rdma_bandwidth_gbps is None:
            missing.add("rdma_bandwidth_gbps")
        assert missing <= set(t.unverified), (t.name, missing)


def test_derived_usable_memory_is_marked(cat):
    sourced = {"P100", "P4", "T4", "V100-16G", "V100-32G", "A10", "A100-40G", "A100-80G", "L20", "H200"}
    for g in cat.gpus.values():
        assert ("usable_gib" in g.unverified) == (g.name not in sourced), g.name


# ---- settings and the price snapshot -------------------------------------------------------------------

def test_settings(cat, snapshot):
    s = cat.settings
    assert s["price_snapshot"] == {"file": "alibaba-gpu-on-demand-2024-10.json", "source": "PRICE-CP",
                                   "as_of": "2024-10-09"}
    assert s["spot_estimate_fraction"] == 0.5 and s["price_max_age_days"] == 90
    assert s["default_region"] == "cn-shenzhen"
    assert set(snapshot) <= set(s["regions"])
    assert {"cn-shanghai", "cn-wulanchabu", "cn-shenzhen"} <= set(cat.regions())
    assert cat.newest_price_date == "2024-10-09"
    assert cat.snapshot_date == "2023-06-17"  # the oldest price in use: cn-shanghai's [PRICE-AC] rows


def test_supplementary_prices_fill_gaps_only_and_keep_their_source(cat):
    sh = cat.seen_in("cn-shanghai", "ecs.gn7-c13g1.26xlarge")
    assert sh.on_demand_cny_per_hour == 252.66 and sh.source == "PRICE-AC" and sh.as_of == "2023-06-17"
    # gn7 (A100 40 GB) has no 2024 price anywhere: other mainland regions borrow the labelled 2023 figure
    q = cat.quote("cn-shenzhen", "ecs.gn7-c12g1.3xlarge")
    assert q.on_demand_cny_per_hour == 31.58 and q.on_demand_from_region == "cn-shanghai"
    assert any("2023-06-17" in lab for lab in q.labels)
    # a snapshot row is never replaced by an older supplementary one
    assert cat.seen_in("cn-shenzhen", "ecs.gn7i-c8g1.2xlarge").source == "PRICE-CP"


@pytest.mark.skipif(not REFERENCE_SNAPSHOT.exists(), reason="shared reference not mounted")
def test_snapshot_is_a_byte_copy_of_the_reference():
    assert SNAPSHOT.read_bytes() == REFERENCE_SNAPSHOT.read_bytes()


def test_price_of_zero_in_the_snapshot_is_unknown(cat, snapshot):
    assert snapshot["cn-beijing"]["ecs.gn6v-c8g1.4xlarge"]["on_demand_cny_per_hour"] == 0
    row = cat.seen_in("cn-beijing", "ecs.gn6v-c8g1.4xlarge")
    assert row is not None and row.on_demand_cny_per_hour is None
    q = cat.quote("cn-beijing", "ecs.gn6v-c8g1.4xlarge")
    assert q.on_demand_cny_per_hour is None and q.spot_cny_per_hour is None
    assert any("no price known" in label for label in q.labels)


def test_quote_borrows_a_mainland_price_with_a_label(cat):
    name = "ecs.ebmgn7ex.32xlarge"
    assert cat.seen_in("cn-shanghai", name) is None
    q = cat.quote("cn-shanghai", name)
    donors = sorted(rows[name].on_demand_cny_per_hour for r, rows in cat.prices.items()
                    if r != "cn-shanghai" and is_mainland_china(r) and name in rows)
    assert q.on_demand_from_region and is_mainland_china(q.on_demand_from_region)
    assert q.on_demand_cny_per_hour == donors[len(donors) // 2]
    assert q.on_demand_cny_per_hour in donors and min(donors) <= statistics.median(donors) <= max(donors)
    assert any("estimated from" in label and q.on_demand_from_region in label for label in q.labels)
    assert any("availability" in label for label in q.labels)
    assert q.spot_estimated and q.spot_cny_per_hour == pytest.approx(q.on_demand_cny_per_hour * 0.5, abs=1e-3)
    assert any("spot price" in label and "estimate" in label for label in q.spot_labels)
    assert not any("spot price" in label for label in q.labels)


def test_quote_does_not_borrow_outside_mainland_china(cat):
    name = "ecs.gn7e-c16g1.4xlarge"
    assert cat.seen_in("us-west-1", name) is None
    q = cat.quote("us-west-1", name)
    assert q.on_demand_cny_per_hour is None and q.on_demand_from_region is None


def test_quote_never_returns_zero(cat):
    for region in cat.regions():
        for name in cat.instance_types:
            q = cat.quote(region, name)
            for value in (q.on_demand_cny_per_hour, q.spot_cny_per_hour):
                assert value is None or value > 0, (region, name)
            if q.on_demand_cny_per_hour is None:
                assert q.spot_cny_per_hour is None


# ---- the loader rejects bad data ------------------------------------------------------------------------

@pytest.fixture()
def data_copy(tmp_path) -> Path:
    dst = tmp_path / "data"
    shutil.copytree(DATA_DIR, dst, ignore=shutil.ignore_patterns("overlays"))
    return dst


def _edit_yaml(path: Path, change) -> None:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    change(doc)
    path.write_text(yaml.safe_dump(doc, allow_unicode=True, sort_keys=False), encoding="utf-8")


def test_data_copy_builds(data_copy):
    assert len(build_catalog(data_copy, overlays=[]).instance_types) > 50


@pytest.mark.parametrize("file,kind", [("gpus.yaml", "GPU"), ("instance_types.yaml", "instance type"),
                                       ("sources.yaml", "source")])
def test_loader_rejects_duplicates(data_copy, file, kind):
    _edit_yaml(data_copy / file, lambda doc: doc.append(dict(doc[0])))
    with pytest.raises(CatalogError, match=f"duplicate {kind}"):
        build_catalog(data_copy, overlays=[])


def test_loader_rejects_duplicate_family(data_copy):
    _edit_yaml(data_copy / "families.yaml", lambda doc: doc["families"].append(dict(doc["families"][0])))
    with pytest.raises(CatalogError, match="duplicate family"):
        build_catalog(data_copy, overlays=[])


def test_loader_rejects_unknown_source_tags(data_copy):
    def change(doc):
        doc["families"][0]["sources"] = ["NO-SUCH-TAG"]

    _edit_yaml(data_copy / "families.yaml", change)
    with pytest.raises(CatalogError, match="unknown source 'NO-SUCH-TAG'"):
        build_catalog(data_copy, overlays=[])


def test_loader_reads_a_zero_price_as_unknown(data_copy):
    path = data_copy / "prices" / "alibaba-gpu-on-demand-2024-10.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    raw["cn-shenzhen"]["ecs.gn7i-c8g1.2xlarge"]["on_demand_cny_per_hour"] = 0
    path.write_text(json.dumps(raw), encoding="utf-8")
    c = build_catalog(data_copy, overlays=[])
    assert c.seen_in("cn-shenzhen", "ecs.gn7i-c8g1.2xlarge").on_demand_cny_per_hour is None
    q = c.quote("cn-shenzhen", "ecs.gn7i-c8g1.2xlarge")
    assert q.on_demand_cny_per_hour and q.on_demand_from_region != "cn-shenzhen"  # borrowed, never 0


def test_loader_rejects_a_snapshot_that_disagrees(data_copy):
    path = data_copy / "prices" / "alibaba-gpu-on-demand-2024-10.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    raw["cn-shenzhen"]["ecs.gn7i-c8g1.2xlarge"]["gpu_count"] = 2
    path.write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(CatalogError, match="disagrees"):
        build_catalog(data_copy, overlays=[])


def _tiny(**over):
    args = dict(
        sources=[SourceRef(tag="S", title="s")],
        gpus=[GpuModel(name="G", architecture="ampere", memory_gb=24, usable_gib=22.2,
                       supports_bf16=True, supports_fp8=False, sources=("S",))],
        families=[InstanceFamily(name="gx", gpu="G", interconnect="pcie", rdma="none", sources=("S",))],
        instance_types=[InstanceType(name="ecs.gx.large", family="gx", gpu_count=1, sources=("S",))],
        prices=[], settings={"spot_estimate_fraction": 0.5})
    args.update(over)
    return Catalog(**args)


def test_catalog_rejects_a_zero_price_given_directly():
    assert _tiny().knows("ecs.gx.large")
    bad = RegionPrice(region="cn-shenzhen", instance_type="ecs.gx.large", on_demand_cny_per_hour=0,
                      source="S", as_of="2024-10-09")
    with pytest.raises(CatalogError, match="unknown must be null"):
        _tiny(prices=[bad])


def test_catalog_rejects_prices_and_gpus_that_make_no_sense():
    orphan = RegionPrice(region="cn-shenzhen", instance_type="ecs.gx.xlarge", on_demand_cny_per_hour=1.0,
                         source="S", as_of="2024-10-09")
    with pytest.raises(CatalogError, match="type the catalog lacks"):
        _tiny(prices=[orphan])
    too_big = GpuModel(name="G", architecture="ampere", memory_gb=24, usable_gib=25,
                       supports_bf16=True, supports_fp8=False, sources=("S",))
    with pytest.raises(CatalogError, match="exceeds"):
        _tiny(gpus=[too_big])
    fp8_wrong = GpuModel(name="G", architecture="ampere", memory_gb=24, usable_gib=22, fp8_tflops=1.0,
                         supports_bf16=True, supports_fp8=False, sources=("S",))
    with pytest.raises(CatalogError, match="FP8"):
        _tiny(gpus=[fp8_wrong])
