"""Knock-on changes: what a replaced resource does to the resources whose inputs hold its outputs.

Offline ids are digests of type and name (preview/cloud.py), so a replaced resource keeps its id
in the head plan and its dependents look unchanged. Pulumi's preview does not see them that way:
a replacement's outputs are unknown until it exists (the engine's CreateStep calls the provider's
Create with ``Preview`` set, pulumi/pulumi pkg/resource/deploy/step.go:372 at 1b594989; the bridge
answers the proposed state, whose computed values are unknown, pulumi-terraform-bridge
pkg/tfbridge/provider.go:1362-1378 at 59de6c66), so every input that holds one of them reaches the
dependent's Diff as unknown. The bridged Terraform diff marks an unknown ForceNew argument as a
replacement (``RequiresNew = Old != New || NewComputed``, hashicorp/terraform-plugin-sdk
helper/schema/schema.go:575 at 9e601691, which the bridge uses through pulumi's fork) and any
other unknown as an update; a delete-before-replace cascade does the same with the whole property
made unknown (step_generator.go:3268-3331, ``calculateDependentReplacements``). Transitively.

So here: every input a replaced resource feeds, by the head plan's recorded property dependencies
(input -> URNs; ``dependsOn`` and parent links change no input and are not followed), becomes
"known after apply" and is judged with the dependent's own provider facts. Inside the input, the
leaves holding the replaced resource's id are the ones fed; when none shows it (a derived value),
the whole input is, as in Pulumi's cascade. Each knock-on change names its cause chain.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from trainstack.catalog.provider_facts import ProviderFacts

from .change_rules import ignored_takes_effect, judge, matches, takes_effect
from .values import UNKNOWN_TEXT, flatten

Key = tuple[str, str]
#: The plan-document field propagation reads (older plans lack it).
FIELD = "resources[].property_dependencies"
#: How a knock-on change's reason starts (the verdict's own reason follows after "; ").
KNOWN_AFTER = "known after apply: it holds an output of"
#: What a step of a cause chain did, by verdict.
OUTCOME = {"replace": "replaced", "no-api-call": "stored only (no API call)", "unknown": "unknown",
           "update": "updated in place", "ignored": "ignored (ignore_changes)"}
SHORT_EFFECT = {"stop": "stop/start", "restart": "stop/start (restart)", "wipe": "system disk wiped",
                "detach": "detached", "resize": "pool resized", "next_instance_only": "new nodes only"}


@dataclass
class KnockOn:
    """What propagation found: extra changes and ignored changes per resource, and cause chains."""

    changes: dict[Key, list[dict]] = field(default_factory=dict)
    ignored: dict[Key, list[dict]] = field(default_factory=dict)
    chains: dict[Key, list[dict]] = field(default_factory=dict)  # replaced resource -> its cause chain
    recorded: bool = True  # the head plan records property dependencies


def records_dependencies(doc: dict) -> bool:
    """Whether a plan document records property dependencies (every resource carries the field)."""
    resources = doc.get("resources") or []
    return bool(resources) and all("property_dependencies" in r for r in resources)


def outcome(c: dict) -> str:
    if c.get("action") == "update" and c.get("effect"):
        return SHORT_EFFECT.get(c["effect"], c["effect"])
    return OUTCOME.get(c.get("action", "unknown"), "unknown")


def chain_text(chain: list[dict]) -> str:
    """``net-vswitch zoneId: replaced -> node-0 vswitchId: stop/start``."""
    return " -> ".join(f"{s['name']} {s['input']}: {s['outcome']}" for s in chain)


def _step(r: dict, path: str, what: str) -> dict:
    return {"type": r["type"], "name": r["name"], "input": path, "outcome": what}


def _text(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str)


def fed_paths(entry: dict, top: str, rid: Optional[str], block: bool) -> list[str]:
    """The paths inside input ``top`` of ``entry`` that hold the output of a resource with id ``rid``:
    the leaves that show the id; when none does (a derived value), the whole input, as Pulumi's
    cascade makes it unknown, except in a nested block (``block``), where the provider diffs each
    leaf and any of them may hold it: then every leaf, so a ForceNew one is not missed."""
    value = (entry.get("inputs") or {}).get(top)
    if value is None:
        return []
    leaves = list(flatten(value, top))
    hits = [p for p, v in leaves if rid and rid in _text(v)]
    return hits or ([p for p, _ in leaves] if block else [top])


def dependents(head: dict[Key, dict]) -> dict[str, list[tuple[Key, str]]]:
    """URN -> the (resource, input) pairs of the head plan whose value holds its outputs."""
    out: dict[str, list[tuple[Key, str]]] = {}
    for key, r in head.items():
        deps = r.get("property_dependencies")
        if not isinstance(deps, dict):  # a hand-edited saved plan: nothing to follow (the fuzz test's case)
            continue
        for top, urns in sorted(deps.items()):
            for urn in urns if isinstance(urns, list) else ():
                if isinstance(urn, str):
                    out.setdefault(urn, []).append((key, top))
    return out


def propagate(facts: ProviderFacts, base: dict[Key, dict], head: dict[Key, dict],
              direct: dict[Key, list[dict]], ignore_of: Callable[[Key], list[str]],
              provider_inputs_of: Callable[[Key], Optional[dict]], recorded: bool) -> KnockOn:
    """Knock-on changes of the resources ``direct`` (their own judged changes) already replaces.

    ``ignore_of(key)``: the head's ``ignore_changes`` of a resource (Pulumi applies them to the new
    inputs before it diffs, so an unknown there is no change either); ``provider_inputs_of(key)``:
    its provider's inputs. Resources new in head are skipped (created anyway)."""
    found = KnockOn(recorded=recorded)
    if not recorded:
        return found
    graph = dependents(head)
    leaves: dict[Key, dict[str, Any]] = {}  # the base inputs of each dependent, flattened once
    queue: list[Key] = []
    for key, changes in direct.items():
        first = next((c for c in changes if c["replace"]), None)
        if first is not None:
            found.chains[key] = [_step(head[key], first["path"], "replaced")]
            queue.append(key)
    while queue:
        cause = queue.pop(0)
        u = head[cause]
        for key, top in graph.get(u.get("urn") or "", []):
            if key not in base or key == cause:
                continue
            seen = {c["path"] for c in direct.get(key, []) + found.changes.get(key, []) + found.ignored.get(key, [])}
            before = leaves[key] if key in leaves else leaves.setdefault(key, _leaves(base[key]))
            for path in fed_paths(head[key], top, u.get("id"), _is_block(facts, head[key], top)):
                if path in seen:
                    continue
                seen.add(path)
                chain = found.chains[cause]
                _judge_fed(facts, head[key], key, path, before.get(path), chain, ignore_of(key),
                           provider_inputs_of(key), found)
            if key not in found.chains:
                hit = next((c for c in found.changes.get(key, []) if c["replace"]), None)
                if hit is not None:
                    found.chains[key] = hit["caused_by"]
                    queue.append(key)
    return found


def _is_block(facts: ProviderFacts, entry: dict, top: str) -> bool:
    rf = facts.resource(entry["type"])
    arg = rf.arguments.get(top) if rf is not None else None
    return arg is not None and arg.type == "block"


def _leaves(r: dict) -> dict[str, Any]:
    return dict(flatten(r.get("inputs") or {}))


def _judge_fed(facts: ProviderFacts, entry: dict, key: Key, path: str, before: Any, chain: list[dict],
               ignore: list[str], provider_inputs: Optional[dict], found: KnockOn) -> None:
    pattern = next((p for p in ignore or [] if matches(p, path)), None)
    if pattern is not None:
        found.ignored.setdefault(key, []).append({
            "path": path, "before": before, "after": UNKNOWN_TEXT, "unknown_after": True,
            "reason": f"the program lists `{pattern}` in ignore_changes",
            "takes_effect": ignored_takes_effect(entry), "caused_by": chain + [_step(entry, path, OUTCOME["ignored"])]})
        return
    v = judge(facts, entry, path, provider_inputs)
    change = {"path": path, "before": before, "after": UNKNOWN_TEXT, "replace": v.replace,
              "disruptive": v.disruptive, "action": v.action,
              "reason": f"{KNOWN_AFTER} `{chain[-1]['name']}`, which is replaced; {v.reason}",
              "takes_effect": takes_effect(entry, path, v), "unknown_after": True}
    if v.effect:
        change["effect"] = v.effect
    if v.diff_suppress:
        change["diff_suppress"] = v.diff_suppress
    change["caused_by"] = chain + [_step(entry, path, outcome(change))]
    found.changes.setdefault(key, []).append(change)


def delete_first_cascade(changed: list[dict]) -> None:
    """A delete-before-replace replacement deletes first whatever it replaces downstream (Pulumi:
    "we must also eagerly delete all resources that depend directly or indirectly on the resource
    being replaced and would be replaced", pkg/resource/deploy/step_generator.go:2053-2068 at
    1b594989), so a knock-on replacement caused by one is deleted first as well (``deleted_with``
    names the cause), and create-before-delete collisions do not apply to it. Transitively."""
    by_key = {(c["type"], c["name"]): c for c in changed}
    settled = False
    while not settled:
        settled = True
        for c in changed:
            if not c["replace"] or c["delete_before_replace"]:
                continue
            for x in c["changes"]:
                step = (x.get("caused_by") or [None, None])[-2] if x["replace"] else None
                cause = by_key.get((step["type"], step["name"])) if step else None
                if cause is not None and cause["replace"] and cause["delete_before_replace"]:
                    c["delete_before_replace"], c["deleted_with"] = True, cause["name"]
                    c.pop("collisions", None)
                    settled = False
                    break


def entry_chain(changes: list[dict]) -> Optional[str]:
    """The cause chain that decides a changed resource's verdict, when a knock-on change does: the
    replacement, else the disruption, else the only kind of change it has."""
    own = [c for c in changes if not c.get("unknown_after")]
    fed = [c for c in changes if c.get("unknown_after")]
    if not fed:
        return None
    for flag in ("replace", "disruptive"):
        if not any(c[flag] for c in own):
            hit = next((c for c in fed if c[flag]), None)
            if hit is not None:
                return chain_text(hit["caused_by"])
    return chain_text(fed[0]["caused_by"]) if not own else None


__all__ = ["FIELD", "KnockOn", "chain_text", "delete_first_cascade", "dependents", "entry_chain", "fed_paths",
           "propagate", "records_dependencies"]
