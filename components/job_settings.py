"""What `pulumi up` writes under the stack bucket's read-only ``job/`` prefix: the job settings
channel (``job/settings.json``) and the node programs it names.

What the settings carry and how a node trusts them is decided in :mod:`trainstack.bootstrap.render`
(:func:`~trainstack.bootstrap.render.render_job_settings`): the command, env, hostfile, topology,
launcher options and the CPFS mount of every rank, and the digest of the node programs' set, as one
deterministic JSON document. This component writes that document as an ``oss.BucketObject`` and
hands back its SHA-256, which the cluster tags on every node (``trainstack:job-settings``): the node
checks the object against the tag at every job start. The node role may read ``job/`` and never
write it (components/identity.py).

The node programs (:mod:`trainstack.bootstrap.programs`) are objects at content-addressed keys
(``job/programs/<sha256>/<name>``), one resource each, named by the digest: a new trainstack adds
new objects and drops the old resources, which are retained (``retain_on_delete``), so a node that
still names an older set (a pool node ESS launches from a configuration written before, a node in
its first boot during the `pulumi up`) finds it; a key never changes content (``key`` is ForceNew:
resource_alicloud_oss_bucket_object.go:34 at ace5bcf8, provider_facts.json). The settings object
depends on them, so every node (created after it) boots with its programs in place.

A multi-node self-healing plan also keeps each settings generation at ``job/settings/<sha256>.json``
(retained like the programs): node 0 records which generation its run uses and every pool node,
a replacement arriving after a settings change included, fetches that one and checks it against its
name (trainstack_pool.py), so the cluster never splits between two settings.

The document is a plain string unless the plan mounts CPFS (the export's address is known at deploy
time), so the digest is plain at preview time for every other plan.
"""

from __future__ import annotations

import re
from typing import Optional, Union

import pulumi
import pulumi_alicloud as alicloud

from trainstack.bootstrap.node import GENERATIONS_DIR
from trainstack.bootstrap.programs import program_objects
from trainstack.bootstrap.render import JobSettings, render_job_settings
from trainstack.errors import InputError
from trainstack.plan import Plan
from trainstack.rules import bootstrap_message


def _render(plan: Plan, cpfs_address: Optional[str]) -> JobSettings:
    try:
        return render_job_settings(plan, cpfs_mount_address=cpfs_address)
    except ValueError as exc:  # the rule book rendered it already: only a deploy-time address can fail here
        raise InputError(bootstrap_message(plan, 0, exc)) from None


class JobSettingsObject(pulumi.ComponentResource):
    """``object`` (the settings' BucketObject), ``digest`` (plain str, or an Output on CPFS plans) and
    ``programs`` (the node programs' BucketObjects, their manifest last)."""

    object: alicloud.oss.BucketObject
    digest: Union[str, pulumi.Output[str]]
    programs: list[alicloud.oss.BucketObject]

    def __init__(self, name: str, plan: Plan, bucket: pulumi.Input[str],
                 cpfs_mount_address: Optional[pulumi.Output[str]] = None,
                 opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("trainstack:index:JobSettings", name, None, opts)
        oss = plan.storage.oss
        assert oss is not None, "the rule book gives every ECS plan its stack bucket"
        if plan.storage.cpfs is not None and cpfs_mount_address is not None:
            settings = cpfs_mount_address.apply(lambda address: _render(plan, address))
            document: pulumi.Input[str] = settings.apply(lambda s: s.document)
            self.digest = settings.apply(lambda s: s.digest)
        else:
            plain = _render(plan, None)
            document, self.digest = plain.document, plain.digest
        # code, not data: never protected; retained so that every set a node was given still verifies
        kept = pulumi.ResourceOptions(parent=self, protect=False, retain_on_delete=True)
        self.programs = [
            alicloud.oss.BucketObject(f"{name}-{re.sub(r'[^A-Za-z0-9-]', '-', p.name)}-{p.sha256[:16]}", bucket=bucket,
                                      key=p.key, content=p.content, content_type=p.content_type, acl="private",
                                      opts=kept)
            for p in program_objects(plan)]
        self.generation = None
        if plan.elastic:  # a new digest is a new key (ForceNew): the old generation is retained, not deleted
            key = pulumi.Output.from_input(self.digest).apply(lambda d: f"{oss.job_prefix}{GENERATIONS_DIR}{d}.json")
            self.generation = alicloud.oss.BucketObject(
                f"{name}-generation", bucket=bucket, key=key, content=document, content_type="application/json",
                acl="private", opts=pulumi.ResourceOptions(parent=self, protect=False, retain_on_delete=True,
                                                            depends_on=self.programs))
        # never protected or retained (the settings are regenerated by the next `pulumi up`)
        self.object = alicloud.oss.BucketObject(
            f"{name}-object", bucket=bucket, key=oss.job_settings_key, content=document,
            content_type="application/json", acl="private",
            opts=pulumi.ResourceOptions(parent=self, protect=False,
                                        depends_on=self.programs + ([self.generation] if self.generation else [])))
        self.register_outputs({"key": oss.job_settings_key, "digest": self.digest})
