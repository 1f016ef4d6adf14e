"""A PAI-DLC profile's rules that need the catalog or the DLC facts, and which profiles want DLC.

The rule book owns these; the DLC strategy (trainstack.placement.dlc / dlc_pods) reads the same
functions, so a profile the rule book accepts is never refused later for its image or quota spec.
"""

from __future__ import annotations

from typing import Optional

from ..catalog import Catalog, dlc_facts
from ..errors import Problem, did_you_mean
from ..profile import TrainingProfile


def wants_dlc(profile: TrainingProfile) -> bool:
    """`target: dlc`, or `auto` with a PAI workspace or resource quota named in the profile."""
    r = profile.resources
    if r.target == "dlc":
        return True
    return r.target == "auto" and bool(profile.dlc.workspace_id or profile.dlc.resource_id)


def image_problem(profile: TrainingProfile) -> Optional[Problem]:
    """A DLC job that pins no image and whose job type has no official image to look up."""
    if profile.job.image or profile.dlc.image_tag:
        return None
    if profile.dlc.job_type in dlc_facts().official_images.frameworks:
        return None
    return Problem(path="dlc.job_type", given=profile.dlc.job_type, has_given=True,
                   message=f"no official image is looked up for {profile.dlc.job_type} jobs (only "
                           f"{', '.join(dlc_facts().official_images.frameworks)}); set job.image, or dlc.image_tag")


def quota_spec_problems(profile: TrainingProfile, catalog: Catalog) -> list[Problem]:
    """``dlc.quota_spec`` must be a catalog ECS type or a Lingjun spec whose GPU the team stated."""
    spec = profile.dlc.quota_spec
    if spec is None:
        return []
    if catalog.knows(spec):
        return []
    facts = dlc_facts()
    lingjun = {s.name: s for s in facts.lingjun_specs}
    if spec not in lingjun:
        pool = list(lingjun) + [r.name for r in catalog.resolved_instances()]
        return [Problem(path="dlc.quota_spec", given=spec, has_given=True, suggestions=did_you_mean(spec, pool),
                        message="not an ECS type of the catalog or a Lingjun spec PAI documents")]
    if lingjun[spec].stated is None:
        from ..catalog.dlc_specs import LINGJUN_OVERLAY
        from ..catalog.loader import overlay_dir

        return [Problem(path="dlc.quota_spec", given=spec, has_given=True,
                        message=f"Alibaba documents no GPU model, GPU count or interconnect for Lingjun spec {spec} "
                                f"[PAI-RDMA]: state them (from ListEcsSpecs or the console) in "
                                f"{overlay_dir() / LINGJUN_OVERLAY} (docs/dlc.md, \"Lingjun\")")]
    return []


def dlc_profile_problems(profile: TrainingProfile, catalog: Catalog) -> list[Problem]:
    """A DLC job's rules that need the catalog or the DLC facts: an image it can get (a pinned one, or an
    official one to look up), a quota node spec trainstack can plan (``dlc.quota_spec``), and, on a
    Lingjun quota, PAI's preset NCCL variables left as PAI sets them (never the eRDMA set)."""
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
