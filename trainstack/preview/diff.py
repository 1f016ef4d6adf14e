"""Compare two plan documents: resources added, removed and changed, replacements, cost, policies.

Resource identity is ``type`` + ``name`` (like Pulumi's own diff once aliases are applied), so a
component refactor that keeps names does not read as delete-and-create. A change is a
*replacement* when it touches an input the provider cannot update in place (the table below,
from terraform-provider-alicloud's ForceNew arguments and Alibaba API limits), an input the
program lists in ``replace_on_changes``, or any input of a PAI-DLC job (a submitted job cannot be
edited; the trainstack provider replaces it).
"""

from __future__ import annotations

import json
from typing import Any, Iterator, Optional

from .sources import PLAN_SCHEMA_VERSION

INSTANCE = "alicloud:ecs/instance:Instance"
DLC_KIND = "pai-dlc-job"

#: type -> {top-level input: why changing it replaces the resource}
REPLACING_INPUTS: dict[str, dict[str, str]] = {
    INSTANCE: {
        "availabilityZone": "the zone of an instance is fixed at creation",
        "vswitchId": "a node moves to another vSwitch only as a new node",
        "imageId": "a new image re-creates the system disk (the node is rebuilt)",
        "dataDisks": "data disks declared on the instance are created with it",
        "spotStrategy": "the pricing model is fixed at creation",
        "spotPriceLimit": "a spot bid is fixed at creation",
        "spotDuration": "the spot protection period is fixed at creation",
    },
    "alicloud:vpc/switch:Switch": {
        "zoneId": "a vSwitch lives in one zone", "cidrBlock": "a vSwitch's CIDR is fixed",
        "vpcId": "a vSwitch belongs to one VPC"},
    "alicloud:ecs/securityGroup:SecurityGroup": {"vpcId": "a security group belongs to one VPC",
                                                 "securityGroupType": "fixed at creation"},
    "alicloud:ecs/securityGroupRule:SecurityGroupRule": {
        k: "security group rules cannot be edited, only re-created"
        for k in ("type", "ipProtocol", "portRange", "cidrIp", "sourceSecurityGroupId", "nicType", "policy",
                  "priority", "securityGroupId")},
    "alicloud:nas/fileSystem:FileSystem": {
        k: "fixed when the file system is created (its data does not move)"
        for k in ("fileSystemType", "protocolType", "storageType", "zoneId", "vpcId", "vswitchId")},
    "alicloud:oss/bucket:Bucket": {"bucket": "bucket names cannot be changed"},
    "alicloud:ecs/ecsDeploymentSet:EcsDeploymentSet": {"strategy": "a deployment set's strategy is fixed"},
}
#: an on-demand instance changes type in place (stop, modify, start); a spot instance cannot
SPOT_TYPE_CHANGE = "a spot instance cannot change its instance type"
SUMMARY_FIELDS = ("target", "instance_type", "gpu_model", "nodes", "gpus_per_node", "zone", "spot",
                  "spot_price_limit", "memory_margin_gib", "tokens_per_second", "estimated_hours")


def flatten(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """``(path, leaf)`` pairs: ``dataDisks[0].size``; lists of scalars stay one value; a string
    holding a JSON document (a RAM policy) is opened up: ``policyDocument(json).Statement[0]...``."""
    if isinstance(value, str) and value[:1] in "{[" and len(value) > 2:
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        if isinstance(parsed, (dict, list)) and parsed:
            yield from flatten(parsed, f"{path}(json)")
            return
    if isinstance(value, dict) and value:
        for k in sorted(value):
            yield from flatten(value[k], f"{path}.{k}" if path else str(k))
    elif isinstance(value, list) and value and any(isinstance(v, (dict, list)) for v in value):
        for i, v in enumerate(value):
            yield from flatten(v, f"{path}[{i}]")
    else:
        yield path, value


def _top(path: str) -> str:
    return path.split(".", 1)[0].split("[", 1)[0].split("(", 1)[0]


def input_changes(base: dict, head: dict) -> list[dict[str, Any]]:
    before, after = dict(flatten(base.get("inputs") or {})), dict(flatten(head.get("inputs") or {}))
    return [{"path": p, "before": before.get(p), "after": after.get(p)}
            for p in sorted(set(before) | set(after)) if before.get(p) != after.get(p)]


def replacement_reasons(base: dict, head: dict, changes: list[dict]) -> dict[str, str]:
    """``{path: why}`` for the changed paths that force a replacement."""
    table = REPLACING_INPUTS.get(head["type"], {})
    declared = set(head.get("replace_on_changes") or []) | set(base.get("replace_on_changes") or [])
    is_dlc = (head.get("inputs") or {}).get("kind") == DLC_KIND
    spot = any((r.get("inputs") or {}).get("spotStrategy") not in (None, "NoSpot") for r in (base, head))
    out = {}
    for c in changes:
        top = _top(c["path"])
        if top in table:
            out[c["path"]] = table[top]
        elif top in declared or "*" in declared:
            out[c["path"]] = "the program declares replace_on_changes for it"
        elif is_dlc:
            out[c["path"]] = "a submitted PAI-DLC job cannot be edited"
        elif head["type"] == INSTANCE and top == "instanceType" and spot:
            out[c["path"]] = SPOT_TYPE_CHANGE
    return out


def _index(doc: dict) -> dict[tuple[str, str], dict]:
    out: dict[tuple[str, str], dict] = {}
    for r in doc.get("resources") or []:
        key = (r["type"], r["name"])
        n = 2
        while key in out:  # same type+name under different parents: keep both
            key = (r["type"], f"{r['name']}#{n}")
            n += 1
        out[key] = r
    return out


def _delta(before: Optional[float], after: Optional[float]) -> dict[str, Optional[float]]:
    delta = None if before is None or after is None else round(after - before, 4)
    pct = None if delta is None or not before else round(100.0 * delta / before, 1)
    return {"before": before, "after": after, "delta": delta, "percent": pct}


def cost_changes(base: dict, head: dict) -> dict[str, dict]:
    b, h = base.get("cost") or {}, head.get("cost") or {}
    out = {"hourly": _delta(b.get("hourly_cny"), h.get("hourly_cny")),
           "total": _delta(b.get("total_cny"), h.get("total_cny")),
           "hours": _delta(b.get("estimated_hours"), h.get("estimated_hours"))}
    for kind in ("on_demand", "spot"):
        bk, hk = b.get(kind) or {}, h.get(kind) or {}
        out[f"{kind}_hourly"] = _delta(bk.get("hourly_cny"), hk.get("hourly_cny"))
        out[f"{kind}_total"] = _delta(bk.get("total_cny"), hk.get("total_cny"))
    return out


def _verdict_key(v: dict) -> tuple:
    return (v.get("policy"), v.get("resource"), v.get("level"), v.get("message"))


def diff_documents(base: dict, head: dict, base_label: str = "base", head_label: str = "head") -> dict[str, Any]:
    """The diff document (``kind: trainstack-diff``); both inputs are plan documents."""
    bi, hi = _index(base), _index(head)
    added = [_ident(hi[k]) for k in hi if k not in bi]
    removed = [dict(_ident(bi[k]), protect=bool(bi[k].get("protect")),
                    retain_on_delete=bool(bi[k].get("retain_on_delete"))) for k in bi if k not in hi]
    changed = []
    for key in hi:
        if key not in bi:
            continue
        changes = input_changes(bi[key], hi[key])
        if not changes:
            continue
        reasons = replacement_reasons(bi[key], hi[key], changes)
        for c in changes:
            c["replace"] = c["path"] in reasons
            if c["replace"]:
                c["reason"] = reasons[c["path"]]
        changed.append(dict(_ident(hi[key]), replace=bool(reasons), changes=changes))
    bv = {_verdict_key(v): v for v in base.get("policy") or []}
    hv = {_verdict_key(v): v for v in head.get("policy") or []}
    bs, hs = base.get("summary") or {}, head.get("summary") or {}
    return {
        "schema_version": PLAN_SCHEMA_VERSION,
        "kind": "trainstack-diff",
        "base": _side(base, base_label),
        "head": _side(head, head_label),
        "summary": [{"field": f, "before": bs.get(f), "after": hs.get(f)} for f in SUMMARY_FIELDS
                    if bs.get(f) != hs.get(f)],
        "cost": cost_changes(base, head),
        "resources": {"added": added, "removed": removed, "changed": changed},
        "warnings": warnings(removed, changed, bi),
        "counts": {"add": len(added), "remove": len(removed), "change": len(changed),
                   "replace": sum(1 for c in changed if c["replace"]),
                   "unchanged": sum(1 for k in hi if k in bi) - len(changed),
                   "before": len(bi), "after": len(hi)},
        "policy": {"new": [hv[k] for k in hv if k not in bv], "resolved": [bv[k] for k in bv if k not in hv],
                   "mandatory_before": sum(1 for v in bv.values() if v.get("level") == "mandatory"),
                   "mandatory_after": sum(1 for v in hv.values() if v.get("level") == "mandatory")},
    }


def warnings(removed: list[dict], changed: list[dict], base: dict[tuple[str, str], dict]) -> list[str]:
    """What `pulumi up` will refuse or keep: protected resources it would have to delete."""
    out = []
    for r in removed:
        if r["protect"]:
            out.append(f"`{r['name']}` ({r['type']}) is protected: `pulumi up` refuses to delete it; "
                       "unprotect it first (`pulumi state unprotect`) or keep it in the program")
        elif r["retain_on_delete"]:
            out.append(f"`{r['name']}` ({r['type']}) leaves the stack but stays in the cloud (retain_on_delete)")
    for c in changed:
        if c["replace"] and base.get((c["type"], c["name"]), {}).get("protect"):
            out.append(f"`{c['name']}` ({c['type']}) is protected and would be replaced: `pulumi up` refuses")
    return out


def _ident(r: dict) -> dict[str, Any]:
    return {"type": r["type"], "name": r["name"]}


def _side(doc: dict, label: str) -> dict[str, Any]:
    return {"label": label, "stack": doc.get("stack"), "name": (doc.get("plan") or {}).get("name"),
            "catalog_date": doc.get("catalog_date"), "pricing": (doc.get("cost") or {}).get("pricing"),
            "summary": doc.get("summary") or {}}


def empty_plan() -> dict[str, Any]:
    """The base side of a stack that does not exist yet (everything in head is added)."""
    return {"schema_version": PLAN_SCHEMA_VERSION, "kind": "trainstack-plan", "stack": None, "plan": None,
            "summary": {}, "cost": {}, "resources": [], "policy": [], "exports": {}}
