"""RAM policies and attachments: no OSS access on a wildcard bucket, no all-bucket system policies."""

from __future__ import annotations

import json
from typing import Any, Iterator, Sequence

from ...catalog import Catalog
from ..stack_view import RamAttachment, RamPolicy, RamStatement
from . import Finding
from .gpu import names

#: system policies that grant every bucket of the account
ALL_BUCKET_SYSTEM_POLICIES = ("AliyunOSSFullAccess", "AliyunOSSReadOnlyAccess")


def statements(document: Any) -> tuple[RamStatement, ...]:
    """A policy document (JSON text or object) as typed statements; anything unreadable has none."""
    doc = document
    if isinstance(doc, str):
        try:
            doc = json.loads(doc)
        except ValueError:
            return ()
    if not isinstance(doc, dict):
        return ()
    st = doc.get("Statement")
    st = [st] if isinstance(st, dict) else st if isinstance(st, list) else []
    out = []
    for x in st:
        if not isinstance(x, dict):
            continue
        action = x.get("Action")
        actions = ((action,) if isinstance(action, str) else tuple(a if isinstance(a, str) else None for a in action)
                   if isinstance(action, list) else None)
        res = x.get("Resource")
        resources = (res,) if isinstance(res, str) else tuple(r for r in res if isinstance(r, str)) \
            if isinstance(res, list) else ()
        out.append(RamStatement(effect=str(x.get("Effect", "Allow")), actions=actions, resources=resources))
    return tuple(out)


def may_touch_oss(statement: RamStatement) -> bool:
    """Whether a statement's actions can reach OSS (``oss:*``, ``*``, or no readable action list). A
    ``Resource: "*"`` of other services' actions (e.g. ``ecs:ListTagResources``, which has no
    resource-level authorization) grants no bucket."""
    if not statement.actions:
        return True
    return any(a is None or a.strip() == "*" or a.strip().lower().startswith("oss:") for a in statement.actions)


def wildcard_oss_resources(document: Any) -> list[str]:
    """The OSS resources of Allow statements whose bucket part holds a wildcard (``*`` or ``?``)."""
    parsed = document if isinstance(document, tuple) else statements(document)
    out = []
    for st in parsed:
        if st.effect.lower() != "allow" or not may_touch_oss(st):
            continue
        for r in st.resources:
            if r.strip() == "*":
                out.append(r)
                continue
            parts = r.split(":", 4)
            if len(parts) == 5 and parts[0] == "acs" and parts[1] in ("oss", "*"):
                bucket = parts[4].split("/", 1)[0]
                if "*" in bucket or "?" in bucket or not bucket:
                    out.append(r)
    return out


def no_wildcard_oss_access(policies: Sequence[RamPolicy], attachments: Sequence[RamAttachment], settings: dict,
                           cat: Catalog) -> Iterator[Finding]:
    for p in policies:
        wild = wildcard_oss_resources(p.statements)
        if wild:
            yield Finding(f"{p.resource}: RAM policy grants OSS access on {names(wild)}: a '*' bucket is every "
                          "bucket in the account; name the concrete buckets and prefixes (profile oss:// URIs "
                          "name real buckets)", p.resource)
    for a in attachments:
        if (a.policy_type or "").lower() == "system" and a.policy_name in ALL_BUCKET_SYSTEM_POLICIES:
            yield Finding(f"{a.resource}: attaches the system policy {a.policy_name}, which covers every bucket in "
                          "the account; attach a custom policy naming the buckets instead", a.resource)
