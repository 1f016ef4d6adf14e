"""The training profile's fields: frozen, strictly-typed models (names are a contract, docs/DESIGN.md).

Field-level and cross-field rules that need nothing but the profile live here; rules that need the
catalog or the resolved plan live in ``trainstack.rules``.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from ..architecture import Architecture, derive_architecture, presets

DNS_LABEL = re.compile(r"^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$")
SCHEMA_URL_COMMENT = "# yaml-language-server: $schema=../../profile.schema.json"
class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ModelSpec(_Strict):
    """Exactly one of ``preset``, ``architecture`` or ``params_b``."""

    preset: Optional[str] = Field(None, description="A name from `trainstack schema` presets, e.g. llama-3-8b")
    architecture: Optional[Architecture] = None
    params_b: Optional[float] = Field(None, gt=0, le=2000, description="Size in billions; shape derived")

    @model_validator(mode="after")
    def _exactly_one(self) -> "ModelSpec":
        given = [k for k in ("preset", "architecture", "params_b") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of preset, architecture, params_b (got {given or 'none'})")
        if self.preset is not None and self.preset not in presets():
            raise ValueError(f"unknown preset {self.preset!r}")
        return self

    def resolved_architecture(self) -> Architecture:
        if self.architecture is not None:
            return self.architecture
        if self.preset is not None:
            return presets()[self.preset].architecture
        return derive_architecture(float(self.params_b))  # type: ignore[arg-type]

    @property
    def label(self) -> str:
        if self.preset:
            return self.preset
        if self.params_b is not None:
            return f"{self.params_b:g}B (derived shape)"
        return "custom architecture"


class LoraSpec(_Strict):
    rank: int = Field(16, ge=1, le=1024)
    targets: Literal["attention", "all-linear"] = "attention"
    alpha: Optional[float] = Field(None, gt=0, description="Defaults to 2 x rank")


Method = Literal["full", "lora", "qlora", "pretrain"]
Precision = Literal["bf16", "bf16-mixed", "fp16-mixed", "fp8-mixed"]


class TrainingSpec(_Strict):
    method: Method = "full"
    precision: Precision = "bf16-mixed"
    optimizer: Literal["adamw", "adamw-8bit", "sgd", "adafactor"] = "adamw"
    micro_batch_size: int = Field(1, ge=1, le=4096)
    sequence_length: int = Field(2048, ge=16, le=1 << 20)
    gradient_checkpointing: bool = False
    lora: Optional[LoraSpec] = None
    zero_stage: int = Field(0, ge=0, le=3)
    tokens: Optional[float] = Field(None, gt=0, le=1e15, description="Total tokens to process")

    @model_validator(mode="after")
    def _lora_only_with_adapters(self) -> "TrainingSpec":
        if self.lora is not None and self.method not in ("lora", "qlora"):
            raise ValueError(f"a lora block is only valid with method lora or qlora, not {self.method!r}")
        return self

    @property
    def adapters(self) -> Optional[LoraSpec]:
        """The LoRA settings in force (defaults when a LoRA method omits the block)."""
        if self.method in ("lora", "qlora"):
            return self.lora or LoraSpec()
        return None


ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: KMS secret names: letters, digits and _ / + = . @ -, at most 192 (KMS CreateSecret, SecretName:
#: https://www.alibabacloud.com/help/en/kms/support/api-kms-createsecret)
KMS_SECRET_NAME = re.compile(r"[A-Za-z0-9_/+=.@-]{1,192}")
KMS_KEY_ID = re.compile(r"key-[A-Za-z0-9]{1,64}")


def _no_nul(value: str, what: str) -> None:
    if "\x00" in value:
        raise ValueError(f"{what} contains a NUL character, which no shell argument or variable can hold")


class JobSecret(_Strict):
    """Where the node reads one secret at job start (with its RAM role); the value never
    passes through trainstack. KMS Secrets Manager is the store; others may be added as keys."""

    kms_secret: str = Field(description="Name of a KMS Secrets Manager secret in the job's region")
    kms_key_id: Optional[str] = Field(
        None, description="The KMS key that encrypts the secret, if it is your own key: the node role then "
                          "also gets kms:Decrypt on it (GetSecretValue requires that)")

    @field_validator("kms_secret")
    @classmethod
    def _secret_name(cls, v: str) -> str:
        if not KMS_SECRET_NAME.fullmatch(v):
            raise ValueError("a KMS secret name is 1-192 letters, digits and _ / + = . @ -")
        return v

    @field_validator("kms_key_id")
    @classmethod
    def _key_id(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and not KMS_KEY_ID.fullmatch(v):
            raise ValueError("a KMS key id looks like key-xxxxxxxx (an alias cannot name a RAM policy resource)")
        return v


class JobSpec(_Strict):
    command: str = Field("python train.py", min_length=1, max_length=4096)
    image: Optional[str] = Field(None, max_length=512)
    code_uri: Optional[str] = Field(None, max_length=1024)
    env: dict[str, str] = Field(default_factory=dict)
    secrets: dict[str, JobSecret] = Field(
        default_factory=dict, description="Environment name the trainer sees -> where the node reads the value "
                                          "at job start ({kms_secret: NAME}); ECS nodes only")
    max_runtime_hours: Optional[float] = Field(None, gt=0, le=24 * 90, description="Hard stop; nodes stop billing")

    @field_validator("env")
    @classmethod
    def _env_names(cls, v: dict[str, str]) -> dict[str, str]:
        for k, value in v.items():
            if not ENV_NAME.fullmatch(k):
                raise ValueError(f"environment variable name {k!r} is not a valid shell name")
            _no_nul(value, f"job.env {k}")
        return v

    @field_validator("command", "code_uri")
    @classmethod
    def _shell_text(cls, v: Optional[str], info: ValidationInfo) -> Optional[str]:
        if v is not None:
            _no_nul(v, f"job.{info.field_name}")
        return v

    @field_validator("secrets")
    @classmethod
    def _secret_names(cls, v: dict[str, JobSecret]) -> dict[str, JobSecret]:
        for k in v:
            if not ENV_NAME.fullmatch(k):
                raise ValueError(f"secret environment name {k!r} is not a valid shell name")
        return v

    @model_validator(mode="after")
    def _secret_or_env(self) -> "JobSpec":
        if both := sorted(set(self.env) & set(self.secrets)):
            raise ValueError(f"{', '.join(both)} set in both job.env and job.secrets; keep one")
        return self


class ResourcesSpec(_Strict):
    target: Literal["auto", "ecs", "dlc"] = "auto"
    gpus: Union[Literal["auto"], int] = "auto"
    gpu_models: tuple[str, ...] = ()
    instance_types: tuple[str, ...] = Field((), description="Optional allow-list of ECS types")
    max_nodes: int = Field(8, ge=1, le=512)
    spot: Literal["never", "allow", "require"] = "allow"
    objective: Literal["cost", "time"] = "cost"
    deadline_hours: Optional[float] = Field(None, gt=0, le=24 * 365)
    max_hourly_cost: Optional[float] = Field(None, gt=0, description="CNY per hour")
    max_total_cost: Optional[float] = Field(None, gt=0, description="CNY")
    self_healing: bool = Field(
        False, description="Spot only: run the node in an ESS scaling group that replaces a reclaimed spot "
                           "node (1-node plans; checkpoints on oss or cpfs)")

    @field_validator("self_healing")
    @classmethod
    def _self_healing_needs_spot(cls, v: bool, info: ValidationInfo) -> bool:
        spot = info.data.get("spot")
        if v and spot == "never":
            raise ValueError("self_healing replaces reclaimed spot nodes; it needs resources.spot: allow or "
                             "require (spot is never)")
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
    image_tag: Optional[str] = Field(None, max_length=128, description="Tag of the PAI pytorch-training image")
    enable_rdma: Optional[bool] = None
    public_limits_raised: bool = Field(
        False, description="Your account manager raised PAI-DLC's public-resource limits (2 GPUs, 8 vCPU)")


class StorageSpec(_Strict):
    dataset_gib: float = Field(0, ge=0, le=10_000_000)
    dataset_uri: Optional[str] = Field(None, max_length=1024)
    checkpoint: Literal["cpfs", "oss", "essd"] = "oss"
    checkpoint_gib: Optional[float] = Field(None, gt=0, le=1_000_000)
    retain_on_destroy: bool = True

    @field_validator("dataset_uri")
    @classmethod
    def _uri(cls, v: Optional[str]) -> Optional[str]:
        if v and not re.match(r"^(oss|cpfs|nas)://\S+$", v):
            raise ValueError("dataset_uri must start with oss://, cpfs:// or nas://")
        return v


class NetworkSpec(_Strict):
    vpc_cidr: str = "10.0.0.0/16"
    vswitch_cidr: Optional[str] = None
    internet_egress: bool = False

    @field_validator("vpc_cidr", "vswitch_cidr")
    @classmethod
    def _private(cls, v: Optional[str]) -> Optional[str]:
        if v is None:
            return v
        net = ipaddress.ip_network(v, strict=True)
        if net.version != 4 or not net.is_private:
            raise ValueError("must be a private IPv4 CIDR such as 10.0.0.0/16")
        if not 8 <= net.prefixlen <= 29:
            raise ValueError("prefix length must be between /8 and /29")
        return v

    @model_validator(mode="after")
    def _inside(self) -> "NetworkSpec":
        if self.vswitch_cidr and not ipaddress.ip_network(self.vswitch_cidr).subnet_of(
                ipaddress.ip_network(self.vpc_cidr)):
            raise ValueError(f"vswitch_cidr {self.vswitch_cidr} is not inside vpc_cidr {self.vpc_cidr}")
        return self


class AccessSpec(_Strict):
    ssh_cidrs: tuple[str, ...] = ()
    key_pair: Optional[str] = Field(None, max_length=128)

    @field_validator("ssh_cidrs")
    @classmethod
    def _cidrs(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for c in v:
            net = ipaddress.ip_network(c, strict=False)
            if net.prefixlen == 0:
                raise ValueError(f"{c} opens SSH to the whole internet; list your office or VPN CIDRs")
            if not net.is_private and net.prefixlen < (16 if net.version == 4 else 32):
                raise ValueError(f"{c} opens SSH to {net.num_addresses:,} public addresses; use a /16 or "
                                 "narrower office or VPN range")
        return v


class TrainingProfile(_Strict):
    """A whole profile. Field names are a contract (docs/DESIGN.md)."""

    name: str = Field(description="DNS-safe: lowercase letters, digits, '-'; at most 63")
    region: str = "cn-shenzhen"
    zone: Optional[str] = None
    model: ModelSpec
    training: TrainingSpec = Field(default_factory=TrainingSpec)
    job: JobSpec = Field(default_factory=JobSpec)
    resources: ResourcesSpec = Field(default_factory=ResourcesSpec)
    dlc: DlcSpec = Field(default_factory=DlcSpec)
    storage: StorageSpec = Field(default_factory=StorageSpec)
    network: NetworkSpec = Field(default_factory=NetworkSpec)
    access: AccessSpec = Field(default_factory=AccessSpec)
    image_id: Optional[str] = Field(None, max_length=128)
    tags: dict[str, str] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _dns(cls, v: str) -> str:
        if not DNS_LABEL.match(v):
            raise ValueError("must be DNS-safe: lowercase letters, digits and '-', starting with a letter, at most 63")
        return v

    @field_validator("region")
    @classmethod
    def _region_shape(cls, v: str) -> str:
        if not re.fullmatch(r"[a-z]{2}-[a-z0-9-]+", v):
            raise ValueError("must look like cn-shenzhen")
        return v

    @field_validator("tags")
    @classmethod
    def _tags(cls, v: dict[str, str]) -> dict[str, str]:
        for k in v:
            if k.startswith(("trainstack:", "aliyun", "acs:")):
                raise ValueError(f"tag {k!r} uses a reserved prefix (trainstack:, aliyun, acs:)")
        return v

    @model_validator(mode="after")
    def _cross_field(self) -> "TrainingProfile":
        t, r = self.training, self.resources
        if r.gpus == 1 and t.zero_stage > 0:
            raise ValueError(f"zero_stage {t.zero_stage} shards over data-parallel GPUs; with gpus: 1 use zero_stage: 0")
        if self.zone and not self.zone.startswith(self.region):
            raise ValueError(f"zone {self.zone} is not in region {self.region}")
        if r.self_healing and r.target == "dlc":
            raise ValueError("resources.self_healing applies to ECS nodes; PAI-DLC (target: dlc) restarts jobs itself")
        if r.self_healing and self.storage.checkpoint == "essd":
            raise ValueError("resources.self_healing needs storage.checkpoint: oss or cpfs; a replacement node "
                             "cannot reach checkpoints on the reclaimed node's ESSD")
        if r.target == "dlc" and r.instance_types and self.dlc.resource_id:
            raise ValueError("resources.instance_types does not apply to a DLC quota job (dlc.resource_id)")
        return self

    @property
    def architecture(self) -> Architecture:
        return self.model.resolved_architecture()
