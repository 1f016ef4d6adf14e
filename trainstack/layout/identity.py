"""The GPU nodes' RAM documents, as plain functions over the Plan: the OSS, status, KMS, tag-read and
stop policies the node role gets (components/identity.py attaches them; the rule book's plan view
judges the same documents, so ``validate`` and the policy pack read one text).

Why each grant is what it is: components/identity.py (least privilege, concrete buckets only).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional, Sequence

from ..catalog.limits import service_limits
from ..errors import InputError
from ..ossuri import OssUri, OssUriError, parse_oss_uri
from ..plan import Plan


ECS_TRUST_POLICY = {
    "Version": "1",
    "Statement": [{"Action": "sts:AssumeRole", "Effect": "Allow",
                   "Principal": {"Service": ["ecs.aliyuncs.com"]}}],
}
CHECKPOINT_ACTIONS = ["oss:ListObjects", "oss:GetObject", "oss:PutObject", "oss:DeleteObject",
                      "oss:AbortMultipartUpload", "oss:ListParts", "oss:GetBucketInfo"]
#: object actions on the checkpoints/ prefix (multipart uploads above 64 MiB)
CHECKPOINT_OBJECT_ACTIONS = ["oss:GetObject", "oss:PutObject", "oss:DeleteObject", "oss:AbortMultipartUpload",
                             "oss:ListParts"]
JOB_SETTINGS_ACTIONS = ["oss:GetObject"]
READ_ACTIONS = ["oss:ListObjects", "oss:GetObject", "oss:GetBucketInfo"]
TAG_READ_ACTIONS = ["ecs:ListTagResources"]
STOP_ACTIONS = ["ecs:StopInstance", "ecs:StopInstances"]
#: a self-healing pool node scales its pool to 0 at the job's end: ExecuteScalingRule on its scaling group
#: only (the group holds one rule, TotalCapacity 0: components/spot_pool.py), never ModifyScalingGroup.
#: Resource: the group's ARN, acs:ess:<region>:<account>:scalinggroup/<id> (Auto Scaling, "Manage Auto
#: Scaling resources with resource-level authentication",
#: https://www.alibabacloud.com/help/en/auto-scaling/use-cases/resource-level-authentication)
SCALE_ACTIONS = ["ess:ExecuteScalingRule"]
#: RAM action of KMS GetSecretValue; a secret encrypted with the user's own key also needs
#: kms:Decrypt on that key (GetSecretValue API reference; KMS RAM resource formats
#: acs:kms:${region}:${account}:secret/${name} and .../key/${key-id}:
#: https://www.alibabacloud.com/help/en/kms/key-management-service/developer-reference/api-kms-2016-01-20-getsecretvalue)
SECRET_ACTIONS = ["kms:GetSecretValue"]
DECRYPT_ACTIONS = ["kms:Decrypt"]


def role_name(plan: Plan) -> str:
    """RAM role names: at most 64 characters of letters, digits, '-' (plan names are DNS labels)."""
    return f"{plan.name[:52]}-train-node"


def oss_location(uri: Optional[str], field: str = "uri") -> Optional[OssUri]:
    """The bucket and key of an ``oss://`` URI (None for other schemes); a bad one is an InputError."""
    if not uri or not uri.startswith("oss://"):
        return None
    try:
        return parse_oss_uri(uri)
    except OssUriError as exc:
        raise InputError(f"{field}: oss:// URI {exc}") from None


def oss_bucket_of(uri: Optional[str]) -> Optional[str]:
    loc = oss_location(uri)
    return loc.bucket if loc else None


def _read_statements(locations: Sequence[OssUri]) -> list[dict]:
    """Read-only access to exactly these objects/prefixes (listing limited to the prefix)."""
    objects = sorted({loc.ram_object_resource() for loc in locations})
    statements = [{"Effect": "Allow", "Action": ["oss:GetObject"], "Resource": objects}]
    by_bucket: dict[str, set[str]] = {}
    for loc in locations:
        by_bucket.setdefault(loc.bucket, set()).add(loc.list_prefix())
    for bucket, prefixes in sorted(by_bucket.items()):
        statement: dict = {"Effect": "Allow", "Action": ["oss:ListObjects", "oss:GetBucketInfo"],
                           "Resource": [f"acs:oss:*:*:{bucket}"]}
        if "" not in prefixes:
            statement["Condition"] = {"StringLike": {"oss:Prefix": sorted(f"{p}*" for p in prefixes)}}
        statements.append(statement)
    return statements


def _bucket_arns(bucket: str) -> list[str]:
    return [f"acs:oss:*:*:{bucket}", f"acs:oss:*:*:{bucket}/*"]


def stack_bucket_statements(plan: Plan) -> list[dict]:
    """The node's rights on the stack bucket, prefix by prefix (ECS nodes): ``job/`` read-only,
    ``checkpoints/`` read/write with OSS checkpoints. Its own ``status/<node>/`` prefixes are the
    status policy's (:func:`status_policy_document`)."""
    oss = plan.storage.oss
    if oss is None:
        return []
    b = oss.bucket
    statements = [
        {"Effect": "Allow", "Action": JOB_SETTINGS_ACTIONS, "Resource": [f"acs:oss:*:*:{b}/{oss.job_prefix}*"]},
    ]
    if plan.storage.checkpoint == "oss":
        statements.append({"Effect": "Allow", "Action": CHECKPOINT_OBJECT_ACTIONS,
                           "Resource": [f"acs:oss:*:*:{b}/{oss.prefix}*"]})
        statements.append({"Effect": "Allow", "Action": ["oss:ListObjects"], "Resource": [f"acs:oss:*:*:{b}"],
                           "Condition": {"StringLike": {"oss:Prefix": [f"{oss.prefix}*"]}}})
    statements.append({"Effect": "Allow", "Action": ["oss:GetBucketInfo"], "Resource": [f"acs:oss:*:*:{b}"]})
    return statements


def _covered(plan: Plan, loc: OssUri) -> bool:
    """Whether the node already reads ``loc`` through its checkpoint-bucket rights: all of the DLC
    checkpoint bucket, or on ECS the stack bucket's own prefixes (a dataset elsewhere in it still needs
    its own read statements)."""
    oss = plan.storage.oss
    if oss is None or loc.bucket != oss.bucket:
        return False
    if plan.target != "ecs":
        return True
    readable = [oss.job_prefix] + ([oss.prefix] if plan.storage.checkpoint == "oss" else [])
    return any(loc.key.startswith(p) for p in readable)


def oss_policy_document(plan: Plan) -> Optional[dict]:
    """The stack bucket by prefix (ECS), or read/write on the checkpoint bucket (DLC); read-only on
    dataset and code buckets; None if no OSS."""
    statements = []
    ckpt = plan.storage.oss.bucket if plan.storage.oss else None
    if ckpt and plan.target == "ecs":
        statements += stack_bucket_statements(plan)
    elif ckpt:
        statements.append({"Effect": "Allow", "Action": CHECKPOINT_ACTIONS, "Resource": _bucket_arns(ckpt)})
    readonly = [loc for loc in (oss_location(plan.storage.dataset_uri, "storage.dataset_uri"),
                                oss_location(plan.job.code_uri, "job.code_uri"))
                if loc is not None and not _covered(plan, loc)]
    if readonly:
        statements += _read_statements(readonly)
    return {"Version": "1", "Statement": statements} if statements else None


def kms_policy_document(plan: Plan) -> Optional[dict]:
    """GetSecretValue on exactly the job's secrets and the alerts webhook's secret (Decrypt on their own
    keys); None without any."""
    secrets = list(plan.job.secrets.values()) + ([plan.job.alerts] if plan.job.alerts else [])
    if not secrets:
        return None
    names = sorted({s.kms_secret for s in secrets})
    statements = [{"Effect": "Allow", "Action": SECRET_ACTIONS,
                   "Resource": [f"acs:kms:{plan.region}:*:secret/{n}" for n in names]}]
    keys = sorted({s.kms_key_id for s in secrets if s.kms_key_id})
    if keys:
        statements.append({"Effect": "Allow", "Action": DECRYPT_ACTIONS,
                           "Resource": [f"acs:kms:{plan.region}:*:key/{k}" for k in keys]})
    return {"Version": "1", "Statement": statements}


def status_policy_document(plan: Plan) -> Optional[dict]:
    """Write and read the nodes' own heartbeats (the heartbeat program is a node program under
    ``job/``, read-only in the OSS policy); None without a status place."""
    # bootstrap/ (the node files' code) loads only for a plan that reports status, not at the CLI's start
    from ..bootstrap.heartbeat import has_status, status_prefix

    if not has_status(plan):
        return None
    bucket = plan.storage.oss.bucket  # type: ignore[union-attr]

    def document(prefixes: list[str]) -> dict:
        return {"Version": "1", "Statement": [
            {"Effect": "Allow", "Action": ["oss:PutObject", "oss:GetObject"],
             "Resource": [f"acs:oss:*:*:{bucket}/{p}*" for p in prefixes]},
            {"Effect": "Allow", "Action": ["oss:ListObjects"], "Resource": [f"acs:oss:*:*:{bucket}"],
             "Condition": {"StringLike": {"oss:Prefix": [f"{p}*" for p in prefixes]}}},
        ]}

    names = plan.node_names()
    if plan.elastic:  # node 0, and the pool's nodes, each under its instance id (trainstack-launch)
        names = [names[0], plan.pool_node_name()]
    each = document([status_prefix(plan, n) for n in names])
    if len(json.dumps(each)) <= service_limits().number("ram.policy.document.max_characters"):
        return each
    return document([status_prefix(plan) + f"{plan.name}-node-"])  # too many nodes to list: their prefix


def stop_policy_document(region: str, instance_ids: Sequence[str]) -> dict:
    """StopInstance on exactly these instances (the launcher's no-charge stop at job end)."""
    return {"Version": "1", "Statement": [{
        "Effect": "Allow", "Action": STOP_ACTIONS,
        "Resource": [f"acs:ecs:{region}:*:instance/{i}" for i in instance_ids]}]}


def scale_policy_document(region: str, scaling_group_id: str) -> dict:
    """ExecuteScalingRule on exactly this scaling group (its one rule scales it to 0)."""
    return {"Version": "1", "Statement": [{
        "Effect": "Allow", "Action": SCALE_ACTIONS,
        "Resource": [f"acs:ess:{region}:*:scalinggroup/{scaling_group_id}"]}]}


def tag_read_policy_document() -> dict:
    """ListTagResources: the node reads its own job-settings tag (no resource-level authorization)."""
    return {"Version": "1", "Statement": [{"Effect": "Allow", "Action": TAG_READ_ACTIONS, "Resource": "*"}]}


@dataclass(frozen=True)
class RoleGrant:
    """One custom policy the node role gets (``document`` None: the plan needs no such grant)."""

    suffix: str
    policy_name: str
    document: Optional[dict]
    purpose: str


def node_role_grants(plan: Plan) -> tuple[RoleGrant, ...]:
    """The node role's custom policies, in the order they are attached."""
    return (
        RoleGrant("oss", f"{plan.name[:52]}-oss-access", oss_policy_document(plan),
                  "stack bucket by prefix, datasets read-only"),
        RoleGrant("status", f"{plan.name[:52]}-node-status", status_policy_document(plan),
                  "nodes write and read their heartbeats"),
        RoleGrant("kms", f"{plan.name[:49]}-job-secrets", kms_policy_document(plan),
                  "read the job's secrets from KMS at job start"),
        RoleGrant("tags", f"{plan.name[:50]}-read-tags", tag_read_policy_document() if plan.target == "ecs" else None,
                  "a node reads its job-settings tag (ListTagResources)"),
    )
