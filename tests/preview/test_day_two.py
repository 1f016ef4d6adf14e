"""Day two: what the next `pulumi up` does to running GPU nodes after a routine profile edit.

Each scenario plans a sample profile (base) and the same profile after one edit (head) with the real
program under the recording mock engine (`trainstack plan`'s planner), diffs the two plan documents
(`trainstack diff`'s structured output) and asserts on what the provider facts say each change does
(trainstack/catalog/data/provider_facts.json, trainstack/preview/change_rules.py). docs/day-two.md
is the table these scenarios prove.

"Touched" means: a GPU node replaced, disrupted (stopped, restarted, wiped) or destroyed, or a disk
attachment of a running node replaced (it detaches the disk from the running node).
"""

from __future__ import annotations

import copy
import functools
import json
import pathlib
import tempfile
from typing import Any, Callable

import pytest
import yaml

from trainstack.preview.diff import diff_documents

ROOT = pathlib.Path(__file__).resolve().parents[2]
INSTANCE = "alicloud:ecs/instance:Instance"
DISK = "alicloud:ecs/ecsDisk:EcsDisk"
ATTACHMENT = "alicloud:ecs/ecsDiskAttachment:EcsDiskAttachment"
SETTINGS_KEY = "job/settings.json"
#: the ECS samples: single node on demand, the multi-node 70B (3 x 8 A100, eRDMA, CPFS), single-node spot
ECS_SAMPLES = ("llama3-8b-lora", "llama3-70b-full", "qwen-7b-spot")
RELEASE = ROOT / "tests" / "preview" / "fixtures" / "release"


def sample(name: str) -> dict[str, Any]:
    return yaml.safe_load((ROOT / "stacks" / "profiles" / f"{name}.yaml").read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=None)
def _plan(profile_json: str, extra_files: str = "{}") -> str:
    from trainstack.preview.planner import plan_source
    from trainstack.preview.sources import Source, find_project

    profile = json.loads(profile_json)
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in json.loads(extra_files).items():  # a price book beside the profile
            (pathlib.Path(tmp) / name).write_text(text, encoding="utf-8")
            profile = json.loads(json.dumps(profile).replace(f"@{name}@", str(pathlib.Path(tmp) / name)))
        path = pathlib.Path(tmp) / f"{profile['name']}.yaml"  # the stack is named after the profile
        path.write_text(yaml.safe_dump(profile), encoding="utf-8")
        doc = plan_source(Source("profile", str(path), path), find_project(ROOT))
    return json.dumps(doc)


def plan(profile: dict[str, Any], **files: str) -> dict[str, Any]:
    return json.loads(_plan(json.dumps(profile, sort_keys=True), json.dumps(files, sort_keys=True)))


def day_two(name: str, edit: Callable[[dict[str, Any]], Any], **files: str) -> dict[str, Any]:
    """The diff of sample ``name`` before and after ``edit`` (which changes a copy of the profile)."""
    head = copy.deepcopy(sample(name))
    edit(head)
    return diff_documents(plan(sample(name)), plan(head, **files))


def touched(d: dict[str, Any]) -> list[str]:
    """GPU nodes replaced, disrupted or destroyed, and disk attachments replaced (a detach)."""
    out = [c["name"] for c in d["resources"]["changed"] if c["node"] and (c["replace"] or c["disruptive"])]
    out += [c["name"] for c in d["resources"]["changed"] if c["type"] == ATTACHMENT and c["replace"]]
    out += [r["name"] for r in d["resources"]["removed"] if r["node"]]
    return out


def changed(d: dict[str, Any], type_: str) -> list[dict[str, Any]]:
    return [c for c in d["resources"]["changed"] if c["type"] == type_]


def settings_changed(d: dict[str, Any]) -> bool:
    return any(c["type"] == "alicloud:oss/bucketObject:BucketObject" and c["name"].endswith("-job-settings-object")
               for c in d["resources"]["changed"])


def nodes(d: dict[str, Any], side: str = "head") -> int:
    return d[side]["summary"]["nodes"]


# ---- the routine edits: never a running GPU node -----------------------------------------------

def _dataset(p):
    p["storage"]["dataset_gib"] *= 2


def _command(p):
    p["job"]["command"] += " --lr 1e-5"


def _env(p):
    p["job"].setdefault("env", {})["WANDB_PROJECT"] = "day-two"


def _tokens(p):
    p["training"]["tokens"] = float(p["training"]["tokens"]) * 2  # YAML 1.1 reads 5.0e7 as text


def _tags(p):
    p["tags"]["cost-center"] = "ml-4711"


def _deadline(p):
    p["resources"]["deadline_hours"] = 400  # later than any sample needs: the placement stays


ROUTINE = {"dataset_gib": _dataset, "job.command": _command, "job.env": _env, "training.tokens": _tokens,
           "tags": _tags, "resources.deadline_hours": _deadline}


@pytest.mark.parametrize("edit", sorted(ROUTINE))
@pytest.mark.parametrize("name", ECS_SAMPLES)
def test_a_routine_edit_never_replaces_or_disrupts_a_running_gpu_node(name, edit):
    d = day_two(name, ROUTINE[edit])
    assert d["profile_changes"], "the edit changed nothing"
    assert nodes(d, "base") == nodes(d, "head"), "the edit moved the placement: not a routine edit any more"
    assert touched(d) == [], [c for c in d["resources"]["changed"] if c["name"] in touched(d)]
    assert d["resources"]["removed"] == [] and not [c for c in d["resources"]["changed"] if c["replace"]]


@pytest.mark.parametrize("name", ECS_SAMPLES)
def test_job_settings_reach_running_nodes_at_their_next_job_start(name):
    for edit in (_command, _env):
        d = day_two(name, edit)
        assert settings_changed(d)
        for node in changed(d, INSTANCE):
            (change,) = node["changes"]  # only the digest tag the launcher checks the settings against
            assert change["path"] == "tags.trainstack:job-settings" and change["takes_effect"] == "next_job_start"
            assert change["action"] == "update" and not change["disruptive"]
        assert len(changed(d, INSTANCE)) == nodes(d)


@pytest.mark.parametrize("name", ECS_SAMPLES)
def test_a_bigger_dataset_grows_the_data_disks_online(name):
    d = day_two(name, _dataset)
    disks = changed(d, DISK)
    assert len(disks) == nodes(d) and touched(d) == []
    # bigger disks cost more: the budget guard's all-in price travels in the job settings, which running
    # nodes read at their next job start (their settings digest tag, updated in place)
    assert d["cost"]["hourly"]["delta"] > 0 and settings_changed(d)
    for node in changed(d, INSTANCE):
        assert {c["path"] for c in node["changes"]} == {"tags.trainstack:job-settings"}
        assert all(c["takes_effect"] == "next_job_start" for c in node["changes"])
    for disk in disks:
        (size,) = [c for c in disk["changes"] if c["path"] == "size"]
        assert size["action"] == "update" and not size["replace"] and size["takes_effect"] == "disk_grown"
        assert "resource_alicloud_ecs_disk.go" in size["reason"]


def test_one_more_node_adds_a_node_and_touches_none_of_the_running_ones():
    d = day_two("llama3-70b-full", lambda p: p["resources"].update(gpus=32))  # 3 -> 4 nodes of 8 GPUs
    assert (nodes(d, "base"), nodes(d, "head")) == (3, 4)
    assert touched(d) == []
    added = {(r["type"], r["name"]) for r in d["resources"]["added"]}
    assert (INSTANCE, "llama3-70b-full-cluster-node-3") in added
    assert (DISK, "llama3-70b-full-storage-data-disk-3") in added
    # the running nodes learn the new hostfile and world size from the job settings, at their next job start
    assert settings_changed(d)
    for node in changed(d, INSTANCE):
        assert {c["path"] for c in node["changes"]} == {"tags.trainstack:job-settings"}


# ---- the edits that do replace: said as what they are, and replacements that succeed -------------

@pytest.mark.parametrize("name", ["llama3-8b-lora", "qwen-7b-spot"])
def test_spot_on_or_off_replaces_the_node_deleting_the_old_one_first(name):
    flip = "require" if sample(name)["resources"]["spot"] == "never" else "never"
    d = day_two(name, lambda p: p["resources"].update(spot=flip))
    replaced = [c for c in changed(d, INSTANCE) if c["replace"]]
    assert replaced and all(c["delete_before_replace"] for c in replaced), "its fixed IP must be free first"
    assert any(x["path"] == "spotStrategy" and x["replace"] for c in replaced for x in c["changes"])
    # the checkpoints are elsewhere: nothing that holds them is replaced or destroyed
    assert not [c for c in d["resources"]["changed"] if c["replace"] and c["type"] == "alicloud:oss/bucket:Bucket"]
    assert not [w for w in d["warnings"] if "privateIp" in w]


def test_a_catalog_price_change_leaves_the_spot_bid_alone():
    """The bid is the on-demand price from the catalog: a refreshed price is ignored (ForceNew), so the
    running spot node stays; only its budget guard price (job settings) follows."""
    base = sample("qwen-7b-spot")
    itype = plan(base)["plan"]["instance_type"]
    book = yaml.safe_dump({"prices": [{"region": "cn-shenzhen", "instance_type": itype, "on_demand_cny_per_hour": 99.0,
                                       "as_of": "2026-01-15", "source": "enterprise discount"}]})
    d = day_two("qwen-7b-spot", lambda p: p.update(price_book="@prices.yaml@"), **{"prices.yaml": book})
    # the team's on-demand price moves the bid; the spot estimate stays on the list price (issue 35)
    assert d["head"]["summary"]["spot_price_limit"] == 99.0 != d["base"]["summary"]["spot_price_limit"]
    assert d["head"]["summary"]["hourly_cost_cny"] == d["base"]["summary"]["hourly_cost_cny"]
    assert touched(d) == []
    ignored = [c for r in d["resources"]["ignored"] for c in r["changes"]]
    assert any(c["path"] == "spotPriceLimit" for c in ignored), d["resources"]["ignored"]


def test_an_image_pin_is_managed_and_shown_as_what_it_does():
    """The family lookup is ignored after creation; a pinned image_id is managed, and its change is a
    system-disk replacement (ReplaceSystemDisk) the diff names."""
    d = day_two("llama3-8b-lora", lambda p: p.update(image_id="m-wz9pinned000000001"))
    (node,) = changed(d, INSTANCE)
    (image,) = [c for c in node["changes"] if c["path"] == "imageId"]
    assert image["disruptive"] and node["disruptive"]


def test_a_checkpoint_backend_change_keeps_the_single_node_running():
    """OSS -> CPFS: a new file system in the services vSwitch; the node mounts it at its next job start
    (every node has the NFS client and the sync service, which follows the job settings)."""
    d = day_two("llama3-8b-lora", lambda p: p["storage"].update(checkpoint="cpfs"))
    assert touched(d) == []
    added = {r["type"] for r in d["resources"]["added"]}
    assert {"alicloud:nas/fileSystem:FileSystem", "alicloud:vpc/switch:Switch"} <= added
    assert settings_changed(d)


def test_moving_retained_cpfs_checkpoints_to_oss_is_refused_not_deleted():
    d = day_two("llama3-70b-full", lambda p: p["storage"].update(checkpoint="oss"))
    assert touched(d) == []
    (fs,) = [r for r in d["resources"]["removed"] if r["type"] == "alicloud:nas/fileSystem:FileSystem"]
    assert fs["protect"] and any("is protected" in w for w in d["warnings"])


def test_a_region_change_is_refused_where_it_would_replace_retained_checkpoints():
    """Not a day-two edit (docs/day-two.md: deploy a new stack): the stack bucket's name holds the
    region, so it would be replaced, and `pulumi up` refuses to replace the protected bucket."""
    d = day_two("llama3-8b-lora", lambda p: p.update(region="cn-beijing"))
    (bucket,) = changed(d, "alicloud:oss/bucket:Bucket")
    assert bucket["replace"]
    assert any("storage-bucket` (alicloud:oss/bucket:Bucket) is protected and would be replaced" in w
               for w in d["warnings"])
    assert [r["name"] for r in d["resources"]["added"] if r["type"].startswith("pulumi:providers:")] == \
        ["alicloud-cn-beijing"]


# ---- upgrade trainstack: the saved plans of this release against the current program ---------------

@pytest.mark.parametrize("name", ECS_SAMPLES)
def test_upgrading_trainstack_touches_no_running_gpu_node(name):
    """tests/preview/fixtures/release/<stack>.json: `trainstack plan --format json` of the sample at
    this release (regenerate only when cutting a release: UPDATE_RELEASE_PLANS=1)."""
    import os

    path = RELEASE / f"{name}.json"
    current = plan(sample(name))
    if os.environ.get("UPDATE_RELEASE_PLANS") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(current, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    saved = json.loads(path.read_text(encoding="utf-8"))
    d = diff_documents(saved, current, "release", "current")
    assert touched(d) == []
    assert not [c for c in d["resources"]["changed"] if c["replace"]]
    assert d["unknown"] == []
    if saved["schema_version"] < 3:  # its cost counted the GPU nodes: only those compare (issue 31)
        c = d["cost"]
        assert c["comparable"] is False and c["basis"]["before"] == "compute-only" and c["total"]["delta"] is None
        assert c["compute_hourly"]["before"] == saved["cost"]["hourly_cny"] == c["compute_hourly"]["after"]
        assert "GPU instances only" in c["note"]


# ---- a self-healing cluster (issue 23): resizing the pool is called out, never silent ----------

def test_growing_a_self_healing_cluster_resizes_its_pool_in_place_and_says_so():
    """3 -> 4 nodes: node 0 and the vSwitches stay; the ESS group's size changes in place, and the diff
    does not mark it disruptive (no running node is touched: an added node waits for a seat until the next
    job start; a shrink, which releases running nodes, still is: test_a_shrinking_pool_is_disruptive)."""
    def grow(p):
        p["resources"].update(gpus=32, max_hourly_cost=800)

    d = day_two("llama3-70b-spot-heal", grow)
    assert (nodes(d, "base"), nodes(d)) == (3, 4)
    # the one "replacement": the new settings generation at its new content-addressed key (the old one is
    # retained, never deleted: a running pool node may still fetch it)
    replaced = [c for c in d["resources"]["changed"] if c["replace"]]
    assert [c["name"] for c in replaced] == ["llama3-70b-spot-heal-job-settings-generation"]
    assert replaced[0]["lifecycle"]["retain_on_delete"] and not d["resources"]["removed"]
    [group] = changed(d, "alicloud:ess/scalingGroup:ScalingGroup")
    assert not group["disruptive"] and {c["path"] for c in group["changes"]} == {"maxSize", "desiredCapacity"}
    assert all(c["effect"] == "resize" and "the group grows" in c["reason"] for c in group["changes"])
    [node_0] = changed(d, INSTANCE)
    assert not node_0["disruptive"] and {c["path"] for c in node_0["changes"]} == {"tags.trainstack:job-settings"}
    # node 0 and the pool take the new settings at the same point: the next job start (issue 31 item 3)
    [config] = [c for c in d["resources"]["changed"] if (c.get("inputs") or {}).get("kind") ==
                "ess-scaling-configuration" or c["name"].endswith("-pool-config")]
    digest = {c["takes_effect"] for r in (node_0, config) for c in r["changes"]
              if c["path"] == "tags.trainstack:job-settings"}
    assert digest == {"next_job_start"}


def test_a_shrinking_pool_is_disruptive_and_a_growing_one_is_not():
    from trainstack.preview.change_rules import Verdict, grows

    resize = Verdict("update", "ModifyScalingGroup", disruptive=True, effect="resize")
    assert grows(resize, 2, 3) and grows(resize, 2, 2)
    assert not grows(resize, 3, 2) and not grows(resize, None, 3) and not grows(resize, "2", 3)
    assert not grows(Verdict("update", "x", effect="restart"), 1, 2)
