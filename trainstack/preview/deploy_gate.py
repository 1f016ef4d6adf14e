"""The deploy gate: diff what the deploy job last deployed against the plan it is about to deploy.

`pulumi up` on a change the cloud API refuses (a disk or CPFS shrink, a node moved across zones)
stops part-way, with the resources before the failing one already changed. So before `pulumi up`,
the deploy job plans the stack offline, diffs it against the plan of its last successful deploy and
stops when the diff lists an impossible update (exit 2, the same rule as `trainstack diff`); after
a successful `pulumi up` it records the plan it deployed.

Where the record lives: the Pulumi state bucket (``PULUMI_BACKEND_URL``,
``s3://<bucket>?endpoint=<oss endpoint>&region=<region>``, docs/preview.md), object
``trainstack/deployed/<project>/<stack>/plan.json``. Why there and not in the stack bucket or a
workflow artifact: the deploy identity already reads and writes that bucket and nothing else does
(the preview identity may write only ``.pulumi/locks/*``; the nodes' RAM role names only the stack
bucket's ``job/``, ``status/<node>/`` and ``checkpoints/`` prefixes, never the state bucket, so no
node can forge what was deployed); it exists before the first deploy (the stack bucket is created
by it and named from the account); it is versioned with the state it describes; artifacts expire
(at most 90 days) and would silently turn the gate off. No record (the first deploy, or one before
the gate existed) passes with a note; a record that cannot be read stops the deploy (exit 2 or 5).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional
from urllib.parse import parse_qs, urlsplit

from ..errors import InputError
from ..fsutil import read_json_file
from ..outputs import atomic_write_text
from .sources import MAX_SAVED_PLAN_BYTES, Project, Source, load_saved_plan

PREFIX = "trainstack/deployed"
BACKEND_ENV = "PULUMI_BACKEND_URL"


@dataclass(frozen=True)
class Store:
    """Where the deployed plans are kept (the state bucket of an ``s3://`` backend on OSS)."""

    bucket: str
    region: str
    endpoint: Optional[str] = None

    def key(self, project: str, stack: str) -> str:
        return f"{PREFIX}/{project}/{stack}/plan.json"


def store_from_backend(url: Optional[str]) -> Store:
    """The store of a self-managed ``s3://`` backend URL; a bad one is exit 2 (the URL is not echoed:
    a backend URL may carry credentials in other setups)."""
    if not url:
        raise InputError(f"{BACKEND_ENV} is not set: the deploy gate keeps the deployed plan in the Pulumi state "
                         "bucket", hint="set the production environment secret PULUMI_BACKEND_URL (docs/preview.md)")
    parts = urlsplit(url)
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    if parts.scheme != "s3" or not parts.hostname or not query.get("region"):
        raise InputError(f"{BACKEND_ENV} is not an s3://<bucket>?endpoint=...&region=... backend URL "
                         f"(scheme {parts.scheme or 'none'!r})",
                         hint="the OSS state bucket of docs/preview.md: s3://my-pulumi-state?endpoint="
                              "oss-cn-shenzhen.aliyuncs.com&region=cn-shenzhen")
    return Store(bucket=parts.hostname, region=query["region"], endpoint=query.get("endpoint"))


class PlanStore:
    """Read and write the deployed plan of a stack with Alibaba's OSS SDK (trainstack.cloud.oss)."""

    def __init__(self, store: Store, client: Any = None, sleep: Any = None):
        # each CI step loads only what it runs (the planner brings Pulumi's engine)
        from ..cloud.oss import OssReader, make_client

        self.store = store
        self.client = client if client is not None else make_client(store.region, store.endpoint)
        self.reader = OssReader(self.client, store.region, sleep=sleep)

    def read(self, project: str, stack: str) -> Optional[bytes]:
        """The recorded plan's bytes, or None when none is recorded."""
        return self.reader.get_optional(self.store.bucket, self.store.key(project, stack))

    def write(self, project: str, stack: str, data: bytes) -> None:
        self.reader.put_bytes(self.store.bucket, self.store.key(project, stack), data)


def _saved(data: bytes, label: str) -> dict[str, Any]:
    """A recorded plan, checked like any saved plan (schema version, shape, size)."""
    if len(data) > MAX_SAVED_PLAN_BYTES:
        raise InputError(f"{label}: the recorded plan is over {MAX_SAVED_PLAN_BYTES // (1024 * 1024)} MiB")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "deployed-plan.json"
        path.write_bytes(data)
        try:
            return load_saved_plan(path)
        except InputError as err:
            raise InputError(f"{label}: {err.message.split(': ', 1)[-1]}",
                             hint="delete the object to let the next deploy record a fresh one") from None


def gate(stack: str, project: Project, plans: PlanStore, plan_out: Path,
         policy_config: Optional[dict] = None) -> tuple[str, int]:
    """``(markdown for the job summary, exit code)``: plan ``stack`` now (written to ``plan_out`` for
    :func:`record`), diff the recorded plan against it; 2 on an impossible update."""
    # each CI step loads only what it runs (the planner brings Pulumi's engine)
    from .diff import diff_documents, diff_exit_code
    from .planner import plan_source
    from .render_diff import render_markdown

    head = plan_source(Source("stack", stack, project.stack_file(stack), stack=stack), project,
                       policy_config=policy_config)
    atomic_write_text(plan_out, json.dumps(head, sort_keys=True) + "\n")
    where = f"oss://{plans.store.bucket}/{plans.store.key(project.name, stack)}"
    data = plans.read(project.name, stack)
    if data is None:
        return (f"### trainstack deploy gate: `{stack}`\n\nNo deployed plan is recorded at `{where}` (the first "
                "deploy, or one before the gate): nothing to compare; this deploy records one.\n", 0)
    d = diff_documents(_saved(data, where), head, base_label=f"{stack} (deployed)", head_label=f"{stack} (this push)")
    return render_markdown(d), diff_exit_code(d)


def record(stack: str, project: Project, plans: PlanStore, plan_path: Path) -> str:
    """Record the plan the gate wrote (call it only after `pulumi up` succeeded)."""
    doc = read_json_file(plan_path, what="deployed plan", limit=MAX_SAVED_PLAN_BYTES)
    if not isinstance(doc, dict) or doc.get("kind") != "trainstack-plan" or doc.get("stack") != stack:
        raise InputError(f"{plan_path}: not the trainstack plan of stack {stack!r}",
                         hint="record the file the deploy gate wrote with --plan-out")
    plans.write(project.name, stack, (json.dumps(doc, sort_keys=True) + "\n").encode())
    return f"oss://{plans.store.bucket}/{plans.store.key(project.name, stack)}"


def store_from_environment() -> Store:
    return store_from_backend(os.environ.get(BACKEND_ENV))


__all__ = ["BACKEND_ENV", "PREFIX", "PlanStore", "Store", "gate", "record", "store_from_backend",
           "store_from_environment"]
