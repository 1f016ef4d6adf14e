"""Issue 31's audit: 38 routine edits of the sample stacks, each with the answer the provider gives.

The edits were audited against terraform-provider-alicloud (release/v2 ace5bcf8) and Alibaba's API
docs; each case here plans the sample before and after its edit with the real program (the day-two
harness of test_day_two.py) and asserts what `pulumi up` does. F = llama3-70b-full, H =
llama3-70b-spot-heal, Q = qwen-7b-spot, L = llama3-8b-lora, D = qwen-7b-dlc. The five cases issue 31
item 3 (self-healing clusters never split) fixed were strict xfails until it landed (issue 33's branch).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
from dataclasses import dataclass
from typing import Any, Callable, Optional

import pytest

from test_day_two import (
    ATTACHMENT, DISK, INSTANCE, ROOT, _plan, changed, day_two, nodes, plan, sample, settings_changed, touched,
)
from trainstack.preview.diff import diff_documents

F, H, Q, L, D = "llama3-70b-full", "llama3-70b-spot-heal", "qwen-7b-spot", "llama3-8b-lora", "qwen-7b-dlc"
CPFS = "alicloud:nas/fileSystem:FileSystem"
GROUP = "alicloud:ess/scalingGroup:ScalingGroup"
CONFIG = "pulumi-python:dynamic:Resource"  # the pool's configuration: kind ess-scaling-configuration (issue 33)
BUCKET, SWITCH = "alicloud:oss/bucket:Bucket", "alicloud:vpc/switch:Switch"
DLC = "pulumi-python:dynamic:Resource"
NEW_IMAGE = "m-offline-newer-family-image"


# ---- what the answers are made of ---------------------------------------------------------------

def by_name(d: dict, name_end: str) -> dict:
    (hit,) = [c for c in d["resources"]["changed"] if c["name"].endswith(name_end)]
    return hit


def paths(entry: dict) -> set[str]:
    return {c["path"] for c in entry["changes"]}


def change(entry: dict, path: str) -> dict:
    (hit,) = [c for c in entry["changes"] if c["path"] == path]
    return hit


def replaced(d: dict, type_: Optional[str] = None) -> list[dict]:
    return [c for c in d["resources"]["changed"] if c["replace"] and (type_ is None or c["type"] == type_)]


def no_impossible(d: dict) -> None:
    assert d["impossible"] == [], d["impossible"]


def only_job_settings_reach_the_nodes(d: dict) -> None:
    """command / env / a secret: a new settings object and digest tag, read at the next job start."""
    no_impossible(d)
    assert touched(d) == [] and replaced(d) == [] and settings_changed(d)
    for node in changed(d, INSTANCE):
        assert paths(node) == {"tags.trainstack:job-settings"}
        assert change(node, "tags.trainstack:job-settings")["takes_effect"] == "next_job_start"
    assert len(changed(d, INSTANCE)) == nodes(d)


def disks_grow_in_place(d: dict) -> None:
    no_impossible(d)
    # a healing cluster keeps each settings generation as its own retained object (issue 31 item 3): a
    # new generation is a new object beside the old one, never a node or disk replacement
    assert touched(d) == [] and [r for r in replaced(d) if not r["name"].endswith("-job-settings-generation")] == []
    disks = changed(d, DISK)
    assert disks and all(change(x, "size")["takes_effect"] == "disk_grown" for x in disks)
    for disk in disks:  # a larger ESSD may need a higher level: ModifyDiskSpec, in place too
        for c in disk["changes"]:
            assert c["action"] == "update" and not c["replace"] and not c["disruptive"], c


def every_shrink_is_impossible(d: dict) -> None:
    """ResizeDisk and UpgradeFileSystem only grow: the diff lists each shrink, `pulumi up` is not tried."""
    shrunk = [(c["name"], x["path"]) for c in d["resources"]["changed"] for x in c["changes"]
              if x["path"] in ("size", "capacity") and c["type"] in (DISK, CPFS) and x["after"] < x["before"]]
    assert shrunk
    listed = {(i["resource"], i["input"]) for i in d["impossible"]}
    assert listed == set(shrunk), (listed, shrunk)
    for i in d["impossible"]:
        assert i["fix"] and i["reason"] and any(s.startswith("alicloud/") for s in i["source"])
        assert any(s.startswith("https://www.alibabacloud.com/") for s in i["source"])


def attachments_follow_their_node(d: dict) -> None:
    """A replaced node's disk and RAM role attachments hold its id: they are replaced too (knock-on),
    and the disk attachment's replacement detaches the data disk from the running node."""
    for node in replaced(d, INSTANCE):
        rank = node["name"].rsplit("-", 1)[1]
        for kind in ("data-disk", "role"):
            att = by_name(d, f"-cluster-{kind}-{rank}")
            assert att["replace"], att
            fed = change(att, "instanceId")
            assert fed["unknown_after"] and fed["caused_by"][0]["name"] == node["name"]
            assert att["cause_chain"].startswith(node["name"])
            if node["delete_before_replace"]:  # Pulumi deletes a DBR replacement's dependents first too
                assert att["delete_before_replace"] and att["deleted_with"] == node["name"]
        assert by_name(d, f"-cluster-data-disk-{rank}")["disruptive"]  # DetachDisk on the running node


def nodes_replaced_delete_first(count: int) -> Callable[[dict], None]:
    def check(d: dict) -> None:
        no_impossible(d)
        nodes_ = replaced(d, INSTANCE)
        assert len(nodes_) == count and all(n["delete_before_replace"] for n in nodes_)
        attachments_follow_their_node(d)
        assert not replaced(d, BUCKET) and not [w for w in d["warnings"] if "privateIp" in w]
    return check


def refused_region_move(d: dict) -> None:
    """Not a day-two edit: the bucket (its name holds the region) and the network are replaced, and
    `pulumi up` refuses to replace what holds checkpoints (the bucket, or CPFS, is protected)."""
    assert replaced(d, BUCKET)
    assert any("is protected and would be replaced: `pulumi up` refuses" in w for w in d["warnings"])


def no_split(d: dict) -> None:
    """Item 3: node 0 and the pool nodes take new job settings at the same point."""
    when = {c["takes_effect"] for r in d["resources"]["changed"] if r["type"] in (INSTANCE, CONFIG)
            for c in r["changes"] if c["path"] == "tags.trainstack:job-settings"}
    assert len(when) <= 1, when


# ---- the edits --------------------------------------------------------------------------------

def scale(field: str, factor: float, **resources: Any) -> Callable[[dict], None]:
    def edit(p: dict) -> None:
        p["storage"][field] = int(p["storage"].get(field) or 0) * factor
        p["storage"][field] = int(p["storage"][field])
        p["resources"].update(resources)
    return edit


def command(p):
    p["job"]["command"] += " --lr 1e-5"


def env(p):
    p["job"].setdefault("env", {})["WANDB_PROJECT"] = "audit"


def secret(p):
    p["job"].setdefault("secrets", {})["HF_TOKEN"] = {"kms_secret": "team-hf-token"}


def tags(p):
    p["tags"]["cost-center"] = "ml-4711"


def region(p):
    p["region"] = "cn-beijing"


def zone(to: str) -> Callable[[dict], None]:
    return lambda p: p.update(zone=to)


def gpus(n: int, **more: Any) -> Callable[[dict], None]:
    return lambda p: p["resources"].update(gpus=n, **more)


def spot(value: str, **more: Any) -> Callable[[dict], None]:
    return lambda p: p["resources"].update(spot=value, **more)


def h_fewer_nodes(p):
    """3 -> 2 nodes: LoRA fits on 16 GPUs; the checkpoint size is stated so CPFS keeps its capacity."""
    p["resources"]["gpus"] = 16
    p["training"].update(method="lora", lora={"rank": 16, "targets": "attention"})
    p["storage"]["checkpoint_gib"] = 1500


def storage_moves_the_total_cost(d: dict) -> None:
    """Issue 31's Done-when: the bigger disks (and CPFS) move the all-in total; the GPU nodes' cost stays."""
    c = d["cost"]
    assert c["comparable"] and c["total"]["delta"] > 0 and c["hourly"]["delta"] > 0
    assert c["compute_hourly"]["delta"] == 0
    grown = {r["name"] for r in c["resources"] if r["status"] == "changed" and r["monthly"]["delta"] > 0}
    assert "dataset disks" in grown and all(r["kind"] != "compute" for r in c["resources"] if r["name"] in grown)
    assert round(sum(r["run"]["delta"] for r in c["resources"] if not r["contingent"]), 2) == pytest.approx(c["total"]["delta"], abs=0.05)


def _dataset_x2(name: str) -> Callable[[dict], None]:
    def check(d: dict) -> None:
        disks_grow_in_place(d)
        storage_moves_the_total_cost(d)
        if name in (F, H):
            fs = change(by_name(d, "-storage-cpfs"), "capacity")
            assert fs["action"] == "update" and fs["after"] > fs["before"]
            (line,) = [r for r in d["cost"]["resources"] if r["name"] == "CPFS"]
            assert line["monthly"]["delta"] > 0 and line["after_destroy_monthly"]["delta"] > 0  # retained
        if name == H:  # the pool's template: only nodes created later get the bigger disk
            size = change(changed(d, CONFIG)[0], "dataDisks[0].size")
            assert size["takes_effect"] == "new_nodes_only"
    return check


def _q_type_change(d: dict) -> None:
    no_impossible(d)
    (node,) = changed(d, INSTANCE)
    itype = change(node, "instanceType")
    assert not node["replace"] and itype["effect"] == "stop" and node["disruptive"]


def _h_grows_without_touching(d: dict) -> None:
    [group] = changed(d, GROUP)
    assert not group["disruptive"] and touched(d) == []


def _f_grows(d: dict) -> None:
    no_impossible(d)
    assert touched(d) == [] and nodes(d) == nodes(d, "base") + 1
    added = {r["type"] for r in d["resources"]["added"]}
    assert {INSTANCE, DISK, ATTACHMENT, "alicloud:ecs/ramRoleAttachment:RamRoleAttachment"} <= added


def _h_node0_replaced_pool_removed(d: dict) -> None:
    no_impossible(d)
    (node0,) = [c for c in replaced(d, INSTANCE) if c["name"].endswith("-node-0")]
    assert node0["delete_before_replace"]
    attachments_follow_their_node(d)
    gone = {r["type"] for r in d["resources"]["removed"]}
    assert {GROUP, CONFIG} <= gone


def _f_spot(d: dict) -> None:
    nodes_replaced_delete_first(3)(d)
    assert "alicloud:ecs/ecsDeploymentSet:EcsDeploymentSet" in {r["type"] for r in d["resources"]["removed"]}


def _price_limit(d: dict) -> None:
    nodes_replaced_delete_first(1)(d)
    assert change(replaced(d, INSTANCE)[0], "spotPriceLimit")["replace"]


def _image_ignored(d: dict) -> None:
    no_impossible(d)
    assert touched(d) == [] and replaced(d) == []
    ignored = {(r["name"], c["path"]): c for r in d["resources"]["ignored"] for c in r["changes"]}
    hits = [c for (name, p), c in ignored.items() if p == "imageId"]
    assert hits and all(c["takes_effect"] == "new_nodes_only" for c in hits)
    for config in changed(d, CONFIG):  # the pool's template: only nodes created later
        assert change(config, "imageId")["takes_effect"] == "new_nodes_only"


def _pinned_image(d: dict) -> None:
    (node,) = changed(d, INSTANCE)
    image = change(node, "imageId")
    assert image["effect"] == "wipe" and node["disruptive"] and not node["replace"]


def _tags_only(d: dict) -> None:
    no_impossible(d)
    assert touched(d) == [] and replaced(d) == []
    for entry in d["resources"]["changed"]:
        for c in entry["changes"]:
            assert c["path"].startswith(("tags", "volumeTags")), (entry["name"], c["path"])


def _h_zone(d: dict) -> None:
    """Refused: CPFS (zone_id ForceNew) is protected; and node 0 could not follow its vSwitch anyway."""
    assert any(f"({CPFS}) is protected and would be replaced: `pulumi up` refuses" in w for w in d["warnings"])
    assert {(i["resource"].rsplit("-", 2)[-2:] == ["node", "0"], i["input"]) for i in d["impossible"]} == \
        {(True, "vswitchId")}


def _l_zone(d: dict) -> None:
    """The vSwitch is replaced (zone_id ForceNew); node 0's vswitch_id is then unknown: an update the
    provider performs with a stop/start (ModifyInstanceVpcAttribute), which the API refuses across
    zones; the data disk is replaced (zone_id ForceNew) and its attachment with it (disk_id ForceNew)."""
    node = by_name(d, "-cluster-node-0")
    vsw = change(node, "vswitchId")
    assert vsw["unknown_after"] and vsw["effect"] == "stop" and node["disruptive"] and not node["replace"]
    assert "resource_alicloud_instance.go:2983" in vsw["reason"]
    assert node["cause_chain"] == "llama3-8b-lora-network-vswitch zoneId: replaced -> " \
                                  "llama3-8b-lora-cluster-node-0 vswitchId: stop/start"
    att = by_name(d, "-cluster-data-disk-0")
    assert att["replace"] and att["disruptive"] and change(att, "diskId")["unknown_after"]
    assert att["cause_chain"].startswith("llama3-8b-lora-storage-data-disk-0 zoneId: replaced")
    (impossible,) = d["impossible"]
    assert (impossible["input"], impossible["before"], impossible["after"]) == ("vswitchId", "cn-shenzhen-e",
                                                                                "cn-shenzhen-a")
    assert "tags only" not in json.dumps(d)


def _dlc_command(d: dict) -> None:
    (job,) = replaced(d, DLC)
    assert job["delete_before_replace"] and paths(job) == {"command"}


def _dlc_dataset(d: dict) -> None:
    """The dataset (uri ForceNew) is replaced; the running job's data_sources hold its id: replaced too."""
    (dataset,) = replaced(d, "alicloud:pai/workspaceDataset:WorkspaceDataset")
    (job,) = replaced(d, DLC)
    assert job["delete_before_replace"]
    (fed,) = job["changes"]
    assert fed["unknown_after"] and fed["path"].startswith("data_sources")
    assert job["cause_chain"].startswith(f"{dataset['name']} uri: replaced -> ")


@dataclass(frozen=True)
class Case:
    id: str
    sample: str
    edit: Callable[[dict], Any]
    expect: Callable[[dict], None]
    xfail: Optional[str] = None
    image: Optional[str] = None  # the family lookup answers a newer public image


CASES = [
    *[Case(f"dataset-x2-{n}", n, scale("dataset_gib", 2), _dataset_x2(n)) for n in (F, Q)],
    # budgets count the disks too (all-in): 2x the dataset's disks would price H's spot plan over 650 CNY/h
    Case(f"dataset-x2-{H}", H, scale("dataset_gib", 2, max_hourly_cost=750), _dataset_x2(H)),
    *[Case(f"dataset-half-{n}", n, scale("dataset_gib", 0.5), every_shrink_is_impossible) for n in (F, H, Q, L)],
    *[Case(f"{what.__name__}-{n}", n, what, only_job_settings_reach_the_nodes) for n in (F, Q)
      for what in (command, env, secret)],
    *[Case(f"{what.__name__}-{H}", H, what, no_split) for what in (command, env, secret)],
    Case("nodes-up-F", F, gpus(32), _f_grows),
    Case("nodes-up-Q", Q, gpus(8), _q_type_change),
    Case("nodes-up-H", H, gpus(32, max_hourly_cost=800), _h_grows_without_touching),
    Case("nodes-down-H", H, h_fewer_nodes, _h_node0_replaced_pool_removed),
    Case("healing-off-H", H, lambda p: p["resources"].update(self_healing=False), _h_node0_replaced_pool_removed),
    Case("on-demand-to-spot-F", F, spot("require"), _f_spot),
    Case("spot-to-on-demand-H", H, spot("never", self_healing=False, max_hourly_cost=900),
         _h_node0_replaced_pool_removed),
    Case("spot-to-on-demand-Q", Q, spot("never"), nodes_replaced_delete_first(1)),
    Case("spot-on-L", L, spot("require"), nodes_replaced_delete_first(1)),
    Case("stated-price-limit-Q", Q, lambda p: p["resources"].update(spot_price_limit=20.0), _price_limit),
    *[Case(f"new-public-image-{n}", n, lambda p: None, _image_ignored, image=NEW_IMAGE) for n in (F, Q, H)],
    Case("pinned-image-L", L, lambda p: p.update(image_id="m-wz9pinned000000001"), _pinned_image),
    *[Case(f"tags-{n}", n, tags, _tags_only) for n in (F, Q, L)],
    *[Case(f"region-{n}", n, region, refused_region_move) for n in (F, Q, L)],
    Case("zone-H", H, zone("cn-shenzhen-e"), _h_zone),
    Case("zone-L", L, zone("cn-shenzhen-a"), _l_zone),
    Case("command-D", D, command, _dlc_command),
    Case("dataset-uri-D", D, lambda p: p["storage"].update(dataset_uri="oss://my-team-data/qwen-v2/"), _dlc_dataset),
]


@contextlib.contextmanager
def image_lookup_answers(image_id: str):
    """The offline image lookup answers ``image_id`` (a newer image in the family) while planning."""
    from trainstack.preview import cloud

    before = cloud.FAKE_IMAGE_ID
    cloud.FAKE_IMAGE_ID = image_id
    try:
        yield
    finally:
        cloud.FAKE_IMAGE_ID = before


@functools.lru_cache(maxsize=None)
def _image_plan(name: str, image_id: str) -> str:
    with image_lookup_answers(image_id):
        return _plan.__wrapped__(json.dumps(sample(name), sort_keys=True), "{}")  # not the shared cache


def run(case: Case) -> dict:
    if case.image:
        return diff_documents(plan(sample(case.sample)), json.loads(_image_plan(case.sample, case.image)))
    return day_two(case.sample, case.edit)


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id, marks=[pytest.mark.xfail(strict=True, reason=c.xfail)]
                                               if c.xfail else []) for c in CASES])
def test_the_diff_gives_the_providers_answer(case):
    case.expect(run(case))


def test_the_audit_covers_the_issues_edits():
    assert len(CASES) == 40 and len({c.id for c in CASES}) == len(CASES)
    assert sum(1 for c in CASES if c.xfail) == 0


def test_node_0_of_a_healing_cluster_is_replaced_delete_first():
    """Node 0 holds a fixed private IP (the rendezvous address); create-before-delete would ask for the
    address the old node still holds (layout/lifecycle.py)."""
    (node0,) = [r for r in plan(sample(H))["resources"] if r["type"] == INSTANCE]
    assert node0["inputs"].get("privateIp") and node0["delete_before_replace"]


def test_an_impossible_update_exits_2_and_leads_the_comment(tmp_path, capsys, monkeypatch):
    """`trainstack diff` on a halved dataset: exit 2, the impossible updates first in the markdown."""
    from trainstack.cli import main

    import yaml

    head = copy.deepcopy(sample(L))
    head["storage"]["dataset_gib"] //= 2
    path = tmp_path / "llama3-8b-lora.yaml"
    path.write_text(yaml.safe_dump(head), encoding="utf-8")
    monkeypatch.chdir(ROOT)
    assert main(["diff", "stacks/profiles/llama3-8b-lora.yaml", str(path)]) == 2
    out, err = capsys.readouterr()
    first = out.split("**Total cost", 1)[0]
    assert "> [!CAUTION]" in first and "1 impossible update" in first and "**Instead:**" in first
    assert "llama3-8b-lora-storage-data-disk-0" in first and "ResizeDisk" in first
    assert "impossible update(s)" in err
    assert main(["diff", "stacks/profiles/llama3-8b-lora.yaml", str(path), "--format", "json"]) == 2
    d = json.loads(capsys.readouterr().out)
    (item,) = d["impossible"]
    assert set(item) >= {"resource", "input", "before", "after", "reason", "fix", "source"}


def _pinned_image(doc: dict, head: bool) -> None:
    doc["image_id"] = "m-wz9prepared00000001"
    if head:
        doc["image_provides"] = ["gpu-driver", "erdma", "pytorch"]


def _dataset_copy(doc: dict, head: bool) -> None:
    doc["storage"] = {**doc["storage"], "dataset_uri": "oss://team-data/corpus/"}
    if head:
        doc["storage"]["dataset_sync"] = "at-boot"


@pytest.mark.parametrize("edit", [_pinned_image, _dataset_copy], ids=["image_provides", "dataset_sync"])
def test_an_edit_of_what_a_node_does_at_boot_reaches_no_running_node(edit):
    """Issue 33 item 5: declaring what a pinned image holds (`image_provides`) or copying the dataset at boot
    (`storage.dataset_sync: at-boot`) on a running healing stack changes only user data: node 0 ignores it
    (user data is read at create), the pool's configuration takes it for nodes ESS launches later; nothing
    is replaced, rebooted or wiped."""
    base, head = sample(H), sample(H)
    edit(base, head=False)
    edit(head, head=True)
    d = diff_documents(plan(base), plan(head))
    no_impossible(d)
    assert touched(d) == [] and replaced(d) == []
    (config,) = changed(d, CONFIG)
    assert paths(config) == {"userData"} and change(config, "userData")["takes_effect"] == "new_nodes_only"
    ignored = {(r["name"], c["path"]): c for r in d["resources"]["ignored"] for c in r["changes"]}
    assert [c["takes_effect"] for (name, p), c in ignored.items() if name.endswith("node-0")] == ["new_nodes_only"]
