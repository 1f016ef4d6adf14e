"""Service limits as data: every entry typed and sourced, and equal to the constants code uses today."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from trainstack.catalog import CatalogError, load_catalog, service_limits
from trainstack.catalog.limits import ServiceLimit, load_limits
from trainstack.catalog.loader import DATA_DIR


@pytest.fixture(scope="module")
def limits():
    return service_limits()


def test_every_limit_cites_a_known_source_and_unknowns_are_explicit(limits):
    tags = {row["tag"] for row in yaml.safe_load((DATA_DIR / "sources.yaml").read_text(encoding="utf-8"))}
    assert len(limits) >= 50
    for lim in limits:
        assert lim.source in tags, lim.key
        if lim.value is None:
            assert not lim.verified and lim.notes, lim.key
    assert {lim.key for lim in limits.unverified()} == {
        "cpfs.capacity.min_gib",
        "cpfs.protocol_service.throughput_tiers_mbps", "pai.dlc.public.max_gpus", "pai.dlc.public.max_vcpu"}


def test_code_constants_are_read_from_the_limits(limits):
    from trainstack import plan, tags
    from trainstack.bootstrap import render
    from trainstack.layout import network, storage
    from trainstack.placement import dlc

    assert limits.value("ecs.essd.min_gib") == plan.ESSD_MIN_GIB
    assert limits.number("ecs.essd.max_gib") == plan.ESSD_MAX_GIB
    assert limits.number("ecs.deployment_set.low_latency.max_instances") == plan.DEPLOYMENT_SET_MAX
    assert limits.number("cpfs.capacity.step_gib") == storage.CPFS_STEP_GIB
    assert limits.number("cpfs.capacity.min_gib") == storage.CPFS_MIN_GIB
    assert limits.number("pai.dlc.public.max_gpus") == dlc.DLC_PUBLIC_MAX_GPUS
    assert limits.number("pai.dlc.public.max_vcpu") == dlc.DLC_PUBLIC_MAX_VCPU
    assert limits.number("ecs.user_data.max_bytes") == render.USER_DATA_LIMIT
    assert limits.number("oss.bucket.max_tags") == tags.MAX_BUCKET_TAGS == 20
    assert limits.value("pai.erdma.nccl_env") == network.ERDMA_NCCL_ENV


def test_deployment_set_families_agree_with_the_family_flags(limits):
    cat = load_catalog()
    flagged = {f.name for f in cat.families.values() if f.deployment_set_low_latency}
    assert set(limits.value("ecs.deployment_set.low_latency.families")) == flagged
    assert limits.value("ecs.deployment_set.low_latency.single_zone") is True
    assert limits.value("ecs.deployment_set.spot_instances_allowed") is False


def test_jumbo_frames_and_mtu(limits):
    cat = load_catalog()
    assert {f.name for f in cat.families.values() if f.jumbo_frames} == {"gn8v", "gn8v-tee"}
    assert limits.number("ecs.mtu.jumbo") == limits.number("ecs.erdma_gpu.mtu_with_jumbo_ll128") == 8500
    assert limits.number("ecs.erdma_gpu.mtu_otherwise") == 1400 and limits.number("ecs.mtu.default") == 1500
    # no GPU family is on the ECS jumbo-frame page's list
    assert not set(limits.value("ecs.mtu.jumbo_families")) & set(cat.families)


def test_vswitch_addresses(limits):
    reserved = limits.number("vpc.vswitch.reserved_addresses")
    assert reserved == 4 and 2 ** (32 - 20) - reserved == 4092
    assert (limits.number("vpc.vswitch.mask_min"), limits.number("vpc.vswitch.mask_max")) == (16, 29)
    assert limits.number("cpfs.protocol_service.vswitch_addresses") == 32
    assert limits.number("cpfs.protocol_service.max_per_file_system") == 1


@pytest.mark.parametrize("name,ok", [
    ("node-0", True), ("trainstack-job.rank-1", True), ("ab", True), ("a", False), ("-node", False),
    ("node-", False), ("node..0", False), ("node--0", False), ("x" * 64, True), ("x" * 65, False),
    ("node_0", False),
])
def test_linux_host_name_rule(limits, name, ok):
    assert bool(re.fullmatch(limits.value("ecs.host_name.linux.pattern"), name)) is ok


@pytest.mark.parametrize("name,ok", [
    ("trainstack-ckpt-a1b2", True), ("abc", True), ("ab", False), ("Upper", False), ("-abc", False),
    ("abc-", False), ("a" * 63, True), ("a" * 64, False), ("a_b_c", False),
])
def test_oss_bucket_name_rule(limits, name, ok):
    assert bool(re.fullmatch(limits.value("oss.bucket_name.pattern"), name)) is ok
    if ok:
        assert limits.number("oss.bucket_name.min_chars") <= len(name) <= limits.number("oss.bucket_name.max_chars")


def test_ram_tag_and_bucket_figures(limits):
    assert limits.number("ram.policy.max_versions") == 5
    assert limits.value("ram.policy.rotate_strategy") == "DeleteOldestNonDefaultVersionWhenLimitExceeded"
    assert limits.number("ecs.tags.max_per_resource") == 20 and limits.number("oss.bucket.max_tags") == 20
    assert limits.value("ecs.tags.reserved_key_prefixes") == ("aliyun", "acs:")


def test_lookups_fail_loudly(limits):
    with pytest.raises(KeyError, match="did you mean ecs.user_data.max_bytes"):
        limits["ecs.user_data.max_byte"]
    with pytest.raises(TypeError, match="not a number"):
        limits.number("ecs.deployment_set.strategies")
    assert {lim.key for lim in limits.under("cpfs.protocol_service")} >= {"cpfs.protocol_service.vswitch_addresses"}


@pytest.fixture()
def data_copy(tmp_path) -> Path:
    dst = tmp_path / "data"
    shutil.copytree(DATA_DIR, dst, ignore=shutil.ignore_patterns("overlays"))
    return dst


def _append(path: Path, row: dict) -> None:
    rows = yaml.safe_load(path.read_text(encoding="utf-8"))
    rows.append(row)
    path.write_text(yaml.safe_dump(rows, sort_keys=False), encoding="utf-8")


@pytest.mark.parametrize("row,match", [
    ({"key": "ecs.user_data.max_bytes", "value": 1, "source": "ECS-SDK"}, "duplicate key"),
    ({"key": "ecs.new.limit", "value": 1, "source": "NO-SUCH-TAG"}, "unknown source 'NO-SUCH-TAG'"),
    ({"key": "ecs.new.limit", "value": None, "source": "ECS-SDK"}, "verified: false"),
    ({"key": "ecs.new.limit", "value": 1, "source": "ECS-SDK", "verified": False}, "needs notes"),
    ({"key": "Bad Key", "value": 1, "source": "ECS-SDK"}, "pattern"),
    ({"key": "ecs.new.limit", "value": 1, "source": "ECS-SDK", "typo": 1}, "typo"),
])
def test_loader_rejects_bad_entries(data_copy, row, match):
    _append(data_copy / "service_limits.yaml", row)
    with pytest.raises(CatalogError, match=match):
        load_limits(data_copy)


def test_limit_is_frozen(limits):
    lim = limits["ecs.user_data.max_bytes"]
    assert isinstance(lim, ServiceLimit)
    with pytest.raises(Exception):
        lim.value = 1  # type: ignore[misc]
