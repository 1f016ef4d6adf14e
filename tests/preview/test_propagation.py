"""Replacement propagation (trainstack/preview/propagation.py), checked as properties of the class:

* over the plan documents of every sample and variant, with random resources forced into a
  replacement (a ForceNew input changed): every resource with an input a replaced resource feeds,
  by the recorded property dependencies, is reported changed (or its change ignored, when the
  program ignores that input), nothing else is, and no resource is replaced without a ForceNew
  change of its own or a cause chain of replacements leading to it;
* over random profile edits of the samples, planned through the production path;
* and the edges: a head plan without dependencies (unknown, said), a base plan without them (exact).
"""

from __future__ import annotations

import copy
import json

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import sample_plans
from test_day_two import plan, sample
from trainstack.catalog.provider_facts import load_provider_facts
from trainstack.errors import TrainstackError
from trainstack.preview.diff import diff_documents
from trainstack.preview.propagation import FIELD, fed_paths
from trainstack.preview.values import UNKNOWN_TEXT

PLANS = tuple(sorted(sample_plans.all_plans()))
FACTS = load_provider_facts()


def force_new_inputs(r: dict) -> list[str]:
    """Top-level scalar inputs of ``r`` whose argument is ForceNew (changing one replaces it)."""
    rf = FACTS.resource(r["type"])
    if rf is None or not r.get("custom"):
        return []
    return sorted(k for k, v in (r.get("inputs") or {}).items()
                  if isinstance(v, (str, int, float)) and not isinstance(v, bool)
                  and k in rf.arguments and rf.arguments[k].force_new and k not in (r.get("ignore_changes") or []))


def replaceable(doc: dict) -> list[int]:
    return [i for i, r in enumerate(doc["resources"]) if force_new_inputs(r)]


def bump(v):
    return v + "-x" if isinstance(v, str) else v + 1


def check_properties(d: dict, head: dict, forced: set[tuple[str, str]] = frozenset()) -> None:
    """The invariants every diff must keep (``forced``: resources whose ForceNew input was changed)."""
    changed = {(c["type"], c["name"]): c for c in d["resources"]["changed"]}
    ignored = {(c["type"], c["name"]): c for c in d["resources"]["ignored"]}
    by_urn = {r["urn"]: r for r in head["resources"]}
    replaced_urns = {r["urn"] for r in head["resources"] if changed.get((r["type"], r["name"]), {}).get("replace")}
    added = {(a["type"], a["name"]) for a in d["resources"]["added"]}
    for key in forced:
        assert changed[key]["replace"], key
    # 1. every input a replaced resource feeds is reported: changed (unknown after) or ignored
    for r in head["resources"]:
        key = (r["type"], r["name"])
        if key in added:
            continue
        for top, urns in r.get("property_dependencies", {}).items():
            if not set(urns) & replaced_urns or (r.get("inputs") or {}).get(top) is None:
                continue
            reported = [c["path"] for c in changed.get(key, {}).get("changes", [])] + \
                       [c["path"] for c in ignored.get(key, {}).get("changes", [])]
            assert any(p == top or p.startswith((f"{top}.", f"{top}[", f"{top}(")) for p in reported), (key, top)
    # 2. no replacement without a ForceNew change of its own or a chain of replacements leading to it
    for key, c in changed.items():
        if not c["replace"]:
            continue
        hits = [x for x in c["changes"] if x["replace"]]
        assert hits, key
        own = [x for x in hits if not x.get("unknown_after")]
        if own:
            continue
        chain = hits[0]["caused_by"]
        assert chain[-1]["name"] == c["name"] and c.get("cause_chain")
        for step in chain[:-1]:
            assert changed[(step["type"], step["name"])]["replace"], step
        root = changed[(chain[0]["type"], chain[0]["name"])]
        assert any(x["replace"] and not x.get("unknown_after") for x in root["changes"]), chain
    # 3. a knock-on change is always "known after apply" and names a replaced cause it depends on
    for key, c in changed.items():
        entry = next(r for r in head["resources"] if (r["type"], r["name"]) == key)
        for x in c["changes"]:
            if x.get("unknown_after"):
                assert x["after"] == UNKNOWN_TEXT
                cause = x["caused_by"][-2]
                top = x["path"].split("(json)", 1)[0].split(".", 1)[0].split("[", 1)[0]
                deps = {by_urn[u]["name"] for u in entry["property_dependencies"].get(top, []) if u in by_urn}
                assert cause["name"] in deps, (key, x["path"], cause)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_forced_replacements_propagate_to_every_input_they_feed_and_nowhere_else(data):
    name = data.draw(st.sampled_from(PLANS), label="plan")
    base = sample_plans.plan(name)
    head = copy.deepcopy(base)
    candidates = replaceable(head)
    picks = data.draw(st.lists(st.sampled_from(candidates), min_size=1, max_size=3, unique=True), label="resources")
    forced = set()
    for i in picks:
        r = head["resources"][i]
        arg = data.draw(st.sampled_from(force_new_inputs(r)), label=f"{r['name']} input")
        r["inputs"][arg] = bump(r["inputs"][arg])
        forced.add((r["type"], r["name"]))
    d = diff_documents(base, head)
    check_properties(d, head, forced)
    # nothing else: a resource changed only if forced or fed (directly or down a chain)
    for c in d["resources"]["changed"]:
        key = (c["type"], c["name"])
        assert key in forced or all(x.get("unknown_after") for x in c["changes"]), (key, c["changes"])


def _zone(p, z):
    p["zone"] = z


OPERATORS = {
    "zone-a": lambda p: _zone(p, "cn-shenzhen-a"), "zone-e": lambda p: _zone(p, "cn-shenzhen-e"),
    "dataset-up": lambda p: p["storage"].update(dataset_gib=p["storage"]["dataset_gib"] * 2),
    "dataset-down": lambda p: p["storage"].update(dataset_gib=p["storage"]["dataset_gib"] // 2),
    "checkpoint-gib": lambda p: p["storage"].update(checkpoint_gib=3000),
    "dataset-uri": lambda p: p["storage"].update(dataset_uri="oss://my-team-data/v2/"),
    "nodes": lambda p: p["resources"].update(gpus=32) if p["resources"].get("gpus") in (24, "auto")
    else p["resources"].update(gpus=int(p["resources"]["gpus"]) * 2),
    "spot": lambda p: p["resources"].update(spot="never", self_healing=False)
    if p["resources"].get("spot") != "never" else p["resources"].update(spot="require"),
    "command": lambda p: p["job"].update(command=p["job"]["command"] + " --seed 7"),
    "env": lambda p: p["job"].setdefault("env", {}).update(PROPERTY="1"),
    "tags": lambda p: p["tags"].update(owner="prop"),
    "image": lambda p: p.update(image_id="m-wz9pinned000000002"),
}
SAMPLES = ("llama3-8b-lora", "llama3-70b-full", "llama3-70b-spot-heal", "qwen-7b-spot", "qwen-7b-dlc")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(name=st.sampled_from(SAMPLES), ops=st.lists(st.sampled_from(sorted(OPERATORS)), min_size=1, max_size=2,
                                                   unique=True))
def test_random_profile_edits_keep_the_propagation_invariants(name, ops):
    head_profile = copy.deepcopy(sample(name))
    for op in ops:
        OPERATORS[op](head_profile)
    try:
        head = plan(head_profile)
    except TrainstackError:  # an edit the resolver refuses (infeasible, bad input) is no diff
        assume(False)
    base = plan(sample(name))
    check_properties(diff_documents(base, head), head)


# ---- saved plans without property dependencies ----------------------------------------------------

def _strip(doc: dict) -> dict:
    out = copy.deepcopy(doc)
    for r in out["resources"]:
        r.pop("property_dependencies", None)
        r.pop("id", None)
    return out


def _zone_edit():
    head = copy.deepcopy(sample("llama3-8b-lora"))
    head["zone"] = "cn-shenzhen-a"
    return plan(sample("llama3-8b-lora")), plan(head)


def test_a_head_plan_without_dependencies_says_the_knock_on_changes_are_unknown():
    base, head = _zone_edit()
    d = diff_documents(base, _strip(head))
    assert {"side": "head", "field": FIELD} in d["unknown"]
    assert any("records no property dependencies" in w and "llama3-8b-lora-network-vswitch" in w for w in d["warnings"])
    assert not any(x.get("unknown_after") for c in d["resources"]["changed"] for x in c["changes"])
    from trainstack.preview.render_diff import render_markdown

    assert "does not record `resources[].property_dependencies`" in render_markdown(d)


def test_a_base_plan_without_dependencies_changes_nothing_pulumi_judges_the_new_inputs():
    base, head = _zone_edit()
    exact, old_base = diff_documents(base, head), diff_documents(_strip(base), head)
    assert old_base["unknown"] == [] and old_base["resources"] == exact["resources"]
    assert old_base["impossible"] == exact["impossible"]


def test_no_replacement_means_nothing_to_say_even_without_dependencies():
    base = plan(sample("qwen-7b-spot"))
    head = copy.deepcopy(sample("qwen-7b-spot"))
    head["tags"]["owner"] = "x"
    d = diff_documents(base, _strip(plan(head)))
    assert d["unknown"] == [] and not [w for w in d["warnings"] if "property dependencies" in w]


# ---- the pieces --------------------------------------------------------------------------------

def test_the_fed_leaves_are_the_ones_holding_the_id_else_the_whole_input_or_every_leaf_of_a_block():
    entry = {"inputs": {"networkInterfaces": {"vswitchId": "vsw-1", "queuePairNumber": 4.0},
                        "tags": {"a": "x", "b": "y"}, "vswitchId": "vsw-2"}}
    assert fed_paths(entry, "networkInterfaces", "vsw-1", block=True) == ["networkInterfaces.vswitchId"]
    assert fed_paths(entry, "networkInterfaces", "qp-9", block=True) == ["networkInterfaces.queuePairNumber",
                                                                          "networkInterfaces.vswitchId"]
    assert fed_paths(entry, "tags", "addr-1", block=False) == ["tags"]  # a derived value: the whole input
    assert fed_paths(entry, "vswitchId", "vsw-2", block=False) == ["vswitchId"]
    assert fed_paths(entry, "absent", "vsw-2", block=False) == []


def test_a_chain_runs_through_every_replaced_link():
    """H zone edit: CPFS (zone_id) -> its export (file_system_id) -> the address lookup (export_id) ->
    node 0's tags (the mount address travels in a tag): four links, each replaced but the last."""
    head = copy.deepcopy(sample("llama3-70b-spot-heal"))
    head["zone"] = "cn-shenzhen-e"
    d = diff_documents(plan(sample("llama3-70b-spot-heal")), plan(head))
    (node,) = [c for c in d["resources"]["changed"] if c["name"].endswith("-cluster-node-0")]
    (tags,) = [x for x in node["changes"] if x["path"] == "tags"]
    names = [s["name"].rsplit("-storage-", 1)[-1] for s in tags["caused_by"]]
    assert names[:-1] == ["cpfs", "cpfs-export", "cpfs-address"] or names[-2] == "cpfs-address", names
    assert tags["action"] == "update" and not tags["replace"] and tags["after"] == UNKNOWN_TEXT


def test_an_ignored_input_fed_by_a_replacement_is_listed_as_ignored_with_its_cause():
    base, head = _zone_edit()
    head = copy.deepcopy(head)
    (node,) = [r for r in head["resources"] if r["name"].endswith("-cluster-node-0")]
    node["ignore_changes"] = list(node["ignore_changes"]) + ["vswitchId"]
    d = diff_documents(base, head)
    ignored = [x for r in d["resources"]["ignored"] if r["name"] == node["name"] for x in r["changes"]]
    (vsw,) = [x for x in ignored if x["path"] == "vswitchId"]
    assert vsw["unknown_after"] and vsw["caused_by"][0]["name"].endswith("-network-vswitch")
    assert d["impossible"] == []  # an ignored change is never sent


def test_the_diff_document_round_trips_as_json():
    base, head = _zone_edit()
    d = diff_documents(base, head)
    assert json.loads(json.dumps(d)) == d
