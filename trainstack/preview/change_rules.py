"""What `pulumi up` does with one changed input, from the provider facts and the program's options.

A change is, in this order:
1. ignored, when the program lists the input in ``ignore_changes`` (Pulumi does not diff it);
2. a replacement, when the program lists it in ``replace_on_changes``;
3. for trainstack's dynamic providers: what their ``diff`` replaces (``trainstack_providers``);
4. for bridged resources: a replacement when the Terraform argument is ``ForceNew`` (or
   CustomizeDiff forces it under the provider configuration the program sets), else an update
   in place when the provider's Update path checks it, else nothing in the cloud (the provider
   stores the new value without an API call). A hand-checked effect marks in-place updates that
   stop, restart or wipe a running node.
Facts come only through :mod:`trainstack.catalog.provider_facts`.

Each verdict also says when the change reaches a running job (:func:`takes_effect`): ``now`` (the
API call changes the cloud), ``replace`` (a new resource), ``next_job_start`` (the job settings
channel, a node's job-settings tag, a disk that grows online: the launcher reads, verifies and
applies them when the job next starts), ``new_nodes_only`` (what only a node created later gets:
a changed scaling configuration, changes the program ignores on running nodes), ``never``
(stored without an API call) or ``unknown``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal, Optional

from trainstack.catalog.provider_facts import Effect, ProviderFacts, ResourceFacts, normalize
from trainstack.layout.pool_configuration import KIND as POOL_KIND
from trainstack.tags import NODE_RANK as RANK_TAG

from ..fsutil import json_or_none

DYNAMIC = "pulumi-python:dynamic:Resource"
INSTANCE = "alicloud:ecs/instance:Instance"
BUCKET_OBJECT = "alicloud:oss/bucketObject:BucketObject"
DISKS = frozenset({"alicloud:ecs/ecsDisk:EcsDisk", "alicloud:ecs/disk:Disk"})
NODE_TEMPLATES = frozenset({"alicloud:ess/scalingConfiguration:ScalingConfiguration"})  # and kind POOL_KIND
#: The job settings channel (trainstack.bootstrap.render; the key of OssPlan.job_settings_key) and the
#: node tag that carries its digest (trainstack.tags.JOB_SETTINGS).
JOB_SETTINGS_PREFIX = "job/"
#: The job settings document; the other objects under job/ are node programs at content-addressed keys
#: (trainstack.bootstrap.programs): a new program is a new object, and it reaches running nodes when
#: the job settings name its set (the settings' change says so); an object changed in place is not what
#: any running node runs (nodes verify every program by its sha256), only nodes created later may fetch it.
JOB_SETTINGS_KEY = f"{JOB_SETTINGS_PREFIX}settings.json"
JOB_SETTINGS_TAG_PATH = "tags.trainstack:job-settings"
WHEN = {"now": "now", "replace": "when the resource is replaced",
        "next_job_start": "at the next job start (the launcher reads and verifies the job settings)",
        "disk_grown": "now (ResizeDisk online); the filesystem grows at the next job start",
        "new_nodes_only": "only on nodes created later", "never": "never (stored only)", "unknown": "unknown"}
#: Effects that interrupt a running node (``next_instance_only`` does not: it is worth saying, not alarming).
DISRUPTIVE_EFFECTS = frozenset({"restart", "stop", "wipe", "detach", "resize"})
Action = Literal["replace", "update", "no-api-call", "unknown"]


@dataclass(frozen=True)
class Verdict:
    action: Action
    reason: str
    disruptive: bool = False
    effect: Optional[str] = None
    sources: tuple[str, ...] = field(default=())
    diff_suppress: Optional[str] = None  # a DiffSuppressFunc may call the difference none (it decides at deploy time)

    @property
    def replace(self) -> bool:
        return self.action == "replace"


def matches(pattern: str, path: str) -> bool:
    """Whether a Pulumi property path (``ignore_changes``/``replace_on_changes`` entry, ``*`` for
    a whole segment) covers the changed input ``path``: the path itself or anything inside it."""
    if pattern == "*":
        return True
    pat = [p for p in re.split(r"\.|\[|\]", normalize_pattern(pattern)) if p]
    got = [p for p in re.split(r"\.|\[|\]", path.split("(json)", 1)[0]) if p]
    if len(got) < len(pat):
        return False
    return all(a == "*" or a == b for a, b in zip(pat, got))


def normalize_pattern(pattern: str) -> str:
    return pattern.replace('["', ".").replace('"]', "")


def provider_setting(provider_inputs: Optional[dict], dotted: str) -> Optional[Any]:
    """A value inside the provider resource's inputs (``features.ecsInstance.replaceOnImageUpdate``);
    a list of one block (how Terraform nests ``features``) is looked into."""
    value: Any = provider_inputs or {}
    for part in dotted.split("."):
        if isinstance(value, str) and value[:1] in "[{":  # Pulumi sends nested provider config as JSON
            value = json_or_none(value)  # bounded: a saved plan's string may nest arbitrarily deep
        if isinstance(value, list) and len(value) == 1:
            value = value[0]
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def judge(facts: ProviderFacts, entry: dict, path: str, provider_inputs: Optional[dict]) -> Verdict:
    """The verdict for one changed input ``path`` of the head-side resource ``entry``."""
    declared = entry.get("replace_on_changes") or []
    hit = next((p for p in declared if matches(p, path)), None)
    if hit is not None:
        return Verdict("replace", f"the program lists `{hit}` in replace_on_changes")
    if entry["type"] == DYNAMIC:
        return _dynamic(facts, entry, path)
    rf = facts.resource(entry["type"])
    if rf is None:
        return Verdict("unknown", f"no provider facts for {entry['type']}: what `pulumi up` does is unknown")
    found = rf.argument(path)
    if found is None:
        return Verdict("unknown", f"`{path}` is not an argument of {rf.terraform_type} in the provider source read")
    key, arg = found
    suppress = None
    if arg.diff_suppress is not None:
        s = arg.diff_suppress
        suppress = f"{s.function} at {s.defined_at}" + (f" (reads {', '.join(s.reads)})" if s.reads else "")
    effects = rf.effects_of(key, "update")
    for e in effects:
        if e.unless_provider_feature and provider_setting(provider_inputs, e.unless_provider_feature) is True:
            where = ", ".join(d.where for d in rf.decisions(key)) or rf.schema_
            return Verdict("replace", f"`{arg.tf}`: CustomizeDiff forces a replacement because the provider sets "
                                      f"`{e.unless_provider_feature}` ({where})", sources=(where,),
                           diff_suppress=suppress)
    if arg.force_new:
        return Verdict("replace", f"`{arg.tf}` is ForceNew ({arg.source})", sources=(arg.source,),
                       diff_suppress=suppress)
    update = arg.update if arg.update is not None else rf.top_update(key)
    applied = [e for e in effects if not e.unless_provider_feature
               or provider_setting(provider_inputs, e.unless_provider_feature) is not True]
    if applied:
        e = applied[0]
        return Verdict("update", f"{effect_label(e)}: {e.why} ({', '.join(e.sources + e.docs)})",
                       disruptive=e.effect in DISRUPTIVE_EFFECTS, effect=e.effect, sources=e.sources,
                       diff_suppress=suppress)
    if update:
        return Verdict("update", f"`{arg.tf}` is updated in place ({update[0]})", sources=tuple(update),
                       diff_suppress=suppress)
    reads = rf.top_reads(key)
    if reads:
        return Verdict("update", f"`{arg.tf}` is sent again by the provider's Update ({reads[0]}), which does not "
                                 f"check it for a change", sources=reads, diff_suppress=suppress)
    return Verdict("no-api-call", f"`{arg.tf}` ({arg.source}) is neither ForceNew nor read by the provider's Update "
                                  f"({rf.update or 'no Update'}): `pulumi up` stores the new value, nothing changes "
                                  f"in the cloud", sources=(arg.source,), diff_suppress=suppress)


def replace_effects(rf: Optional[ResourceFacts]) -> list[Effect]:
    """Hand-checked effects a replacement of this resource has on the node it is attached to."""
    return [] if rf is None else [e for e in rf.effects if e.when == "replace"]


def _dynamic(facts: ProviderFacts, entry: dict, path: str) -> Verdict:
    kind = (entry.get("inputs") or {}).get("kind")
    dyn = facts.dynamic(kind)
    if dyn is None:
        return Verdict("unknown", f"dynamic resource of kind {kind!r}: no facts about its provider's diff")
    top = normalize(path).split(".", 1)[0]
    if top in dyn.replace:
        return Verdict("replace", f"{dyn.why} ({dyn.source})", sources=(dyn.source,))
    if top in dyn.updated:
        return Verdict("update", f"{dyn.update_why} ({dyn.source})", effect=dyn.update_effect, sources=(dyn.source,),
                       disruptive=(dyn.update_effect or "") in DISRUPTIVE_EFFECTS)
    return Verdict("no-api-call", f"the {kind} provider's diff does not compare `{top}` ({dyn.source})",
                   sources=(dyn.source,))


def is_job_settings(entry: dict) -> bool:
    return entry["type"] == BUCKET_OBJECT and (entry.get("inputs") or {}).get("key") == JOB_SETTINGS_KEY


def is_node_program(entry: dict) -> bool:
    key = str((entry.get("inputs") or {}).get("key", ""))
    return entry["type"] == BUCKET_OBJECT and key.startswith(JOB_SETTINGS_PREFIX) and key != JOB_SETTINGS_KEY


def heals_multi_node(entry: dict) -> bool:
    """A multi-node self-healing pool's configuration: its nodes launch into the settings generation node 0's
    run names (trainstack_pool.py), never the digest ESS tagged them with (trainstack:rank is ``pool``)."""
    inputs = entry.get("inputs") or {}
    tags = inputs.get("tags") if isinstance(inputs.get("tags"), dict) else {}
    return inputs.get("kind") == POOL_KIND and tags.get(RANK_TAG) == "pool"


def takes_effect(entry: dict, path: str, verdict: Verdict) -> str:
    """When a judged change reaches the running job (see the module docstring)."""
    if verdict.replace:
        return "replace"
    if verdict.action in ("never", "no-api-call"):
        return "never"
    if verdict.action == "unknown":
        return "unknown"
    if path == JOB_SETTINGS_TAG_PATH and heals_multi_node(entry):
        return "next_job_start"  # node 0 and the pool together: the cluster never splits (issue 31 item 3)
    if verdict.effect == "next_instance_only" or entry["type"] in NODE_TEMPLATES or is_node_program(entry):
        return "new_nodes_only"
    if is_job_settings(entry) or (entry["type"] == INSTANCE and path == JOB_SETTINGS_TAG_PATH):
        return "next_job_start"
    if entry["type"] in DISKS and normalize(path) == "size":
        return "disk_grown"  # ResizeDisk online now; the launcher grows the filesystem at the next job start
    return "now"


def ignored_takes_effect(entry: dict) -> str:
    """A change the program's ignore_changes skip: a node created later gets it (a running one never)."""
    return "new_nodes_only" if entry["type"] == INSTANCE else "never"


def grows(verdict: Verdict, before: Any, after: Any) -> bool:
    """A group resize that only adds nodes: ESS launches them and touches no running node (an added node of a
    self-healing job waits for a seat until the next job start), so it is not disruptive; a shrink still is."""
    return (verdict.effect == "resize" and isinstance(before, (int, float)) and isinstance(after, (int, float))
            and after >= before)


def effect_label(e: Effect) -> str:
    return {"restart": "stops and restarts the running node", "stop": "stops the running node",
            "wipe": "wipes the node's system disk", "detach": "detaches it from the running node",
            "resize": "removes running nodes when the group shrinks; added nodes join only the next job",
            "next_instance_only": "reaches only nodes created later"}[e.effect]
