"""Compare two plan documents: profile fields, resources added, removed and changed, cost, policies.

Resource identity is ``type`` + ``name`` (like Pulumi's own diff once aliases are applied), so a
component refactor that keeps names does not read as delete-and-create. Each changed input gets a
verdict from :mod:`.change_rules` (provider facts generated from the terraform-provider-alicloud
source, and the lifecycle options the program declares): replaced, updated in place (and whether
that stops, restarts or wipes a running node), or stored without an API call. Inputs the program
lists in ``ignore_changes`` are no change (reported apart). An older saved plan's missing fields
are reported as unknown, never read as "nothing changed".
"""

from __future__ import annotations

from dataclasses import replace as with_fields
from typing import Any, Optional

from trainstack.catalog.provider_facts import ProviderFacts, load_provider_facts

from ..dlc_job import KIND as DLC_KIND
from ..layout.pool_configuration import KIND as POOL_KIND
from ..errors import EXIT_BAD_INPUT, EXIT_POLICY
from ..redaction import redact_input
from .change_rules import (
    DYNAMIC, effect_label, grows, ignored_takes_effect, is_job_settings, judge, matches, replace_effects, takes_effect,
)
from .impossible import impossible_updates
from .propagation import FIELD, delete_first_cascade, entry_chain, propagate, records_dependencies
from ..plan.schema import COST_BASIS_ALL_IN, COST_BASIS_COMPUTE, cost_basis, cost_to_v3
from .sources import PLAN_SCHEMA_VERSION
from .text_format import finite_number
from .values import flatten

DIFF_SCHEMA_VERSION = 2
INSTANCE = "alicloud:ecs/instance:Instance"
#: Resources that are (or run) GPU nodes: their replacements and disruptions lead the PR comment.
NODE_TYPES = frozenset({INSTANCE, "alicloud:ess/scalingGroup:ScalingGroup",
                        "alicloud:ess/scalingConfiguration:ScalingConfiguration"})
NODE_KINDS = frozenset({DLC_KIND, POOL_KIND})
PROVIDER_PREFIX = "pulumi:providers:"
LIFECYCLE = ("protect", "retain_on_delete", "ignore_changes", "delete_before_replace", "replace_on_changes")
SUMMARY_FIELDS = ("target", "instance_type", "gpu_model", "nodes", "gpus_per_node", "zone", "spot",
                  "spot_price_limit", "memory_margin_gib", "tokens_per_second", "estimated_hours")


def input_changes(base: dict, head: dict) -> list[dict[str, Any]]:
    before, after = dict(flatten(base.get("inputs") or {})), dict(flatten(head.get("inputs") or {}))
    return [{"path": p, "before": before.get(p), "after": after.get(p)}
            for p in sorted(set(before) | set(after)) if before.get(p) != after.get(p)]


def is_node(r: dict) -> bool:
    return r["type"] in NODE_TYPES or (r["type"] == DYNAMIC and (r.get("inputs") or {}).get("kind") in NODE_KINDS)


def lifecycle(r: dict, unknown: list[str]) -> dict[str, Any]:
    """The lifecycle options of a resource entry (``None``: the saved plan does not record it)."""
    out = {}
    for k in LIFECYCLE:
        if f"resources[].{k}" in unknown:
            out[k] = None
        elif k in ("ignore_changes", "replace_on_changes"):
            out[k] = list(r.get(k) or [])
        else:
            out[k] = bool(r.get(k))
    return out


def changed_resource(facts: ProviderFacts, base: dict, head: dict, opts: dict, changes: list[dict],
                     base_unknown: list[str], head_unknown: list[str]) -> Optional[dict]:
    """The changed entry (or None) of one resource present on both sides, from its judged changes
    (its own and the knock-on ones, :mod:`.propagation`). The verdicts follow the head's options:
    Pulumi applies the new program's ignore/replace options. A change of lifecycle options alone
    (``protect`` dropped, say) is a changed entry too."""
    lifecycle_changes = lifecycle_diff(base, head, base_unknown, head_unknown)
    if not changes and not lifecycle_changes:
        return None
    replace = any(c["replace"] for c in changes)
    reasons = []
    if replace:
        for c in changes:
            if c["disruptive"]:  # the node is replaced anyway
                c["disruptive"] = False
                c["reason"] += "; superseded: the resource is replaced"
        reasons = [f"replacing it {effect_label(e)}: {e.why} ({', '.join(e.sources + e.docs)})"
                   for e in replace_effects(facts.resource(head["type"]))]
    dbr: Optional[bool] = opts["delete_before_replace"]
    dyn = facts.dynamic((head.get("inputs") or {}).get("kind")) if head["type"] == DYNAMIC else None
    if dyn is not None:
        dbr = dyn.delete_before_replace or bool(dbr)
    if is_job_settings(head) and replace is False:
        reasons.append("the job settings channel: running nodes read the new settings at their next job start "
                       "(`systemctl restart trainstack-job` or a reboot); a running trainer is not touched")
    entry = dict(_ident(head), node=is_node(head), replace=replace,
                 delete_before_replace=(dbr if replace else False),
                 disruptive=any(c["disruptive"] for c in changes) or (replace and bool(reasons)),
                 unknown=any(c["action"] == "unknown" for c in changes), changes=changes, lifecycle=opts)
    collisions = held_value_collisions(facts, base, head) if replace and not dbr else []
    for key, value in (("reasons", reasons), ("collisions", collisions), ("lifecycle_changes", lifecycle_changes),
                       ("cause_chain", entry_chain(changes))):
        if value:
            entry[key] = value
    return entry


def judged_changes(facts: ProviderFacts, base: dict, head: dict, opts: dict,
                   provider_inputs: Optional[dict]) -> tuple[list[dict], list[dict]]:
    """``(changes with verdicts, changes the program's ignore_changes skip)``."""
    changes, ignored = [], []
    for c in input_changes(base, head):
        pattern = next((p for p in opts["ignore_changes"] or [] if matches(p, c["path"])), None)
        if pattern is not None:
            ignored.append(dict(c, reason=f"the program lists `{pattern}` in ignore_changes",
                                takes_effect=ignored_takes_effect(head)))
            continue
        v = judge(facts, head, c["path"], provider_inputs)
        if grows(v, c["before"], c["after"]):
            v = with_fields(v, disruptive=False, reason=f"the group grows: ESS launches nodes and touches no running one "
                                                    f"(an added node of a running self-healing job waits for a seat "
                                                    f"until the next job start); {v.reason}")
        change = dict(c, replace=v.replace, disruptive=v.disruptive, action=v.action, reason=v.reason,
                      takes_effect=takes_effect(head, c["path"], v))
        if v.effect:
            change["effect"] = v.effect
        if v.diff_suppress:
            change["diff_suppress"] = v.diff_suppress
        changes.append(change)
    return changes, ignored


def held_value_collisions(facts: ProviderFacts, base: dict, head: dict) -> list[str]:
    """A create-before-delete replacement that keeps a value the old resource holds exclusively."""
    rf = facts.resource(head["type"])
    if rf is None:
        return []
    before, after = dict(flatten(base.get("inputs") or {})), dict(flatten(head.get("inputs") or {}))
    return [f"the replacement is created before the old one is deleted and keeps `{u.argument}` "
            f"{after[u.argument]!r}: {u.why}, so the create fails ({', '.join(u.docs)}); set "
            f"delete_before_replace or change `{u.argument}`"
            for u in rf.unique_while_alive
            if after.get(u.argument) is not None and after.get(u.argument) == before.get(u.argument)]


def lifecycle_diff(base: dict, head: dict, base_unknown: list[str], head_unknown: list[str]) -> list[dict[str, Any]]:
    b, h = lifecycle(base, base_unknown), lifecycle(head, head_unknown)
    return [{"option": k, "before": b[k], "after": h[k]} for k in LIFECYCLE
            if b[k] is not None and h[k] is not None and b[k] != h[k]]


def profile_changes(base: dict, head: dict) -> Optional[list[dict[str, Any]]]:
    """The profile fields that changed (``None`` when a side does not record its profile)."""
    bp, hp = base.get("profile"), head.get("profile")
    if not isinstance(bp, dict) or not isinstance(hp, dict):
        return None
    before, after = dict(flatten(bp)), dict(flatten(hp))
    return [{"path": p, "before": before.get(p), "after": after.get(p)}
            for p in sorted(set(before) | set(after)) if before.get(p) != after.get(p)]


def _provider_inputs(doc: dict, entry: dict) -> Optional[dict]:
    """The inputs of the provider resource ``entry`` uses (its explicit provider, else the default)."""
    urn = entry.get("provider_urn")
    for r in doc.get("resources") or []:
        if r["type"].startswith(PROVIDER_PREFIX) and (r.get("urn") == urn if urn else False):
            return r.get("inputs") or {}
    return None


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


def _figure(v: Any) -> Optional[float]:
    """A cost figure as a number, or None: a hand-edited saved plan may hold anything there."""
    return float(v) if finite_number(v) else None


def _delta(before: Any, after: Any) -> dict[str, Optional[float]]:
    before, after = _figure(before), _figure(after)
    # finite or null: a hand-made plan's 1e-308 CNY/h (or two figures near the float limit) would make
    # the percent or the delta Infinity, which is not JSON (found by make fuzz at 3,000)
    delta = None if before is None or after is None else _finite(round(after - before, 4))
    pct = None if delta is None or not before else _finite(round(100.0 * delta / before, 1))
    return {"before": before, "after": after, "delta": delta, "percent": pct}


def _finite(x: float) -> Optional[float]:
    return x if finite_number(x) else None


def _cost(doc: dict) -> dict:
    """The document's cost block in this version's meaning (an older plan's GPU-only figures become the
    compute ones; its all-in ones are unknown)."""
    if cost_basis(doc) == COST_BASIS_COMPUTE:
        cost = cost_to_v3(doc).get("cost")
    else:
        cost = doc.get("cost")
    return cost if isinstance(cost, dict) else {}


def _line_key(item: dict) -> tuple[str, str]:
    return (str(item.get("type")), str(item.get("name")))


def _lines(cost: dict) -> list:
    return cost["breakdown"] if isinstance(cost.get("breakdown"), list) else []


def resource_cost_changes(b: dict, h: dict, base_known: bool) -> list[dict[str, Any]]:
    """Per billed line (type + name): monthly, run, hourly and after-destroy figures before and after."""
    before = {_line_key(i): i for i in _lines(b) if isinstance(i, dict)}
    after = {_line_key(i): i for i in _lines(h) if isinstance(i, dict)}
    out = []
    for key in list(after) + [k for k in before if k not in after]:
        bi, hi = before.get(key) or {}, after.get(key) or {}
        status = ("base-unknown" if not base_known else "added" if not bi else "removed" if not hi else
                  "changed" if any(bi.get(f) != hi.get(f) for f in ("monthly_cny", "run_cny", "hourly_cny", "quantity",
                                                                     "count", "unpriced")) else "unchanged")
        row = {"type": key[0], "name": key[1], "status": status, "kind": (hi or bi).get("kind"),
               "retained": bool((hi or bi).get("retained")), "contingent": bool((hi or bi).get("contingent"))}
        for field, out_key in (("monthly_cny", "monthly"), ("run_cny", "run"), ("hourly_cny", "hourly"),
                               ("after_destroy_monthly_cny", "after_destroy_monthly")):
            row[out_key] = _delta(bi.get(field) if bi else (None if not base_known else 0.0),
                                  hi.get(field) if hi else 0.0)
        for side, item in (("before", bi), ("after", hi)):
            if item.get("unpriced"):
                row[f"unpriced_{side}"] = item["unpriced"]
        out.append(row)
    return out


def cost_changes(base: dict, head: dict) -> dict[str, Any]:
    """All-in totals, the GPU-only ones (comparable with plans saved before the breakdown), and per line."""
    b, h = _cost(base), _cost(head)
    basis = {"before": cost_basis(base) if base.get("cost") else None, "after": cost_basis(head)}
    out: dict[str, Any] = {
        "basis": basis, "comparable": basis["before"] in (None, COST_BASIS_ALL_IN),
        "hourly": _delta(b.get("hourly_cny"), h.get("hourly_cny")),
        "total": _delta(b.get("total_cny"), h.get("total_cny")),
        "hours": _delta(b.get("estimated_hours"), h.get("estimated_hours")),
        "compute_hourly": _delta(b.get("compute_hourly_cny"), h.get("compute_hourly_cny")),
        "compute_total": _delta(b.get("compute_total_cny"), h.get("compute_total_cny")),
        "monthly": _delta(b.get("monthly_cny"), h.get("monthly_cny")),
        "after_destroy_monthly": _delta(b.get("after_destroy_monthly_cny"), h.get("after_destroy_monthly_cny")),
    }
    for kind in ("on_demand", "spot"):
        bk, hk = b.get(kind) or {}, h.get(kind) or {}
        out[f"{kind}_hourly"] = _delta(bk.get("hourly_cny"), hk.get("hourly_cny"))
        out[f"{kind}_total"] = _delta(bk.get("total_cny"), hk.get("total_cny"))
    out["resources"] = resource_cost_changes(b, h, base_known=basis["before"] != COST_BASIS_COMPUTE)
    if basis["before"] == COST_BASIS_COMPUTE:
        out["note"] = ("the base plan was saved by an older trainstack whose cost counted the GPU instances only: "
                       "its all-in figures are unknown, so only the GPU instances' cost is compared")
    return out


def _verdict_key(v: dict) -> tuple:
    return (v.get("policy"), v.get("resource"), v.get("level"), v.get("message"))


def diff_documents(base: dict, head: dict, base_label: str = "base", head_label: str = "head",
                   facts: Optional[ProviderFacts] = None) -> dict[str, Any]:
    """The diff document (``kind: trainstack-diff``); both inputs are plan documents, redacted here
    whoever wrote them (a hand-made or older saved plan may hold a password or a token in user data:
    trainstack/redaction.py; trainstack's own documents come out unchanged)."""
    base, head = redact_input(base), redact_input(head)
    facts = facts or load_provider_facts()
    base_unknown, head_unknown = list(base.get("unknown_fields") or []), list(head.get("unknown_fields") or [])
    bi, hi = _index(base), _index(head)
    added = [dict(_ident(hi[k]), node=is_node(hi[k]), lifecycle=lifecycle(hi[k], head_unknown))
             for k in hi if k not in bi]
    removed = [dict(_ident(bi[k]), node=is_node(bi[k]), protect=bool(bi[k].get("protect")),
                    retain_on_delete=bool(bi[k].get("retain_on_delete"))) for k in bi if k not in hi]
    changed, ignored, impossible = [], [], []
    both = [k for k in hi if k in bi]
    opts = {k: lifecycle(hi[k], head_unknown) for k in both}
    pins = {k: _provider_inputs(head, hi[k]) for k in both}
    judged = {k: judged_changes(facts, bi[k], hi[k], opts[k], pins[k]) for k in both}
    knock = propagate(facts, bi, hi, {k: v[0] for k, v in judged.items()}, lambda k: opts[k]["ignore_changes"],
                      pins.get, records_dependencies(head))
    base_urns, head_urns = _by_urn(base), _by_urn(head)
    for key in both:
        changes = judged[key][0] + knock.changes.get(key, [])
        skipped = judged[key][1] + knock.ignored.get(key, [])
        entry = changed_resource(facts, bi[key], hi[key], opts[key], changes, base_unknown, head_unknown)
        if skipped:
            ignored.append(dict(_ident(hi[key]), changes=skipped))
        if entry is not None:
            changed.append(entry)
            impossible += impossible_updates(facts, bi[key], hi[key], entry, base_urns, head_urns)
    delete_first_cascade(changed)
    if not knock.recorded and any(c["replace"] for c in changed):
        head_unknown = head_unknown + [FIELD]
    bv = {_verdict_key(v): v for v in base.get("policy") or []}
    hv = {_verdict_key(v): v for v in head.get("policy") or []}
    bs, hs = base.get("summary") or {}, head.get("summary") or {}
    return {
        "schema_version": DIFF_SCHEMA_VERSION,
        "kind": "trainstack-diff",
        "base": _side(base, base_label),
        "head": _side(head, head_label),
        "provider_facts": {"provider": facts.provider.name, "version": facts.provider.version,
                           "commit": facts.provider.commit,
                           "bridged_by": f"{facts.provider.bridged_by.package} {facts.provider.bridged_by.version}"},
        "unknown": [{"side": side, "field": f} for side, fields in (("base", base_unknown), ("head", head_unknown))
                    for f in fields],
        "impossible": impossible,
        "profile_changes": profile_changes(base, head),
        "summary": [{"field": f, "before": bs.get(f), "after": hs.get(f)} for f in SUMMARY_FIELDS
                    if bs.get(f) != hs.get(f)],
        # whose price the head rests on (prices.as_of / age_days / source), and the base's under `before`
        "prices": None if head.get("prices") is None and base.get("prices") is None
        else {**(head.get("prices") or {}), "before": base.get("prices")},
        "cost": cost_changes(base, head),
        "resources": {"added": added, "removed": removed, "changed": changed, "ignored": ignored},
        "warnings": warnings(removed, changed, bi) + unknown_knock_on(knock, changed),
        "counts": {"add": len(added), "remove": len(removed), "change": len(changed),
                   "replace": sum(1 for c in changed if c["replace"]),
                   "disrupt": sum(1 for c in changed if c["disruptive"] and not c["replace"]),
                   "unchanged": sum(1 for k in hi if k in bi) - len(changed),
                   "before": len(bi), "after": len(hi)},
        "policy": {"new": [hv[k] for k in hv if k not in bv], "resolved": [bv[k] for k in bv if k not in hv],
                   "mandatory_before": sum(1 for v in bv.values() if v.get("level") == "mandatory"),
                   "mandatory_after": sum(1 for v in hv.values() if v.get("level") == "mandatory")},
    }


def diff_exit_code(d: dict) -> int:
    """`trainstack diff`'s exit code (the deploy gate's too): 2 when an update is impossible (`pulumi
    up` would stop part-way), else 4 when the head violates a mandatory policy, else 0."""
    if d["impossible"]:
        return EXIT_BAD_INPUT
    return EXIT_POLICY if d["policy"]["mandatory_after"] else 0


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
        old = base.get((c["type"], c["name"]), {})
        if c["replace"] and old.get("protect"):
            out.append(f"`{c['name']}` ({c['type']}) is protected and would be replaced: `pulumi up` refuses")
        elif c["replace"] and old.get("retain_on_delete"):
            out.append(f"`{c['name']}` ({c['type']}) would be replaced and is retain_on_delete: the old one stays "
                       "in the cloud next to the new one")
        for why in c.get("collisions", []):
            out.append(f"`{c['name']}` ({c['type']}): {why}")
        if c.get("unknown"):
            out.append(f"`{c['name']}` ({c['type']}): what `pulumi up` does to some changed inputs is unknown "
                       "(no provider facts for them)")
    return out


def unknown_knock_on(knock, changed: list[dict]) -> list[str]:
    """Said when the head plan cannot show what the replaced resources' dependents do."""
    if knock.recorded:
        return []
    names = [c["name"] for c in changed if c["replace"]]
    if not names:
        return []
    return [f"what depends on the {len(names)} replaced resource(s) ({', '.join(f'`{n}`' for n in names[:5])}"
            f"{', ...' if len(names) > 5 else ''}) is unknown: the head plan records no property dependencies "
            "(saved by an older trainstack); plan it again with this version"]


def _by_urn(doc: dict) -> dict[str, dict]:
    # a saved plan's urns are strings or absent: sources.saved_plan_problems refuses any other (exit 2)
    return {r["urn"]: r for r in doc.get("resources") or [] if r.get("urn")}


def _ident(r: dict) -> dict[str, Any]:
    return {"type": r["type"], "name": r["name"]}


def _side(doc: dict, label: str) -> dict[str, Any]:
    return {"label": label, "stack": doc.get("stack"), "name": (doc.get("plan") or {}).get("name"),
            "catalog_date": doc.get("catalog_date"), "pricing": (doc.get("cost") or {}).get("pricing"),
            "prices": doc.get("prices"),
            "summary": doc.get("summary") or {},
            "capacity": (doc.get("plan") or {}).get("capacity") if isinstance(doc.get("plan"), dict) else None,
            "estimate": (doc.get("plan") or {}).get("estimate") if isinstance(doc.get("plan"), dict) else None}


def empty_plan() -> dict[str, Any]:
    """The base side of a stack that does not exist yet (everything in head is added)."""
    return {"schema_version": PLAN_SCHEMA_VERSION, "kind": "trainstack-plan", "stack": None, "plan": None,
            "profile": {}, "summary": {}, "cost": {}, "resources": [], "policy": [], "exports": {}}
