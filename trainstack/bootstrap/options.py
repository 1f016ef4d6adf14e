"""The bootstrap's knobs the Plan does not decide (driver and CUDA versions, ports, timeouts, the
checkpoint signal, what happens at job end), each with a documented default (docs/bootstrap.md) and
validated once, so a rendered script never carries a malformed value."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

_VERSION = re.compile(r"^[0-9]+(\.[0-9A-Za-z]+)*$")
_SCRIPT_NAME = re.compile(r"^[A-Za-z0-9._-]+\.sh$")
_PINNED = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==[0-9][0-9A-Za-z.+!-]*$")
_CHECKPOINT_SIGNALS = ("USR1", "USR2")
_STOP_ON = ("always", "success", "never")


@dataclass(frozen=True)
class BootstrapOptions:
    """Knobs the Plan does not decide, each with a documented default (docs/bootstrap.md)."""

    driver_version: str = "570.133.20"
    cuda_version: str = "12.8.1"
    cudnn_version: str = "9.8.0.87"
    auto_install_script: str = "auto_install_v4.0.sh"
    driver_wait_seconds: int = 2400
    erdma_version: str = "1.4.5"
    pip_index_url: str = "http://mirrors.cloud.aliyuncs.com/pypi/simple/"
    torch_spec: str = "torch==2.7.1"
    oss_sdk_spec: str = "alibabacloud-oss-v2==1.4.1"
    install_requirements: bool = True
    master_port: int = 29500
    rdzv_timeout_seconds: int = 1800
    nccl_check_timeout_seconds: int = 300
    require_rdma: bool = True
    checkpoint_signal: str = "USR1"
    checkpoint_grace_seconds: int = 300
    kill_after_seconds: int = 30
    spot_poll_seconds: float = 5.0
    ckpt_sync_seconds: int = 300
    heartbeat_seconds: int = 60
    stop_on: str = "always"
    poweroff_fallback: bool = True
    setup_timeout_seconds: int = 5400
    data_disk_wait_seconds: int = 900

    def __post_init__(self) -> None:
        for name in ("driver_version", "cuda_version", "cudnn_version", "erdma_version"):
            if not _VERSION.match(getattr(self, name)):
                raise ValueError(f"bootstrap option {name}={getattr(self, name)!r} is not a version")
        if urlsplit(self.pip_index_url).scheme not in ("http", "https"):
            raise ValueError("bootstrap option pip_index_url must be an http(s) URL")
        if not _PINNED.match(self.oss_sdk_spec):
            raise ValueError("bootstrap option oss_sdk_spec must pin one version: alibabacloud-oss-v2==X.Y.Z")
        if not _SCRIPT_NAME.match(self.auto_install_script):
            raise ValueError("bootstrap option auto_install_script must be a plain *.sh file name")
        if self.checkpoint_signal not in _CHECKPOINT_SIGNALS:
            raise ValueError(f"checkpoint_signal must be one of {_CHECKPOINT_SIGNALS}: torchrun must be "
                             "able to ignore it while it still stops on SIGTERM")
        if self.stop_on not in _STOP_ON:
            raise ValueError(f"stop_on must be one of {_STOP_ON}")
        if not 1024 <= self.master_port <= 65534:
            raise ValueError("master_port must be in 1024..65534 (the NCCL check uses master_port + 1)")
        for name in ("driver_wait_seconds", "rdzv_timeout_seconds", "nccl_check_timeout_seconds",
                     "checkpoint_grace_seconds", "kill_after_seconds", "ckpt_sync_seconds", "heartbeat_seconds",
                     "setup_timeout_seconds", "data_disk_wait_seconds"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"bootstrap option {name} must be a positive integer")
        if not 0 < self.spot_poll_seconds <= 60:
            raise ValueError("spot_poll_seconds must be in (0, 60]: the notice is only 5 minutes")
