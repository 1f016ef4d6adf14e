"""The rule book: every rule a profile and its plan must pass, in one place.

``validate``, ``resolve``, ``plan`` and the Pulumi program all go through :func:`planned` (or its
two halves), so they agree: a profile ``validate`` accepts never fails ``plan`` with exit 2, and a
plan the rule book accepts never fails in component code. Two kinds of rules:

* profile rules that need the catalog (:func:`profile_problems`): names the catalog must know, and
  the names trainstack derives from ``name`` (host names, instance names) within Alibaba's rules;
* plan rules that need the resolution (:func:`plan_problems`): ESSD sizes, tag counts, the
  self-healing pool, deployment-set groups, the launch (``job.command`` on the plan's topology,
  reserved job variable names), the DLC job request, the node bootstrap (user-data size), and the
  day-two rules (:func:`day_two_problems`: MTU and jumbo frames from sourced family facts, queue
  pairs on every ERI, vSwitches that keep random allocations away from fixed node IPs).

Infeasibility is not a rule violation: it stays exit 3 from ``resolve``/``plan``.
Components only translate a checked Plan into resources.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import replace
from typing import Callable, Iterator, Optional

import ipaddress
import re

from .catalog import Catalog, load_catalog
from .catalog.limits import service_limits
from .errors import InputError, Problem, did_you_mean
from .plan import ESSD_MAX_GIB, ESSD_MIN_GIB, Plan
from .profile import TrainingProfile
from .tags import MAX_BUCKET_TAGS, MAX_TAGS, ROLE_CHECKPOINT, base_tags, node_tags, within_limit

#: ESS spot protection: 1 hour or none (``ScalingConfiguration.spot_duration``).
ESS_SPOT_DURATIONS = (0, 1)
#: Stands in for the CPFS protocol mount address (known only at deploy time) when the bootstrap is
#: rendered to check it: as long as a real one (`<id>-<hash>.<region>.cpfs.aliyuncs.com:/share`).
CPFS_ADDRESS_PLACEHOLDER = "cpfs-0123456789abcdef-0123456789ab.cn-wulanchabu.cpfs.aliyuncs.com:/share"


# ---- profile rules ---------------------------------------------------------------------------

def profile_problems(profile: TrainingProfile, catalog: Catalog) -> list[Problem]:
    """Every profile rule that needs the catalog or no resolution: names the catalog must know (an
    unknown region; a GPU model no sold type carries, unknown or known only for estimates, e.g. H800:
    "not sold on Alibaba ECS"; an instance type the catalog lacks) and what no plan could launch
    (``job.command``; ``job.secrets`` on a DLC job)."""
    from .bootstrap.locations import classify_code_uri
    from .launchers import check_command
    from .launchers.dlc import secrets_problems

    problems = check_command(profile.job.command, None) + name_problems(profile)
    try:
        classify_code_uri(profile.job.code_uri)
    except ValueError as exc:
        problems.append(Problem(path="job.code_uri", message=str(exc)))
    problems += layout_problems(profile, catalog)
    if profile.resources.target == "dlc":
        problems += secrets_problems(profile.job.secrets)
    if profile.region not in catalog.regions():
        problems.append(Problem(path="region", message="unknown region", given=profile.region, has_given=True,
                                allowed=", ".join(catalog.regions()),
                                suggestions=did_you_mean(profile.region, catalog.regions())))
    sold = sorted(g.name for g in catalog.gpus.values() if not g.estimate_only)
    by_lower = {k.lower(): g for k, g in catalog.gpus.items()}
    for i, g in enumerate(profile.resources.gpu_models):
        known = by_lower.get(g.lower())
        if known is None:
            problems.append(Problem(path=f"resources.gpu_models[{i}]", message="unknown GPU model", given=g,
                                    has_given=True, allowed=", ".join(sold), suggestions=did_you_mean(g, sold)))
        elif known.estimate_only:
            problems.append(Problem(path=f"resources.gpu_models[{i}]",
                                    message=f"GPU model {known.name} is not sold on Alibaba ECS (known for estimates only)",
                                    given=g, has_given=True, allowed=", ".join(sold),
                                    suggestions=_sold_alternatives(known, catalog)))
    for i, t in enumerate(profile.resources.instance_types):
        try:
            catalog.instance(t, path=f"resources.instance_types[{i}]")
        except InputError as exc:
            problems.extend(exc.problems)
    problems += dlc_profile_problems(profile, catalog)
    if profile.price_book is not None:
        from .catalog.price_book import catalog_for

        try:
            catalog_for(profile, catalog)
        except InputError as exc:  # each problem names the price book file and its entry
            problems.extend(exc.problems)
    return problems


def derived_names(profile: TrainingProfile) -> dict[str, str]:
    """The longest ECS names trainstack derives from ``name`` (the last node of ``resources.max_nodes``)."""
    last = f"{profile.name}-node-{profile.resources.max_nodes - 1}"
    return {"host name": last, "instance name": last}


def name_problems(profile: TrainingProfile) -> list[Problem]:
    """``name`` against the rules of every ECS name derived from it: host names (2 to 64 characters,
    no two of '.' '-' in a row: ecs.host_name.linux.*) and instance names (at most 128)."""
    if profile.resources.target == "dlc":
        return []
    limits = service_limits()
    rules = {"host name": (re.compile(str(limits.value("ecs.host_name.linux.pattern"))),
                           int(limits.number("ecs.host_name.linux.max_chars"))),
             "instance name": (None, int(limits.number("ecs.instance_name.max_chars")))}
    out = []
    for what, name in derived_names(profile).items():
        pattern, longest = rules[what]
        if len(name) > longest:
            room = longest - (len(name) - len(profile.name))
            out.append(Problem(path="name", given=profile.name, has_given=True,
                               message=f"the {what} of node {profile.resources.max_nodes - 1} ({name!r}) is {len(name)} "
                                       f"characters; ECS takes at most {longest}",
                               allowed=f"a name of at most {room} characters with resources.max_nodes "
                                       f"{profile.resources.max_nodes}"))
        elif pattern is not None and not pattern.fullmatch(name):
            out.append(Problem(path="name", given=profile.name, has_given=True,
                               message=f"the {what} {name!r} breaks ECS's rule (no '--', '.-' or '..'; letters, "
                                       "digits, '.' and '-')",
                               allowed="a name without two hyphens in a row"))
    return out


def dlc_profile_problems(profile: TrainingProfile, catalog: Catalog) -> list[Problem]:
    """A DLC job's rules that need the catalog or the DLC facts: an image it can get (a pinned one, or an
    official one to look up), a quota node spec trainstack can plan (``dlc.quota_spec``), and, on a
    Lingjun quota, PAI's preset NCCL variables left as PAI sets them (never the eRDMA set)."""
    from .catalog import dlc_facts
    from .placement.dlc import image_problem, quota_spec_problems, wants_dlc

    if not wants_dlc(profile):
        return []
    out = [p for p in (image_problem(profile),) if p is not None]
    out += quota_spec_problems(profile, catalog)
    spec = profile.dlc.quota_spec
    lingjun = {s.name: s for s in dlc_facts().lingjun_specs}
    if spec in lingjun and lingjun[spec].nccl_preset:
        preset = dlc_facts().preset(lingjun[spec].nccl_preset or "")
        for name in preset.keep:
            value = profile.job.env.get(name)
            if value is not None and value != preset.env[name]:
                out.append(Problem(path=f"job.env.{name}", given=value, has_given=True, allowed=preset.env[name],
                                   message=f"PAI presets {name}={preset.env[name]} on Lingjun spec {spec} "
                                           f"[PAI-RDMA]; another value breaks or slows NCCL on its RDMA network "
                                           f"(the eRDMA set, e.g. NCCL_IB_HCA=erdma, is for eRDMA ECS types); "
                                           f"fix: remove it"))
    return out


def layout_problems(profile: TrainingProfile, catalog: Catalog) -> list[Problem]:
    """The profile's own parallel degrees that no plan could run: tensor parallelism wider than the largest
    NVLink/NVSwitch node it may use (TP runs inside one node), and a degree its job.command cannot be given
    (trainstack.launchers.check_degrees). The degrees' divisibility (heads, layers, sequence, world size)
    is checked with the profile itself (trainstack.profile.model)."""
    from .launchers import Degrees, check_degrees

    t, r = profile.training, profile.resources
    out: list[Problem] = []
    tp = t.tensor_parallel or 1
    if tp > 1:
        wanted = {g.lower() for g in r.gpu_models}
        nodes = [i.gpu_count for i in catalog.resolved_instances()
                 if i.family.training and i.gpu is not None and i.gpu_count > 1 and i.multi_gpu_training_ok
                 and (not wanted or i.gpu.name.lower() in wanted)
                 and (not r.instance_types or i.name in r.instance_types)]
        widest = max(nodes, default=1)
        if tp > widest:
            out.append(Problem(path="training.tensor_parallel", given=tp, has_given=True,
                               message=f"tensor_parallel {tp} would span nodes: tensor parallelism runs inside one "
                                       f"NVLink/NVSwitch node, and the widest such node the profile may use has "
                                       f"{widest} GPU(s)" + ("" if nodes else " (none has several GPUs on NVLink)"),
                               allowed=f"1 to {widest}, dividing the GPUs of a node"))
    degrees = Degrees(tensor=tp, pipeline=t.pipeline_parallel or 1, context=t.context_parallel or 1,
                      virtual=t.virtual_pipeline_stages, layers_per_stage=1)
    out += check_degrees(profile.job.command, degrees)
    return out


def profile_warnings(profile: TrainingProfile, catalog: Catalog) -> list[Problem]:
    """What is allowed but worth knowing: listed types not seen offered in the profile's region."""
    out = []
    if profile.region not in catalog.regions():
        return out
    for i, t in enumerate(profile.resources.instance_types):
        if catalog.knows(t) and catalog.seen_in(profile.region, t) is None:
            out.append(Problem(path=f"resources.instance_types[{i}]", given=t, has_given=True,
                               message=f"not seen offered in {profile.region} in the price snapshot of "
                                       f"{catalog.snapshot_date} (availability unverified)"))
    return out


def _sold_alternatives(gpu, catalog: Catalog, n: int = 2) -> list[str]:
    """Sold GPUs closest to an estimate-only one: same architecture first, then nearest memory."""
    sold = [g for g in catalog.gpus.values() if not g.estimate_only]
    ranked = sorted(sold, key=lambda g: (g.architecture != gpu.architecture, abs(g.memory_gb - gpu.memory_gb), g.name))
    return [g.name for g in ranked[:n]]


def check_profile(profile: TrainingProfile, catalog: Catalog, file: Optional[str] = None) -> list[Problem]:
    """Raise for the profile rules that need the catalog; return the warnings."""
    problems = profile_problems(profile, catalog)
    if problems:
        in_book = any(p.file is not None for p in problems)  # only price-book problems name their own file
        catalog_names = any(p.path in ("region",) or p.path.startswith("resources.") for p in problems)
        head = ("problems in its price book" if in_book else "names the catalog does not know" if catalog_names
                else f"{len(problems)} problem(s)")
        raise InputError(f"{file or 'profile'}: {head}",
                         problems=[replace(p, file=p.file or file) for p in problems],
                         hint="price book format: README, \"Prices\"" if in_book else
                         "`trainstack catalog --all` lists every region, GPU model and instance type"
                         if catalog_names else None)
    return [replace(w, file=file) for w in profile_warnings(profile, catalog)]


# ---- plan rules ------------------------------------------------------------------------------

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
    from .layout import deployment_set_layout

    try:
        deployment_set_layout(plan)
    except InputError as exc:
        return [Problem(path="resources.max_nodes", message=exc.message)]
    return []


def _launch(plan: Plan) -> list[Optional[Problem]]:
    """job.command on the plan's topology, and job.env / job.secrets names trainstack reserves
    (trainstack.launchers; the node bootstrap and the DLC request raise the same problems)."""
    from .bootstrap import check_job
    from .launchers.dlc import dlc_job_problems

    if plan.target == "dlc":
        return list(dlc_job_problems(plan))
    try:
        return list(check_job(plan))
    except ValueError as exc:  # what the node bootstrap refuses outright (a bad code_uri, a name)
        return [Problem(path="job", message=bootstrap_message(plan, 0, exc))]


def _dlc(plan: Plan) -> list[Optional[Problem]]:
    if plan.target != "dlc" or plan.dlc is None:
        return []
    from .dlc_job import job_inputs, planned_datasets, validate_inputs
    from .launchers import LaunchError

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
    from .catalog import dlc_facts

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
    from .bootstrap import render_user_data
    from .launchers import LaunchError

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


def day_two_problems(plan: Plan) -> list[Optional[Problem]]:
    """What would hurt the second `pulumi up`: a wrong MTU, jumbo frames without a sourced fact, an ERI
    that could take the type's every queue pair, vSwitches that let random allocations near fixed IPs."""
    if plan.target != "ecs":
        return []
    from .layout.lifecycle import fixed_ips, node_lifecycle
    from .layout.network import MAX_ERIS_PER_NODE, mtu_for, queue_pairs_per_eri

    net, out = plan.network, []
    family = load_catalog().instance(plan.instance_type or "").family if plan.instance_type else None
    if net.jumbo_frames and not (family and family.jumbo_frames):
        out.append(Problem(path="network", message=f"jumbo frames on {plan.instance_type}: no source documents them "
                                                    f"for family {family.name if family else '?'}"))
    if net.mtu != mtu_for(net.rdma, net.jumbo_frames):
        out.append(Problem(path="network", message=f"MTU {net.mtu} is not the documented MTU for rdma {net.rdma} "
                                                    f"{'with' if net.jumbo_frames else 'without'} jumbo frames "
                                                    f"({mtu_for(net.rdma, net.jumbo_frames)})"))
    if net.rdma == "erdma" and net.eri_per_node > MAX_ERIS_PER_NODE:
        out.append(Problem(path="network", message=f"{net.eri_per_node} ERIs per node: at most {MAX_ERIS_PER_NODE} can "
                                                    "get a queue pair number"))
    if net.rdma == "erdma" and net.queue_pair_number_max:
        if net.queue_pair_number != queue_pairs_per_eri(net.queue_pair_number_max, max(1, net.eri_per_node)):
            out.append(Problem(path="network", message=f"queue pairs per ERI {net.queue_pair_number} are not the type's "
                                                        f"{net.queue_pair_number_max} split over {net.eri_per_node}"))
    if fixed_ips(plan) and not node_lifecycle(plan).delete_before_replace:
        out.append(Problem(path="network", message="fixed-IP nodes must be replaced delete-before-replace"))
    blocks = {"node": net.vswitch_cidr, "ERI": net.eri_vswitch_cidr, "services": net.services_vswitch_cidr}
    vpc = ipaddress.ip_network(net.vpc_cidr)
    present = {k: ipaddress.ip_network(v) for k, v in blocks.items() if v}
    for k, block in present.items():
        if not block.subnet_of(vpc):
            out.append(Problem(path="network", message=f"the {k} vSwitch {block} is outside the VPC {vpc}"))
        for other, b2 in present.items():
            if other < k and block.overlaps(b2):
                out.append(Problem(path="network", message=f"the {k} and {other} vSwitches overlap ({block}, {b2})"))
    if net.rdma == "erdma" and net.eri_per_node >= 2 and not net.eri_vswitch_cidr:
        out.append(Problem(path="network", message="secondary ERIs need their own vSwitch (random addresses)"))
    needs_services = plan.storage.cpfs is not None or net.internet_egress
    if needs_services and not net.services_vswitch_cidr:
        out.append(Problem(path="network", message="CPFS and the NAT gateway need the services vSwitch"))
    return out


PLAN_RULES: tuple[Callable[[Plan], list[Optional[Problem]]], ...] = (
    _disks, _spot_pool, _tags, _deployment_sets, _launch, _dlc, _bootstrap, day_two_problems)


def plan_problems(plan: Plan) -> list[Problem]:
    """Every plan rule's problems, in the order of :data:`PLAN_RULES`."""
    return [p for rule in PLAN_RULES for p in rule(plan) if p is not None]


def check_plan(plan: Plan, file: Optional[str] = None) -> Plan:
    memo = _reused
    if memo is not None and memo.get(("checked", id(plan)), (None, None))[1] is plan:
        return plan  # this very (frozen) Plan passed already in this command (the program checks it again)
    problems = plan_problems(plan)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise InputError(f"{file or plan.name}: {problems[0].message}{more}",
                         problems=[replace(p, file=file) for p in problems])
    if memo is not None:
        memo[("checked", id(plan))] = (None, plan)
    return plan


# ---- both ------------------------------------------------------------------------------------

_reuse_lock = threading.Lock()
_reused: Optional[dict[tuple, tuple[Optional[Catalog], Plan]]] = None


@contextlib.contextmanager
def reusing_plans() -> Iterator[None]:
    """Within the block, :func:`planned` of the same profile, catalog and file is computed once.
    ``trainstack plan`` plans the profile, then records the real Pulumi program, which plans it
    again in its own thread: same inputs in one command, so the same checked Plan (frozen)."""
    global _reused
    with _reuse_lock:
        outer, _reused = _reused, (_reused if _reused is not None else {})
    try:
        yield
    finally:
        with _reuse_lock:
            _reused = outer


def planned(profile: TrainingProfile, catalog: Optional[Catalog] = None, file: Optional[str] = None) -> Plan:
    """The checked Plan: profile rules, resolution (InfeasibleError, exit 3), plan rules."""
    from .placement import resolve

    catalog = catalog or load_catalog()
    memo = _reused
    key = (profile.model_dump_json(), id(catalog), file) if memo is not None else None
    if memo is not None and key in memo:
        return memo[key][1]
    check_profile(profile, catalog, file)
    plan = check_plan(resolve(profile, catalog), file)
    if memo is not None:
        memo[key] = (catalog, plan)  # the catalog is kept so its id is not reused
    return plan
