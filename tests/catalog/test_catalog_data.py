"""The catalog data: every correction of the seed documents, sources for every fact, loader checks.

Facts checked here come from shared/reference/alibaba-gpu-facts.md (sections A, B, C, G, H) and
the issue-15 audit corrections (each test names the source tag of the fact it checks).
"""

from __future__ import annotations

import json
import math
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
from trainstack.catalog.loader import DATA_DIR, build_catalog, excluded_family_of
from trainstack.errors import InputError

SNAPSHOT_FILE = "alibaba-gpu-on-demand-2024-11.json"
SNAPSHOT = DATA_DIR / "prices" / SNAPSHOT_FILE
#: ../shared beside the checkout (as laid out for developers and CI)
REFERENCE_SNAPSHOT = Path(__file__).resolve().parents[3] / "shared" / "reference" / "prices" / SNAPSHOT_FILE

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


#: PyTorch's device totals in public logs (GiB) [TORCH-*], the lowest where several exist.
TORCH_TOTALS = {"L20": 44.53, "L40S": 44.53, "A100-80G": 79.15, "A100-40G": 39.39, "A10": 21.99,
                "A30": 23.53, "T4": 14.56, "V100-32G": 31.74, "V100-16G": 15.78, "H100": 79.11,
                "H200": 139.8}


def test_usable_gib_figures(cat):
    # the audit: L20 was 44.0 (nominal 45,056 MiB), A100 80G 79.35 and A100 40G 39.59 (older
    # nvidia-smi totals); usable GiB is now what torch.cuda reports as the device total
    for name, total in TORCH_TOTALS.items():
        g = cat.gpus[name]
        assert (g.usable_gib, g.torch_total_gib, g.usable_basis) == (total, total, "torch-total"), name
        assert g.usable_source.startswith(("TORCH-", "CALIB-")), name
    for g in cat.gpus.values():
        assert 0 < g.usable_gib <= g.memory_gb, g.name


def test_no_usable_gib_is_above_pytorchs_figure(cat):
    allowance = cat.settings["usable_memory_allowance_mib"]
    for g in cat.gpus.values():
        if g.torch_total_gib is not None:
            assert g.usable_gib <= g.torch_total_gib, g.name
        if g.nvidia_smi_total_mib is not None:
            # nvidia-smi counts more than the CUDA device total; PyTorch's figure is always below
            assert g.usable_gib < g.nvidia_smi_total_mib / 1024, g.name
        if g.usable_basis == "nvidia-smi-less-allowance":
            assert g.usable_gib == math.floor((g.nvidia_smi_total_mib - allowance) / 1024 * 100) / 100, g.name
    # the allowance covers every gap seen between nvidia-smi and PyTorch on the same part
    gaps = [g.nvidia_smi_total_mib - g.torch_total_gib * 1024 for g in cat.gpus.values()
            if g.torch_total_gib is not None and g.nvidia_smi_total_mib is not None]
    assert gaps and max(gaps) <= allowance


def test_parts_without_a_pytorch_figure_say_so(cat):
    assert {g.name for g in cat.gpus.values() if g.usable_basis == "nvidia-smi-less-allowance"} == {"P100", "P4", "H20"}
    assert cat.gpus["H20"].usable_gib == 94.57  # (97,871 - 1,024) MiB [SMI-H20]
    for name in ("H800", "H100-PCIe"):  # no public measurement: the SXM H100's, stated as assumed
        g = cat.gpus[name]
        assert g.usable_basis == "assumed" and g.usable_gib == cat.gpus["H100"].usable_gib
        assert "usable_gib" in g.unverified and "H100" in g.notes


def test_the_cuda_context_stays_with_the_estimator(cat):
    from trainstack.sizing import constants

    assert constants.CUDA_CONTEXT_GIB > 0  # counted in `required`, not taken off usable_gib
    assert "CUDA context" in GpuModel.model_fields["usable_gib"].description


@pytest.mark.parametrize("change,match", [
    (dict(usable_source=None), "no usable_source"),
    (dict(usable_basis="torch-total", torch_total_gib=22.0), "torch-total needs usable_gib == torch_total_gib"),
    (dict(usable_basis="assumed", unverified=()), "must be listed in unverified"),
    (dict(torch_total_gib=22.0, usable_basis="assumed", unverified=("usable_gib",)), "above 22.0 GiB"),
    (dict(usable_basis="nvidia-smi-less-allowance", nvidia_smi_total_mib=None, unverified=("usable_gib",)),
     "needs nvidia_smi_total_mib"),
])
def test_loader_enforces_the_usable_memory_rule(change, match):
    base = dict(name="G", architecture="ampere", memory_gb=24, usable_gib=22.2, usable_basis="torch-total",
                usable_source="S", torch_total_gib=22.2, supports_bf16=True, supports_fp8=False, sources=("S",))
    base.update(change)
    with pytest.raises(CatalogError, match=match):
        _tiny(gpus=[GpuModel(**base)])


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
    "ebmgn7": "nvswitch", "ebmgn6ia": "pcie",
}


@pytest.mark.parametrize("family,link", sorted(INTERCONNECT.items()))
def test_interconnect_per_the_facts(cat, family, link):
    f = cat.families[family]
    assert f.interconnect == link
    if link == "unverified":
        assert "interconnect" in f.unverified


def test_ebmgn7_is_a100_on_nvswitch_per_the_bare_metal_overview(cat):
    f = cat.families["ebmgn7"]
    assert f.interconnect == "nvswitch" and "OLD-EBM" in f.sources and "interconnect" not in f.unverified
    assert cat.instance("ecs.ebmgn7.26xlarge").multi_gpu_training_ok


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
    # no public source gives an ERI count for ebmgn7ix or ebmgn8ia (only "ERI, 160 Gbit/s")
    for name in ("ecs.ebmgn7ix.32xlarge", "ecs.ebmgn8ia.64xlarge"):
        t = cat.instance_types[name]
        assert t.eri_count is None and "eri_count" in t.unverified, name
    assert "ebmgn7ex" not in (cat.families["ebmgn8ia"].notes or "")
    assert cat.instance("ecs.sccgn7ex.32xlarge").type.rdma_bandwidth_gbps == 800
    assert cat.instance("ecs.gn8is-2x.8xlarge").type.eri_count == 1


def test_uefi_status_and_deployment_sets(cat):
    uefi = {f.name for f in cat.families.values() if f.uefi_required}
    # every family whose doc says its images must boot UEFI [EBM-ZH][GPU-ZH]; ebmgn7ix since round 3
    assert uefi == {"ebmgn7ex", "ebmgn7ix", "ebmgn8v", "ebmgn8is", "ebmgn8ia", "gn9gc", "ebmgn9g", "ebmgn9ge",
                    "ebmgn9gc"}
    for name in uefi:
        cite = cat.families[name].cite("boot_mode", "boot-mode")
        assert cite is not None and name.lower() in cite.quote.lower() and "UEFI" in cite.quote, name
    # LowLatency support per the deployment-set overview [DSET-ZH]; other families unverified
    low = {f.name for f in cat.families.values() if f.deployment_set_low_latency}
    assert low == {"gn8v", "ebmgn8v", "ebmgn7ex"}
    for name in low:
        assert "DSET-ZH" in cat.families[name].sources
    assert all(f.deployment_set_low_latency is None for f in cat.families.values() if f.name not in low)
    assert {f.name for f in cat.families.values() if f.status == "not-recommended"} == {"gn5", "gn5i", "gn7s", "ebmgn6ia"}
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
            if excluded_family_of(name, cat.excluded_families):
                continue  # a knowingly excluded family (Intel GPU, video transcoding)
            t = cat.instance_types[name]
            assert (t.vcpu, t.memory_gib, t.gpu_count) == (row["vcpu"], row["memory_gib"], row["gpu_count"]), name
            assert "PRICE-VS" in t.sources, name


def test_types_the_november_snapshot_adds_are_recorded_or_excluded_with_a_reason(cat, snapshot):
    names = {n for rows in snapshot.values() for n in rows}
    for name in ("ecs.ebmgn7i.32xlarge", "ecs.gn7r-c16g1.4xlarge", "ecs.ebmgn6e.24xlarge", "ecs.ebmgn6ia.20xlarge"):
        assert name in names and cat.knows(name), name
    ia = cat.instance("ecs.ebmgn6ia.20xlarge")
    assert (ia.gpu.name, ia.type.gpu_count, ia.type.vcpu, ia.family.interconnect) == ("T4", 2, 80, "pcie")
    assert not ia.family.training and "RETIRED-ZH" in ia.family.sources
    for name, why in (("ecs.ebmgi6s.24xlarge", "Intel"), ("ecs.video-trans.26xhevc", "transcod")):
        assert name in names and not cat.knows(name)
        with pytest.raises(InputError) as exc:
            cat.instance(name)
        assert why in exc.value.message and "not in the catalog" in exc.value.message


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
    for g in cat.gpus.values():
        assert ("usable_gib" in g.unverified) == (g.usable_basis != "torch-total"), g.name
        assert g.usable_source in g.sources and g.usable_source in cat.sources, g.name


# ---- settings and the price snapshot -------------------------------------------------------------------

def test_settings(cat, snapshot):
    s = cat.settings
    assert s["price_snapshot"] == {"file": SNAPSHOT_FILE, "source": "PRICE-VS", "as_of": "2024-11-07"}
    assert "f4246b12076a9c8e0aa94eb98890ac4617c25916" in cat.sources["PRICE-VS"].url
    assert s["spot_estimate_fraction"] == 0.5 and s["price_max_age_days"] == 90
    assert s["default_region"] == "cn-shenzhen"
    assert set(snapshot) <= set(s["regions"])
    assert {"cn-shanghai", "cn-wulanchabu", "cn-shenzhen"} <= set(cat.regions())
    assert cat.newest_price_date == "2024-11-07"
    assert cat.snapshot_date == "2024-11-07"  # every price in use is from the November snapshot


def test_november_snapshot_prices_gn7_and_cn_shanghai(cat):
    # gn7 (A100 40 GB) was unpriced in the October file; [PRICE-VS] lists it in cn-beijing and cn-shanghai
    for region in ("cn-beijing", "cn-shanghai"):
        sh = cat.seen_in(region, "ecs.gn7-c13g1.26xlarge")
        assert sh.on_demand_cny_per_hour == pytest.approx(252.67, abs=0.01) and sh.source == "PRICE-VS"
    assert cat.seen_in("cn-shanghai", "ecs.gn7-c12g1.3xlarge").on_demand_cny_per_hour == pytest.approx(31.58, abs=0.01)
    assert len(cat.prices["cn-shanghai"]) >= 50  # absent from the October file


def test_supplementary_prices_are_never_shadowed_silently(cat):
    # supplementary.yaml only fills gaps; the 2023 cn-shanghai rows it held are all in [PRICE-VS] now,
    # so every row left in it must name a (region, type) pair the snapshot lacks
    blocks = yaml.safe_load((DATA_DIR / "prices" / "supplementary.yaml").read_text(encoding="utf-8")) or []
    snapshot = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    for block in blocks:
        for name in block["on_demand_cny_per_hour"]:
            assert name not in snapshot.get(block["region"], {}), (block["region"], name)
            assert cat.seen_in(block["region"], name).source == block["source"]
    readme = (DATA_DIR / "prices" / "README.md").read_text(encoding="utf-8")
    assert "f4246b12076a9c8e0aa94eb98890ac4617c25916" in readme and "gn7 IS priced" in readme


def test_supplementary_rows_fill_gaps_only(data_copy):
    path = data_copy / "prices" / "supplementary.yaml"
    path.write_text(yaml.safe_dump([
        {"source": "PRICE-AC", "as_of": "2023-06-17", "region": "cn-shanghai",
         "on_demand_cny_per_hour": {"ecs.gn7-c12g1.3xlarge": 1.0, "ecs.ebmgn7ex.32xlarge": 250.0}}]), encoding="utf-8")
    c = build_catalog(data_copy, overlays=[])
    assert c.seen_in("cn-shanghai", "ecs.gn7-c12g1.3xlarge").source == "PRICE-VS"  # the newer row wins
    gap = c.seen_in("cn-shanghai", "ecs.ebmgn7ex.32xlarge")
    assert (gap.on_demand_cny_per_hour, gap.source, gap.as_of) == (250.0, "PRICE-AC", "2023-06-17")


@pytest.mark.skipif(not REFERENCE_SNAPSHOT.exists(), reason="shared reference not mounted")
def test_snapshot_is_a_byte_copy_of_the_reference():
    assert SNAPSHOT.read_bytes() == REFERENCE_SNAPSHOT.read_bytes()


def test_november_snapshot_corrects_the_two_zero_prices(cat, snapshot):
    # the October file had 0 (unknown) for gn6v-c8g1.4xlarge in cn-beijing and cn-zhangjiakou
    for region, price in (("cn-beijing", 52.92), ("cn-zhangjiakou", 39.68)):
        assert snapshot[region]["ecs.gn6v-c8g1.4xlarge"]["on_demand_cny_per_hour"] == pytest.approx(price, abs=0.005)
        assert cat.quote(region, "ecs.gn6v-c8g1.4xlarge").on_demand_cny_per_hour == pytest.approx(price, abs=0.005)
    assert not [(r, n) for r, rows in snapshot.items() for n, row in rows.items() if not row["on_demand_cny_per_hour"]]


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
    path = data_copy / "prices" / SNAPSHOT_FILE
    raw = json.loads(path.read_text(encoding="utf-8"))
    raw["cn-shenzhen"]["ecs.gn7i-c8g1.2xlarge"]["on_demand_cny_per_hour"] = 0
    path.write_text(json.dumps(raw), encoding="utf-8")
    c = build_catalog(data_copy, overlays=[])
    assert c.seen_in("cn-shenzhen", "ecs.gn7i-c8g1.2xlarge").on_demand_cny_per_hour is None
    q = c.quote("cn-shenzhen", "ecs.gn7i-c8g1.2xlarge")
    assert q.on_demand_cny_per_hour and q.on_demand_from_region != "cn-shenzhen"  # borrowed, never 0
    assert any("no listed price" in label for label in q.labels)


def test_loader_rejects_a_snapshot_that_disagrees(data_copy):
    path = data_copy / "prices" / SNAPSHOT_FILE
    raw = json.loads(path.read_text(encoding="utf-8"))
    raw["cn-shenzhen"]["ecs.gn7i-c8g1.2xlarge"]["gpu_count"] = 2
    path.write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(CatalogError, match="disagrees"):
        build_catalog(data_copy, overlays=[])


def _tiny(**over):
    args = dict(
        sources=[SourceRef(tag="S", title="s")],
        gpus=[GpuModel(name="G", architecture="ampere", memory_gb=24, usable_gib=22.2, usable_basis="torch-total",
                       usable_source="S", torch_total_gib=22.2, supports_bf16=True, supports_fp8=False,
                       sources=("S",))],
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
    too_big = GpuModel(name="G", architecture="ampere", memory_gb=24, usable_gib=25, usable_source="S",
                       unverified=("usable_gib",), supports_bf16=True, supports_fp8=False, sources=("S",))
    with pytest.raises(CatalogError, match="exceeds"):
        _tiny(gpus=[too_big])
    fp8_wrong = GpuModel(name="G", architecture="ampere", memory_gb=24, usable_gib=22, fp8_tflops=1.0,
                         usable_source="S", unverified=("usable_gib",), supports_bf16=True, supports_fp8=False,
                         sources=("S",))
    with pytest.raises(CatalogError, match="FP8"):
        _tiny(gpus=[fp8_wrong])
