"""The profile's ``resources`` and ``dlc`` sections: how many GPUs of which kind, spot or not, the
budget, and the PAI-DLC workspace, quota and image a DLC job uses.

Cloud ids are checked by the shape Alibaba's API references give them: no published grammar
exists for a PAI workspace or quota id, so an id is what every example has, 1-128 letters, digits,
``-`` and ``_`` starting with a letter or digit (the price book's ``resource_id`` rule,
trainstack/catalog/price_book.py); the examples: WorkspaceId ``ws123***`` (PAI API, data type
WorkspaceIdName, https://www.alibabacloud.com/help/en/pai/developer-reference/api-paistudio-2022-01-12-struct-workspaceidname),
quota ids such as ``quota1a2b3c4d`` (docs/dlc.md). An image tag follows the OCI distribution grammar,
``[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`` (github.com/distribution/reference, regexp.go ``tag``).
"""

from __future__ import annotations

import re
from typing import Any, Literal, Optional, Union

from pydantic import Field, ValidationInfo, field_validator, model_validator

from .base import _Strict

CLOUD_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")
IMAGE_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
#: an ECS instance type (ecs.gn7i-c8g1.2xlarge) or a Lingjun spec (ml.gu7xf.c96m1600.8-gu108)
NODE_SPEC = re.compile(r"[a-z][a-z0-9]*(\.[A-Za-z0-9-]+)+")


class ResourcesSpec(_Strict):
    target: Literal["auto", "ecs", "dlc"] = "auto"
    gpus: Union[Literal["auto"], int] = "auto"
    gpu_models: tuple[str, ...] = Field((), strict=False)
    instance_types: tuple[str, ...] = Field((), strict=False, description="Optional allow-list of ECS types")
    max_nodes: int = Field(8, ge=1, le=512)
    spot: Literal["never", "allow", "require"] = "allow"
    objective: Literal["cost", "time"] = "cost"
    deadline_hours: Optional[float] = Field(None, gt=0, le=24 * 365)
    max_hourly_cost: Optional[float] = Field(None, gt=0, le=1e6, description="CNY per hour")
    max_total_cost: Optional[float] = Field(None, gt=0, le=1e10, description="CNY")
    memory_margin_percent: float = Field(
        3.0, ge=0, le=50, description="GPU memory (share of usable) a plan must leave free after the estimate's "
                                      "required memory; below it a GPU does not fit")
    self_healing: bool = Field(
        False, description="Spot only: an ESS scaling group replaces a reclaimed spot node (checkpoints on oss or "
                           "cpfs). Several nodes: node 0 runs on-demand and hosts torchrun's elastic rendezvous, the "
                           "others are spot in the group; needs spot: allow, checkpoints on cpfs and a torchrun launch "
                           "(docs/self-healing.md)")
    spot_price_limit: Optional[float] = Field(
        None, gt=0, le=100_000, description="Spot only: the most to pay per node, CNY/h (default: the on-demand "
                                            "price, kept after creation; a stated limit is managed and changing it "
                                            "replaces the spot nodes)")
    capacity: Literal["never", "reserve"] = Field(
        "never", description="reserve: an immediate capacity reservation for the plan's type, zone and nodes, made "
                             "before the nodes; it bills the pay-as-you-go rate while it exists and covers on-demand "
                             "nodes only (docs/capacity.md)")

    @field_validator("capacity")
    @classmethod
    def _reserve_on_demand_ecs(cls, v: str, info: ValidationInfo) -> str:
        spot, target = info.data.get("spot"), info.data.get("target")
        if v == "reserve" and spot != "never":  # Alibaba: capacity reservations cover pay-as-you-go, never spot
            raise ValueError(f"reserve covers on-demand (pay-as-you-go) nodes only, never spot, and resources.spot is "
                             f"{spot}; allowed: never, or reserve with resources.spot: never")
        if v == "reserve" and target == "dlc":
            raise ValueError("reserve holds ECS capacity and resources.target is dlc (PAI schedules on its own pools); "
                             "allowed: never, or reserve with resources.target: ecs or auto")
        return v

    @field_validator("self_healing")
    @classmethod
    def _self_healing_needs_spot(cls, v: bool, info: ValidationInfo) -> bool:
        spot = info.data.get("spot")
        if v and spot == "never":
            raise ValueError("self_healing replaces reclaimed spot nodes; it needs resources.spot: allow or "
                             "require (spot is never)")
        return v

    @field_validator("spot_price_limit")
    @classmethod
    def _limit_needs_spot(cls, v: Optional[float], info: ValidationInfo) -> Optional[float]:
        if v is not None and info.data.get("spot") == "never":
            raise ValueError("spot_price_limit applies to spot nodes; resources.spot is never")
        return v

    @field_validator("gpus")
    @classmethod
    def _positive(cls, v: Any) -> Any:
        if isinstance(v, int) and not 1 <= v <= 8192:
            raise ValueError("gpus must be 'auto' or a whole number from 1 to 8192")
        return v


class DlcSpec(_Strict):
    workspace_id: Optional[str] = Field(None, max_length=128)
    resource_id: Optional[str] = Field(None, max_length=128, description="Resource quota ID (Lingjun/general)")
    job_type: Literal["PyTorchJob", "TFJob", "MPIJob", "XGBoostJob", "ElasticBatchJob", "RayJob"] = "PyTorchJob"
    image_tag: Optional[str] = Field(None, max_length=128, description="Tag of the PAI pytorch-training image; "
                                                                      "unset: the newest official image at deploy time")
    enable_rdma: Optional[bool] = None
    public_limits_raised: bool = Field(
        False, description="Your account manager raised PAI-DLC's public-resource limits (2 GPUs, 8 vCPU)")
    quota_spec: Optional[str] = Field(
        None, min_length=1, max_length=128,
        description="Node spec of the resource quota: an ECS type (general computing) or a Lingjun spec "
                    "(ml.gu7xf.c96m1600.8-gu108); sizes pods and sets the GPU. Needs dlc.resource_id")
    cpu_per_pod: Optional[int] = Field(
        None, ge=1, le=4096, description="vCPUs per pod of a quota job; default: the GPU share of the quota's node")
    memory_gib_per_pod: Optional[float] = Field(
        None, gt=0, le=65536, description="Memory (GiB) per pod of a quota job; default: the GPU share of the "
                                          "quota's node")

    @field_validator("workspace_id", "resource_id")
    @classmethod
    def _cloud_id(cls, v: Optional[str], info: ValidationInfo) -> Optional[str]:
        if v is not None and not CLOUD_ID.fullmatch(v):
            what = "PAI workspace" if info.field_name == "workspace_id" else "resource quota"
            raise ValueError(f"is not a {what} id: 1-128 letters, digits, '-' and '_', starting with a letter or "
                             "digit (as the PAI console shows it)")
        return v

    @field_validator("image_tag")
    @classmethod
    def _tag(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and not IMAGE_TAG.fullmatch(v):
            raise ValueError("is not an image tag: letters, digits, '_', '.' and '-', at most 128, not starting "
                             "with '.' or '-'")
        return v

    @field_validator("quota_spec")
    @classmethod
    def _spec(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and not NODE_SPEC.fullmatch(v):
            raise ValueError("is not a node spec: an ECS type (ecs.gn7i-c8g1.2xlarge) or a Lingjun spec "
                             "(ml.gu7xf.c96m1600.8-gu108)")
        return v

    @model_validator(mode="after")
    def _quota_fields(self) -> "DlcSpec":
        given = [k for k in ("quota_spec", "cpu_per_pod", "memory_gib_per_pod") if getattr(self, k) is not None]
        if given and not self.resource_id:
            raise ValueError(f"{', '.join('dlc.' + k for k in given)} apply to a resource quota job: set "
                             "dlc.resource_id (public-resource pods get the ECS spec's own CPU and memory)")
        return self
