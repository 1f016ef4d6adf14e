"""The profile's ``job`` section: what runs on the nodes (or pods), with which environment, and
where each secret is read from at job start (``job.secrets``; the value never passes through
trainstack). ``command`` and ``env`` values are free text (tab and newline allowed); every other
string is one word without control characters."""

from __future__ import annotations

import re
from typing import Optional

from pydantic import Field, ValidationInfo, field_validator, model_validator

from .base import _no_control, _Strict

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
    FREE_TEXT = frozenset({"command", "env"})

    command: str = Field("python train.py", min_length=1, max_length=4096)
    image: Optional[str] = Field(None, max_length=512)
    code_uri: Optional[str] = Field(None, max_length=1024)
    env: dict[str, str] = Field(default_factory=dict)
    secrets: dict[str, JobSecret] = Field(
        default_factory=dict, description="Environment name the trainer sees -> where the node reads the value "
                                          "at job start ({kms_secret: NAME}); ECS nodes only")
    max_runtime_hours: Optional[float] = Field(None, gt=0, le=24 * 90, description="Hard stop; nodes stop billing")

    @field_validator("image", "code_uri")
    @classmethod
    def _uri_text(cls, v: Optional[str]) -> Optional[str]:
        _no_control(v, "URI")
        if v is not None and (not v.strip() or any(c.isspace() for c in v)):
            raise ValueError("must be one URI or image reference without spaces")
        if v is not None and v.startswith("oss://"):
            from ..ossuri import OssUriError, parse_oss_uri

            try:
                parse_oss_uri(v)
            except OssUriError as exc:
                raise ValueError(f"oss:// URI {exc}") from None
        return v

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
