"""PAI-DLC job inputs, built from a Plan without Pulumi, SDKs or network I/O.

``job_inputs(plan)`` gives the plain values of the DLC job (``kind: pai-dlc-job``, ECS spec or
quota, pod count, RDMA, spot, image, command, envs ...); ``components.dlc.DlcJob`` carries exactly
these as its inputs, so policies judge the same values that are sent. ``validate_inputs`` is the
provider's ``check`` and a rule of the rule book. ``planned_datasets`` are the PAI datasets the job
mounts. The SDK request is built from these in ``trainstack.cloud.dlc_request``.

Units: ``DlcPlan.spot_price_limit`` is CNY per hour per pod, like every price in trainstack;
the API's ``SpotSpec.SpotPriceLimit`` is CNY per **minute** (SDK docstring and the SpotSpec API
page), so it is divided by 60 and rounded down to 4 decimals (never bid above the limit).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from .errors import InputError
from .launchers import LaunchError, dlc_command, topology_from_plan
from .launchers.dlc import dlc_job_problems
from .plan import Plan
from .tags import planned_price

KIND = "pai-dlc-job"
WORKER = "Worker"
SPOT_STRATEGY = "SpotWithPriceLimit"
#: Official PAI training image repository; the tag is always chosen by the user (never invented).
DEFAULT_IMAGE_REPOSITORY = "dsw-registry-vpc.{region}.cr.aliyuncs.com/pai/pytorch-training"
#: Where a ``storage.dataset_uri`` is mounted in every pod.
DATASET_MOUNT_PATH = "/mnt/dataset"
#: Where the OSS bucket is mounted when checkpoints do not go to OSS.
OSS_MOUNT_PATH = "/mnt/oss"
#: Statuses in which a job holds no resources and cannot be stopped.
TERMINAL_STATUSES = frozenset({"Succeeded", "Failed", "Stopped"})
#: Placeholder for an id that exists only after deploy (plan output).
UNKNOWN = "(known after deploy)"

#: Input names of the DlcJob resource set from the plan (``job_inputs``) ...
PLAN_INPUT_KEYS = (
    "kind", "region", "display_name", "job_type", "image", "image_lookup", "command", "envs", "ecs_spec",
    "resource_id", "pod_count", "gpus_per_pod", "cpu_per_pod", "memory_gib_per_pod", "enable_rdma", "spot",
    "spot_price_limit", "max_running_minutes", "vpc_cidr", "quota_spec", "quota_kind", "on_demand_cny_per_hour",
    "price_source",
)
#: ... and those known only at deploy time.
DEPLOY_INPUT_KEYS = ("workspace_id", "vpc_id", "vswitch_id", "security_group_id", "data_sources")
INPUT_KEYS = PLAN_INPUT_KEYS + DEPLOY_INPUT_KEYS
#: Inputs that describe the quota for the deploy-time check and the planned price per pod-hour for
#: policies (``gpu-hourly-budget``); a change in them alone never replaces a submitted job (the quota
#: itself is ``resource_id``; a new price-book entry must not restart training).
INFORMATIONAL_INPUT_KEYS = ("quota_spec", "quota_kind", "on_demand_cny_per_hour", "price_source")
#: Outputs of the DlcJob resource. ``image_resolved``: the image the job was submitted with (the
#: deploy-time lookup's answer is kept here, so a newer official image never replaces the job).
OUTPUT_KEYS = ("job_id", "status", "reason", "image_resolved")

_DATA_SOURCE_FIELDS = ("access_point_id", "data_source_id", "data_source_version", "enable_cache", "mount_access",
                       "mount_path", "options", "role_arn", "role_chain", "uri")


# ---------------------------------------------------------------------------------------------
# small pure helpers


def default_image(region: str, tag: Optional[str]) -> str:
    """The official PAI PyTorch training image of ``region`` with the user's ``tag``.

    There is no safe default tag offline (tags come from AIWorkspace ``ListImages``), so a missing
    tag is an error rather than a guess.
    """
    if not tag or not str(tag).strip():
        raise InputError(
            "no image for the DLC job: set job.image, or dlc.image_tag to pin a tag of "
            + DEFAULT_IMAGE_REPOSITORY.format(region=region),
            hint="list the official tags with PAI AIWorkspace ListImages (labels system.supported.dlc=true) "
                 "or in the PAI console; trainstack never invents a tag")
    return f"{DEFAULT_IMAGE_REPOSITORY.format(region=region)}:{str(tag).strip()}"


def deploy_time_image(lookup: Mapping[str, Any]) -> str:
    """What an offline plan shows for an image that is looked up at deploy time."""
    return (f"(resolved at deploy time: newest official PAI {lookup.get('repository')} GPU image with CUDA >= "
            f"{lookup.get('min_cuda')}, AIWorkspace ListImages labels {','.join(lookup.get('labels') or ())})")


def _check_image(image: Optional[str], region: str, lookup: Any = None) -> None:
    """An image must be given (or looked up at deploy time); the official PAI repository must carry a
    tag or digest (no implicit ``latest``, which would be a tag nobody chose)."""
    if not image and lookup is not None:
        return
    if not image:
        default_image(region, None)  # raises the explanatory error
    last = str(image).rsplit("/", 1)[-1]
    if "/pai/" in str(image) and ":" not in last and "@" not in last:
        raise InputError(f"DLC image {image!r} has no tag",
                         hint="pin one with dlc.image_tag or job.image (tags: PAI ListImages or the console)")


def spot_price_limit_per_minute(hourly_cny: float) -> float:
    """CNY/hour -> the API's CNY/minute, rounded down to 4 decimals (never above the hourly cap)."""
    per_minute = math.floor(float(hourly_cny) / 60 * 10_000 + 1e-9) / 10_000
    if per_minute <= 0:
        raise InputError(f"spot price limit {hourly_cny} CNY/h is too small for DLC (below 0.0001 CNY/min)")
    return per_minute


def memory_quantity(gib: float) -> str:
    """A memory size in the API's Kubernetes-style notation (``"10Gi"``, fractional as ``Mi``)."""
    value = float(gib)
    if value <= 0:
        raise InputError(f"memory per pod must be positive, got {gib}")
    return f"{int(value)}Gi" if value.is_integer() else f"{int(round(value * 1024))}Mi"


def workspace_name(plan_name: str, stack: str) -> str:
    """A PAI workspace name: 3-23 letters, digits or underscores, starting with a letter, unique per
    region, so it carries a short hash of stack and plan name."""
    base = re.sub(r"[^A-Za-z0-9_]", "_", plan_name)
    if not base[:1].isalpha():
        base = "ts_" + base
    digest = hashlib.sha256(f"{stack}/{plan_name}".encode()).hexdigest()[:4]
    return f"{base[:18]}_{digest}"


def _int(value: Any) -> Optional[int]:
    """Pulumi hands numbers to providers as floats; the API wants integers."""
    if value is None:
        return None
    if isinstance(value, float) and not value.is_integer():
        raise ValueError(f"expected a whole number, got {value}")
    return int(value)


def _str_envs(envs: Optional[Mapping[str, Any]]) -> dict[str, str]:
    return {str(k): str(v) for k, v in sorted((envs or {}).items())}


# ---------------------------------------------------------------------------------------------
# Plan -> plain job inputs


def job_inputs(plan: Plan) -> dict[str, Any]:
    """The plain inputs of the DLC job resource, from the plan alone (None values omitted)."""
    d = plan.dlc
    if plan.target != "dlc" or d is None:
        raise ValueError(f"plan {plan.name!r} targets {plan.target!r}; a DLC job needs target 'dlc' and plan.dlc")
    _check_image(d.image, plan.region, d.image_lookup)
    if problems := dlc_job_problems(plan):
        raise LaunchError(problems)
    envs: dict[str, str] = {}
    if d.enable_rdma:
        envs.update(plan.network.nccl_env)
    envs.update(d.envs)
    envs.update(plan.job.env)  # what the user wrote wins over planned defaults
    inputs: dict[str, Any] = {
        "kind": KIND,
        "region": plan.region,
        "display_name": plan.name,
        "job_type": d.job_type,
        # the launcher in PAI's PyTorchJob form: WORLD_SIZE/RANK (pods) -> node count/node rank
        "command": dlc_command(d.command, topology_from_plan(plan), plan.job.gradient_accumulation_steps),
        "envs": _str_envs(envs),
        "pod_count": d.pod_count,
        "gpus_per_pod": d.gpus_per_pod,
        "enable_rdma": d.enable_rdma,
        "spot": d.spot,
        "vpc_cidr": plan.network.vpc_cidr,
    }
    if d.image is not None:
        inputs["image"] = d.image
    else:
        inputs["image_lookup"] = d.image_lookup.model_dump(mode="json")  # type: ignore[union-attr]
    if d.quota_kind is not None:
        inputs["quota_kind"] = d.quota_kind

    if (price := planned_price(plan)) is not None:  # what policies price the job at (per pod-hour)
        inputs.update(on_demand_cny_per_hour=price.cny_per_hour, price_source=price.source)
    if d.quota_spec is not None:
        inputs["quota_spec"] = d.quota_spec
    if d.resource_id:
        missing = [n for n in ("cpu_per_pod", "memory_gib_per_pod") if getattr(d, n) is None]
        if missing:
            raise InputError(f"DLC quota job (dlc.resource_id {d.resource_id}) needs {' and '.join(missing)} "
                             "per pod for ResourceConfig: the quota's node size is unknown offline",
                             hint="set dlc." + " and dlc.".join(missing) + ", or dlc.quota_spec to a spec whose "
                                  "vCPU and memory are known")
        inputs.update(resource_id=d.resource_id, cpu_per_pod=d.cpu_per_pod, memory_gib_per_pod=d.memory_gib_per_pod)
        if d.ecs_spec:
            inputs["ecs_spec"] = d.ecs_spec  # informational for policies; not sent with a quota
    elif d.ecs_spec:
        inputs["ecs_spec"] = d.ecs_spec
    else:
        raise InputError("DLC job has neither an ECS spec (public resources) nor dlc.resource_id (quota)",
                         hint="set resources.instance_types / gpu_models, or dlc.resource_id for a quota")
    if d.spot:
        limit = d.spot_price_limit if d.spot_price_limit is not None else plan.spot_price_limit
        if limit is None:
            raise InputError("spot DLC job without a price limit",
                             hint="the limit defaults to the on-demand price per pod; the resolver sets "
                                  "dlc.spot_price_limit (CNY/h)")
        spot_price_limit_per_minute(limit)  # validates
        inputs["spot_price_limit"] = limit
    minutes = d.max_running_minutes
    if minutes is None and plan.job.max_runtime_hours:
        minutes = math.ceil(plan.job.max_runtime_hours * 60)
    if minutes is not None:
        inputs["max_running_minutes"] = minutes
    return inputs


def validate_inputs(inputs: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(property, reason)`` for each plain input the API would reject (provider ``check``).
    Values that are still unknown (preview) are skipped."""
    problems: list[tuple[str, str]] = []
    if inputs.get("kind") != KIND:
        problems.append(("kind", f"must be {KIND!r}"))
    for key in ("region", "command", "job_type"):
        if not inputs.get(key):
            problems.append((key, "is required"))
    if not inputs.get("image") and not inputs.get("image_lookup"):
        problems.append(("image", "is required (or image_lookup, resolved at deploy time)"))
    if not inputs.get("ecs_spec") and not inputs.get("resource_id"):
        problems.append(("ecs_spec", "set ecs_spec (public resources) or resource_id (quota)"))
    if inputs.get("resource_id"):
        for key in ("cpu_per_pod", "memory_gib_per_pod", "gpus_per_pod"):
            if inputs.get(key) is None:
                problems.append((key, "is required with resource_id (ResourceConfig)"))
    pods = inputs.get("pod_count")
    if not isinstance(pods, (int, float)) or pods < 1 or float(pods) != int(pods):
        problems.append(("pod_count", f"must be a whole number >= 1, got {pods!r}"))
    if inputs.get("spot") and not inputs.get("spot_price_limit"):
        problems.append(("spot_price_limit", "is required for a spot job (CNY/h per pod)"))
    return problems


# ---------------------------------------------------------------------------------------------
# datasets (what DlcTraining creates) and the offline preview


@dataclass(frozen=True)
class DatasetSpec:
    """One PAI dataset DlcTraining registers and the job mounts."""

    role: str                      # "checkpoints" | "dataset" | "oss"
    dataset_name: str
    data_source_type: str          # "OSS" | "NAS"
    uri: str
    mount_path: str
    mount_access: str              # "RW" | "RO"
    data_property: str = "DIRECTORY"  # the dataset's ``property``: DIRECTORY | FILE

    @property
    def options(self) -> str:
        """The dataset's ``options``: DLC's default mount path."""
        return json.dumps({"mountPath": self.mount_path})

    def data_source(self, data_source_id: Any) -> dict[str, Any]:
        """The CreateJob ``DataSources`` entry for this dataset once it has an id."""
        return {"data_source_id": data_source_id, "mount_path": self.mount_path, "mount_access": self.mount_access}


def _dir(path: str) -> str:
    return path if path.endswith("/") else path + "/"


def dataset_uri(uri: str, region: str) -> tuple[str, str]:
    """``(data_source_type, PAI uri)`` for a profile's ``oss://``, ``nas://`` or ``cpfs://`` URI.

    PAI wants ``oss://<bucket>.<endpoint>/<path>/`` and ``nas://<file system id>.<region>/<path>/``
    (CPFS file systems are NAS data sources with a ``cpfs-`` id). A bare bucket or file-system id
    gets the region's internal endpoint / region added.
    """
    m = re.fullmatch(r"(oss|nas|cpfs)://([^/]+)(/.*)?", uri)
    if not m:
        raise InputError(f"storage.dataset_uri {uri!r} is not an oss://, nas:// or cpfs:// URI")
    scheme, host, path = m.group(1), m.group(2), m.group(3) or "/"
    if scheme == "oss":
        if "." not in host:
            host = f"{host}.oss-{region}-internal.aliyuncs.com"
        return "OSS", f"oss://{host}{_dir(path)}"
    if "." not in host:
        host = f"{host}.{region}"
    return "NAS", f"nas://{host}{_dir(path)}"


def planned_datasets(plan: Plan, stack: str) -> list[DatasetSpec]:
    """The PAI datasets a DLC plan needs: the OSS checkpoint bucket and ``storage.dataset_uri``."""
    s = plan.storage
    if s.checkpoint == "essd":
        raise InputError("a DLC job has no ESSD data disks: use storage.checkpoint oss (or cpfs with an existing "
                         "CPFS in storage.dataset_uri)")
    if s.checkpoint == "oss" and s.oss is None:
        raise InputError("storage.checkpoint is oss but the plan has no OSS bucket")
    out: list[DatasetSpec] = []
    prefix = f"{plan.name}-{stack}"
    if s.oss is not None:
        ckpt = s.checkpoint == "oss"
        out.append(DatasetSpec(
            role="checkpoints" if ckpt else "oss", dataset_name=f"{prefix}-{'checkpoints' if ckpt else 'oss'}"[:127],
            data_source_type="OSS", uri=f"oss://{s.oss.bucket}.{s.oss.internal_endpoint}/{_dir(s.oss.prefix.lstrip('/'))}",
            mount_path=s.checkpoint_path if ckpt else OSS_MOUNT_PATH, mount_access="RW"))
    if s.dataset_uri:
        kind, uri = dataset_uri(s.dataset_uri, plan.region)
        on_fs = s.checkpoint == "cpfs"
        if on_fs and kind != "NAS":
            raise InputError("storage.checkpoint is cpfs but storage.dataset_uri is not a cpfs:// or nas:// file system")
        if on_fs and not (s.checkpoint_path + "/").startswith(DATASET_MOUNT_PATH + "/"):
            raise InputError(f"with checkpoint cpfs on DLC, checkpoints live on the dataset file system: "
                             f"checkpoint_path must be under {DATASET_MOUNT_PATH}, got {s.checkpoint_path}")
        out.append(DatasetSpec(role="dataset", dataset_name=f"{prefix}-dataset"[:127], data_source_type=kind, uri=uri,
                               mount_path=DATASET_MOUNT_PATH, mount_access="RW" if on_fs else "RO"))
    elif s.checkpoint == "cpfs":
        raise InputError("a DLC job cannot mount a CPFS that trainstack creates; set storage.dataset_uri to an "
                         "existing CPFS (cpfs://<file system id>/path) in the stack's VPC, or use checkpoint oss")
    return out
