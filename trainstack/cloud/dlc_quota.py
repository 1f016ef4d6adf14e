"""The resource quota a DLC job is planned on, read at deploy time (PAI Studio ``GetQuota``).

Offline, trainstack plans a quota job for the node ``dlc.quota_spec`` names (or one assumed from
``resources.gpu_models``). Before ``CreateJob`` the DLC provider reads the real quota and refuses a
job the quota cannot run, with a clear error instead of a job that queues forever:
:func:`quota_problems` (pure) compares the quota's kind (Lingjun or not), node specs and allocatable
GPU, CPU and memory with the job's pods [PAISTUDIO-QUOTA].
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Mapping, Optional

from ..lazy import LazyModule
from .credentials import sdk_config

if TYPE_CHECKING:
    from alibabacloud_paistudio20220112 import client as ps_client, models as ps
else:  # the SDK only when a quota is read
    ps_client = LazyModule("alibabacloud_paistudio20220112.client")
    ps = LazyModule("alibabacloud_paistudio20220112.models")

_UNITS = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "ki": 2 ** 10, "mi": 2 ** 20, "gi": 2 ** 30, "ti": 2 ** 40}


def default_quota_client(region: str) -> Any:
    """The real PAI Studio client of ``region`` (endpoint from the SDK's own rule); no network I/O."""
    return ps_client.Client(sdk_config(region, connect_timeout=10_000, read_timeout=30_000))


def get_quota(client: Any, quota_id: str, call) -> Any:
    return call("GetQuota", lambda: client.get_quota(quota_id, ps.GetQuotaRequest(verbose=False))).body


def quantity(value: Any) -> Optional[float]:
    """A Kubernetes-style quantity (``"96"``, ``"1600Gi"``, ``"500m"`` CPU) as a number (bytes for memory)."""
    if value is None or value == "":
        return None
    m = re.fullmatch(r"\s*([0-9.]+)\s*([KMGTkmgt]i?)?\s*", str(value))
    if not m:
        return None
    unit = (m.group(2) or "").lower()
    if unit == "m" and m.group(2) == "m":  # milli-CPU
        return float(m.group(1)) / 1000
    return float(m.group(1)) * _UNITS[unit]


def quota_problems(quota: Any, inputs: Mapping[str, Any]) -> list[str]:
    """Why the quota cannot run the job's pods (empty when it can, or when the quota says too little)."""
    out: list[str] = []
    qid = inputs.get("resource_id")
    kind = str(getattr(quota, "resource_type", "") or "")
    planned_kind = inputs.get("quota_kind")
    if planned_kind == "lingjun" and kind and kind.lower() != "lingjun":
        out.append(f"quota {qid} is a {kind} quota, the job was planned for Lingjun (dlc.quota_spec "
                   f"{inputs.get('quota_spec')})")
    if planned_kind == "general" and kind.lower() == "lingjun":
        out.append(f"quota {qid} is a Lingjun quota, the job was planned for ECS nodes {inputs.get('quota_spec')}: "
                   "set dlc.quota_spec to its Lingjun spec")
    specs = [getattr(n, "type", None) for n in (getattr(getattr(quota, "min", None), "node_specs", None) or [])]
    specs = [s for s in specs if s]
    if inputs.get("quota_spec") and specs and inputs["quota_spec"] not in specs:
        out.append(f"quota {qid} has nodes {', '.join(specs)}; the job was sized for {inputs['quota_spec']} "
                   "(dlc.quota_spec)")
    pods = int(inputs.get("pod_count") or 1)
    free = getattr(getattr(quota, "quota_details", None), "allocatable_quota", None)
    if free is not None:
        for what, have, per_pod, unit in (
                ("GPUs", quantity(getattr(free, "gpu", None)), inputs.get("gpus_per_pod"), 1),
                ("vCPU", quantity(getattr(free, "cpu", None)), inputs.get("cpu_per_pod"), 1),
                ("GiB of memory", quantity(getattr(free, "memory", None)), inputs.get("memory_gib_per_pod"), 2 ** 30)):
            if have is None or per_pod is None:
                continue
            need = float(per_pod) * pods
            if need > have / unit + 1e-9:
                out.append(f"the job needs {need:g} {what} ({pods} pod(s) x {float(per_pod):g}); quota {qid} can "
                           f"allocate {have / unit:g}")
    return out
