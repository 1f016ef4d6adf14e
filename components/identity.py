"""The GPU nodes' RAM role: least privilege, no access keys on the machines.

- Trust: only the ECS service may assume the role (instance RAM role, credentials from the
  metadata service, which the nodes only answer with IMDSv2 tokens).
- OSS, one stack bucket with prefixes (trainstack.layout.storage.BUCKET_PREFIXES), two policies:
  the OSS policy gives read-only ``job/`` (the job settings channel and the node programs,
  ``job/programs/``: the deployer writes them, a node can never change what another node runs), read/write on
  ``checkpoints/`` when checkpoints are on OSS (listing only under it, ``oss:Prefix``), and
  read-only on exactly the dataset prefix and the code object when the profile points at
  ``oss://`` URIs (``GetObject`` on ``bucket/prefix*``, ``ListObjects`` only under that prefix).
  Every resource names a concrete bucket: URIs are parsed with Alibaba's bucket-name rules
  (:mod:`trainstack.ossuri`), so ``oss://*/`` or ``oss://team-*/`` never become ``acs:oss:*:*:*``;
  the ``no-wildcard-oss-access`` policy blocks any policy that still names a ``*`` bucket.
- ECS ``ListTagResources`` (Resource ``*``: the API has no resource-level authorization,
  ecs.list_tag_resources.resource_level_authorization): the node reads the SHA-256 of its job
  settings from its own ``trainstack:job-settings`` tag (instance tags are not in the metadata
  service: ecs.instance_metadata.tags_available). Reading tags reveals no secret: trainstack never
  puts one in a tag.
- KMS: ``kms:GetSecretValue`` on exactly the secrets named in ``job.secrets`` (and
  ``kms:Decrypt`` on the keys named beside them), so the node reads them at job start
  (docs/bootstrap.md "Job secrets"); no statement at all without job secrets.
- Status (a policy of its own, docs/status.md): ``PutObject``/``GetObject`` under the stack
  bucket's ``status/<node name>/`` prefixes of this plan's nodes (each node writes its heartbeat and
  reads its last one when it replaces a node). The nodes share one role, so RAM cannot
  tell node 0 from node 1: what it enforces is this stack's node prefixes and nothing else (each
  prefix while the document fits RAM's 6,144 characters, else ``status/<plan name>-node-``).
- ECS: ``StopInstance`` on exactly this cluster's instances, so the launcher can stop its node in
  no-charge mode (``StoppedMode=StopCharging``) when the job ends (docs/provisioning.md).
  (``components/cluster.py`` adds it.) A self-healing spot pool gets no ``StopInstance`` at all:
  its node is never stopped (ESS would replace it) and runs until the stack is destroyed.

The documents are built by plain functions over the Plan so tests and policies can read them.
"""

from __future__ import annotations

import json
from typing import Optional, Sequence

import pulumi
import pulumi_alicloud as alicloud

from trainstack.errors import InputError
from trainstack.layout.lifecycle import ram_policy_rotate_strategy
from trainstack.ossuri import OssUri, OssUriError, parse_oss_uri
from trainstack.catalog.limits import service_limits
from trainstack.plan import Plan

from trainstack.tags import base_tags

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
                if loc is not None and loc.bucket != ckpt]
    if readonly:
        statements += _read_statements(readonly)
    return {"Version": "1", "Statement": statements} if statements else None


def kms_policy_document(plan: Plan) -> Optional[dict]:
    """GetSecretValue on exactly the job's secrets (Decrypt on their own keys); None without any."""
    secrets = plan.job.secrets
    if not secrets:
        return None
    names = sorted({s.kms_secret for s in secrets.values()})
    statements = [{"Effect": "Allow", "Action": SECRET_ACTIONS,
                   "Resource": [f"acs:kms:{plan.region}:*:secret/{n}" for n in names]}]
    keys = sorted({s.kms_key_id for s in secrets.values() if s.kms_key_id})
    if keys:
        statements.append({"Effect": "Allow", "Action": DECRYPT_ACTIONS,
                           "Resource": [f"acs:kms:{plan.region}:*:key/{k}" for k in keys]})
    return {"Version": "1", "Statement": statements}


def status_policy_document(plan: Plan) -> Optional[dict]:
    """Write and read the nodes' own heartbeats (the heartbeat program is a node program under
    ``job/``, read-only in the OSS policy); None without a status place."""
    from trainstack.bootstrap.heartbeat import has_status, status_prefix

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


def tag_read_policy_document() -> dict:
    """ListTagResources: the node reads its own job-settings tag (no resource-level authorization)."""
    return {"Version": "1", "Statement": [{"Effect": "Allow", "Action": TAG_READ_ACTIONS, "Resource": "*"}]}


class NodeRole(pulumi.ComponentResource):
    """ram.Role trusted by ECS + the OSS policy attached to it. Instances attach it themselves."""

    role: alicloud.ram.Role
    oss_policy: Optional[alicloud.ram.Policy]
    kms_policy: Optional[alicloud.ram.Policy]

    def __init__(self, name: str, plan: Plan, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("trainstack:index:NodeRole", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.role_name = role_name(plan)
        self.role = alicloud.ram.Role(
            f"{name}-role", role_name=self.role_name, assume_role_policy_document=json.dumps(ECS_TRUST_POLICY),
            description=f"trainstack {plan.name}: GPU nodes (OSS checkpoints, stop own instances)",
            max_session_duration=3600, tags=base_tags(plan), opts=child)
        rotate = ram_policy_rotate_strategy()
        self.oss_policy, self.oss_attachment = self._attach(
            name, plan, "oss", f"{plan.name[:52]}-oss-access", oss_policy_document(plan),
            "stack bucket by prefix, datasets read-only", rotate, child)
        self.status_policy, self.status_attachment = self._attach(
            name, plan, "status", f"{plan.name[:52]}-node-status", status_policy_document(plan),
            "nodes write and read their heartbeats", rotate, child)
        self.kms_policy, self.kms_attachment = self._attach(
            name, plan, "kms", f"{plan.name[:49]}-job-secrets", kms_policy_document(plan),
            "read the job's secrets from KMS at job start", rotate, child)
        self.tag_policy, self.tag_attachment = self._attach(
            name, plan, "tags", f"{plan.name[:50]}-read-tags",
            tag_read_policy_document() if plan.target == "ecs" else None,
            "a node reads its job-settings tag (ListTagResources)", rotate, child)
        self.register_outputs({"role_name": self.role.role_name})

    def _attach(self, name: str, plan: Plan, suffix: str, policy_name: str, doc: Optional[dict], purpose: str,
                rotate: str, opts: pulumi.ResourceOptions
                ) -> tuple[Optional[alicloud.ram.Policy], Optional[alicloud.ram.RolePolicyAttachment]]:
        """A custom policy (rotated, so its versions never run out) attached to the node role; none
        when the plan needs no such grant (``doc`` None)."""
        if doc is None:
            return None, None
        policy = alicloud.ram.Policy(
            f"{name}-{suffix}", policy_name=policy_name, policy_document=json.dumps(doc),
            description=f"trainstack {plan.name}: {purpose}", rotate_strategy=rotate, tags=base_tags(plan), opts=opts)
        attachment = alicloud.ram.RolePolicyAttachment(
            f"{name}-{suffix}", role_name=self.role.role_name, policy_name=policy.policy_name,
            policy_type="Custom", opts=opts)
        return policy, attachment

    @property
    def ready(self) -> list[pulumi.Resource]:
        """What must exist before an instance uses the role."""
        return [r for r in (self.role, self.oss_attachment, self.status_attachment, self.kms_attachment,
                            self.tag_attachment)
                if r is not None]
