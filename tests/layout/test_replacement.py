"""The per-preemption model of a self-healing plan (trainstack.layout.replacement; issue 33 item 5):
phases as labelled data, a prepared image removing exactly the installs it holds, the survivors' wait
priced, and the plan, the node programs and the labels carrying it."""

from __future__ import annotations

import itertools
import shlex
import subprocess
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from tests.plan_factory import resolved
from trainstack.bootstrap import render_script
from trainstack.catalog.loader import CatalogError, DATA_DIR
from trainstack.catalog.replacement_phases import replacement_facts, replacement_phases
from trainstack.layout.replacement import estimate_replacement, replacement_labels
from trainstack.plan import CpfsPlan, OssPlan, StoragePlan

ROOT = Path(__file__).resolve().parents[2]
PARTS = ("gpu-driver", "erdma", "pytorch")
PREPARED = {"image_id": "m-prepared-a100", "image_provides": list(PARTS)}


def test_every_phase_is_labelled_and_a_sourced_one_cites_a_known_source():
    phases = replacement_phases()
    assert {p.kind for p in phases} == {"measured", "sourced", "assumed"}
    assert {p.skipped_by for p in phases if p.skipped_by} == set(PARTS)
    assert all(p.source.strip() and p.what.strip() for p in phases)


def test_a_phase_citing_an_unknown_source_is_refused(tmp_path):
    for name in ("sources.yaml", "replacement_phases.yaml"):
        (tmp_path / name).write_text((DATA_DIR / name).read_text(encoding="utf-8"), encoding="utf-8")
    text = (tmp_path / "replacement_phases.yaml").read_text(encoding="utf-8")
    (tmp_path / "replacement_phases.yaml").write_text(text.replace("source: DRV-AUTO", "source: NO-SUCH-TAG"),
                                                      encoding="utf-8")
    with pytest.raises(CatalogError, match="NO-SUCH-TAG"):
        replacement_facts(tmp_path)


@st.composite
def cases(draw):
    checkpoint = draw(st.sampled_from(("cpfs", "oss")))
    storage = StoragePlan(
        checkpoint=checkpoint, checkpoint_path="/mnt/ckpt", checkpoint_gib=draw(st.floats(0.5, 4000)),
        cpfs=CpfsPlan(capacity_gib=draw(st.integers(3600, 100_000)),
                      storage_type=draw(st.sampled_from(("advance_100", "advance_200"))))
        if checkpoint == "cpfs" else None,
        oss=OssPlan(bucket="b", internal_endpoint="oss-x-internal.aliyuncs.com"))
    provides = tuple(p for p in PARTS if draw(st.booleans()))
    return dict(nodes=draw(st.integers(1, 16)), rdma=draw(st.sampled_from(("erdma", "tcp", "none"))),
                provides=provides, storage=storage, node0_hourly=draw(st.floats(1, 500)),
                pool_node_hourly=draw(st.floats(0.5, 500)), allowance_hours=draw(st.one_of(st.none(), st.floats(0.1, 50))),
                join_timeout_seconds=draw(st.sampled_from((600, 3600))))


@settings(max_examples=200, deadline=None)
@given(cases())
def test_a_prepared_image_removes_exactly_what_it_holds_and_the_wait_is_priced(case):
    r = estimate_replacement(**case)
    facts = {f.name: f for f in replacement_phases()}
    names = [p.name for p in r.phases]
    assert ("erdma_stack" in names) == (case["rdma"] == "erdma") and names[-1] == "checkpoint_restore"
    for p in r.phases:
        fact = facts.get(p.name)
        held = fact is not None and fact.skipped_by in case["provides"]
        assert (p.skipped is not None) == held and p.seconds == (0 if held else p.cold_seconds)
        assert p.kind in ("measured", "sourced", "assumed") and p.source
    # the timeline: ESS launches the replacement on the notice, so its setup overlaps the 300 s the
    # reclaimed node still trains; the survivors wait from the release until the resume phases end
    assert r.notice_seconds == 300
    setup = sum(p.seconds for p in r.phases if p.stage == "setup")
    resume = sum(p.seconds for p in r.phases if p.stage == "resume")
    assert [p.stage for p in r.phases] == sorted((p.stage for p in r.phases), key=("setup", "resume").index)
    assert r.seconds == pytest.approx(max(setup, 300) - 300 + resume, abs=0.15)
    launch = sum(p.seconds for p in r.phases if p.before_launch)
    assert r.replacement_billed_seconds == pytest.approx(max(setup, 300) + resume - launch, abs=0.15)
    assert r.join_wait_seconds == pytest.approx(max(setup, 300) - 300, abs=0.15)
    assert r.prepared_seconds <= r.seconds <= r.cold_seconds and r.cost_cny <= r.cold_cost_cny
    assert (r.prepared_seconds == r.seconds) == (r.join_wait_seconds == 0 or set(case["provides"]) == set(PARTS)
                                                  or (case["rdma"] != "erdma" and {"gpu-driver", "pytorch"} <=
                                                      set(case["provides"])))
    # the survivors: node 0 on-demand and the other pool nodes at spot wait; the replacement bills
    # from its launch (not while ESS has yet to launch it)
    survivors = case["nodes"] - 1
    hourly = 0.0 if survivors == 0 else case["node0_hourly"] + (survivors - 1) * case["pool_node_hourly"]
    assert r.survivors == survivors and r.survivors_hourly_cny == pytest.approx(hourly, abs=1e-3)
    assert r.cost_cny == pytest.approx(
        (hourly * r.seconds + case["pool_node_hourly"] * r.replacement_billed_seconds) / 3600, abs=0.011)
    if case["allowance_hours"]:
        assert abs(r.allowance_preemptions * r.seconds - case["allowance_hours"] * 3600) <= 0.05 * r.seconds + 0.01
    # torchrun's join_timeout bounds the wait for the replacement to join, not the restore after it
    labels = replacement_labels(r)
    assert any("WARNING" in lab for lab in labels) == (r.join_wait_seconds > case["join_timeout_seconds"])


def test_the_restore_reads_one_checkpoint_at_the_cpfs_baseline():
    storage = StoragePlan(checkpoint="cpfs", checkpoint_path="/mnt/cpfs/ckpt", checkpoint_gib=2048.0,
                          cpfs=CpfsPlan(capacity_gib=10_240, storage_type="advance_200"))
    r = estimate_replacement(nodes=3, rdma="erdma", provides=(), storage=storage, node0_hourly=270.0,
                             pool_node_hourly=135.0, allowance_hours=None, join_timeout_seconds=3600)
    (restore,) = [p for p in r.phases if p.name == "checkpoint_restore"]
    # one of the two kept checkpoints, 1,024 GiB, at 200 MB/s per TiB x 10 TiB = 2,000 MB/s
    assert restore.kind == "sourced" and restore.seconds == pytest.approx(1024 * 1024 ** 3 / 1e6 / 2000, abs=0.1)


def test_the_cold_70b_case_by_hand():
    """Three ebmgn7ex nodes over eRDMA, public image, one 919.9 GiB checkpoint on 4,800 GiB of CPFS
    advance_200: setup 120 + 180 + 60 + 900 + 180 + 240 = 1,680 s from the notice, 1,380 s after the
    release; then 14.4 s rendezvous and 919.915 GiB x 1,073.74 MB/GiB / 937.5 MB/s = 1,053.6 s restore."""
    storage = StoragePlan(checkpoint="cpfs", checkpoint_path="/mnt/cpfs/checkpoints", checkpoint_gib=1839.83,
                          cpfs=CpfsPlan(capacity_gib=4800, storage_type="advance_200"))
    r = estimate_replacement(nodes=3, rdma="erdma", provides=(), storage=storage, node0_hourly=270.8333,
                             pool_node_hourly=135.4167, allowance_hours=None, join_timeout_seconds=3600)
    assert r.join_wait_seconds == 1380.0
    assert r.seconds == 2448.0  # 1,380 + 14.4 + 1,053.6
    assert r.replacement_billed_seconds == 2628.0  # 1,680 - 120 + 14.4 + 1,053.6
    assert r.cost_cny == 375.10  # (406.25 x 2,448 + 135.4167 x 2,628) / 3,600
    assert r.prepared_seconds == 1128.0  # 360 - 300 + 14.4 + 1,053.6
    assert not any("WARNING" in lab for lab in replacement_labels(r))


def test_a_setup_shorter_than_the_notice_is_hidden_by_it():
    """A prepared image's replacement is set up before the reclaimed node is released: the survivors
    wait only for the rendezvous and the restore."""
    storage = StoragePlan(checkpoint="oss", checkpoint_path="/mnt/data/ckpt", checkpoint_gib=2.0,
                          oss=OssPlan(bucket="b", internal_endpoint="oss-x-internal.aliyuncs.com"))
    r = estimate_replacement(nodes=2, rdma="tcp", provides=PARTS, storage=storage, node0_hourly=10.0,
                             pool_node_hourly=5.0, allowance_hours=None, join_timeout_seconds=3600)
    setup = sum(p.seconds for p in r.phases if p.stage == "setup")
    resume = {p.name: p for p in r.phases if p.stage == "resume"}
    assert setup == 360 and set(resume) == {"rendezvous_resume", "checkpoint_restore"}
    assert resume["checkpoint_restore"].kind == "assumed"  # OSS: no sourced read throughput
    assert r.seconds == pytest.approx(60 + sum(p.seconds for p in resume.values()), abs=0.15)


def test_the_healing_sample_carries_the_model_and_a_prepared_image_shortens_it():
    cold = resolved("llama3-70b-spot-heal").spot_pool.replacement
    warm_plan = resolved("llama3-70b-spot-heal", PREPARED)
    warm = warm_plan.spot_pool.replacement
    assert cold is not None and warm is not None and cold.survivors == 2
    assert {p.name: p.kind for p in cold.phases}["gpu_driver"] == "sourced"
    assert {p.name: p.kind for p in cold.phases}["rendezvous_resume"] == "measured"
    skipped = {p.name for p in warm.phases if p.skipped}
    assert skipped == {"gpu_driver", "erdma_stack", "pytorch_install"}
    assert warm.seconds < cold.seconds == cold.cold_seconds == warm.cold_seconds
    assert warm.cost_cny < cold.cost_cny
    assert warm_plan.image.provides == PARTS and warm_plan.image.image_id == "m-prepared-a100"
    assert any(lab.startswith("per preemption:") for lab in warm_plan.labels)
    env = render_script(warm_plan, "node.env", node_rank=1, cpfs_mount_address="cpfs-x.example:/share")
    assert "IMAGE_PROVIDES='gpu-driver erdma pytorch'" in env
    assert "IMAGE_PROVIDES" not in render_script(resolved("llama3-70b-spot-heal"), "node.env", node_rank=1,
                                                 cpfs_mount_address="cpfs-x.example:/share")


@pytest.mark.parametrize("provides", [" ".join(c) for n in range(4) for c in itertools.combinations(PARTS, n)])
def test_a_part_the_image_lacks_is_installed_after_all_with_a_warning(provides, tmp_path):
    (tmp_path / "node.env").write_text(f"IMAGE_PROVIDES={shlex.quote(provides)}\n" if provides else "",
                                       encoding="utf-8")
    common = (ROOT / "trainstack" / "bootstrap" / "templates" / "setup" / "00-common.sh").read_text(encoding="utf-8")
    script = textwrap.dedent("""\
        set -euo pipefail
        {common}
        for part in gpu-driver erdma pytorch; do image_lacks "$part" "not found"; done
        echo done
        """).format(common=common)
    out = subprocess.run(["bash", "-c", script], env={"TRAINSTACK_ETC": str(tmp_path), "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and out.stdout.strip() == "done", out.stderr
    warned = {part for part in PARTS if f"image_provides names {part} but" in out.stderr}
    assert warned == set(provides.split())


def test_the_docs_table_shows_the_samples_figures():
    """docs/self-healing.md's cold/warm table is the plan's own figures for the 70B sample."""
    page = (ROOT / "docs" / "self-healing.md").read_text(encoding="utf-8")
    cold = resolved("llama3-70b-spot-heal").spot_pool.replacement
    warm = resolved("llama3-70b-spot-heal", PREPARED).spot_pool.replacement
    for r, head in ((cold, "| public image"), (warm, "| prepared image")):
        (row,) = [line for line in page.splitlines() if line.startswith(head)]
        assert row.endswith(f"| {r.seconds / 60:.1f} min | {r.cost_cny:,.2f} CNY | {r.allowance_preemptions:g} "
                            "preemptions |"), row
