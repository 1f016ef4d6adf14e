"""PAI-DLC CreateJob requests with the official SDK's models (``alibabacloud-pai-dlc20201203``).

``build_request_model(inputs)`` turns the plain job inputs (``trainstack.dlc_job.job_inputs``) plus
the ids known only at deploy time (workspace, VPC, vSwitch, security group, dataset ids) into the
SDK's ``CreateJobRequest``; the dynamic provider sends it. ``build_create_job_request`` is its
``to_map()``: the API body with the SDK's own PascalCase names, so a field name can never drift from
the installed SDK. ``redacted_request`` / ``preview_request`` are what ``trainstack plan`` shows.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from alibabacloud_pai_dlc20201203 import models as dlc_models

from ..dlc_job import (
    _DATA_SOURCE_FIELDS, SPOT_STRATEGY, UNKNOWN, WORKER, _int, _str_envs, deploy_time_image, job_inputs,
    memory_quantity,
    planned_datasets, spot_price_limit_per_minute, validate_inputs,
)
from ..plan import Plan
from ..secrets import redact




def _data_source(entry: Mapping[str, Any]) -> dlc_models.CreateJobRequestDataSources:
    unknown = sorted(set(entry) - set(_DATA_SOURCE_FIELDS))
    if unknown:
        raise ValueError(f"unknown DataSources field(s) {unknown}; allowed: {', '.join(_DATA_SOURCE_FIELDS)}")
    return dlc_models.CreateJobRequestDataSources(**{k: v for k, v in entry.items() if v is not None})


def build_request_model(inputs: Mapping[str, Any], *, image: Optional[str] = None) -> dlc_models.CreateJobRequest:
    """The SDK ``CreateJobRequest`` for the job inputs (plan inputs plus deploy-time ids). ``image``:
    the image a deploy-time lookup (``image_lookup``) found, or what a preview shows for it."""
    problems = validate_inputs(inputs)
    if not inputs.get("workspace_id"):
        problems.append(("workspace_id", "is required"))
    image = inputs.get("image") or image
    if not image:
        problems.append(("image", "is not resolved yet (image_lookup is answered at deploy time)"))
    if problems:
        raise ValueError("invalid DLC job inputs: " + "; ".join(f"{k} {r}" for k, r in problems))
    quota = inputs.get("resource_id")
    spec = dlc_models.JobSpec(type=WORKER, pod_count=_int(inputs["pod_count"]), image=image)
    if quota:
        spec.resource_config = dlc_models.ResourceConfig(
            cpu=str(_int(inputs["cpu_per_pod"])), gpu=str(_int(inputs["gpus_per_pod"])),
            memory=memory_quantity(inputs["memory_gib_per_pod"]))
    else:
        spec.ecs_spec = inputs["ecs_spec"]
    if inputs.get("spot"):
        spec.spot_spec = dlc_models.SpotSpec(
            spot_strategy=SPOT_STRATEGY, spot_price_limit=spot_price_limit_per_minute(inputs["spot_price_limit"]))
    user_vpc = None
    if inputs.get("vpc_id"):
        user_vpc = dlc_models.CreateJobRequestUserVpc(
            vpc_id=inputs["vpc_id"], switch_id=inputs.get("vswitch_id"),
            security_group_id=inputs.get("security_group_id"),
            # the API wants every CIDR of the VPC whenever a vSwitch is given
            extended_cidrs=[inputs["vpc_cidr"]] if inputs.get("vswitch_id") and inputs.get("vpc_cidr") else None)
    envs = _str_envs(inputs.get("envs"))
    data_sources = [_data_source(e) for e in (inputs.get("data_sources") or [])]
    return dlc_models.CreateJobRequest(
        display_name=inputs.get("display_name"),
        job_type=inputs["job_type"],
        job_specs=[spec],
        user_command=inputs["command"],
        workspace_id=inputs["workspace_id"],
        resource_id=quota or None,
        data_sources=data_sources or None,
        envs=envs or None,
        user_vpc=user_vpc,
        settings=dlc_models.JobSettings(enable_rdma=True) if inputs.get("enable_rdma") else None,
        job_max_running_time_minutes=_int(inputs.get("max_running_minutes")),
    )


def build_create_job_request(plan: Plan, *, workspace_id: str, vpc_id: Optional[str], vswitch_id: Optional[str],
                             security_group_id: Optional[str], data_sources: Sequence[Mapping[str, Any]]) -> dict:
    """The CreateJob API body for ``plan`` (PascalCase keys exactly as ``CreateJobRequest.to_map()``).

    ``data_sources`` entries use the SDK's ``CreateJobRequestDataSources`` argument names
    (``data_source_id``, ``mount_path``, ``mount_access``, ``uri``, ``options`` ...).
    """
    inputs = dict(job_inputs(plan), workspace_id=workspace_id, vpc_id=vpc_id, vswitch_id=vswitch_id,
                  security_group_id=security_group_id, data_sources=[dict(d) for d in data_sources])
    return build_request_model(inputs, image=preview_image(inputs)).to_map()


def preview_image(inputs: Mapping[str, Any]) -> Optional[str]:
    """What the request shows for an image looked up at deploy time (None when one is pinned)."""
    lookup = inputs.get("image_lookup")
    return None if inputs.get("image") or not lookup else deploy_time_image(lookup)


def redacted_request(plan: Plan, *, workspace_id: str, vpc_id: Optional[str], vswitch_id: Optional[str],
                     security_group_id: Optional[str], data_sources: Sequence[Mapping[str, Any]]) -> dict:
    """``build_create_job_request`` with secret-named keys and secret-shaped values replaced."""
    return redact(build_create_job_request(
        plan, workspace_id=workspace_id, vpc_id=vpc_id, vswitch_id=vswitch_id,
        security_group_id=security_group_id, data_sources=data_sources))


def preview_request(plan: Plan, stack: str = "dev") -> dict:
    """The redacted CreateJob body ``trainstack plan`` shows: ids that exist only after deploy are
    placeholders; a workspace pinned in ``dlc.workspace_id`` is shown as is."""
    d = plan.dlc
    workspace = d.workspace_id if d is not None and d.workspace_id else UNKNOWN
    sources = [spec.data_source(f"{UNKNOWN}: dataset {spec.dataset_name}") for spec in planned_datasets(plan, stack)]
    return redacted_request(plan, workspace_id=workspace, vpc_id=UNKNOWN, vswitch_id=UNKNOWN,
                            security_group_id=UNKNOWN, data_sources=sources)
