"""Impossible updates: in-place changes the cloud API refuses, so `pulumi up` would stop part-way.

The rules are provider facts (``impossible_updates`` per resource type in
trainstack/catalog/data/provider_facts.json, hand-checked in tools/provider_facts.py against the
provider call that sends the value and the API documentation that refuses it). A change is checked
only when `pulumi up` would send it: an in-place update (``action`` update) of a resource that is
not replaced anyway (a replacement creates the resource anew with the new value).
"""

from __future__ import annotations

from typing import Any, Optional

from trainstack.catalog.provider_facts import Impossible, ProviderFacts, normalize


def _number(v: Any) -> Optional[float]:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def impossible_updates(facts: ProviderFacts, base: dict, head: dict, entry: dict,
                       base_urns: dict[str, dict], head_urns: dict[str, dict]) -> list[dict[str, Any]]:
    """The impossible updates of one changed resource (``entry`` from the diff); ``*_urns``: each
    side's resources by URN (a ``same_referenced`` rule follows the property dependencies)."""
    rf = facts.resource(head["type"])
    if rf is None or not rf.impossible_updates or entry["replace"]:
        return []
    out = []
    for c in entry["changes"]:
        if c["action"] != "update":
            continue
        for rule in rf.impossible(normalize(c["path"])):
            if not rule.applies(head.get("inputs") or {}):
                continue
            found = _check(rule, c, base, head, base_urns, head_urns)
            if found is not None:
                out.append(_entry(rule, head, c, *found))
    return out


def _check(rule: Impossible, change: dict, base: dict, head: dict, base_urns: dict[str, dict],
           head_urns: dict[str, dict]) -> Optional[tuple[Any, Any, Optional[str]]]:
    """``(before, after, what was compared)`` when the rule refuses the change, else None."""
    if rule.rule == "not_smaller":
        before, after = _number(change["before"]), _number(change["after"])
        if before is not None and after is not None and after < before:
            return change["before"], change["after"], None
        return None
    top = change["path"].split(".", 1)[0].split("[", 1)[0]
    attr = rule.attribute or ""
    head_refs = (head.get("property_dependencies") or {}).get(top) or []
    base_refs = (base.get("property_dependencies") or {}).get(top) or []
    for urn in head_refs:
        now = head_urns.get(urn)
        was = next((base_urns[u] for u in base_refs if u in base_urns), None) or base_urns.get(urn)
        if now is None or was is None:
            continue
        before, after = (was.get("inputs") or {}).get(attr), (now.get("inputs") or {}).get(attr)
        if before is not None and after is not None and before != after:
            return before, after, f"`{attr}` of `{now['name']}`" if was is now or was["name"] == now["name"] \
                else f"`{attr}` of `{was['name']}` -> `{now['name']}`"
    return None


def _entry(rule: Impossible, head: dict, change: dict, before: Any, after: Any, compared: Optional[str]) -> dict:
    item = {"type": head["type"], "resource": head["name"], "urn": head.get("urn"), "input": change["path"],
            "before": before, "after": after, "api": rule.api, "reason": rule.why, "fix": rule.fix,
            "source": [*rule.sources, *rule.docs]}
    if compared:
        item["compared"] = compared
    if change.get("caused_by"):
        item["caused_by"] = change["caused_by"]
    return item


__all__ = ["impossible_updates"]
