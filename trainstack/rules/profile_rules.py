"""The profile rules of the rule book: what the catalog must know and what no plan could launch.

Checked before anything is resolved (:func:`check_profile`); a profile that breaks one is exit 2.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Optional

from ..catalog import Catalog
from ..catalog.limits import service_limits
from ..catalog.price_book import catalog_for
from ..errors import InputError, Problem, did_you_mean
from ..profile import TrainingProfile
from .alerts_rules import alerts_profile_problems
from .dlc_profile import dlc_profile_problems


def profile_problems(profile: TrainingProfile, catalog: Catalog) -> list[Problem]:
    """Every profile rule that needs the catalog or no resolution: names the catalog must know (an
    unknown region; a GPU model no sold type carries, unknown or known only for estimates, e.g. H800:
    "not sold on Alibaba ECS"; an instance type the catalog lacks) and what no plan could launch
    (``job.command``; ``job.secrets`` on a DLC job)."""
    # launchers/ and bootstrap/ load with the first rule that reads the job, not at the CLI's start
    from ..bootstrap.locations import classify_code_uri
    from ..launchers import check_command
    from ..launchers.dlc import secrets_problems

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
    problems += dlc_profile_problems(profile, catalog) + alerts_profile_problems(profile)
    if profile.price_book is not None:
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


def layout_problems(profile: TrainingProfile, catalog: Catalog) -> list[Problem]:
    """The profile's own parallel degrees that no plan could run: tensor parallelism wider than the largest
    NVLink/NVSwitch node it may use (TP runs inside one node), and a degree its job.command cannot be given
    (trainstack.launchers.check_degrees). The degrees' divisibility (heads, layers, sequence, world size)
    is checked with the profile itself (trainstack.profile.model)."""
    # launchers/ and bootstrap/ load with the first rule that reads the job, not at the CLI's start
    from ..launchers import Degrees, check_degrees

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
                         hint="price book format: docs/prices.md" if in_book else
                         "`trainstack catalog --all` lists every region, GPU model and instance type"
                         if catalog_names else None)
    return [replace(w, file=file) for w in profile_warnings(profile, catalog)]


