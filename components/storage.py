"""Storage: the stack bucket, CPFS (with its NFS protocol service), the nodes' data and checkpoint disks.

Translates ``plan.storage``; the lifecycle decisions are trainstack.layout.lifecycle's.

- **The stack bucket** (every ECS plan): private, versioned, encrypted, public access blocked, with the
  prefixes of trainstack.layout.storage.BUCKET_PREFIXES (``job/``, ``status/``, ``checkpoints/``).
  When it holds checkpoints it is protected and retained (``storage.retain_on_destroy``); otherwise
  ``pulumi destroy`` deletes it with what the nodes wrote under ``status/`` (``force_destroy``).
  ``pulumi up`` writes the job settings and the node programs under ``job/`` (components/job_settings.py;
  the nodes check each by its sha256, docs/bootstrap.md).
- **CPFS** sits in the services vSwitch (never the cluster's), protected and retained when it holds
  checkpoints. Its protocol service leaves ``protocol_throughput`` to CPFS (ForceNew: a throughput
  tied to the capacity would replace the service on every resize) and, when it must be replaced
  (a new vSwitch), is deleted first: a file system allows one protocol service
  (cpfs.protocol_service.max_per_file_system).
- **Data disks** (dataset cache and scratch) and **checkpoint disks** are standalone ESSDs, one per
  node, attached by the cluster (``EcsDiskAttachment``): a size change grows them in place
  (ResizeDisk, ``type="online"``: ecs.disk.resize_online) and a replaced node gets them back.
  Checkpoint disks are protected and retained; data disks are deleted with the stack.
"""

from __future__ import annotations

from typing import Optional

import pulumi
import pulumi_alicloud as alicloud

from trainstack.bootstrap.heartbeat import has_status, status_prefix
from trainstack.catalog.limits import service_limits
from trainstack.layout.lifecycle import protocol_service_lifecycle, retained
from trainstack.plan import DataDiskPlan, Plan
from trainstack.rules import checkpoint_disks_planned

from .cpfs_export import CpfsExportAddress
from trainstack.tags import MAX_BUCKET_TAGS, ROLE_CHECKPOINT, base_tags, within_limit

CPFS_ACCESS_GROUP = "DEFAULT_VPC_GROUP_NAME"
#: ResizeDisk type that grows a disk under a running node (data/service_limits.yaml)
RESIZE_ONLINE = str(service_limits().value("ecs.disk.resize_online"))


def checkpoint_options(plan: Plan, parent: pulumi.Resource) -> pulumi.ResourceOptions:
    """Options for anything that holds checkpoints (the contract policies and docs rely on)."""
    keep = retained(plan)
    return pulumi.ResourceOptions(parent=parent, protect=keep.protect, retain_on_delete=keep.retain_on_delete)


class Storage(pulumi.ComponentResource):
    """Stack bucket (+ private ACL, public-access block), CPFS + protocol service, per-node disks."""

    bucket: Optional[alicloud.oss.Bucket]
    cpfs: Optional[alicloud.nas.FileSystem]
    protocol_service: Optional[alicloud.nas.ProtocolService]
    protocol_mount_target: Optional[alicloud.nas.ProtocolMountTarget]
    data_disks: list[alicloud.ecs.EcsDisk]
    checkpoint_disks: list[alicloud.ecs.EcsDisk]

    def __init__(self, name: str, plan: Plan, zone: str, vpc_id: pulumi.Input[str],
                 services_vswitch_id: Optional[pulumi.Input[str]], opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("trainstack:index:Storage", name, None, opts)
        st = plan.storage
        child = pulumi.ResourceOptions(parent=self)

        self.bucket = self.bucket_acl = self.public_access_block = None
        if st.oss is not None:
            self._bucket(name, plan)

        self.cpfs = self.protocol_service = self.protocol_mount_target = self.cpfs_address = None
        if st.cpfs is not None and plan.target == "ecs":
            assert services_vswitch_id is not None, "the rule book gives CPFS its services vSwitch"
            self._cpfs(name, plan, zone, vpc_id, services_vswitch_id, child)

        self.data_disks, self.checkpoint_disks = [], []
        names = plan.node_names()
        # plain nodes only: ESS makes a pool node's disks itself (a multi-node pool's node 0 is plain)
        for rank in plan.instance_ranks() if plan.target == "ecs" else []:
            node = names[rank]
            if st.data_disk is not None:
                self.data_disks.append(self._disk(f"{name}-data-disk-{rank}", f"{node}-data", plan, zone, st.data_disk,
                                                  f"dataset cache of node {rank}", child))
        if checkpoint_disks_planned(plan):
            disk = st.checkpoint_disk
            assert disk is not None
            for rank, node in enumerate(plan.node_names()):
                self.checkpoint_disks.append(self._disk(
                    f"{name}-ckpt-disk-{rank}", f"{node}-checkpoints", plan, zone, disk,
                    f"checkpoints of node {rank}", checkpoint_options(plan, self),
                    tags=base_tags(plan, role=ROLE_CHECKPOINT, zone=zone)))

        self.mount_points = mount_points(plan)
        self.register_outputs({
            "bucket": self.bucket.bucket if self.bucket else None,
            "cpfs_id": self.cpfs.id if self.cpfs else None,
            "mount_points": self.mount_points,
        })

    @staticmethod
    def _disk(resource: str, disk_name: str, plan: Plan, zone: str, disk: DataDiskPlan, what: str,
              opts: pulumi.ResourceOptions, tags: Optional[dict] = None) -> alicloud.ecs.EcsDisk:
        return alicloud.ecs.EcsDisk(
            resource, disk_name=disk_name, zone_id=zone, category=disk.category,
            performance_level=disk.performance_level, size=disk.size_gib, type=RESIZE_ONLINE,
            encrypted=True, delete_with_instance=False, payment_type="PayAsYouGo",
            description=f"trainstack {plan.name}: {what}", tags=tags or base_tags(plan, zone=zone), opts=opts)

    def _bucket(self, name: str, plan: Plan) -> None:
        oss = plan.storage.oss
        assert oss is not None
        holds = plan.storage.checkpoint == "oss" or plan.target == "dlc"
        opts = checkpoint_options(plan, self) if holds else pulumi.ResourceOptions(parent=self)
        self.bucket = alicloud.oss.Bucket(
            f"{name}-bucket", bucket=oss.bucket, storage_class="Standard", force_destroy=not holds,
            versioning=alicloud.oss.BucketVersioningArgs(status="Enabled") if oss.versioning else None,
            server_side_encryption_rule=alicloud.oss.BucketServerSideEncryptionRuleArgs(
                sse_algorithm=oss.server_side_encryption),
            tags=within_limit(base_tags(plan, role=ROLE_CHECKPOINT if holds else "stack"), MAX_BUCKET_TAGS,
                              "an OSS bucket"),
            opts=opts)
        keep = bool(holds and plan.storage.retain_on_destroy)
        # Settings of a retained bucket stay as they are when the stack is destroyed.
        side = pulumi.ResourceOptions(parent=self.bucket, retain_on_delete=keep, protect=keep)
        self.bucket_acl = alicloud.oss.BucketAcl(f"{name}-bucket-acl", bucket=self.bucket.bucket, acl="private",
                                                 opts=side)
        self.public_access_block = alicloud.oss.BucketPublicAccessBlock(
            f"{name}-bucket-block-public", bucket=self.bucket.bucket, block_public_access=True, opts=side)

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
            svc = protocol_service_lifecycle(plan)
            in_fs = pulumi.ResourceOptions(parent=self, delete_before_replace=svc.delete_before_replace)
            self.protocol_service = alicloud.nas.ProtocolService(
                f"{name}-cpfs-nfs", file_system_id=self.cpfs.id, protocol_type="NFS", protocol_spec="General",
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
    if st.checkpoint_disk is not None and plan.target == "ecs":
        out["checkpoint_disk"] = st.checkpoint_disk.mount_path
    if st.cpfs is not None and plan.target == "ecs":
        out["cpfs"] = st.cpfs.mount_path
    if st.oss is not None and (st.checkpoint == "oss" or plan.target == "dlc"):
        out["oss"] = f"oss://{st.oss.bucket}/{st.oss.prefix}"
    if has_status(plan):  # where `trainstack status` reads the heartbeats, and the job settings
        assert st.oss is not None
        out["status"] = f"oss://{st.oss.bucket}/{status_prefix(plan)}"
        out["job_settings"] = f"oss://{st.oss.bucket}/{st.oss.job_settings_key}"
    return out
