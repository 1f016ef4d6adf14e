"""The profile's ``storage``, ``network`` and ``access`` sections: datasets and checkpoints, the
VPC's private addresses, and who may reach the nodes (nobody by default)."""

from __future__ import annotations

import ipaddress
import re
from typing import Literal, Optional

from pydantic import Field, field_validator, model_validator

from ..cidrs import ssh_source_problem
from ..ossuri import OssUriError, parse_oss_uri
from .base import _Strict


class StorageSpec(_Strict):
    dataset_gib: float = Field(0, ge=0, le=10_000_000)
    dataset_uri: Optional[str] = Field(None, max_length=1024)
    checkpoint: Literal["cpfs", "oss", "essd"] = "oss"
    checkpoint_gib: Optional[float] = Field(None, gt=0, le=1_000_000)
    retain_on_destroy: bool = True
    dataset_sync: Literal["stream", "at-boot"] = Field(
        "stream", description="stream: the job reads storage.dataset_uri itself; at-boot: every ECS node (a "
                              "replacement too) copies that oss:// prefix to its data disk in the background from "
                              "its first seconds, resuming after a reboot (TRAINSTACK_DATASET_DIR)")

    @model_validator(mode="after")
    def _copy_needs_a_source(self) -> "StorageSpec":
        if self.dataset_sync == "at-boot":
            if not (self.dataset_uri or "").startswith("oss://"):
                raise ValueError("dataset_sync: at-boot copies an oss:// dataset to each node's data disk; set "
                                 "storage.dataset_uri to an oss:// prefix (cpfs:// and nas:// are mounted, not "
                                 "copied), or dataset_sync: stream")
            if not self.dataset_uri.endswith("/"):  # type: ignore[union-attr]
                raise ValueError("dataset_sync: at-boot copies everything under a prefix; end storage.dataset_uri "
                                 "with / (the node role then reads that prefix, not one object of that name)")
            if self.dataset_gib <= 0:
                raise ValueError("dataset_sync: at-boot needs storage.dataset_gib (the data disk is sized to hold "
                                 "the copy)")
        return self

    @field_validator("dataset_uri")
    @classmethod
    def _uri(cls, v: Optional[str]) -> Optional[str]:
        if v and not re.fullmatch(r"(oss|cpfs|nas)://[^\s\x00-\x1f\x7f]+", v):
            raise ValueError("dataset_uri must start with oss://, cpfs:// or nas:// (one URI, no spaces or "
                             "control characters)")
        if v and v.startswith("oss://"):
            try:
                parse_oss_uri(v)
            except OssUriError as exc:
                raise ValueError(f"oss:// URI {exc}") from None
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
        # /28 at most: nodes take fixed addresses from host .10 on and Alibaba reserves 4 per vSwitch
        if not 8 <= net.prefixlen <= 28:
            raise ValueError("prefix length must be between /8 and /28 (nodes take fixed addresses from host .10 "
                             "on; a /29 has no room for one)")
        return v

    @model_validator(mode="after")
    def _inside(self) -> "NetworkSpec":
        if self.vswitch_cidr and not ipaddress.ip_network(self.vswitch_cidr).subnet_of(
                ipaddress.ip_network(self.vpc_cidr)):
            raise ValueError(f"vswitch_cidr {self.vswitch_cidr} is not inside vpc_cidr {self.vpc_cidr}")
        return self


class AccessSpec(_Strict):
    ssh_cidrs: tuple[str, ...] = Field((), strict=False)
    key_pair: Optional[str] = Field(None, max_length=128)

    @field_validator("key_pair")
    @classmethod
    def _key_pair_name(cls, v: Optional[str]) -> Optional[str]:
        # ECS KeyPairName: 2-128 characters, a letter first, then letters, digits, '.', '_', '-', ':'
        if v is not None and not re.fullmatch(r"[A-Za-z\u0080-\uffff][\w.:-]{1,127}", v):
            raise ValueError("must be an ECS key pair name: 2-128 characters, a letter first, then letters, "
                             "digits, '.', '_', '-' or ':'")
        return v

    @field_validator("ssh_cidrs")
    @classmethod
    def _cidrs(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for c in v:
            problem = ssh_source_problem(c)
            if problem:
                raise ValueError(problem)
        return v
