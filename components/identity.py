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

The documents are built by plain functions over the Plan (trainstack.layout.identity), so tests, the
policies and the rule book's plan view read the same ones.
"""

from __future__ import annotations

import json
from typing import Optional

import pulumi
import pulumi_alicloud as alicloud

from trainstack.layout.identity import (  # noqa: F401  (the documents are pure: the plan view reads them too)
    CHECKPOINT_ACTIONS, CHECKPOINT_OBJECT_ACTIONS, DECRYPT_ACTIONS, ECS_TRUST_POLICY, JOB_SETTINGS_ACTIONS,
    READ_ACTIONS, SECRET_ACTIONS, STOP_ACTIONS, TAG_READ_ACTIONS, RoleGrant, kms_policy_document, node_role_grants,
    oss_bucket_of, oss_location, oss_policy_document, role_name, stack_bucket_statements, status_policy_document,
    stop_policy_document, tag_read_policy_document,
)
from trainstack.layout.lifecycle import ram_policy_rotate_strategy
from trainstack.plan import Plan

from trainstack.tags import base_tags

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
        oss, status, kms, tags = (self._attach(name, plan, g, rotate, child) for g in node_role_grants(plan))
        self.oss_policy, self.oss_attachment = oss
        self.status_policy, self.status_attachment = status
        self.kms_policy, self.kms_attachment = kms
        self.tag_policy, self.tag_attachment = tags
        self.register_outputs({"role_name": self.role.role_name})

    def _attach(self, name: str, plan: Plan, grant: RoleGrant, rotate: str, opts: pulumi.ResourceOptions
                ) -> tuple[Optional[alicloud.ram.Policy], Optional[alicloud.ram.RolePolicyAttachment]]:
        """A custom policy (rotated, so its versions never run out) attached to the node role; none
        when the plan needs no such grant (``grant.document`` None)."""
        if grant.document is None:
            return None, None
        policy = alicloud.ram.Policy(
            f"{name}-{grant.suffix}", policy_name=grant.policy_name, policy_document=json.dumps(grant.document),
            description=f"trainstack {plan.name}: {grant.purpose}", rotate_strategy=rotate, tags=base_tags(plan),
            opts=opts)
        attachment = alicloud.ram.RolePolicyAttachment(
            f"{name}-{grant.suffix}", role_name=self.role.role_name, policy_name=policy.policy_name,
            policy_type="Custom", opts=opts)
        return policy, attachment

    @property
    def ready(self) -> list[pulumi.Resource]:
        """What must exist before an instance uses the role."""
        return [r for r in (self.role, self.oss_attachment, self.status_attachment, self.kms_attachment,
                            self.tag_attachment)
                if r is not None]
