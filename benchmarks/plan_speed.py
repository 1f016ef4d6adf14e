"""How fast is `trainstack plan --format json`, next to what Pulumi itself costs?

For clusters of 1, 8, 64 and 512 eight-GPU eRDMA nodes, three processes are timed (wall clock,
best of ``--repeat``), all in this run:

* ``plan``: ``python -m trainstack plan PROFILE --format json --out FILE`` (profile, catalog,
  resolver, the real Pulumi program under the recording engine, policies, rendering);
* ``import``: a process that only imports pulumi and the pulumi_alicloud modules the plan uses;
* ``bare``: a bare program that registers the same resources (same types, names, parents and
  input sizes) under plain ``pulumi.runtime.set_mocks`` and ``@pulumi.runtime.test``.

Goal (issue 14): ``plan`` within 1.5x of ``bare`` at 8 nodes and 1.3x from 64 nodes up, with a linear
cost per node.

The profiles pin the layout (``resources.gpus`` = 8 x nodes, ``instance_types`` =
ecs.ebmgn7ex.32xlarge, ``max_nodes`` = nodes), so the real resolver plans exactly that size.

    .venv/bin/python benchmarks/plan_speed.py [--sizes 1 8 64 512] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INSTANCE_TYPE = "ecs.ebmgn7ex.32xlarge"

PROFILE = """\
name: bench-{nodes}n
region: cn-shenzhen
model: {{preset: llama-3-8b}}
training:
  method: full
  precision: bf16-mixed
  micro_batch_size: 1
  sequence_length: 4096
  gradient_checkpointing: true
  zero_stage: 3
  tokens: 1.0e9
job: {{command: "torchrun train.py"}}
resources:
  target: ecs
  gpus: {gpus}
  instance_types: [{itype}]
  max_nodes: {nodes}
  spot: never
storage: {{dataset_gib: 1000, checkpoint: cpfs}}
access: {{ssh_cidrs: [203.0.113.0/24]}}
tags: {{team: bench}}
"""

IMPORT_ONLY = """\
import importlib
import pulumi
import pulumi_alicloud
for module, cls in {classes!r}:
    getattr(importlib.import_module("pulumi_alicloud." + module), cls)
"""

# The same registrations under Pulumi's own mocks: the floor any offline plan pays. Resources use
# the real pulumi_alicloud classes (each declares all its output properties, which Pulumi resolves
# one future at a time), with the recorded inputs; others register as plain Custom/Component.
BARE = """\
import importlib, inspect, json, re, sys, warnings
warnings.simplefilter("ignore", DeprecationWarning)
import pulumi
import pulumi_alicloud
for module, cls in {classes!r}:
    getattr(importlib.import_module("pulumi_alicloud." + module), cls)

class Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args):
        return args.name + "-id", args.inputs
    def call(self, args):
        return {{}}

pulumi.runtime.set_mocks(Mocks(), project="bare", stack="bench", preview=False)
resources = json.load(open(sys.argv[1]))["resources"]
LONG = re.compile(r"^\\((\\d+) bytes, sha256:[0-9a-f]+\\)$")
TOKEN = re.compile(r"^alicloud:([a-zA-Z]+)/\\w+:(\\w+)$")

def full_size(v):  # the plan shows long strings by size; register them at their real size
    if isinstance(v, str) and (m := LONG.match(v)):
        return "x" * int(m.group(1))
    if isinstance(v, dict):
        return {{k: full_size(x) for k, x in v.items()}}
    if isinstance(v, list):
        return [full_size(x) for x in v]
    return v

def snake(name):
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()

def typed(r, opts):
    m = TOKEN.match(r["type"])
    cls = None
    if m:
        cls = getattr(importlib.import_module("pulumi_alicloud." + m.group(1).lower()), m.group(2), None)
    elif r["type"] == "pulumi:providers:alicloud":
        cls = pulumi_alicloud.Provider
    if cls is None:
        return None
    params = set(inspect.signature(cls._internal_init).parameters)
    kwargs = {{snake(k): full_size(v) for k, v in r["inputs"].items() if snake(k) in params}}
    return cls(r["name"], opts=opts, **kwargs)

@pulumi.runtime.test
def program():
    made = {{}}
    for r in resources:
        opts = pulumi.ResourceOptions(parent=made.get(r["parent_urn"]))
        if not r["custom"]:
            made[r["urn"]] = pulumi.ComponentResource(r["type"], r["name"], None, opts)
        else:
            made[r["urn"]] = typed(r, opts) or pulumi.CustomResource(r["type"], r["name"], full_size(r["inputs"]), opts)
    return pulumi.Output.all(*[m.urn for m in made.values()])

program()
"""


def timed(cmd: list[str], repeat: int, cwd: Path = ROOT) -> float:
    """Best wall clock of ``repeat`` runs after one untimed warm-up. Python's bytecode cache is on
    for every process, as on a user's machine: pip compiled pulumi's modules at install, and the
    warm-up writes trainstack's ``__pycache__`` (sandboxes that set PYTHONDONTWRITEBYTECODE would
    otherwise make only trainstack compile its sources on every run)."""
    best = float("inf")
    env = dict(os.environ, PYTHONWARNINGS="ignore::DeprecationWarning")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    for i in range(repeat + 1):
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
        elapsed = time.perf_counter() - start
        if proc.returncode not in (0, 4):  # 4: a mandatory policy verdict; the plan is complete
            sys.exit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-3000:]}")
        if i:
            best = min(best, elapsed)
    return best


def classes(plan_json: Path) -> list[tuple[str, str]]:
    """(pulumi_alicloud module, class) for each alicloud resource type in the plan."""
    out = set()
    for r in json.loads(plan_json.read_text())["resources"]:
        m = re.fullmatch(r"alicloud:([a-zA-Z]+)/\w+:(\w+)", r["type"])
        if m:
            out.add((m.group(1).lower() if m.group(1) != "index" else "", m.group(2)))
    return sorted((mod, cls) for mod, cls in out if mod)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 8, 64, 512])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    py = sys.executable
    rows = []
    with tempfile.TemporaryDirectory(prefix="plan-speed-") as tmp:
        tmpdir = Path(tmp)
        for nodes in args.sizes:
            profile = tmpdir / f"bench-{nodes}.yaml"
            profile.write_text(PROFILE.format(nodes=nodes, gpus=8 * nodes, itype=INSTANCE_TYPE))
            out = tmpdir / f"plan-{nodes}.json"
            cmd = [py, "-m", "trainstack", "plan", str(profile), "--format", "json", "--out", str(out)]
            t_plan = timed(cmd, args.repeat)
            doc = json.loads(out.read_text())
            got = doc["plan"]["nodes"]
            if got != nodes:
                sys.exit(f"the resolver planned {got} nodes for a {nodes}-node profile")
            used = classes(out)
            imports = tmpdir / "imports.py"
            imports.write_text(IMPORT_ONLY.format(classes=used))
            bare = tmpdir / "bare.py"
            bare.write_text(BARE.format(classes=used))
            t_import = timed([py, "-W", "ignore::DeprecationWarning", str(imports)], args.repeat)
            t_bare = timed([py, str(bare), str(out)], args.repeat)
            rows.append((nodes, len(doc["resources"]), t_import, t_bare, t_plan))
            print(f"  {nodes:>4} nodes: plan {t_plan:.2f}s, bare {t_bare:.2f}s, import {t_import:.2f}s", file=sys.stderr)

    print(f"trainstack plan --format json vs baselines (best of {args.repeat}, "
          f"{INSTANCE_TYPE})")
    print(f"{'nodes':>5}  {'resources':>9}  {'import s':>8}  {'bare s':>7}  {'plan s':>7}  {'plan/bare':>9}  "
          f"{'plan ms/node':>12}  {'bare ms/node':>12}")
    n1, _, _, b1, p1 = rows[0]
    for nodes, res, ti, tb, tp in rows:
        per_plan = "" if nodes == n1 else f"{1000 * (tp - p1) / (nodes - n1):.1f}"
        per_bare = "" if nodes == n1 else f"{1000 * (tb - b1) / (nodes - n1):.1f}"
        print(f"{nodes:>5}  {res:>9}  {ti:>8.2f}  {tb:>7.2f}  {tp:>7.2f}  {tp / tb:>9.2f}  {per_plan:>12}  {per_bare:>12}")
    goals = [(nodes, tp / tb, 1.5 if nodes < 64 else 1.3) for nodes, _, _, tb, tp in rows if nodes >= 8]
    for nodes, ratio, goal in goals:
        print(f"{nodes} nodes: plan/bare {ratio:.2f} (goal <= {goal:.2f}): {'met' if ratio <= goal else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
