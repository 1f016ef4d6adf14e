"""The offline stand-in for Alibaba Cloud: plain, plausible, clearly labelled answers.

What the mock engine answers when the program asks the cloud something:

* zone lookups (``alicloud:index/getZones``, ``alicloud:nas/getZones``) return the zones the caller
  gives (the plan's zone when it has one), else ``<region>-a``: a plausible id derived from the
  region, so every component sees one consistent zone;
* the stock lookup (``alicloud:ecs/getInstanceTypes``) says the type is in stock in those zones
  only, so an unpinned plan lands on its first fallback zone, as the offline plan shows it; the
  existing node vSwitch lookup (``alicloud:vpc/getSwitches``) finds none: offline, every run is a
  first deploy (components/zone.py);
* image lookups (``alicloud:ecs/getImages``) return :data:`FAKE_IMAGE_ID`, which is visibly not a
  real image: the real one is looked up by family at deploy time;
* the caller identity (``alicloud:index/getCallerIdentity``) answers :data:`FAKE_ACCOUNT_ID`, the
  stand-in account the stack bucket's name is derived from offline;
* anything else gets an empty result, and the recording marks it unanswered.

Deploy-time values the program needs to go on (a CPFS export's NFS domain, read from the NAS API
by a dynamic resource) get ``.invalid`` stand-ins (RFC 2606: never a real host); queue pairs an ERI
gets from DescribeInstanceTypes at deploy time get the stand-in :data:`FAKE_QUEUE_PAIRS` per ERI.

New resources get deterministic ids shaped like the real ones (``i-``, ``vpc-``, ...) with an
``offline`` infix, and their inputs echoed back as outputs plus the few computed properties the
program may read, so repeated runs give identical plans.
"""

from __future__ import annotations

import hashlib
from typing import Any, Callable, Optional, Sequence

from ..dlc_job import KIND as DLC_KIND

FAKE_IMAGE_ID = "m-offline-preview"
FAKE_ACCOUNT_ID = "offline-preview-account"
#: A stand-in, labelled in the plan's notes: the real figure is DescribeInstanceTypes' at deploy time.
FAKE_QUEUE_PAIRS = 0
DYNAMIC = "pulumi-python:dynamic:Resource"
FAKE_IMAGE_NAME = "offline preview: not a real image (looked up by family at deploy time)"

#: id prefixes Alibaba Cloud uses, by resource type token
ID_PREFIX = {
    "alicloud:vpc/network:Network": "vpc",
    "alicloud:vpc/switch:Switch": "vsw",
    "alicloud:ecs/securityGroup:SecurityGroup": "sg",
    "alicloud:ecs/instance:Instance": "i",
    "alicloud:ecs/ecsDeploymentSet:EcsDeploymentSet": "ds",
    "alicloud:ecs/hpcCluster:HpcCluster": "hpc",
    "alicloud:ecs/ecsDisk:EcsDisk": "d",
    "alicloud:ecs/eipAddress:EipAddress": "eip",
    "alicloud:vpc/natGateway:NatGateway": "ngw",
    "alicloud:vpc/snatEntry:SnatEntry": "snat",
    "alicloud:nas/fileSystem:FileSystem": "nas",
    "alicloud:nas/mountTarget:MountTarget": "mt",
    "alicloud:nas/accessGroup:AccessGroup": "ag",
    "alicloud:nas/protocolService:ProtocolService": "ptc",
    "alicloud:ram/role:Role": "role",
    "alicloud:ecs/ecsKeyPair:EcsKeyPair": "kp",
    "alicloud:ess/scalingGroup:ScalingGroup": "asg",
    "alicloud:ess/scalingConfiguration:ScalingConfiguration": "asc",
    "alicloud:ecs/capacityReservation:CapacityReservation": "crp",
}


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:12]


class OfflineCloud:
    """Answers for invokes and resource registrations; holds no state between calls."""

    def __init__(self, region: str, zones: Optional[Sequence[str]] = None):
        self.region = region
        self.zones = list(zones) if zones else [f"{region}-a"]
        self._invokes: dict[str, Callable[[dict], dict]] = {
            "alicloud:index/getZones:getZones": self._zones,
            "alicloud:nas/getZones:getZones": self._nas_zones,
            "alicloud:ecs/getImages:getImages": self._images,
            "alicloud:ecs/getInstanceTypes:getInstanceTypes": self._instance_types,
            "alicloud:vpc/getSwitches:getSwitches": self._switches,
            "alicloud:index/getCallerIdentity:getCallerIdentity": self._caller_identity,
        }

    # ---- invokes ---------------------------------------------------------------------------
    def invoke(self, token: str, args: dict) -> tuple[dict, bool]:
        """``(result, answered)`` with camelCase wire names, as a provider would reply."""
        handler = self._invokes.get(token)
        return (handler(args or {}), True) if handler else ({}, False)

    def _zones(self, args: dict) -> dict:
        itype = args.get("availableInstanceType")
        zones = [{"id": z, "localName": f"{z} (offline preview)",
                  "availableInstanceTypes": [itype] if itype else [],
                  "availableResourceCreations": ["Instance", "Disk", "VSwitch"],
                  "availableDiskCategories": ["cloud_essd"], "multiZoneIds": [], "slbSlaveZoneIds": []}
                 for z in self.zones]
        return {"id": self.region, "ids": list(self.zones), "zones": zones}

    def _nas_zones(self, args: dict) -> dict:
        fs_type = args.get("fileSystemType") or "standard"
        kinds = {"cpfs": [{"protocolType": "cpfs", "storageType": "advance_100"},
                          {"protocolType": "cpfs", "storageType": "advance_200"}]}
        return {"id": self.region, "zones": [
            {"zoneId": z, "instanceTypes": kinds.get(fs_type, [{"protocolType": "NFS", "storageType": "Performance"}])}
            for z in self.zones]}

    def _images(self, args: dict) -> dict:
        image = {"id": FAKE_IMAGE_ID, "imageId": FAKE_IMAGE_ID, "name": FAKE_IMAGE_NAME,
                 "description": FAKE_IMAGE_NAME, "imageFamily": args.get("imageFamily"),
                 "architecture": "x86_64", "osType": "linux", "status": "Available",
                 "imageOwnerAlias": args.get("owners") or "system"}
        return {"id": self.region, "ids": [FAKE_IMAGE_ID], "images": [image]}

    def _caller_identity(self, args: dict) -> dict:
        return {"id": FAKE_ACCOUNT_ID, "accountId": FAKE_ACCOUNT_ID, "identityType": "offline-preview",
                "arn": f"acs:ram::{FAKE_ACCOUNT_ID}:root"}

    def _instance_types(self, args: dict) -> dict:
        itype = args.get("instanceType")
        if not itype:
            return {"id": self.region, "ids": [], "instanceTypes": []}
        return {"id": self.region, "ids": [itype],
                "instanceTypes": [{"id": itype, "availabilityZones": list(self.zones)}]}

    def _switches(self, args: dict) -> dict:
        return {"id": self.region, "ids": [], "names": [], "vswitches": []}

    # ---- resources -------------------------------------------------------------------------
    def new_resource(self, type_: str, name: str, inputs: dict) -> tuple[str, dict[str, Any]]:
        """A deterministic id and the state a provider would return (inputs + computed)."""
        state = dict(inputs)
        if type_ == "alicloud:oss/bucket:Bucket" and inputs.get("bucket"):
            rid = str(inputs["bucket"])
            state.update(extranetEndpoint=f"oss-{self.region}.aliyuncs.com",
                         intranetEndpoint=f"oss-{self.region}-internal.aliyuncs.com")
            return rid, state
        prefix = ID_PREFIX.get(type_) or type_.rsplit(":", 1)[-1].lower()
        rid = f"{prefix}-offline{_digest(type_, name)}"
        if type_ == "alicloud:ecs/instance:Instance":
            state.setdefault("status", "Running")
            state.setdefault("availabilityZone", self.zones[0])
            state.setdefault("primaryIpAddress", inputs.get("privateIp"))
        elif type_ == "alicloud:vpc/network:Network":
            state.update(routeTableId=f"vtb-offline{_digest(rid)}", routerId=f"vrt-offline{_digest(rid)}")
        elif type_ == "alicloud:vpc/natGateway:NatGateway":
            state.update(snatTableIds=f"stb-offline{_digest(rid)}", forwardTableIds=f"ftb-offline{_digest(rid)}")
        elif type_ == "alicloud:ecs/eipAddress:EipAddress":
            state.update(ipAddress="203.0.113.10")  # TEST-NET-3: documentation range, never real
        elif type_ == "alicloud:nas/mountTarget:MountTarget":
            state.update(mountTargetDomain=f"{rid}.{self.region}.nas.aliyuncs.com")
        elif type_ == "alicloud:nas/protocolService:ProtocolService":
            state.update(protocolServiceId=rid)
        elif type_ == "alicloud:nas/protocolMountTarget:ProtocolMountTarget":
            state.update(exportId=f"exp-offline{_digest(rid)}")
        elif type_ == DYNAMIC:
            state.update(self._dynamic(inputs, rid))
        return rid, state

    def _dynamic(self, inputs: dict, rid: str) -> dict[str, Any]:
        """Outputs of trainstack's dynamic resources (recognised by their ``kind`` input)."""
        kind = inputs.get("kind")
        if kind == "cpfs-export-address":  # the NFS domain is read from the NAS API at deploy time
            return {"domain": f"{inputs.get('export_id')}.{self.region}.cpfs.offline-preview.invalid"}
        if kind == "ecs-queue-pairs":  # DescribeInstanceTypes QueuePairNumber, read at deploy time
            return {"max": FAKE_QUEUE_PAIRS, "per_eri": FAKE_QUEUE_PAIRS}
        if kind == DLC_KIND:
            return {"job_id": f"dlc-offline{_digest(rid)}", "status": "offline preview"}
        return {}
