#!/usr/bin/env python3
"""Generate trainstack/catalog/data/provider_facts.json from the terraform-provider-alicloud source.

Why: `trainstack diff` must say what `pulumi up` does to each changed resource (replace, update in
place, stop or restart a running node, or nothing at all), and the authority for that is the Go
source of the Terraform provider that pulumi-alicloud bridges, not a hand-kept table. This script
reads that source at one commit and writes, per resource type trainstack creates:

* every input argument (top level and nested), with the Pulumi wire name the plan JSON uses
  (read from the installed pulumi-alicloud SDK), whether it is ``ForceNew``, where the provider's
  Update path checks it (``d.HasChange``) - an input that is neither is stored without an API call -
  and its ``DiffSuppressFunc`` (name, definition line, the arguments it reads);
* what ``CustomizeDiff`` decides (``ForceNew``/``SetNewComputed`` calls, with lines);
* a short hand-checked list of in-place updates that stop, restart or wipe a running node (and
  replacements that detach something from one), each located in the source by anchor patterns so
  the recorded line moves with the code and a vanished anchor fails the run;
* a short hand-checked list of impossible updates: in-place changes the cloud API refuses (a disk
  or CPFS shrink, an instance moved to a vSwitch of another zone), each with the provider call that
  sends the value (located by anchors), the API documentation that refuses it, and what to do instead.

Usage (the ``fetch`` tool or a clone provides the git directories; nothing is downloaded)::

    .venv/bin/python tools/provider_facts.py \
        --tf-git-dir /work/.mirror/aliyun+terraform-provider-alicloud/repo --ref release/v2 \
        --pulumi-git-dir /work/.mirror/pulumi+pulumi-alicloud/repo

``--check`` regenerates into memory and exits 1 when the committed file differs.
"""

from __future__ import annotations

import argparse
import bisect
import io
import json
import re
import subprocess
import sys
import tarfile
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "trainstack" / "catalog" / "data" / "provider_facts.json"
TF_REPO = "https://github.com/aliyun/terraform-provider-alicloud"
PULUMI_REPO = "https://github.com/pulumi/pulumi-alicloud"
#: Why the default ref is what it is (kept in the file; pass --note when the evidence changes).
NOTE = ("pulumi-alicloud 4.0.0 (the pinned SDK) bridges the v2 line of terraform-provider-alicloud: its doc "
        "strings cite a feature 'available since v2.0.0-beta5' and upstream versions up to v1.295.0. "
        "pulumi-alicloud's own provider/go.mod at a v4 tag cannot be read: the stored repository has no v4 tag "
        "(newest tag v3.105.0; its master pins v1.285.0). This file reads the newest v2 commit stored "
        "(release/v2); the SDK inputs that commit lacks are listed per resource in sdk_inputs_not_in_schema.")

#: Pulumi type token -> Terraform resource type. Tokens of the resources the components create, plus
#: the ones the next day-two work adds (separate data disks, OSS objects, CIDR reservations, NAS
#: mount targets and access rules). Checked against pulumi-alicloud's provider/resources.go when
#: its git directory is given (explicit entries), else by the bridge's module rule.
RESOURCES: dict[str, str] = {
    "alicloud:ecs/instance:Instance": "alicloud_instance",
    "alicloud:ecs/ramRoleAttachment:RamRoleAttachment": "alicloud_ecs_ram_role_attachment",
    "alicloud:ecs/securityGroup:SecurityGroup": "alicloud_security_group",
    "alicloud:ecs/securityGroupRule:SecurityGroupRule": "alicloud_security_group_rule",
    "alicloud:ecs/ecsDeploymentSet:EcsDeploymentSet": "alicloud_ecs_deployment_set",
    "alicloud:ecs/ecsNetworkInterface:EcsNetworkInterface": "alicloud_ecs_network_interface",
    "alicloud:ecs/ecsNetworkInterfaceAttachment:EcsNetworkInterfaceAttachment":
        "alicloud_ecs_network_interface_attachment",
    "alicloud:ecs/capacityReservation:CapacityReservation": "alicloud_ecs_capacity_reservation",
    "alicloud:ecs/ecsDisk:EcsDisk": "alicloud_ecs_disk",
    "alicloud:ecs/ecsDiskAttachment:EcsDiskAttachment": "alicloud_ecs_disk_attachment",
    "alicloud:ecs/disk:Disk": "alicloud_disk",
    "alicloud:ecs/diskAttachment:DiskAttachment": "alicloud_disk_attachment",
    "alicloud:ecs/eipAddress:EipAddress": "alicloud_eip_address",
    "alicloud:ecs/eipAssociation:EipAssociation": "alicloud_eip_association",
    "alicloud:ess/scalingGroup:ScalingGroup": "alicloud_ess_scaling_group",
    "alicloud:ess/scalingConfiguration:ScalingConfiguration": "alicloud_ess_scaling_configuration",
    "alicloud:ess/scalingRule:ScalingRule": "alicloud_ess_scaling_rule",
    "alicloud:nas/fileSystem:FileSystem": "alicloud_nas_file_system",
    "alicloud:nas/protocolService:ProtocolService": "alicloud_nas_protocol_service",
    "alicloud:nas/protocolMountTarget:ProtocolMountTarget": "alicloud_nas_protocol_mount_target",
    "alicloud:nas/mountTarget:MountTarget": "alicloud_nas_mount_target",
    "alicloud:nas/accessGroup:AccessGroup": "alicloud_nas_access_group",
    "alicloud:nas/accessRule:AccessRule": "alicloud_nas_access_rule",
    "alicloud:oss/bucket:Bucket": "alicloud_oss_bucket",
    "alicloud:oss/bucketAcl:BucketAcl": "alicloud_oss_bucket_acl",
    "alicloud:oss/bucketPublicAccessBlock:BucketPublicAccessBlock": "alicloud_oss_bucket_public_access_block",
    "alicloud:oss/bucketObject:BucketObject": "alicloud_oss_bucket_object",
    "alicloud:pai/workspaceWorkspace:WorkspaceWorkspace": "alicloud_pai_workspace_workspace",
    "alicloud:pai/workspaceDataset:WorkspaceDataset": "alicloud_pai_workspace_dataset",
    "alicloud:ram/policy:Policy": "alicloud_ram_policy",
    "alicloud:ram/role:Role": "alicloud_ram_role",
    "alicloud:ram/rolePolicyAttachment:RolePolicyAttachment": "alicloud_ram_role_policy_attachment",
    "alicloud:vpc/network:Network": "alicloud_vpc",
    "alicloud:vpc/switch:Switch": "alicloud_vswitch",
    "alicloud:vpc/vswitchCidrReservation:VswitchCidrReservation": "alicloud_vpc_vswitch_cidr_reservation",
    "alicloud:vpc/natGateway:NatGateway": "alicloud_nat_gateway",
    "alicloud:vpc/snatEntry:SnatEntry": "alicloud_snat_entry",
}


@dataclass(frozen=True)
class Effect:
    """One hand-checked effect: what the provider does to a running node when ``arguments`` change.

    ``when``: ``update`` (an in-place update does it) or ``replace`` (replacing this resource does
    it to the node it is attached to). ``anchors``: (function, regex, regex, ...) - the recorded
    line is where the last regex matches, each searched after the previous one inside the function.
    ``unless_provider_feature``: a provider ``features`` toggle (Pulumi wire path) that turns the
    update into a replacement instead (CustomizeDiff).
    """

    arguments: tuple[str, ...]  # Terraform names; ("*",): every argument
    effect: str  # restart | stop | wipe | detach | resize | next_instance_only
    why: str
    anchors: tuple[tuple[str, ...], ...]
    when: str = "update"
    unless_provider_feature: Optional[str] = None
    docs: tuple[str, ...] = ()  # documentation behind what the provider's call does in the cloud


CLOUD_INIT_MODULES = "https://docs.cloud-init.io/en/latest/reference/modules.html"  # scripts_user: once per instance
_STOP_START = (
    ("resourceAliCloudInstanceUpdate", r"if imageUpdate \|\| vpcUpdate \|\| passwordUpdate \|\| typeUpdate",
     r"ecsClient\.StopInstance\("),
    ("resourceAliCloudInstanceUpdate", r"if targetExist && target == string\(Running\)", r"ecsClient\.StartInstance\("),
)

EFFECTS: dict[str, tuple[Effect, ...]] = {
    "alicloud:ecs/instance:Instance": (
        Effect(("user_data",), "restart",
               "ModifyInstanceAttribute with the new user data marks the node for a reboot, and the update "
               "stops and starts a running node; cloud-init runs user-data scripts once per instance, so the "
               "restarted node does not run the new script",
               (("modifyInstanceAttribute", r'd\.HasChange\("user_data"\)', r"reboot = true"),) + _STOP_START,
               docs=(CLOUD_INIT_MODULES,)),
        Effect(("host_name",), "restart", "a new host name is applied by stopping and starting the node",
               (("modifyInstanceAttribute", r'd\.HasChange\("host_name"\)', r"reboot = true"),) + _STOP_START),
        Effect(("password", "kms_encrypted_password"), "restart",
               "a new password is applied by stopping and starting the node",
               (("modifyInstanceAttribute", r'd\.HasChange\("password"\)', r"reboot = true"),) + _STOP_START),
        Effect(("image_id",), "wipe",
               "ReplaceSystemDisk on a stopped node: the system disk is re-created from the new image (everything "
               "on it is lost), then the node starts again",
               (("modifyInstanceImage", r'd\.HasChange\("image_id"\)', r"ecsClient\.ReplaceSystemDisk\("),)
               + _STOP_START,
               unless_provider_feature="features.ecsInstance.replaceOnImageUpdate"),
        Effect(("instance_type",), "stop",
               "ModifyInstanceSpec needs the node stopped: stop, change the type, start",
               (("modifyInstanceType", r'd\.HasChange\("instance_type"\)', r"ecsClient\.ModifyInstanceSpec\("),)
               + _STOP_START),
        Effect(("vswitch_id", "private_ip", "vpc_id"), "stop",
               "ModifyInstanceVpcAttribute needs the node stopped: stop, move it, start",
               (("modifyVpcAttribute", r'd\.HasChange\("vswitch_id"\)', r"ecsClient\.ModifyInstanceVpcAttribute\("),)
               + _STOP_START),
        Effect(("cpu_options", "enable_high_density_mode"), "stop",
               "these attributes are only modified on a stopped node: stop, modify, start",
               (("modifyInstanceAttributeNeedStopped", r'd\.HasChange\("cpu_options"\)', r"client\.RpcPost\("),)
               + _STOP_START),
        Effect(("status",), "stop", "status Stopped stops the node (StopInstance)",
               (("resourceAliCloudInstanceUpdate", r'statusUpdate := d\.HasChange\("status"\)',
                 r"ecsClient\.StopInstance\("),)),
    ),
    "alicloud:ess/scalingConfiguration:ScalingConfiguration": (
        Effect(("*",), "next_instance_only",
               "ModifyScalingConfiguration changes the template only: instances the group already runs keep their "
               "settings (a running self-healing node is not touched; its replacement gets the new ones)",
               (("modifyEssScalingConfiguration", r'action := "ModifyScalingConfiguration"'),),
               docs=("https://www.alibabacloud.com/help/en/auto-scaling/latest/modify-a-scaling-configuration",)),
    ),
    "alicloud:ess/scalingGroup:ScalingGroup": (
        Effect(("min_size", "max_size", "desired_capacity"), "resize",
               "ModifyScalingGroup with another size: ESS removes running instances when the group shrinks (by its "
               "RemovalPolicies) and launches new ones when it grows; a self-healing job's torchrun rendezvous keeps "
               "its size, so an added node joins only the next job (docs/self-healing.md)",
               (("resourceAliyunEssScalingGroupUpdate", r'action := "ModifyScalingGroup"', r'd\.HasChange\("min_size"\)'),),
               docs=("https://www.alibabacloud.com/help/en/auto-scaling/developer-reference/"
                     "api-ess-2022-02-22-modifyscalinggroup",)),
    ),
    "alicloud:ecs/ecsDiskAttachment:EcsDiskAttachment": (
        Effect(("disk_id", "instance_id"), "detach",
               "replacing the attachment detaches the disk from the running node (DetachDisk) before it is "
               "attached again: a mounted checkpoint disk disappears under the training job",
               (("resourceAlicloudEcsDiskAttachmentDelete", r'action := "DetachDisk"'),), when="replace"),
    ),
    "alicloud:ecs/diskAttachment:DiskAttachment": (
        Effect(("disk_id", "instance_id"), "detach",
               "replacing the attachment detaches the disk from the running node (DetachDisk) before it is "
               "attached again",
               (("resourceAlicloudEcsDiskAttachmentDelete", r'action := "DetachDisk"'),), when="replace"),
    ),
    "alicloud:ecs/ecsNetworkInterfaceAttachment:EcsNetworkInterfaceAttachment": (
        Effect(("instance_id", "network_interface_id", "network_card_index"), "detach",
               "replacing the attachment detaches the ERI from the running node (DetachNetworkInterface): "
               "RDMA traffic over it stops until it is attached again",
               (("resourceAliCloudEcsNetworkInterfaceAttachmentDelete", r'action := "DetachNetworkInterface"'),),
               when="replace"),
    ),
}

@dataclass(frozen=True)
class Impossible:
    """An in-place update the cloud API refuses, hand-checked: the provider sends the new value and
    the call fails, so `pulumi up` stops part-way (resources before it already changed).

    ``rule``: ``not_smaller`` (a number may only grow) or ``same_referenced`` (the resource the input
    refers to, through the program's property dependencies, must keep its input ``attribute``: an
    instance cannot follow its vSwitch into another zone). ``only_when``: the resource's own
    arguments (Terraform names) that must hold one of the values for the rule to apply.
    ``anchors``: the provider call that sends the value (as for :class:`Effect`); ``docs``: the API
    documentation that says the call refuses it. ``fix``: what to do instead.
    """

    argument: str  # Terraform name
    rule: str  # not_smaller | same_referenced
    api: str
    why: str
    fix: str
    anchors: tuple[tuple[str, ...], ...]
    docs: tuple[str, ...]
    attribute: Optional[str] = None  # same_referenced: the wire name of the referenced resource's input
    only_when: tuple[tuple[str, tuple[str, ...]], ...] = ()


RESIZE_DISK_DOC = "https://www.alibabacloud.com/help/doc-detail/25522.html"  # "must be greater than the original"
_DISK_SHRINK = Impossible(
    "size", "not_smaller", "ResizeDisk",
    "ResizeDisk only grows a disk: the new capacity must be greater than the original one",
    "keep the size at least the deployed one (storage.dataset_gib, storage.checkpoint_gib); a smaller disk is a new "
    "disk: replace it on purpose between jobs (`pulumi up --replace <urn>`; it comes back empty and is detached from "
    "its node meanwhile; copy checkpoints off a checkpoint disk first)",
    (("resourceAliCloudEcsDiskUpdate", r'action = "ResizeDisk"', r'request\["NewSize"\] = d\.Get\("size"\)'),),
    (RESIZE_DISK_DOC,))
IMPOSSIBLE: dict[str, tuple[Impossible, ...]] = {
    "alicloud:ecs/ecsDisk:EcsDisk": (_DISK_SHRINK,),
    "alicloud:ecs/disk:Disk": (_DISK_SHRINK,),
    "alicloud:ecs/instance:Instance": (
        Impossible("system_disk_size", "not_smaller", "ResizeDisk",
                   "the system disk is resized with ResizeDisk, which only grows a disk",
                   "keep the system disk size; a smaller system disk is a new node (`pulumi up --replace <urn>` "
                   "between jobs)",
                   (("resourceAliCloudInstanceUpdate", r'if d\.HasChange\("system_disk_size"\) \{',
                     r"ecsClient\.ResizeDisk\("),),
                   (RESIZE_DISK_DOC,)),
        Impossible("vswitch_id", "same_referenced", "ModifyInstanceVpcAttribute",
                   "ModifyInstanceVpcAttribute moves a stopped instance only between vSwitches of its own zone "
                   "(InvalidVSwitchId.Mismatch otherwise)",
                   "a running node cannot change zones in place: keep `zone`; to move, re-create the nodes in the new "
                   "zone on purpose between jobs (`pulumi up --replace <urn>` per node, their disks follow) or deploy "
                   "a new stack there",
                   (("modifyVpcAttribute", r"ecsClient\.ModifyInstanceVpcAttribute\("),),
                   ("https://www.alibabacloud.com/help/en/ecs/developer-reference/"
                    "api-ecs-2014-05-26-modifyinstancevpcattribute",),
                   attribute="zoneId"),
    ),
    "alicloud:nas/fileSystem:FileSystem": (
        Impossible("capacity", "not_smaller", "UpgradeFileSystem",
                   "a CPFS file system scales out only, never in (UpgradeFileSystem with a smaller capacity fails)",
                   "keep the capacity at least the deployed one (it follows storage.dataset_gib and "
                   "storage.checkpoint_gib); a smaller file system is a new one: copy the checkpoints out first",
                   (("resourceAliCloudNasFileSystemUpdate", r'if !\(checkValue00 == "standard"\)',
                     r'action = "UpgradeFileSystem"', r'request\["Capacity"\] = d\.Get\("capacity"\)'),),
                   ("https://www.alibabacloud.com/help/en/cpfs/cpfsonecs/user-guide/scale-up-a-file-system",),
                   only_when=(("file_system_type", ("cpfs",)),)),
    ),
}

#: Arguments whose value one live resource holds exclusively. Pulumi replaces create-before-delete
#: unless told otherwise, so a replacement that keeps such a value asks the cloud for something the
#: old resource still holds. Hand-checked against Alibaba's API documentation (``docs``).
UNIQUE: dict[str, tuple[tuple[str, str, str], ...]] = {
    "alicloud:ecs/instance:Instance": (
        ("private_ip", "a private IP address of a vSwitch is allocated to one network interface at a time",
         "https://www.alibabacloud.com/help/en/vpc/developer-reference/api-vpc-2016-04-28-checkcanallocatevpcprivateipaddress"),),
    "alicloud:oss/bucket:Bucket": (
        ("bucket", "bucket names are unique across all of OSS",
         "https://www.alibabacloud.com/help/en/oss/user-guide/bucket-naming-conventions"),),
    "alicloud:ram/policy:Policy": (
        ("policy_name", "a custom policy name is unique within the account",
         "https://www.alibabacloud.com/help/en/ram/developer-reference/api-ram-2015-05-01-createpolicy"),),
    "alicloud:ram/role:Role": (
        ("role_name", "a role name is unique within the account",
         "https://www.alibabacloud.com/help/en/ram/developer-reference/api-ram-2015-05-01-createrole"),),
}

# ---- Go source reading ------------------------------------------------------------------------

_OPEN = {"{": "}", "(": ")", "[": "]"}


def _skip_literal(text: str, i: int) -> int:
    """Index after the string, rune or comment starting at ``i`` (``i`` itself when none)."""
    c = text[i]
    if c == '"' or c == "'":
        j = i + 1
        while j < len(text) and text[j] != c:
            j += 2 if text[j] == "\\" else 1
        return j + 1
    if c == "`":
        return text.index("`", i + 1) + 1
    if text.startswith("//", i):
        j = text.find("\n", i)
        return len(text) if j < 0 else j
    if text.startswith("/*", i):
        return text.index("*/", i + 2) + 2
    return i


def matching(text: str, i: int) -> int:
    """Index of the bracket closing the one at ``i``."""
    stack = [_OPEN[text[i]]]
    j = i + 1
    while stack:
        k = _skip_literal(text, j)
        if k != j:
            j = k
            continue
        c = text[j]
        if c in _OPEN:
            stack.append(_OPEN[c])
        elif c == stack[-1]:
            stack.pop()
        j += 1
    return j - 1


def split_top(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Spans of the comma-separated items of ``text[start:end]`` at bracket depth 0."""
    out, depth, j, item = [], 0, start, start
    while j < end:
        k = _skip_literal(text, j)
        if k != j:
            j = k
            continue
        c = text[j]
        if c in "{([":
            depth += 1
        elif c in "})]":
            depth -= 1
        elif c == "," and depth == 0:
            out.append((item, j))
            item = j + 1
        j += 1
    out.append((item, end))
    return [(a, b) for a, b in out if _strip_comments(text[a:b]).strip()]


def _strip_comments(s: str) -> str:
    return re.sub(r"//[^\n]*|/\*.*?\*/", "", s, flags=re.S)


@dataclass
class GoFile:
    path: str
    text: str
    newlines: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.newlines = [m.start() for m in re.finditer("\n", self.text)]

    def line(self, offset: int) -> int:
        return bisect.bisect_right(self.newlines, offset - 1) + 1

    def where(self, offset: int) -> str:
        return f"{self.path}:{self.line(offset)}"


@dataclass
class GoFunc:
    name: str
    file: GoFile
    start: int       # offset of "func"
    body: tuple[int, int]  # offsets of "{" and "}"

    def text(self) -> str:
        return self.file.text[self.body[0]:self.body[1] + 1]


class GoPackage:
    """The provider's ``alicloud`` package: every non-test file and its top-level functions."""

    FUNC = re.compile(r"^func (\w+)\(", re.M)

    def __init__(self, files: dict[str, str]):
        self.files = {p: GoFile(p, t) for p, t in files.items()}
        self.funcs: dict[str, GoFunc] = {}
        for f in self.files.values():
            for m in self.FUNC.finditer(f.text):
                brace = self._body_open(f.text, m.end() - 1)
                self.funcs.setdefault(m.group(1), GoFunc(m.group(1), f, m.start(), (brace, matching(f.text, brace))))

    @staticmethod
    def _body_open(text: str, paren: int) -> int:
        """The ``{`` of a function body whose parameter list opens at ``paren``."""
        j = matching(text, paren) + 1
        while True:
            k = _skip_literal(text, j)
            if k != j:
                j = k
                continue
            if text[j] == "{":
                return j
            if text[j] in "([":
                j = matching(text, j) + 1
                continue
            j += 1


# ---- schema parsing ----------------------------------------------------------------------------

@dataclass
class Arg:
    path: tuple[str, ...]
    where: str
    fields: dict[str, str]
    parent_force_new: bool
    block: bool = False  # its Elem is a nested schema (the arguments below it are listed too)

    @property
    def force_new(self) -> bool:
        return self.fields.get("ForceNew") == "true" or self.parent_force_new

    def flag(self, name: str) -> bool:
        return self.fields.get(name) == "true"


def _fields(text: str, open_brace: int) -> dict[str, tuple[str, int]]:
    """``Key: value`` fields of the composite literal whose ``{`` is at ``open_brace``."""
    out = {}
    for a, b in split_top(text, open_brace + 1, matching(text, open_brace)):
        item = text[a:b]
        m = re.match(r"\s*(?://[^\n]*\s*)*(\w+)\s*:\s*", item)
        if m:
            out[m.group(1)] = (item[m.end():].strip(), a + m.end())
    return out


class SchemaReader:
    def __init__(self, pkg: GoPackage):
        self.pkg = pkg

    def resource(self, func_name: str) -> tuple[GoFunc, dict[str, tuple[str, int]]]:
        fn = self.pkg.funcs[func_name]
        text = fn.file.text
        m = re.compile(r"&schema\.Resource\s*\{").search(text, fn.body[0], fn.body[1])
        if not m:
            raise SystemExit(f"{func_name}: no &schema.Resource literal")
        return fn, _fields(text, m.end() - 1)

    def schema_map(self, file: GoFile, value: str, offset: int) -> tuple[GoFile, int]:
        """(file, offset of ``{``) of the ``map[string]*schema.Schema`` a ``Schema:`` value names."""
        m = re.match(r"map\[string\]\*schema\.Schema\s*\{", value)
        if m:
            return file, offset + m.end() - 1
        call = re.match(r"(\w+)\(", value)
        if call and call.group(1) in self.pkg.funcs:
            fn = self.pkg.funcs[call.group(1)]
            mm = re.compile(r"map\[string\]\*schema\.Schema\s*\{").search(fn.file.text, fn.body[0], fn.body[1])
            if mm:
                return fn.file, mm.end() - 1
        raise SystemExit(f"{file.where(offset)}: cannot read schema {value[:60]!r}")

    def args(self, file: GoFile, brace: int, prefix: tuple[str, ...] = (),
             parent_force_new: bool = False) -> list[Arg]:
        text, out = file.text, []
        for a, b in split_top(text, brace + 1, matching(text, brace)):
            m = re.match(r'\s*(?://[^\n]*\s*)*"(\w+)"\s*:\s*', text[a:b])
            if not m:
                continue
            name, vstart = m.group(1), a + m.end()
            f2, body = self._entry_body(file, text[vstart:b].strip(), vstart)
            flds = {k: v for k, (v, _) in _fields(f2.text, body).items()}
            arg = Arg(prefix + (name,), file.where(a + m.start(1)), flds, parent_force_new)
            out.append(arg)
            elem = _fields(f2.text, body).get("Elem")
            if elem:
                ev, eoff = elem
                em = re.match(r"&schema\.Resource\s*\{", ev)
                if em:
                    sch = _fields(f2.text, eoff + em.end() - 1).get("Schema")
                    if sch:
                        arg.block = True
                        f3, b3 = self.schema_map(f2, *sch)
                        out += self.args(f3, b3, arg.path, arg.force_new)
                else:
                    call = re.match(r"(\w+)\(\)", ev)
                    fn = self.pkg.funcs.get(call.group(1)) if call else None
                    if fn is not None:
                        rm = re.compile(r"&schema\.Resource\s*\{").search(fn.file.text, fn.body[0], fn.body[1])
                        if rm:
                            sch = _fields(fn.file.text, rm.end() - 1).get("Schema")
                            if sch:
                                arg.block = True
                                f3, b3 = self.schema_map(fn.file, *sch)
                                out += self.args(f3, b3, arg.path, arg.force_new)
        return out

    def _entry_body(self, file: GoFile, value: str, offset: int) -> tuple[GoFile, int]:
        """The ``{`` of one schema entry: inline ``{...}`` / ``&schema.Schema{...}`` or a helper's."""
        m = re.match(r"(?:&schema\.Schema\s*)?\{", value)
        if m:
            return file, offset + m.end() - 1
        call = re.match(r"(\w+)\(", value)
        if call and call.group(1) in self.pkg.funcs:
            fn = self.pkg.funcs[call.group(1)]
            mm = re.compile(r"&schema\.Schema\s*\{").search(fn.file.text, fn.body[0], fn.body[1])
            if mm:
                return fn.file, mm.end() - 1
        raise SystemExit(f"{file.where(offset)}: cannot read schema entry {value[:60]!r}")


# ---- update path, customize diff, diff suppression -----------------------------------------

CHANGE_CALL = re.compile(r"\.(HasChange|HasChanges|GetChange|HasChangeExcept)\(([^()]*)\)")
STRING = re.compile(r'"([^"\\]*)"')
CALL = re.compile(r"\b([A-Za-z_]\w*)\(")
DIFF_CALL = re.compile(r"\.(ForceNew|SetNewComputed|SetNew|Clear)\(\s*\"([\w.]+)\"")
CUSTOMDIFF_CALL = re.compile(r"customdiff\.(ForceNewIf|ForceNewIfChange|ComputedIf)\(\s*\"([\w.]+)\"")
GET_CALL = re.compile(r"\.(?:Get|GetOk|GetOkExists|GetChange|HasChange)\(\s*\"([\w.]+)\"")


def reachable(pkg: GoPackage, root: str, skip: set[str], depth: int = 3) -> list[GoFunc]:
    """``root`` and the package functions it calls, ``depth`` levels deep (``skip`` excluded)."""
    seen, todo, out = {root}, [(root, 0)], []
    while todo:
        name, d = todo.pop(0)
        fn = pkg.funcs.get(name)
        if fn is None:
            continue
        out.append(fn)
        if d >= depth:
            continue
        for m in CALL.finditer(_strip_comments(fn.text())):
            callee = m.group(1)
            if callee in pkg.funcs and callee not in seen and callee not in skip:
                seen.add(callee)
                todo.append((callee, d + 1))
    return out


READ_CALL = re.compile(r"\.(?:Get|GetOk|GetOkExists|GetRawConfig)\(\s*\"([\w.]+)\"")


def update_checks(pkg: GoPackage, update: Optional[str], skip: set[str], names: set[str],
                  pattern: re.Pattern = CHANGE_CALL) -> dict[str, list[str]]:
    """``{top-level argument: [file:line, ...]}`` where the Update path checks it for a change
    (``pattern`` READ_CALL: where it reads it at all; some Update functions resend every argument)."""
    out: dict[str, list[str]] = {}
    if not update:
        return out
    for fn in reachable(pkg, update, skip):
        text = fn.file.text
        for m in pattern.finditer(text, fn.body[0], fn.body[1]):
            for s in (STRING.findall(m.group(2)) if pattern is CHANGE_CALL else [m.group(1)]):
                top = s.split(".")[0]
                if top in names:
                    where = fn.file.where(m.start())
                    if where not in out.setdefault(top, []):
                        out[top].append(where)
    return out


def customize_diff(pkg: GoPackage, file: GoFile, value: str, offset: int) -> list[dict[str, str]]:
    """What CustomizeDiff decides: ``{argument, call, where, function}`` per decision."""
    out = []
    names = [n for n in CALL.findall(value) if n in pkg.funcs] or \
        ([value.strip()] if value.strip() in pkg.funcs else [])
    for m in CUSTOMDIFF_CALL.finditer(value):
        out.append({"argument": m.group(2), "call": f"customdiff.{m.group(1)}", "where": file.where(offset),
                    "function": "(inline)"})
    for name in names:
        for fn in reachable(pkg, name, set(), depth=1):
            for m in DIFF_CALL.finditer(fn.file.text, fn.body[0], fn.body[1]):
                out.append({"argument": m.group(2), "call": m.group(1), "where": fn.file.where(m.start()),
                            "function": fn.name})
    return out


def suppression(pkg: GoPackage, a: "Arg") -> dict[str, Any]:
    """A DiffSuppressFunc: its name (or inline), where it is defined, and the arguments it reads."""
    value = a.fields["DiffSuppressFunc"]
    if value.startswith("func("):
        body = value[:matching(value, value.index("{")) + 1]
        return {"function": "(inline)", "defined_at": a.where, "reads": sorted(set(GET_CALL.findall(body)))}
    name = re.match(r"[\w.]+", value).group(0)
    fn = pkg.funcs.get(name)
    if fn is None:
        return {"function": name, "defined_at": None, "reads": []}
    return {"function": name, "defined_at": fn.file.where(fn.start),
            "reads": sorted({r for f in reachable(pkg, name, set(), depth=1)
                             for r in GET_CALL.findall(f.file.text[f.body[0]:f.body[1]])})}


def anchor_line(pkg: GoPackage, anchor: tuple[str, ...]) -> str:
    fn_name, *patterns = anchor
    fn = pkg.funcs.get(fn_name)
    if fn is None:
        raise SystemExit(f"hand-checked anchor: no function {fn_name}")
    pos, hit = fn.body[0], None
    for p in patterns:
        hit = re.compile(p).search(fn.file.text, pos, fn.body[1])
        if hit is None:
            raise SystemExit(f"hand-checked anchor {p!r} not found in {fn_name} ({fn.file.where(fn.start)}): "
                             "re-read the provider source and update EFFECTS")
        pos = hit.end()
    return fn.file.where(hit.start())


# ---- the Pulumi SDK: wire names ----------------------------------------------------------------

def _camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def sdk_names(token: str) -> tuple[dict[tuple[str, ...], str], str]:
    """``{python path: wire path}`` of every input of ``token`` in the installed SDK, and its version."""
    import importlib
    import importlib.metadata

    import pulumi._types as types

    mod, _, cls = token.split(":", 2)[1].partition("/")[0], None, token.rsplit(":", 1)[1]
    module = importlib.import_module(f"pulumi_alicloud.{mod}")
    args_cls = getattr(module, f"{cls}Args")
    out: dict[tuple[str, ...], str] = {}

    def walk(c: type, py: tuple[str, ...], wire: tuple[str, ...]) -> None:
        names, kinds = types.input_type_py_to_pulumi_names(c), types.input_type_types(c)
        for p, w in names.items():
            out[py + (p,)] = ".".join(wire + (w,))
            for nested in _input_classes(kinds.get(w)):
                walk(nested, py + (p,), wire + (w,))

    walk(args_cls, (), ())
    return out, importlib.metadata.version("pulumi-alicloud")


def _type(a: Arg) -> str:
    """``string``/``int``/``bool``/``float``/``map``, or ``list``/``set`` (``block`` when it nests arguments)."""
    m = re.match(r"schema\.Type(\w+)", a.fields.get("Type", ""))
    kind = m.group(1).lower() if m else "unknown"
    return "block" if a.block else kind


def _plural(name: str) -> str:
    return name[:-1] + "ies" if name.endswith("y") else name if name.endswith("s") else name + "s"


def _sdk_wire(sdk: dict[tuple[str, ...], str], tf_path: tuple[str, ...]) -> Optional[str]:
    """The SDK wire path of a Terraform argument path. The bridge names a list block in the plural
    (``cors_rule`` -> ``corsRules``), so each segment is tried as given, then pluralised."""
    py: tuple[str, ...] = ()
    for part in tf_path:
        for candidate in (part, _plural(part)):
            if py + (candidate,) in sdk:
                py += (candidate,)
                break
        else:
            return None
    return sdk[py]


def _input_classes(tp: Any) -> Iterable[type]:
    import pulumi._types as types

    seen, todo = set(), [tp]
    while todo:
        t = todo.pop()
        if t is None or id(t) in seen:
            continue
        seen.add(id(t))
        if isinstance(t, type) and types.is_input_type(t):
            yield t
            continue
        todo += list(typing.get_args(t))


# ---- pulumi-alicloud token check -------------------------------------------------------------

def token_source(pulumi_text: Optional[str], token: str, tf_type: str) -> str:
    """Where pulumi-alicloud maps ``tf_type`` to ``token`` (resources.go line, or the module rule)."""
    mod, name = token.split(":")[1].split("/")[0], token.rsplit(":", 1)[1]
    if pulumi_text:
        m = re.search(rf'"{tf_type}"\s*:\s*\{{\s*\n?\s*Tok:\s*resource\((\w+)Mod,\s*"(\w+)"\)', pulumi_text)
        if m:
            if (m.group(1).lower(), m.group(2)) != (mod.lower(), name):
                raise SystemExit(f"{tf_type}: resources.go maps it to {m.group(1)}/{m.group(2)}, not {token}")
            return f"provider/resources.go:{pulumi_text.count(chr(10), 0, m.start()) + 1}"
    auto = f"alicloud_{mod}_" + re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()
    if auto != tf_type:
        raise SystemExit(f"{token}: no explicit mapping of {tf_type} and the module rule gives {auto}")
    return "module rule (alicloud_<module>_<name>)"


# ---- generation --------------------------------------------------------------------------------

def git(git_dir: Path, *args: str) -> bytes:
    return subprocess.run(["git", f"--git-dir={git_dir}", *args], check=True, capture_output=True).stdout


def read_package(git_dir: Path, ref: str) -> dict[str, str]:
    data = git(git_dir, "archive", "--format=tar", ref, "alicloud/")
    files = {}
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for member in tar:
            if member.isfile() and member.name.endswith(".go") and not member.name.endswith("_test.go") \
                    and member.name.count("/") == 1:
                files[member.name] = tar.extractfile(member).read().decode("utf-8", "replace")
    return files


def resources_map(pkg: GoPackage) -> dict[str, str]:
    text = pkg.files["alicloud/provider.go"].text
    return dict(re.findall(r'^\s*"(alicloud_\w+)"\s*:\s*(\w+)\(\),', text, re.M))


def describe(pkg: GoPackage, reader: SchemaReader, token: str, tf_type: str, func: str,
             pulumi_text: Optional[str]) -> dict[str, Any]:
    fn, res = reader.resource(func)
    sf, sb = reader.schema_map(fn.file, *res["Schema"])
    args = reader.args(sf, sb)
    handlers = {k: res[k][0].rstrip(",").strip() for k in ("Create", "Read", "Update", "Delete",
                                                            "CreateContext", "ReadContext", "UpdateContext",
                                                            "DeleteContext") if k in res}
    update = handlers.get("Update") or handlers.get("UpdateContext")
    skip = {v for k, v in handlers.items() if "Update" not in k}
    tops = {a.path[0] for a in args}
    checks = update_checks(pkg, update, skip, tops)
    reads = update_checks(pkg, update, skip, tops, READ_CALL)
    sdk, sdk_version = sdk_names(token)
    arguments: dict[str, dict[str, Any]] = {}
    tf_without_sdk = []
    for a in args:
        inputs = a.flag("Optional") or a.flag("Required")
        if not inputs or "Removed" in a.fields:
            continue
        wire = _sdk_wire(sdk, a.path)
        if wire is None:
            tf_without_sdk.append(".".join(a.path))
            wire = ".".join(_camel(p) for p in a.path)
        entry: dict[str, Any] = {"tf": ".".join(a.path), "source": a.where, "type": _type(a),
                                 "force_new": a.force_new}
        if a.flag("Required"):
            entry["required"] = True
        if a.flag("Computed"):
            entry["computed"] = True
        if len(a.path) == 1:
            entry["update"] = checks.get(a.path[0], [])
            if not entry["update"] and reads.get(a.path[0]):
                entry["update_reads"] = reads[a.path[0]]
        if "DiffSuppressFunc" in a.fields:
            entry["diff_suppress"] = suppression(pkg, a)
        if "Deprecated" in a.fields:
            entry["deprecated"] = True
        arguments[wire] = entry
    wire_of = {e["tf"]: w for w, e in arguments.items()}
    decisions = []
    if "CustomizeDiff" in res:
        value, off = res["CustomizeDiff"]
        for d in customize_diff(pkg, fn.file, value, off):
            d["argument"] = wire_of.get(d["argument"], d["argument"])
            decisions.append(d)
    effects = []
    for e in EFFECTS.get(token, ()):
        missing = [x for x in e.arguments if x not in wire_of and x != "*"]
        if missing:
            raise SystemExit(f"{token}: hand-checked effect names unknown arguments {missing}")
        item: dict[str, Any] = {"arguments": [wire_of.get(x, x) for x in e.arguments], "effect": e.effect,
                                "when": e.when, "why": e.why, "sources": [anchor_line(pkg, a) for a in e.anchors]}
        if e.unless_provider_feature:
            item["unless_provider_feature"] = e.unless_provider_feature
        if e.docs:
            item["docs"] = list(e.docs)
        effects.append(item)
    unique = [{"argument": wire_of[a], "why": why, "docs": [doc]} for a, why, doc in UNIQUE.get(token, ())]
    impossible = [impossible_entry(pkg, token, wire_of, i) for i in IMPOSSIBLE.get(token, ())]
    sdk_tops = {w for p, w in sdk.items() if len(p) == 1}
    sdk_only = sorted(sdk_tops - {w for w in arguments if "." not in w})
    return {
        "terraform_type": tf_type,
        "pulumi_token_source": token_source(pulumi_text, token, tf_type),
        "schema": fn.file.where(fn.start),
        "update": pkg.funcs[update].file.where(pkg.funcs[update].start) if update in pkg.funcs else None,
        "arguments": dict(sorted(arguments.items())),
        "customize_diff": decisions,
        "effects": effects,
        "unique_while_alive": unique,
        "impossible_updates": impossible,
        "sdk_inputs_not_in_schema": sdk_only,
        "schema_inputs_not_in_sdk": sorted(tf_without_sdk),
        "_sdk_version": sdk_version,
    }


def impossible_entry(pkg: GoPackage, token: str, wire_of: dict[str, str], i: Impossible) -> dict[str, Any]:
    """One impossible-update fact, its arguments as wire names and its provider line located by anchors."""
    missing = [a for a in (i.argument, *(k for k, _ in i.only_when)) if a not in wire_of]
    if missing:
        raise SystemExit(f"{token}: impossible-update fact names unknown arguments {missing}")
    item: dict[str, Any] = {"argument": wire_of[i.argument], "rule": i.rule, "api": i.api, "why": i.why, "fix": i.fix,
                            "sources": [anchor_line(pkg, a) for a in i.anchors], "docs": list(i.docs)}
    if i.attribute:
        item["attribute"] = i.attribute
    if i.only_when:
        item["only_when"] = {wire_of[k]: list(v) for k, v in i.only_when}
    return item


def provider_block(tf_git: Path, ref: str, pulumi_git: Optional[Path], sdk_version: str) -> dict[str, Any]:
    commit = git(tf_git, "rev-parse", f"{ref}^{{commit}}").decode().strip()
    date = git(tf_git, "log", "-1", "--format=%cI", commit).decode().strip()
    described = git(tf_git, "describe", "--tags", commit).decode().strip()
    block: dict[str, Any] = {
        "name": "terraform-provider-alicloud", "repository": TF_REPO, "ref": ref, "version": described,
        "commit": commit,
        "commit_date": date,
        "bridged_by": {"package": "pulumi-alicloud", "version": sdk_version, "repository": PULUMI_REPO},
    }
    if pulumi_git is not None:
        head = git(pulumi_git, "rev-parse", "HEAD").decode().strip()
        tags = git(pulumi_git, "tag", "--list", f"v{sdk_version.split('.')[0]}.*").decode().split()
        gomod = git(pulumi_git, "show", f"{head}:provider/go.mod").decode()
        pinned = re.search(r"github\.com/aliyun/terraform-provider-alicloud (v\S+)", gomod)
        block["bridged_by"]["go_mod"] = {
            "tags_of_this_major": tags,
            "newest_commit_read": head,
            "newest_commit_pins": pinned.group(1) if pinned else None,
        }
    return block


def generate(tf_git: Path, ref: str, pulumi_git: Optional[Path], note: Optional[str]) -> dict[str, Any]:
    pkg = GoPackage(read_package(tf_git, ref))
    reader = SchemaReader(pkg)
    rmap = resources_map(pkg)
    pulumi_text = git(pulumi_git, "show", "HEAD:provider/resources.go").decode() if pulumi_git else None
    resources, sdk_version = {}, None
    for token, tf_type in RESOURCES.items():
        if tf_type not in rmap:
            raise SystemExit(f"{tf_type} is not in the provider's ResourcesMap at {ref}")
        entry = describe(pkg, reader, token, tf_type, rmap[tf_type], pulumi_text)
        sdk_version = entry.pop("_sdk_version")
        resources[token] = entry
    out = {
        "kind": "trainstack-provider-facts",
        "schema_version": 1,
        "generated_by": "tools/provider_facts.py",
        "provider": provider_block(tf_git, ref, pulumi_git, sdk_version or "?"),
        "resources": resources,
        "trainstack_providers": trainstack_providers(),
    }
    if note:
        out["provider"]["note"] = note
    return out


def _line_of(path: Path, pattern: str) -> str:
    text = path.read_text(encoding="utf-8")
    m = re.search(pattern, text, re.M)
    if m is None:
        raise SystemExit(f"{path}: anchor {pattern!r} not found")
    return f"{path.relative_to(ROOT).as_posix()}:{text.count(chr(10), 0, m.start()) + 1}"


def trainstack_providers() -> dict[str, Any]:
    """trainstack's own dynamic providers (``pulumi-python:dynamic:Resource``, told apart by the
    ``kind`` input): what their ``diff`` replaces, read from the code that decides it."""
    sys.path.insert(0, str(ROOT))
    from trainstack.dlc_job import INFORMATIONAL_INPUT_KEYS, INPUT_KEYS, KIND, OUTPUT_KEYS

    dlc, cpfs = ROOT / "components" / "dlc.py", ROOT / "components" / "cpfs_export.py"
    qp = ROOT / "components" / "queue_pairs.py"
    from trainstack.layout import pool_configuration as pc

    ess = ROOT / "components" / "ess_pool.py"

    def lookup_facts(path: Path) -> tuple[list[str], list[str], list[str]]:
        """(replaced on, outputs, not compared) of a lookup provider whose diff names its inputs."""
        text = path.read_text(encoding="utf-8")
        replaces = re.search(r'for k in \(([^)]*)\) if olds', text)
        props = re.search(r"props: dict\[str, Any\] = \{(.*?)\}\n", text, re.S)
        keys = sorted(STRING.findall(replaces.group(1)))
        every = set(re.findall(r'"(\w+)":', props.group(1)))
        outputs = sorted(k for k in every if re.search(rf'"{k}": None', props.group(1)))
        return keys, outputs, sorted(every - set(keys) - set(outputs))

    cpfs_replace, _, _ = lookup_facts(cpfs)
    cpfs_text = cpfs.read_text(encoding="utf-8")
    props = re.search(r"props: dict\[str, Any\] = \{(.*?)\}\n", cpfs_text, re.S)
    qp_replace, qp_outputs, qp_other = lookup_facts(qp)
    return {
        KIND: {"replace": sorted(set(INPUT_KEYS) - set(INFORMATIONAL_INPUT_KEYS)), "outputs": sorted(OUTPUT_KEYS),
               "not_compared": sorted(INFORMATIONAL_INPUT_KEYS),
               "delete_before_replace": True,
               "why": "a submitted PAI-DLC job cannot be edited: the provider stops and deletes it, then submits "
                      "a new one (the job restarts from its last checkpoint)",
               "source": _line_of(dlc, r"def diff\(self, _id: str, olds: dict\[str, Any\]")},
        "cpfs-export-address": {
            "replace": cpfs_replace, "outputs": ["domain"],
            "not_compared": sorted(set(re.findall(r'"(\w+)":', props.group(1))) - set(cpfs_replace) - {"domain"}),
            "delete_before_replace": False,
            "why": "a read-only lookup of the CPFS export's mount domain: only a different export is a new lookup",
            "source": _line_of(cpfs, r"def diff\(self")},
        "ecs-queue-pairs": {
            "replace": qp_replace, "outputs": qp_outputs, "not_compared": qp_other,
            "delete_before_replace": False,
            "why": "a read-only lookup of the type's queue pairs (DescribeInstanceTypes), kept in state: only another "
                   "type or ERI count is a new lookup",
            "source": _line_of(qp, r"def diff\(self")},
        pc.KIND: {
            "replace": sorted(pc.REPLACE_KEYS), "outputs": sorted(pc.OUTPUT_KEYS), "not_compared": [],
            "updated": sorted(pc.UPDATE_KEYS), "update_effect": "next_instance_only",
            "update_why": "ModifyScalingConfiguration: only nodes ESS launches later get it, running nodes keep "
                          "what they were launched with (scaling_group_id is ForceNew, every other argument is "
                          "updated: terraform-provider-alicloud ace5bcf8 "
                          "resource_alicloud_ess_scaling_configuration.go:45-48)",
            "delete_before_replace": False,
            "why": "a scaling configuration belongs to one scaling group: another group or region is a new "
                   "configuration, created (and activated) before the old one is deleted",
            "source": _line_of(ess, r"def diff\(self")},
    }


def render(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=1, sort_keys=False) + "\n"


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tf-git-dir", type=Path, required=True, help="git directory of terraform-provider-alicloud")
    p.add_argument("--ref", required=True, help="tag or commit to read")
    p.add_argument("--pulumi-git-dir", type=Path, help="git directory of pulumi-alicloud (token and go.mod checks)")
    p.add_argument("--note", default=NOTE, help="why this ref (kept in the file)")
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--check", action="store_true", help="exit 1 if --out differs from what would be written")
    args = p.parse_args(argv)
    text = render(generate(args.tf_git_dir, args.ref, args.pulumi_git_dir, args.note))
    if args.check:
        same = args.out.is_file() and args.out.read_text(encoding="utf-8") == text
        print("up to date" if same else f"{args.out} is stale: regenerate it")
        return 0 if same else 1
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(args.out)
    print(f"wrote {args.out} ({len(json.loads(text)['resources'])} resource types)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
