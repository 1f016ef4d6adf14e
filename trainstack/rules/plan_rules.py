"""The plan rules of the rule book: what a resolved plan must pass before any component sees it.

ESSD sizes, tag counts, the self-healing pool, deployment-set groups, the launch (``job.command`` on
the plan's topology, reserved job variable names), the DLC job request, the node bootstrap
(user-data size), and the day-two rules (:mod:`.day_two`). :func:`plan_problems` returns them all.
"""

from __future__ import annotations

from typing import Callable, Optional

from ..catalog import dlc_facts, load_catalog
from ..errors import InputError, Problem
from ..layout import deployment_set_layout
from ..layout.storage import SCRATCH_GIB, local_data_gib
from ..plan import ESSD_MAX_GIB, ESSD_MIN_GIB, Plan
from ..tags import MAX_BUCKET_TAGS, MAX_TAGS, ROLE_CHECKPOINT, base_tags, node_tags, within_limit
from .alerts_rules import alerts_plan_problems
from .day_two import day_two_problems

#: ESS spot protection: 1 hour or none (``ScalingConfiguration.spot_duration``).
ESS_SPOT_DURATIONS = (0, 1)


def essd_problem(what: str, category: str, performance_level: Optional[str], size_gib: int,
                 path: str = "storage") -> Optional[Problem]:
    """A disk Alibaba would reject: ESSD PL3 needs >= 1261 GiB, PL2 >= 461, PL1 >= 20 [ESSD-DOC]."""
    if category != "cloud_essd" or performance_level is None:
        return None
    low = ESSD_MIN_GIB[performance_level]
    if low <= size_gib <= ESSD_MAX_GIB:
        return None
    return Problem(path=path, message=f"{what}: ESSD {performance_level} needs {low}..{ESSD_MAX_GIB} GiB, "
                                      f"the plan has {size_gib} GiB")


def _disks(plan: Plan) -> list[Optional[Problem]]:
    if plan.target != "ecs":
        return []
    st = plan.storage
    out = [essd_problem("system disk", st.system_disk_category, st.system_disk_performance_level, st.system_disk_gib)]
    if st.data_disk is not None:
        out.append(essd_problem("data disk", st.data_disk.category, st.data_disk.performance_level,
                                st.data_disk.size_gib, path="storage.dataset_gib"))
    if st.checkpoint_disk is not None:
        out.append(essd_problem("checkpoint disk", st.checkpoint_disk.category, st.checkpoint_disk.performance_level,
                                st.checkpoint_disk.size_gib, path="storage.checkpoint_gib"))
    return out


def _dataset_copy(plan: Plan) -> list[Optional[Problem]]:
    """A dataset copied at boot must fit the data disk, which is sized for it up to the largest ESSD."""
    st = plan.storage
    if plan.target != "ecs" or st.dataset_sync != "at-boot":
        return []
    need = local_data_gib(st.dataset_gib)
    if st.data_disk is not None and st.data_disk.size_gib >= need:
        return []
    return [Problem(path="storage.dataset_sync", given="at-boot", has_given=True,
                    allowed="stream (the job reads storage.dataset_uri), or a smaller storage.dataset_gib",
                    message=f"a {st.dataset_gib:,.0f} GiB dataset copied at boot needs a {need:,.0f} GiB data disk "
                            f"(the dataset x 1.2 and {SCRATCH_GIB} GiB of scratch), over the largest ESSD "
                            f"({ESSD_MAX_GIB:,} GiB)")]


def checkpoint_disks_planned(plan: Plan) -> bool:
    """Checkpoints on standalone, retained ESSDs (one per node)."""
    return plan.target == "ecs" and plan.storage.checkpoint_disk is not None


def _spot_pool(plan: Plan) -> list[Optional[Problem]]:
    """A self-healing pool the plan can run (docs/self-healing.md); the launcher's side (torchrun
    elastic only) is the launch check's (trainstack.launchers.check_command)."""
    path = "resources.self_healing"
    pool = plan.spot_pool
    if pool is None:
        if plan.self_healing and plan.target == "ecs" and plan.spot and plan.nodes > 1:  # never silently ignored
            return [Problem(path="resources.spot_price_limit", message=(
                f"a {plan.nodes}-node self-healing plan needs a spot price limit for its ESS pool, and there is "
                "none (no stated limit, and no on-demand price to default to)"), allowed="a price in CNY/h")]
        return []
    if not plan.spot or plan.spot_strategy != "SpotWithPriceLimit":
        return [Problem(path=path, message="a self-healing spot pool needs spot nodes with a price limit")]
    if checkpoint_disks_planned(plan):
        return [Problem(path=path, message="a self-healing spot pool cannot keep checkpoints on ESSD (a replacement "
                                           "node cannot reach the reclaimed node's disk): use oss or cpfs")]
    if plan.spot_duration_hours not in ESS_SPOT_DURATIONS:
        return [Problem(path=path, message=f"ESS spot protection is 0 or 1 hour, the plan has "
                                           f"{plan.spot_duration_hours}")]
    if not pool.anchor:
        return []
    out: list[Optional[Problem]] = []
    if not pool.compensate_with_on_demand:
        out.append(Problem(path="resources.spot", given="require", has_given=True,
                           allowed="allow (with resources.self_healing), or resources.max_nodes: 1",
                           message=f"a {plan.nodes}-node self-healing plan runs node 0 on-demand (it hosts the "
                                   "rendezvous every replacement node joins), and spot: require allows no "
                                   "on-demand node"))
    if plan.storage.checkpoint != "cpfs":
        out.append(Problem(path="storage.checkpoint", given=plan.storage.checkpoint, has_given=True,
                           allowed="cpfs (with resources.self_healing on several nodes)",
                           message=f"a {plan.nodes}-node self-healing plan needs its checkpoints on CPFS: after a "
                                   "replacement, torchrun's rendezvous may give a surviving node another rank, so "
                                   "every rank's checkpoint shard must be readable from every node"))
    if plan.network.pool_vswitch_cidr is None:
        out.append(Problem(path=path, message="a multi-node self-healing pool needs its own vSwitch (the node "
                                              "vSwitch holds fixed IPs only)"))
    return out


def _tags(plan: Plan) -> list[Optional[Problem]]:
    out: list[Optional[Problem]] = []

    def count(build: Callable[[], dict], limit: int, what: str) -> None:
        try:
            within_limit(build(), limit, what)
        except InputError as exc:
            out.append(Problem(path="tags", message=exc.message, given=len(plan.tags), has_given=True,
                               allowed=exc.hint))

    if plan.target == "ecs":
        count(lambda: node_tags(plan, plan.zone or "zone-unknown", max(0, plan.nodes - 1), "0" * 64), MAX_TAGS,
              "a GPU node")
    else:
        count(lambda: base_tags(plan), MAX_TAGS, "a trainstack resource")
    if plan.storage.oss is not None:
        count(lambda: base_tags(plan, role=ROLE_CHECKPOINT), MAX_BUCKET_TAGS, "an OSS bucket")
    return out


def _deployment_sets(plan: Plan) -> list[Optional[Problem]]:
    try:
        deployment_set_layout(plan)
    except InputError as exc:
        return [Problem(path="resources.max_nodes", message=exc.message)]
    return []


def _launch(plan: Plan) -> list[Optional[Problem]]:
    """job.command on the plan's topology, and job.env / job.secrets names trainstack reserves
    (trainstack.launchers; the node bootstrap and the DLC request raise the same problems)."""
    # launchers/ and bootstrap/ load with the first rule that reads the job, not at the CLI's start
    from ..bootstrap import check_job
    from ..launchers.dlc import dlc_job_problems

    if plan.target == "dlc":
        return list(dlc_job_problems(plan))
    try:
        return list(check_job(plan))
    except ValueError as exc:  # what the node bootstrap refuses outright (a bad code_uri, a name)
        return [Problem(path="job", message=bootstrap_message(plan, 0, exc))]


def _dlc(plan: Plan) -> list[Optional[Problem]]:
    if plan.target != "dlc" or plan.dlc is None:
        return []
    # launchers/ and bootstrap/ load with the first rule that reads the job, not at the CLI's start
    from ..dlc_job import job_inputs, planned_datasets, validate_inputs
    from ..launchers import LaunchError

    d = plan.dlc
    if d.resource_id and not d.workspace_id:
        return [Problem(path="dlc.resource_id", given=d.resource_id, has_given=True,
                        message="a resource quota needs dlc.workspace_id: it is usable only in a workspace it is "
                                "attached to, and a workspace trainstack creates has none",
                        allowed="set dlc.workspace_id to the workspace the quota is attached to")]
    out: list[Optional[Problem]] = list(_pod_fits_node(plan))
    for step in (lambda: job_inputs(plan), lambda: planned_datasets(plan, "")):
        try:
            result = step()
        except LaunchError:
            continue  # reported by _launch
        except InputError as exc:
            out.append(Problem(path="dlc", message=exc.message, allowed=exc.hint))
            continue
        if isinstance(result, dict):
            out += [Problem(path=f"dlc.{key}", message=f"{key} {why}") for key, why in validate_inputs(result)]
    return out


def _pod_fits_node(plan: Plan) -> list[Problem]:
    """A quota pod asks for no more vCPU or memory than one node of ``dlc.quota_spec`` has."""
    d = plan.dlc
    if d is None or not d.resource_id or not d.quota_spec:
        return []
    catalog = load_catalog()
    if catalog.knows(d.quota_spec):
        node = catalog.instance(d.quota_spec).type
        vcpu, memory = node.vcpu, node.memory_gib
    else:
        spec = next((s for s in dlc_facts().lingjun_specs if s.name == d.quota_spec), None)
        stated, reading = (spec.stated, spec.name_reading) if spec else (None, None)
        vcpu = (stated.vcpu if stated else None) or (reading.vcpu if reading else None)
        memory = (stated.memory_gib if stated else None) or (reading.memory_gib if reading else None)
    out = []
    for key, asked, has, unit in (("cpu_per_pod", d.cpu_per_pod, vcpu, "vCPU"),
                                  ("memory_gib_per_pod", d.memory_gib_per_pod, memory, "GiB")):
        if asked is not None and has is not None and asked > has:
            out.append(Problem(path=f"dlc.{key}", given=asked, has_given=True, allowed=f"at most {has:g}",
                               message=f"a pod cannot have more than one {d.quota_spec} node's {has:g} {unit}"))
    return out


def bootstrap_problem(plan: Plan, rank: int) -> Optional[Problem]:
    """What the node bootstrap of ``rank`` refuses (user-data size, a command the launcher cannot run)."""
    # launchers/ and bootstrap/ load with the first rule that reads the job, not at the CLI's start
    from ..bootstrap import render_user_data
    from ..launchers import LaunchError

    try:
        render_user_data(plan, rank)
    except LaunchError:
        return None  # reported by _launch
    except ValueError as exc:
        return Problem(path="job", message=bootstrap_message(plan, rank, exc))
    return None


def bootstrap_message(plan: Plan, rank: int, exc: Exception) -> str:
    return f"bootstrap of {plan.name} node {rank}: {exc}"


def _bootstrap(plan: Plan) -> list[Optional[Problem]]:
    if plan.target != "ecs":
        return []
    # ranks differ only in their numbers: the first and the last (longest) stand for all
    return [bootstrap_problem(plan, rank) for rank in sorted({0, plan.nodes - 1})]


PLAN_RULES: tuple[Callable[[Plan], list[Optional[Problem]]], ...] = (
    _disks, _dataset_copy, _spot_pool, _tags, _deployment_sets, _launch, _dlc, alerts_plan_problems, _bootstrap,
    day_two_problems)


def plan_problems(plan: Plan) -> list[Problem]:
    """Every plan rule's problems, in the order of :data:`PLAN_RULES`."""
    return [p for rule in PLAN_RULES for p in rule(plan) if p is not None]


