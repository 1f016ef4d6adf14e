"""Offline plans of the sample stacks and of profile variants that reach every component path
(self-healing spot pool, ESSD checkpoint disks, NAT egress, eRDMA with a deployment set), planned
once per test session through the production path (`trainstack plan`'s planner)."""

from __future__ import annotations

import copy
import functools
import pathlib
from typing import Any

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
STACKS = ("llama3-8b-lora", "llama3-70b-full", "qwen-7b-spot", "qwen-7b-dlc")


def _profile(name: str) -> dict[str, Any]:
    return yaml.safe_load((ROOT / "stacks" / "profiles" / f"{name}.yaml").read_text(encoding="utf-8"))


def _variants() -> dict[str, dict[str, Any]]:
    heal = copy.deepcopy(_profile("qwen-7b-spot"))
    heal["name"] = "qwen-7b-heal"
    heal["resources"]["self_healing"] = True
    essd = copy.deepcopy(_profile("llama3-70b-full"))
    essd["name"] = "llama3-70b-essd"
    essd["storage"]["checkpoint"] = "essd"
    essd["network"]["internet_egress"] = True
    return {"qwen-7b-heal": heal, "llama3-70b-essd": essd}


@functools.lru_cache(maxsize=None)
def plan(name: str) -> dict[str, Any]:
    """The plan document of a sample stack or of a variant (see :func:`_variants`)."""
    import tempfile

    from trainstack.preview.planner import plan_source
    from trainstack.preview.sources import Source, find_project

    project = find_project(ROOT)
    if name in STACKS:
        return plan_source(Source("stack", name, project.stack_file(name), stack=name), project)
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / f"{name}.yaml"
        path.write_text(yaml.safe_dump(_variants()[name]), encoding="utf-8")
        return plan_source(Source("profile", str(path), path), project)


def all_plans() -> dict[str, dict[str, Any]]:
    return {name: plan(name) for name in (*STACKS, *_variants())}
