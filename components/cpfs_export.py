"""The NFS address of a CPFS protocol-service export, read from the NAS API at deploy time.

pulumi-alicloud 4.0's ``nas.ProtocolMountTarget`` outputs the export ID but not its domain, and
the nodes need ``<domain>`` to mount CPFS. ``CpfsExportAddress`` is a read-only dynamic
resource: on create/refresh it calls ``DescribeProtocolMountTarget`` (NAS API 2017-06-26,
filter ``ExportIds``) and returns ``ProtocolMountTargetDomain``; deleting it deletes nothing.
Credentials come from the Alibaba Cloud default credentials chain of the machine running
``pulumi up`` (environment variables, ``~/.aliyun/config.json`` profile, or an ECS RAM role).

The lookup function is a module-level name (:data:`lookup`) so tests can replace it.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

import pulumi
import pulumi.dynamic as dyn

from trainstack.errors import CloudApiError

NAS_API_VERSION = "2017-06-26"
ATTEMPTS = 10
RETRY_SECONDS = 15.0


def describe_export_domain(region: str, file_system_id: str, export_id: str) -> Optional[str]:
    """ProtocolMountTargetDomain of one export, or None while the API does not show it yet."""
    from alibabacloud_credentials.client import Client as CredentialClient
    from alibabacloud_tea_openapi.client import Client
    from alibabacloud_tea_openapi.models import Config, OpenApiRequest, Params
    from darabonba.runtime import RuntimeOptions

    client = Client(Config(credential=CredentialClient(), region_id=region, endpoint=f"nas.{region}.aliyuncs.com",
                           connect_timeout=10_000, read_timeout=30_000))
    params = Params(action="DescribeProtocolMountTarget", version=NAS_API_VERSION, protocol="HTTPS", pathname="/",
                    method="POST", auth_type="AK", style="RPC", req_body_type="formData", body_type="json")
    request = OpenApiRequest(query={"FileSystemId": file_system_id, "Filters.1.Key": "ExportIds",
                                    "Filters.1.Value": export_id})
    body = (client.call_api(params, request, RuntimeOptions()) or {}).get("body") or {}
    for target in body.get("ProtocolMountTargets") or []:
        if target.get("ExportId") == export_id and target.get("ProtocolMountTargetDomain"):
            return str(target["ProtocolMountTargetDomain"])
    return None


#: ``(region, file_system_id, export_id) -> domain | None``; tests replace it.
lookup: Callable[[str, str, str], Optional[str]] = describe_export_domain


def _domain(props: dict, sleep: Callable[[float], None] = time.sleep) -> str:
    region, fs, export = props["region"], props["file_system_id"], props["export_id"]
    for attempt in range(ATTEMPTS):
        try:
            domain = lookup(region, fs, export)
        except Exception as exc:  # SDK / credentials errors: say what failed, no traceback
            raise CloudApiError(f"DescribeProtocolMountTarget for {fs} export {export} in {region} failed: {exc}",
                                hint="check the Alibaba Cloud credentials of the machine running `pulumi up` "
                                     "(nas:DescribeProtocolMountTarget)") from None
        if domain:
            return domain
        if attempt + 1 < ATTEMPTS:
            sleep(RETRY_SECONDS)
    raise CloudApiError(f"CPFS {fs} export {export} has no mount domain yet; run `pulumi up` again in a few minutes")


class _Provider(dyn.ResourceProvider):
    def create(self, props: dict) -> dyn.CreateResult:
        outs = {**props, "domain": _domain(props)}
        return dyn.CreateResult(id_=f"{props['file_system_id']}:{props['export_id']}", outs=outs)

    def read(self, id_: str, props: dict) -> dyn.ReadResult:
        return dyn.ReadResult(id_=id_, outs={**props, "domain": _domain(props)})

    def diff(self, _id: str, olds: dict, news: dict) -> dyn.DiffResult:
        changed = [k for k in ("region", "file_system_id", "export_id") if olds.get(k) != news.get(k)]
        return dyn.DiffResult(changes=bool(changed), replaces=changed, delete_before_replace=False)

    def delete(self, _id: str, _props: dict) -> None:
        return None  # a lookup: nothing to delete


class CpfsExportAddress(dyn.Resource):
    """``domain``: the NFS mount target domain of a CPFS protocol-service export."""

    domain: pulumi.Output[str]

    def __init__(self, name: str, *, region: str, file_system_id: pulumi.Input[str], export_id: pulumi.Input[str],
                 opts: Optional[pulumi.ResourceOptions] = None):
        props: dict[str, Any] = {"kind": "cpfs-export-address", "region": region, "file_system_id": file_system_id,
                                 "export_id": export_id, "domain": None}
        super().__init__(_Provider(), name, props, opts)
