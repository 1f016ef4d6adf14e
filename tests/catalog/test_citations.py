"""Catalog facts that rest on a quote: the loader refuses a fact whose quote does not carry it."""

from __future__ import annotations

import pytest

from trainstack.catalog import CatalogError, Citation, load_catalog
from trainstack.catalog.facts import Catalog
from trainstack.layout.image import IMAGE_FAMILY, IMAGE_FAMILY_UEFI, plan_image
from trainstack.profile import load_profile


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def rebuilt(cat, **families):
    """The catalog with some families replaced (name -> changed InstanceFamily)."""
    fams = [families.get(f.name, f) for f in cat.families.values()]
    prices = [p for rows in cat.prices.values() for p in rows.values()]
    return Catalog(sources=cat.sources.values(), gpus=cat.gpus.values(), families=fams,
                   instance_types=cat.instance_types.values(), prices=prices, settings=cat.settings,
                   excluded_families=cat.excluded_reasons)


def test_the_shipped_citations_load_and_ebmgn7ix_boots_uefi(cat):
    fam = cat.families["ebmgn7ix"]
    assert fam.boot_mode == "uefi" and fam.uefi_required
    cite = fam.cite("boot_mode")
    assert cite.source == "EBM-ZH" and "ebmgn7ix" in cite.quote and "UEFI" in cite.quote
    assert cite.url.endswith("#ebmgn7ix")
    assert cat.sources["EBM-ZH"].url  # the URL a reader follows


@pytest.mark.parametrize("change, words", [
    (lambda f: f.model_copy(update={"citations": ()}), "has no boot_mode citation"),
    (lambda f: f.model_copy(update={"citations": (Citation(fact="boot_mode", source="EBM-ZH", claim="boot-mode",
                                                           quote="ebmgn7ix 支持BIOS"),)}), "does not carry"),
    (lambda f: f.model_copy(update={"citations": (Citation(fact="boot_mode", source="NVIDIA-A10", claim="boot-mode",
                                                           quote="UEFI only"),)}), "not among the family's sources"),
    (lambda f: f.model_copy(update={"pcie_gen": 4}), "pcie_gen and pcie_gbs come together"),
    (lambda f: f.model_copy(update={"pcie_gen": 5, "pcie_gbs": 128.0}), "has no pcie citation"),
    (lambda f: f.model_copy(update={"citations": f.citations + (Citation(
        fact="nvlink_required_for_transformer", source="EBM-ZH", claim="nvlink-required-for-transformer",
        quote="在使用高通信负载的AI训练业务如Transformer等模型时，务必启用NVLink；否则PCIe链路可能导致数据受损"),)}),
     "warning is cited for a family without NVLink"),
])
def test_a_fact_without_the_quote_behind_it_is_refused(cat, change, words):
    with pytest.raises(CatalogError, match=words):
        rebuilt(cat, ebmgn7ix=change(cat.families["ebmgn7ix"]))


def test_a_pcie_figure_the_quote_does_not_state_is_refused(cat):
    wrong = cat.families["ebmgn8is"].model_copy(update={"pcie_gen": 5})
    with pytest.raises(CatalogError, match="does not state Gen5"):
        rebuilt(cat, ebmgn8is=wrong)


def test_a_gpu_part_quote_must_name_the_families_gpu(cat):
    cite = Citation(fact="interconnect", source="GPU-ZH", claim="gpu-part", quote="采用NVIDIA T4 GPU卡。")
    with pytest.raises(CatalogError, match="naming A10"):
        rebuilt(cat, gn7i=cat.families["gn7i"].model_copy(update={"citations": (cite,)}))


@pytest.mark.parametrize("name, uefi", [("ecs.ebmgn7ix.32xlarge", True), ("ecs.ebmgn8is.32xlarge", True),
                                        ("ecs.gn7i-c8g1.2xlarge", False), ("ecs.ebmgn7i.32xlarge", False)])
def test_the_image_plan_follows_the_sourced_boot_mode(cat, name, uefi):
    profile = load_profile("stacks/profiles/llama3-8b-lora.yaml")
    img = plan_image(profile, cat.instance(name))
    assert img.uefi is uefi and img.image_family == (IMAGE_FAMILY_UEFI if uefi else IMAGE_FAMILY)
    said = [n for n in img.notes if "boots UEFI images only" in n]
    if uefi:
        quote = cat.instance(name).family.cite("boot_mode").quote
        assert said and quote in said[0] and "[EBM-ZH:" in said[0]
    else:
        assert not said


def test_day_two_a_changed_image_choice_leaves_running_ebmgn7ix_nodes_alone(cat):
    """Round 3 moves ebmgn7ix to the UEFI image family. The looked-up image is in the nodes'
    ignore_changes, so the next `pulumi up` of a running ebmgn7ix stack changes nothing on them; only
    new nodes boot the UEFI image. A pinned image_id is managed (a change would replace the disk).
    Hand-edited plans: the resolver places 8 PCIe GPUs only with a policy exception (issue 35 item 2)."""
    from tests.plan_factory import hand_edited, single_gpu_lora_plan
    from trainstack.layout.lifecycle import node_ignore_changes

    profile = load_profile("stacks/profiles/llama3-8b-lora.yaml")
    inst = cat.instance("ecs.ebmgn7ix.32xlarge")
    looked_up = hand_edited(single_gpu_lora_plan(), instance_type=inst.name, image=plan_image(profile, inst))
    assert looked_up.image.image_family == IMAGE_FAMILY_UEFI and "image_id" in node_ignore_changes(looked_up)
    pinned = profile.model_copy(update={"image_id": "m-uefi123"})
    managed = hand_edited(single_gpu_lora_plan(), instance_type=inst.name, image=plan_image(pinned, inst))
    assert "image_id" not in node_ignore_changes(managed)
    assert any("the pinned image must boot UEFI" in n for n in managed.image.notes)
