"""diff_documents and its markdown, on small hand-written plan documents (what the provider does
per input is checked case by case in test_provider_cases.py)."""

from __future__ import annotations

import copy

from trainstack.preview.diff import diff_documents, empty_plan, flatten
from trainstack.preview.render_diff import MAX_MARKDOWN_CHARS, render_markdown

INSTANCE = "alicloud:ecs/instance:Instance"


def node(i, itype="ecs.gn7i-c8g1.2xlarge", spot="NoSpot", **extra):
    inputs = {"instanceType": itype, "spotStrategy": spot, "privateIp": f"10.0.0.{10 + i}",
              "dataDisks": [{"category": "cloud_essd", "size": 200.0, "performanceLevel": "PL1"}],
              "tags": {"trainstack:role": "training"}, **extra}
    return {"type": INSTANCE, "name": f"demo-node-{i}", "urn": f"urn:x::{INSTANCE}::demo-node-{i}",
            "parent": None, "parent_urn": None, "inputs": inputs}


def line(name, typ, hourly, hours=20.0, retained=False, kind="block_storage"):
    return {"name": name, "type": typ, "kind": kind, "hourly_cny": hourly, "run_cny": round(hourly * hours, 2),
            "monthly_cny": round(hourly * 730, 2), "after_destroy_monthly_cny": round(hourly * 730, 2) if retained else 0.0,
            "retained": retained, "price_source": "test", "unpriced": None}


def doc(nodes, *, hourly, total, itype="ecs.gn7i-c8g1.2xlarge", spot="NoSpot", policy=(), extra=(), version=3):
    """A plan document; its cost all-in (version 3: the nodes are 90 % of it, the dataset disks the rest), or
    GPU-only as an older trainstack saved it (version 1, 2)."""
    compute = round(hourly * 0.9, 4)
    cost = {"pricing": "spot" if spot != "NoSpot" else "on-demand", "hourly_cny": hourly, "total_cny": total,
            "estimated_hours": 20.0,
            "on_demand": {"hourly_cny": hourly, "total_cny": total},
            "spot": {"hourly_cny": hourly / 2, "total_cny": total / 2 * 1.15}}
    if version >= 3:
        cost.update(basis="all-in", compute_hourly_cny=compute, compute_total_cny=round(compute * 20, 2),
                    monthly_cny=round(hourly * 730, 2), after_destroy_monthly_cny=0.0,
                    breakdown=[line("nodes", INSTANCE, compute, kind="compute"),
                               line("dataset disks", "alicloud:ecs/ecsDisk:EcsDisk", round(hourly - compute, 4))])
    return {
        "schema_version": version, "kind": "trainstack-plan", "stack": "demo", "catalog_date": "2024-10-15",
        "plan": {"name": "demo"},
        "summary": {"target": "ecs", "instance_type": itype, "nodes": nodes, "gpus_per_node": 1, "spot": spot != "NoSpot"},
        "cost": cost,
        "resources": [node(i, itype, spot) for i in range(nodes)] + list(extra),
        "policy": list(policy),
    }


ADVISORY = {"policy": "gpu-hourly-budget", "level": "advisory", "resource": None, "message": "over budget"}
MANDATORY = {"policy": "multi-node-requires-rdma", "level": "mandatory", "resource": "demo-node-0",
             "message": "no RDMA"}


def test_flatten_paths():
    assert dict(flatten({"a": {"b": 1}, "l": [{"x": 2}], "s": ["sg-1", "sg-2"]})) == {
        "a.b": 1, "l[0].x": 2, "s": ["sg-1", "sg-2"]}


def test_added_removed_and_changed_by_type_and_name():
    d = diff_documents(doc(1, hourly=9.5, total=190.0), doc(3, hourly=30.0, total=600.0, itype="ecs.gn7i-c16g1.4xlarge"))
    assert [r["name"] for r in d["resources"]["added"]] == ["demo-node-1", "demo-node-2"]
    assert d["resources"]["removed"] == []
    (changed,) = d["resources"]["changed"]
    assert changed["name"] == "demo-node-0"
    (change,) = changed["changes"]
    assert {k: change[k] for k in ("path", "before", "after", "replace", "disruptive", "action")} == {
        "path": "instanceType", "before": "ecs.gn7i-c8g1.2xlarge", "after": "ecs.gn7i-c16g1.4xlarge",
        "replace": False, "disruptive": True, "action": "update"}
    assert "ModifyInstanceSpec needs the node stopped" in change["reason"]
    assert changed["replace"] is False and changed["disruptive"] is True and changed["node"] is True
    assert d["counts"] == {"add": 2, "remove": 0, "change": 1, "replace": 0, "disrupt": 1, "unchanged": 0,
                           "before": 1, "after": 3}


def test_replacements_are_called_out_with_a_reason_and_supersede_in_place_disruptions():
    base = doc(1, hourly=9.5, total=190.0, spot="SpotWithPriceLimit")
    head = copy.deepcopy(base)
    head["resources"][0]["inputs"]["instanceType"] = "ecs.gn7i-c16g1.4xlarge"   # stop + ModifyInstanceSpec
    head["resources"][0]["inputs"]["dataDisks"][0]["category"] = "cloud_auto"   # ForceNew
    head["resources"][0]["inputs"]["tags"]["team"] = "nlp"                       # in place
    (changed,) = diff_documents(base, head)["resources"]["changed"]
    by_path = {c["path"]: c for c in changed["changes"]}
    assert changed["replace"] and not changed["disruptive"] and changed["delete_before_replace"] is False
    assert not by_path["instanceType"]["replace"] and not by_path["instanceType"]["disruptive"]
    assert by_path["instanceType"]["reason"].endswith("superseded: the resource is replaced")
    assert by_path["dataDisks[0].category"]["replace"]
    assert "`data_disks.category` is ForceNew (alicloud/resource_alicloud_instance.go:" in \
        by_path["dataDisks[0].category"]["reason"]
    assert not by_path["tags.team"]["replace"] and by_path["tags.team"]["before"] is None


def test_declared_replace_on_changes_and_dlc_jobs_replace():
    job = {"type": "pulumi-python:dynamic:Resource", "name": "job", "urn": "u", "inputs": {"kind": "pai-dlc-job", "pod_count": 2.0}}
    other = {"type": "x:y:Z", "name": "z", "urn": "z", "inputs": {"a": 1}, "replace_on_changes": ["a"]}
    base = doc(0, hourly=1.0, total=1.0, extra=[job, other])
    head = copy.deepcopy(base)
    head["resources"][0]["inputs"]["pod_count"] = 4.0
    head["resources"][1]["inputs"]["a"] = 2
    changed = {c["name"]: c for c in diff_documents(base, head)["resources"]["changed"]}
    assert changed["job"]["replace"] and changed["z"]["replace"]


def test_cost_deltas_on_demand_and_spot():
    d = diff_documents(doc(1, hourly=10.0, total=200.0), doc(2, hourly=25.0, total=500.0))
    c = d["cost"]
    assert c["hourly"] == {"before": 10.0, "after": 25.0, "delta": 15.0, "percent": 150.0}
    assert c["total"]["delta"] == 300.0
    assert c["spot_hourly"]["before"] == 5.0 and c["spot_hourly"]["after"] == 12.5
    assert c["on_demand_total"]["delta"] == 300.0


def test_the_delta_per_billed_resource_and_in_total():
    base, head = doc(1, hourly=10.0, total=200.0), doc(1, hourly=12.0, total=240.0)
    head["cost"]["breakdown"].append(line("CPFS", "alicloud:nas/fileSystem:FileSystem", 1.0, retained=True,
                                          kind="file_storage"))
    rows = {r["name"]: r for r in diff_documents(base, head)["cost"]["resources"]}
    assert rows["nodes"]["status"] == "changed" and rows["nodes"]["run"]["delta"] == round((10.8 - 9.0) * 20, 2)
    assert rows["CPFS"]["status"] == "added" and rows["CPFS"]["monthly"] == {
        "before": 0.0, "after": 730.0, "delta": 730.0, "percent": None}
    assert rows["CPFS"]["after_destroy_monthly"]["after"] == 730.0 and rows["CPFS"]["retained"]


def test_a_plan_saved_before_the_breakdown_compares_gpu_instances_only():
    """Its cost meant the GPU nodes: the all-in figures are unknown, never compared with a later plan's."""
    d = diff_documents(doc(1, hourly=10.0, total=200.0, version=2), doc(1, hourly=12.0, total=240.0))
    c = d["cost"]
    assert c["basis"] == {"before": "compute-only", "after": "all-in"} and c["comparable"] is False
    assert c["total"] == {"before": None, "after": 240.0, "delta": None, "percent": None}
    assert c["compute_total"]["before"] == 200.0 and c["compute_total"]["after"] == round(10.8 * 20, 2)
    assert {r["status"] for r in c["resources"]} == {"base-unknown"} and "GPU instances only" in c["note"]
    md = render_markdown(d)
    assert "the base plan counted the GPU instances only (saved by an older trainstack)" in md.splitlines()[2]
    assert "| nodes | — | 7,884.00 | unknown | — | 216.00 | unknown |" in md and "Note: the base plan was saved by an older trainstack" in md


def test_policy_changes_new_and_resolved():
    d = diff_documents(doc(1, hourly=1.0, total=1.0, policy=[ADVISORY]),
                       doc(2, hourly=2.0, total=2.0, policy=[MANDATORY]))
    assert d["policy"]["new"] == [MANDATORY] and d["policy"]["resolved"] == [ADVISORY]
    assert (d["policy"]["mandatory_before"], d["policy"]["mandatory_after"]) == (0, 1)


def test_markdown_headline_table_and_collapsible_details():
    d = diff_documents(doc(1, hourly=9.5, total=190.0), doc(2, hourly=19.0, total=380.0, policy=[MANDATORY]),
                       "lora.yaml", "full.yaml")
    md = render_markdown(d)
    lines = md.splitlines()
    assert lines[0] == "### trainstack diff: `lora.yaml` → `full.yaml`"
    assert lines[2].startswith("**Total cost (all-in) increased: 190.00 CNY → 380.00 CNY (+190.00 CNY, +100.0%) 📈**")
    assert "| Hourly cost (all-in, chosen pricing) | 9.50 CNY | 19.00 CNY | +9.50 CNY |" in lines
    assert "| Hourly GPU instances | 8.55 CNY | 17.10 CNY | +8.55 CNY |" in lines
    assert "| Resource | Monthly before | Monthly after | Monthly Δ | Run before | Run after | Run Δ |" in lines
    assert "| nodes | 6,241.50 | 12,483.00 | +6,241.50 | 171.00 | 342.00 | +171.00 |" in lines
    assert "| **Total (all-in)** | 6,935.00 | 13,870.00 | +6,935.00 | 190.00 | 380.00 | +190.00 |" in lines
    assert "| Mandatory policy violations | 0 | 1 | +1 |" in lines
    assert "<details><summary>Resources: 1 to add, 0 to change, 0 to destroy</summary>" in lines
    assert "| + add | `demo-node-1` | `alicloud:ecs/instance:Instance` |  |" in lines
    assert "> [!CAUTION]" in lines
    assert md.count("<details>") == md.count("</details>") == 3  # resources, policies, plan fields


def test_new_stack_against_an_empty_base():
    d = diff_documents(empty_plan(), doc(2, hourly=2.0, total=4.0))
    assert d["counts"]["add"] == 2 and d["cost"]["total"]["delta"] is None
    assert "unknown" in render_markdown(d).splitlines()[2]


def test_many_identical_changes_collapse_and_markdown_stays_small():
    base = doc(512, hourly=1.0, total=1.0)
    head = doc(512, hourly=2.0, total=2.0, itype="ecs.gn7i-c16g1.4xlarge")
    md = render_markdown(diff_documents(base, head))
    assert "`demo-node-0 … demo-node-511 (512)`" in md
    assert len(md) < MAX_MARKDOWN_CHARS


def test_markdown_is_cut_below_githubs_limit_with_balanced_details():
    base = doc(0, hourly=1.0, total=1.0)
    head = doc(0, hourly=1.0, total=1.0, extra=[
        {"type": f"t:m:T{i}", "name": f"r{i}", "urn": str(i), "inputs": {"k": "v" * 60}} for i in range(3000)])
    md = render_markdown(diff_documents(base, head))
    assert len(md) <= MAX_MARKDOWN_CHARS + 200
    assert md.count("<details>") == md.count("</details>")


def test_json_strings_are_compared_inside():
    policy = '{"Statement": [{"Action": ["ecs:StopInstance"], "Resource": ["i-1"]}]}'
    assert dict(flatten({"policyDocument": policy})) == {
        "policyDocument(json).Statement[0].Action": ["ecs:StopInstance"],
        "policyDocument(json).Statement[0].Resource": ["i-1"]}


def test_destroying_or_replacing_protected_resources_is_a_warning():
    bucket = {"type": "alicloud:oss/bucket:Bucket", "name": "ckpt", "urn": "b", "protect": True,
              "retain_on_delete": True, "inputs": {"bucket": "a"}}
    kept = {"type": "x:y:Z", "name": "kept", "urn": "k", "retain_on_delete": True, "inputs": {}}
    d = diff_documents(doc(0, hourly=1.0, total=1.0, extra=[bucket, kept]), doc(0, hourly=1.0, total=1.0))
    assert [r["name"] for r in d["resources"]["removed"]] == ["ckpt", "kept"]
    assert "`ckpt` (alicloud:oss/bucket:Bucket) is protected: `pulumi up` refuses to delete it" in d["warnings"][0]
    assert "stays in the cloud" in d["warnings"][1]
    md = render_markdown(d)
    assert "> [!WARNING]" in md and "| − destroy | `ckpt` | `alicloud:oss/bucket:Bucket` | **protected** |" in md
    renamed = dict(bucket, inputs={"bucket": "b"})
    d = diff_documents(doc(0, hourly=1.0, total=1.0, extra=[bucket]), doc(0, hourly=1.0, total=1.0, extra=[renamed]))
    assert d["resources"]["changed"][0]["replace"] and "would be replaced" in d["warnings"][0]


def test_a_lifecycle_option_change_alone_is_flagged():
    bucket = {"type": "alicloud:oss/bucket:Bucket", "name": "ckpt", "urn": "b", "protect": True,
              "retain_on_delete": True, "ignore_changes": [], "delete_before_replace": False,
              "replace_on_changes": [], "inputs": {"bucket": "a"}}
    unprotected = dict(bucket, protect=False)
    d = diff_documents(doc(0, hourly=1.0, total=1.0, extra=[bucket]), doc(0, hourly=1.0, total=1.0, extra=[unprotected]))
    (changed,) = d["resources"]["changed"]
    assert changed["changes"] == [] and not changed["replace"]
    assert changed["lifecycle_changes"] == [{"option": "protect", "before": True, "after": False}]
    assert "lifecycle `protect`: `yes` → `no`" in render_markdown(d)
