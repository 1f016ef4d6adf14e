"""How fast is `trainstack diff` on big plans, with and without a replacement cascade?

For clusters of 8, 64 and 512 eight-GPU eRDMA nodes (benchmarks/plan_speed.py's profiles), the base
plan and two heads are planned once (``trainstack plan --format json``), then ``diff_documents`` is
timed in this process (best of ``--repeat``) for:

* ``command``: a new job command (the job settings object and every node's digest tag change);
* ``vpc_cidr``: a new VPC CIDR, which replaces the VPC and, through the recorded property
  dependencies, every vSwitch, security group, node and attachment downstream (the largest cascade).

``--plans DIR`` keeps the plan files, so another checkout can time its diff on the same plans
(``PYTHONPATH=<checkout> python benchmarks/diff_speed.py --plans DIR --reuse``).

    .venv/bin/python benchmarks/diff_speed.py [--sizes 8 64 512] [--repeat 5] [--plans DIR] [--reuse]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.append(str(ROOT))  # after PYTHONPATH: another checkout given there times its own diff
from plan_speed import INSTANCE_TYPE, PROFILE  # noqa: E402

EDITS = {
    "command": lambda text: text.replace('command: "torchrun train.py"', 'command: "torchrun train.py --lr 1e-5"'),
    "vpc_cidr": lambda text: text + "network: {vpc_cidr: 10.8.0.0/16}\n",
}


def _plan(profile: str, out: Path, name: str) -> None:
    path = out / f"{name}.yaml"
    path.write_text(profile, encoding="utf-8")
    subprocess.run([sys.executable, "-m", "trainstack", "plan", str(path), "--format", "json",
                    "--out", str(out / f"{name}.json")], cwd=ROOT, check=True, capture_output=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 64, 512])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--plans", type=Path, help="directory to keep (or, with --reuse, read) the plans in")
    parser.add_argument("--reuse", action="store_true", help="read the plans from --plans instead of planning")
    args = parser.parse_args()
    from trainstack.preview.diff import diff_documents

    out = args.plans or Path(tempfile.mkdtemp(prefix="diff-speed-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"| nodes | resources | edit | changed | replaced | diff (best of {args.repeat}) |")
    print("|---:|---:|---|---:|---:|---:|")
    for nodes in args.sizes:
        base_profile = PROFILE.format(nodes=nodes, gpus=8 * nodes, itype=INSTANCE_TYPE)
        if not args.reuse:
            _plan(base_profile, out, f"{nodes}-base")
            for edit, change in EDITS.items():
                _plan(change(base_profile), out, f"{nodes}-{edit}")
        base = json.loads((out / f"{nodes}-base.json").read_text(encoding="utf-8"))
        for edit in EDITS:
            head = json.loads((out / f"{nodes}-{edit}.json").read_text(encoding="utf-8"))
            best, d = float("inf"), None
            for _ in range(args.repeat):
                start = time.perf_counter()
                d = diff_documents(base, head)
                best = min(best, time.perf_counter() - start)
            print(f"| {nodes} | {len(head['resources'])} | {edit} | {d['counts']['change']} | "
                  f"{d['counts']['replace']} | {best * 1000:,.0f} ms |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
