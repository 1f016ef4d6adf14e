"""PAI-DLC facts as data: Lingjun specs, NCCL presets, job environment, image labels, prices."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from trainstack.catalog import CatalogError, dlc_facts
from trainstack.catalog.dlc_specs import load_dlc_facts
from trainstack.catalog.loader import DATA_DIR


@pytest.fixture(scope="module")
def facts():
    return dlc_facts()


def test_lingjun_specs_documented_by_pai(facts):
    assert [s.name for s in facts.lingjun_specs] == [
        "ml.gu7xf.c96m1600.8-gu108", "ml.gu7xf.8xlarge-gu108", "ml.gu7ef.c96m1600.8-gu100", "ml.gu8xf.8xlarge-gu108"]
    for s in facts.lingjun_specs:
        assert s.rdma and s.rdma_hca == "mlx5" and "PAI-RDMA" in s.sources, s.name
        # nothing public states the hardware per spec: unknown, and said so
        assert s.gpu_model is None and s.gpu_count is None and {"gpu_model", "gpu_count"} <= set(s.unverified)
    reading = facts.spec("ml.gu7xf.c96m1600.8-gu108").name_reading
    assert (reading.vcpu, reading.memory_gib, reading.gpu_count) == (96, 1600, 8)
    assert facts.spec("ml.gu8xf.8xlarge-gu108").name_reading is None


def test_pai_nccl_preset_on_lingjun(facts):
    p = facts.preset("lingjun-default")
    assert p.source == "PAI-RDMA"
    assert p.env == {
        "NCCL_IB_TC": "136", "NCCL_IB_SL": "5", "NCCL_IB_GID_INDEX": "3", "NCCL_SOCKET_IFNAME": "eth",
        "NCCL_DEBUG": "INFO", "NCCL_IB_HCA": "mlx5", "NCCL_IB_TIMEOUT": "22", "NCCL_IB_QPS_PER_CONNECTION": "8",
        "NCCL_NET_PLUGIN": "none"}
    assert all(s.nccl_preset == "lingjun-default" for s in facts.lingjun_specs)
    req = facts.custom_image_requirements
    assert (req.min_cuda, req.min_nccl) == ("11.2", "2.12.10")


def test_the_lingjun_preset_differs_from_the_erdma_one(facts):
    from trainstack.layout import ERDMA_NCCL_ENV

    lingjun = facts.preset("lingjun-default").env
    assert ERDMA_NCCL_ENV["NCCL_IB_HCA"] == "erdma" != lingjun["NCCL_IB_HCA"]
    assert ERDMA_NCCL_ENV["NCCL_IB_GID_INDEX"] != lingjun["NCCL_IB_GID_INDEX"]


def test_pytorch_job_env_counts_nodes_not_processes(facts):
    env = facts.env_for("pytorch")
    assert env.source == "DLC-ENV"
    assert {v.name for v in env.variables} == {"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "NPROC_PER_NODE"}
    assert "NODES" in env.variable("WORLD_SIZE").meaning and "NODE" in env.variable("RANK").meaning
    assert env.launcher_mapping["--nnodes"] == "WORLD_SIZE" and env.launcher_mapping["--node_rank"] == "RANK"
    assert env.variable("MASTER_PORT").example == "23456"
    with pytest.raises(KeyError):
        env.variable("LOCAL_RANK")


def test_official_training_image_labels(facts):
    img = facts.official_images
    assert set(img.label_filter) == {"system.official=true", "system.supported.dlc=true", "system.chipType=GPU"}
    assert {"system.supported.dlc", "system.framework", "system.chipType"} <= set(img.label_keys)
    assert img.cuda_label is None and "cuda_label" in img.unverified
    parts = img.parse_tag("2.1-gpu-py310-cu121-ubuntu22.04")
    assert parts == {"framework_version": "2.1", "device": "gpu", "python": "py310", "cuda": "cu121",
                     "os": "ubuntu22.04"}
    assert img.parse_tag("latest") is None


def test_no_dlc_price_is_claimed(facts):
    p = facts.prices
    assert p.published is False and p.source == "DLC-BILL"
    assert "per_spec_on_demand_cny_per_hour" in p.unverified and "console" in p.notes


@pytest.fixture()
def data_copy(tmp_path) -> Path:
    dst = tmp_path / "data"
    shutil.copytree(DATA_DIR, dst, ignore=shutil.ignore_patterns("overlays"))
    return dst


def _edit(path: Path, change) -> None:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    change(doc)
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")


@pytest.mark.parametrize("change,match", [
    (lambda d: d["lingjun_specs"][0].update(sources=["NO-SUCH-TAG"]), "unknown source 'NO-SUCH-TAG'"),
    (lambda d: d["lingjun_specs"][0].update(unverified=[]), "not listed in unverified"),
    (lambda d: d["lingjun_specs"][0].update(nccl_preset="nope"), "unknown NCCL preset"),
    (lambda d: d["lingjun_specs"].append(dict(d["lingjun_specs"][0])), "duplicate spec"),
    (lambda d: d["nccl_presets"][0]["env"].update(PATH="/bin"), "not NCCL variables"),
    (lambda d: d["job_env"][0]["launcher_mapping"].update({"--x": "LOCAL_RANK"}), "does not set"),
    (lambda d: d["official_images"].update(tag_groups=["a"]), "tag_groups"),
])
def test_loader_rejects_bad_facts(data_copy, change, match):
    _edit(data_copy / "dlc_specs.yaml", change)
    with pytest.raises(CatalogError, match=match):
        load_dlc_facts(data_copy)
