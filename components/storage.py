"""Storage: the OSS checkpoint bucket, CPFS (with its NFS protocol service) and checkpoint ESSDs.

On an ECS plan the bucket also holds the nodes' heartbeats (``status/``) and the heartbeat
program they run (``job/trainstack_heartbeat.py``, a ``BucketObject``: a new trainstack version
updates it in place with PutObject; the nodes fetch it when their heartbeat service starts and
run it only when its sha256 matches their node.env, docs/status.md).

Translates ``plan.storage``. Everything that holds checkpoints is created with
``protect`` and ``retain_on_delete`` while ``storage.retain_on_destroy`` is true (the default), so
``pulumi destroy`` never deletes trained results (docs/provisioning.md says how to release them
on purpose). Node-local data disks are declared on the instances (components/cluster.py); only
ESSDs that hold checkpoints are standalone disks here, so they can outlive their instance.
"""

from __future__ import annotations

from typing import Optional

import pulumi
import pulumi_alicloud as alicloud

from trainstack.bootstrap.heartbeat import PROGRAM_KEY, has_status, program_text, status_prefix
from trainstack.plan import Plan
from trainstack.rules import checkpoint_disks_planned

from .cpfs_export import CpfsExportAddress
from trainstack.tags import MAX_BUCKET_TAGS, ROLE_CHECKPOINT, base_tags, within_limit

CPFS_ACCESS_GROUP = "DEFAULT_VPC_GROUP_NAME"


def checkpoint_options(plan: Plan, parent: pulumi.Resource) -> pulumi.ResourceOptions:
    """Options for anything that holds checkpoints (the contract policies and docs rely on)."""
    keep = plan.storage.retain_on_destroy
    return pulumi.ResourceOptions(parent=parent, protect=keep, retain_on_delete=keep)


class Storage(pulumi.ComponentResource):
    """OSS bucket (+ private ACL, public-access block), CPFS + protocol service, checkpoint ESSDs."""

    bucket: Optional[alicloud.oss.Bucket]
    heartbeat_program: Optional[alicloud.oss.BucketObject]
    cpfs: Optional[alicloud.nas.FileSystem]
    protocol_service: Optional[alicloud.nas.ProtocolService]
    protocol_mount_target: Optional[alicloud.nas.ProtocolMountTarget]
    checkpoint_disks: list[alicloud.ecs.EcsDisk]

    def __init__(self, name: str, plan: Plan, zone: str, vpc_id: pulumi.Input[str], vswitch_id: pulumi.Input[str],
                 opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("trainstack:index:Storage", name, None, opts)
        st = plan.storage
        child = pulumi.ResourceOptions(parent=self)

        self.bucket = self.bucket_acl = self.public_access_block = self.heartbeat_program = None
        if st.oss is not None:
            self._bucket(name, plan)

        self.cpfs = self.protocol_service = self.protocol_mount_target = self.cpfs_address = None
        if st.cpfs is not None and plan.target == "ecs":
            self._cpfs(name, plan, zone, vpc_id, vswitch_id, child)

        self.checkpoint_disks = []
        if checkpoint_disks_planned(plan):
            disk = st.data_disk
            assert disk is not None
            for rank, node in enumerate(plan.node_names()):
                self.checkpoint_disks.append(alicloud.ecs.EcsDisk(
                    f"{name}-ckpt-disk-{rank}", disk_name=f"{node}-checkpoints", zone_id=zone,
                    category=disk.category, performance_level=disk.performance_level, size=disk.size_gib,
                    encrypted=True, delete_with_instance=False, payment_type="PayAsYouGo",
                    description=f"trainstack {plan.name}: checkpoints of node {rank}",
                    tags=base_tags(plan, role=ROLE_CHECKPOINT, zone=zone),
                    opts=checkpoint_options(plan, self)))

        self.mount_points = mount_points(plan)
        self.register_outputs({
            "bucket": self.bucket.bucket if self.bucket else None,
            "cpfs_id": self.cpfs.id if self.cpfs else None,
            "mount_points": self.mount_points,
        })

    def _bucket(self, name: str, plan: Plan) -> None:
        oss = plan.storage.oss
        assert oss is not None
        # The bucket is the checkpoint store (or the archive of CPFS / ESSD checkpoints): always kept.
        self.bucket = alicloud.oss.Bucket(
            f"{name}-bucket", bucket=oss.bucket, storage_class="Standard", force_destroy=False,
            versioning=alicloud.oss.BucketVersioningArgs(status="Enabled") if oss.versioning else None,
            server_side_encryption_rule=alicloud.oss.BucketServerSideEncryptionRuleArgs(
                sse_algorithm=oss.server_side_encryption),
            tags=within_limit(base_tags(plan, role=ROLE_CHECKPOINT), MAX_BUCKET_TAGS, "an OSS bucket"),
            opts=checkpoint_options(plan, self))
        keep = plan.storage.retain_on_destroy
        # Settings of a retained bucket stay as they are when the stack is destroyed.
        side = pulumi.ResourceOptions(parent=self.bucket, retain_on_delete=keep)
        self.bucket_acl = alicloud.oss.BucketAcl(f"{name}-bucket-acl", bucket=self.bucket.bucket, acl="private",
                                                 opts=side)
        self.public_access_block = alicloud.oss.BucketPublicAccessBlock(
            f"{name}-bucket-block-public", bucket=self.bucket.bucket, block_public_access=True, opts=side)
        self.heartbeat_program = None
        if has_status(plan):
            # not data: destroyed with the stack (a retained bucket keeps only what the nodes wrote)
            self.heartbeat_program = alicloud.oss.BucketObject(
                f"{name}-heartbeat-program", bucket=self.bucket.bucket, key=PROGRAM_KEY, content=program_text(),
                content_type="text/x-python", acl="private", opts=pulumi.ResourceOptions(parent=self.bucket))

    def _cpfs(self, name: str, plan: Plan, zone: str, vpc_id: pulumi.Input[str], vswitch_id: pulumi.Input[str],
              child: pulumi.ResourceOptions) -> None:
        cpfs = plan.storage.cpfs
        assert cpfs is not None
        holds = plan.storage.checkpoint == "cpfs"
        self.cpfs = alicloud.nas.FileSystem(
            f"{name}-cpfs", file_system_type="cpfs", protocol_type="cpfs", storage_type=cpfs.storage_type,
            capacity=cpfs.capacity_gib, zone_id=zone, vpc_id=vpc_id, vswitch_id=vswitch_id,
            description=f"trainstack {plan.name}",
            tags=base_tags(plan, role=ROLE_CHECKPOINT if holds else "dataset", zone=zone),
            opts=checkpoint_options(plan, self) if holds else child)
        if cpfs.protocol_service:
            # Children of the Storage component, not of the (protected) file system: they do not
            # hold data, so `pulumi destroy --exclude-protected` removes them (and their cost).
            in_fs = child
            self.protocol_service = alicloud.nas.ProtocolService(
                f"{name}-cpfs-nfs", file_system_id=self.cpfs.id, protocol_type="NFS", protocol_spec="General",
                protocol_throughput=int(cpfs.throughput_mbps) if cpfs.throughput_mbps else None,
                vpc_id=vpc_id, vswitch_id=vswitch_id, description=f"{plan.name} NFS access", opts=in_fs)
            self.protocol_mount_target = alicloud.nas.ProtocolMountTarget(
                f"{name}-cpfs-export", file_system_id=self.cpfs.id,
                protocol_service_id=self.protocol_service.protocol_service_id, path="/",
                vpc_id=vpc_id, vswitch_id=vswitch_id, access_group_name=CPFS_ACCESS_GROUP,
                description=f"{plan.name} export", opts=in_fs)
            self.cpfs_address = CpfsExportAddress(
                f"{name}-cpfs-address", region=plan.region, file_system_id=self.cpfs.id,
                export_id=self.protocol_mount_target.export_id,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[self.protocol_mount_target]))

    @property
    def cpfs_mount_address(self) -> Optional[pulumi.Output[str]]:
        """The NFS mount target domain of the CPFS export (deploy-time value), if any."""
        return self.cpfs_address.domain if self.cpfs_address is not None else None


def mount_points(plan: Plan) -> dict[str, str]:
    """Where things are on a node (plain values, exported and rendered into the bootstrap)."""
    st = plan.storage
    out = {"checkpoints": st.checkpoint_path}
    if st.data_disk is not None and plan.target == "ecs":
        out["data_disk"] = st.data_disk.mount_path
    if st.cpfs is not None and plan.target == "ecs":
        out["cpfs"] = st.cpfs.mount_path
    if st.oss is not None and (st.checkpoint == "oss" or plan.target == "dlc"):
        out["oss"] = f"oss://{st.oss.bucket}/{st.oss.prefix}"
    if has_status(plan):  # where `trainstack status` reads the heartbeats
        out["status"] = f"oss://{st.oss.bucket}/{status_prefix(plan)}"
    return out
