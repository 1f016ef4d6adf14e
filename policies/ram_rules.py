"""RAM policies and attachments: no OSS access on a wildcard bucket, no all-bucket system policies."""

from __future__ import annotations

from typing import Any, Optional

# _base before trainstack: from a bare checkout it puts the checkout's trainstack on sys.path
if __package__:
    from ._base import NO_WILDCARD_OSS_ACCESS, level_or_default
    from . import _props as P
else:  # run by Pulumi from inside policies/
    from _base import NO_WILDCARD_OSS_ACCESS, level_or_default  # type: ignore[no-redef]
    import _props as P  # type: ignore[no-redef]

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)


# ---- 11. no-wildcard-oss-access ---------------------------------------------------------------
RAM_POLICY = "alicloud:ram/policy:Policy"
RAM_ATTACHMENTS = ("alicloud:ram/rolePolicyAttachment:RolePolicyAttachment",
                   "alicloud:ram/userPolicyAttachment:UserPolicyAttachment",
                   "alicloud:ram/groupPolicyAttachment:GroupPolicyAttachment")
#: system policies that grant every bucket of the account
ALL_BUCKET_SYSTEM_POLICIES = ("AliyunOSSFullAccess", "AliyunOSSReadOnlyAccess")


def _statements(document: Any) -> list[dict]:
    import json

    doc = document
    if isinstance(doc, str):
        try:
            doc = json.loads(doc)
        except ValueError:
            return []
    if not isinstance(doc, dict):
        return []
    st = doc.get("Statement")
    st = [st] if isinstance(st, dict) else st if isinstance(st, list) else []
    return [x for x in st if isinstance(x, dict)]


def _may_touch_oss(statement: dict) -> bool:
    """Whether a statement's actions can reach OSS (``oss:*``, ``*``, or no readable action list). A
    ``Resource: "*"`` of other services' actions (e.g. ``ecs:ListTagResources``, which has no
    resource-level authorization) grants no bucket."""
    actions = statement.get("Action")
    actions = [actions] if isinstance(actions, str) else actions if isinstance(actions, list) else None
    if not actions:
        return True
    return any(not isinstance(a, str) or a.strip() == "*" or a.strip().lower().startswith("oss:") for a in actions)


def wildcard_oss_resources(document: Any) -> list[str]:
    """The OSS resources of Allow statements whose bucket part holds a wildcard (``*`` or ``?``)."""
    out = []
    for st in _statements(document):
        if str(st.get("Effect", "Allow")).lower() != "allow" or not _may_touch_oss(st):
            continue
        res = st.get("Resource")
        for r in [res] if isinstance(res, str) else res if isinstance(res, list) else []:
            if not isinstance(r, str):
                continue
            if r.strip() == "*":
                out.append(r)
                continue
            parts = r.split(":", 4)
            if len(parts) == 5 and parts[0] == "acs" and parts[1] in ("oss", "*"):
                bucket = parts[4].split("/", 1)[0]
                if "*" in bucket or "?" in bucket or not bucket:
                    out.append(r)
    return out


def no_wildcard_oss_access(level: Optional[EnforcementLevel] = None) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        p = P.plain(args.props)
        if args.resource_type == RAM_POLICY:
            wild = wildcard_oss_resources(p.get("policyDocument", p.get("document")))
            if wild:
                report(f"{args.name}: RAM policy grants OSS access on {P.names(wild)}: a '*' bucket is every "
                       "bucket in the account; name the concrete buckets and prefixes (profile oss:// URIs "
                       "name real buckets)")
        elif args.resource_type in RAM_ATTACHMENTS:
            name = P.as_str(p.get("policyName"))
            if (P.as_str(p.get("policyType")) or "").lower() == "system" and name in ALL_BUCKET_SYSTEM_POLICIES:
                report(f"{args.name}: attaches the system policy {name}, which covers every bucket in the "
                       "account; attach a custom policy naming the buckets instead")

    return ResourceValidationPolicy(
        name=NO_WILDCARD_OSS_ACCESS,
        description="Checks whether RAM policies grant OSS access on a wildcard bucket (acs:oss:*:*:*, "
                    "team-*, Resource \"*\") or attach the all-bucket OSS system policies.",
        validate=validate,
        enforcement_level=level_or_default(NO_WILDCARD_OSS_ACCESS, level),
    )
