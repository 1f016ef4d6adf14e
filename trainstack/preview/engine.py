"""Run a Pulumi program in-process under a recording mock engine: the offline "preview".

Why this shape: there is no Pulumi CLI or cloud account offline, yet the plan must show what the
*real* program (the one `pulumi up` runs) declares. So the program file is executed exactly as the
Python language host does (``run_in_stack`` + ``runpy``), against Pulumi's own mock monitor, with
a subclass that also records each registration's parent, options and inputs (camelCase wire
names, numbers as floats: the shape CrossGuard policies see), every invoke and the stack exports.

Isolation: each run happens on a fresh thread (so in a fresh set of context variables, where
Pulumi keeps its runtime state) with its own event loop, RPC thread pool, and freshly built
runtime settings, root stack resource and config. Several runs in one process never see each
other's resources, the caller's own Pulumi state is untouched, and whatever a failed run left
scheduled is cancelled with its loop.
"""

from __future__ import annotations

import contextlib
import gc
import os
import runpy
import sys
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from ..lazy import LazyModule
from .cloud import OfflineCloud
from .values import Secret, UNKNOWN_TEXT, clean_value

#: imported at the first program run, under its warning filters: `trainstack diff` and `node-files`
#: import this module and never run a program (pulumi takes ~1.4 s, asyncio ~0.1 s)
if TYPE_CHECKING:
    import asyncio

    import pulumi
    from google.protobuf import empty_pb2
else:
    asyncio = LazyModule("asyncio")
    pulumi = LazyModule("pulumi")
    empty_pb2 = LazyModule("google.protobuf.empty_pb2")

STACK_TYPE = "pulumi:pulumi:Stack"


@dataclass
class RecordedResource:
    """One registration, as the engine received it."""

    type: str
    name: str
    urn: str
    id: Optional[str]
    parent_urn: Optional[str]            # None: a child of the stack itself
    custom: bool
    inputs: dict[str, Any]               # camelCase; secrets as Secret, unknowns as UNKNOWN_TEXT
    protect: bool = False
    retain_on_delete: bool = False
    delete_before_replace: bool = False
    replace_on_changes: tuple[str, ...] = ()
    ignore_changes: tuple[str, ...] = ()
    dependencies: tuple[str, ...] = ()   # URNs this resource waits for
    property_dependencies: dict[str, tuple[str, ...]] = field(default_factory=dict)  # input -> URNs
    provider_urn: Optional[str] = None   # explicit provider; None means the default provider
    read: bool = False                   # a `Resource.get` lookup, not something to create


@dataclass
class RecordedInvoke:
    token: str
    args: dict[str, Any]
    result: dict[str, Any]
    answered: bool                       # False: the offline cloud had no answer (empty result)


@dataclass
class Recording:
    """Everything one program run declared."""

    project: str
    stack: str
    resources: list[RecordedResource] = field(default_factory=list)
    invokes: list[RecordedInvoke] = field(default_factory=list)
    exports: dict[str, Any] = field(default_factory=dict)
    component_outputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    logs: list[tuple[str, str]] = field(default_factory=list)

    def by_urn(self) -> dict[str, RecordedResource]:
        return {r.urn: r for r in self.resources}


def _norm(urn: str) -> str:
    """The URN the real engine would give: the mock monitor keeps the stack's type in the
    qualified type of top-level resources (``pulumi:pulumi:Stack$T``); Pulumi does not."""
    return urn.replace(f"::{STACK_TYPE}$", "::") if urn else urn


def _monitor_class():
    """A MockMonitor that also keeps registration options (built lazily: importing pulumi is slow)."""
    class RecordingMonitor(pulumi.runtime.mocks.MockMonitor):
        def __init__(self, mocks, recording: Recording):
            super().__init__(mocks)
            self.recording = recording
            self.lock = threading.Lock()
            self.local = threading.local()

        def RegisterResource(self, request):
            # The base class deserialises the inputs and calls mocks.new_resource on this same
            # thread; the request travels there through a thread-local, so inputs are read once.
            self.local.request = request
            try:
                return super().RegisterResource(request)
            finally:
                self.local.request = None

        def ReadResource(self, request):
            self.local.request, self.local.read = request, True
            try:
                return super().ReadResource(request)
            finally:
                self.local.request, self.local.read = None, False

        def RegisterResourceOutputs(self, request):
            outputs = clean_value(pulumi.runtime.rpc.deserialize_properties(request.outputs, keep_unknowns=True))
            with self.lock:
                if request.urn.split("::")[2] == STACK_TYPE:
                    self.recording.exports = outputs
                else:
                    self.recording.component_outputs[_norm(request.urn)] = outputs
            return super().RegisterResourceOutputs(request)

    return RecordingMonitor


def _mocks_class():
    class RecordingMocks(pulumi.runtime.mocks.Mocks):
        """Answers from the offline cloud; writes every registration and invoke to the recording."""

        def __init__(self, cloud: OfflineCloud, recording: Recording):
            self.cloud = cloud
            self.recording = recording
            self.monitor = None  # set once the monitor exists

        def new_resource(self, args):
            request = getattr(self.monitor.local, "request", None)
            rid, state = self.cloud.new_resource(args.typ, args.name, args.inputs)
            if args.resource_id:  # a read of an existing resource keeps its id
                rid = args.resource_id
            if request is not None:
                self._record(request, args, rid)
            return rid, state

        def _record(self, request, args, rid: str) -> None:
            parent = _norm(request.parent) or None
            urn = _norm(self.monitor.make_urn(request.parent, request.type, request.name))
            if parent and parent.split("::")[2] == STACK_TYPE:
                parent = None
            is_read = bool(getattr(self.monitor.local, "read", False))
            rec = RecordedResource(
                type=args.typ, name=args.name, urn=urn, id=rid, parent_urn=parent,
                custom=bool(getattr(request, "custom", True)), inputs=clean_value(args.inputs),
                protect=bool(getattr(request, "protect", False)),
                retain_on_delete=bool(getattr(request, "retainOnDelete", False)),
                delete_before_replace=bool(getattr(request, "deleteBeforeReplace", False)),
                replace_on_changes=tuple(getattr(request, "replaceOnChanges", ()) or ()),
                ignore_changes=tuple(getattr(request, "ignoreChanges", ()) or ()),
                dependencies=tuple(sorted({_norm(d) for d in getattr(request, "dependencies", ()) or ()})),
                property_dependencies={k: tuple(sorted({_norm(u) for u in v.urns}))
                                       for k, v in getattr(request, "propertyDependencies", {}).items() if v.urns},
                provider_urn=(_norm(request.provider.rsplit("::", 1)[0]) if request.provider else None),
                read=is_read,
            )
            with self.monitor.lock:
                self.recording.resources.append(rec)

        def call(self, args):
            result, answered = self.cloud.invoke(args.token, args.args)
            with self.monitor.lock:
                self.recording.invokes.append(RecordedInvoke(
                    token=args.token, args=clean_value(args.args), result=clean_value(result),
                    answered=answered))
            return result

    return RecordingMocks


def _engine_class():
    engine_pb2 = pulumi.runtime.proto.engine_pb2
    names = {engine_pb2.DEBUG: "debug", engine_pb2.INFO: "info", engine_pb2.WARNING: "warning",
             engine_pb2.ERROR: "error"}

    class RecordingEngine(pulumi.runtime.mocks.MockEngine):
        """Keeps the program's `pulumi.log.*` messages (warnings belong in the plan output)."""

        def __init__(self, recording: Recording, lock: threading.Lock):
            super().__init__(None)
            self.recording, self.lock = recording, lock

        def Log(self, request):
            level = names.get(request.severity, "info")
            if level != "debug":
                with self.lock:
                    self.recording.logs.append((level, request.message))

    return RecordingEngine


def record_program(program_path: Path, project: str, stack: str, config: dict[str, str], *,
                   cloud: Optional[OfflineCloud] = None, secret_keys: tuple[str, ...] = (),
                   preview: bool = False, chdir: bool = True) -> Recording:
    """Run the Pulumi program at ``program_path`` (a file, or a directory holding ``__main__.py``)
    for ``project``/``stack`` with ``config`` (full keys, e.g. ``trainstack:profile``).

    ``preview=False`` (default) makes every output the mock returns known, so every input is a
    plain value in the recording; ``preview=True`` runs the program with ``is_dry_run()`` true,
    like `pulumi preview`. The program runs with its own directory as working directory and first
    on ``sys.path``, as the language host runs it. An exception from the program is re-raised
    unchanged (after the runtime has shut down), so a TrainstackError keeps its exit code.
    """
    program = Path(program_path).resolve()
    workdir = program if program.is_dir() else program.parent
    recording = Recording(project=project, stack=stack)
    cloud = cloud or OfflineCloud(region=config.get("alicloud:region") or "cn-hangzhou")
    outcome: dict[str, BaseException] = {}

    def run() -> None:
        try:
            _run_isolated(program, workdir, recording, cloud, config, secret_keys, preview)
        except BaseException as exc:  # noqa: BLE001 - handed back to the calling thread
            outcome["error"] = exc

    with _program_environment(workdir, chdir), _fewer_gc_passes():
        worker = threading.Thread(target=run, name=f"trainstack-preview-{stack}", daemon=True)
        worker.start()
        worker.join()
    if "error" in outcome:
        raise outcome["error"]
    return recording


def _run_isolated(program: Path, workdir: Path, recording: Recording, cloud: OfflineCloud,
                  config: dict[str, str], secret_keys: tuple[str, ...], preview: bool) -> None:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    executor = _Executor()
    loop.set_default_executor(executor)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"pulumi_alicloud(\..*)?$")
            warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"pulumi(\..*)?$")
            _configure_runtime(recording, cloud, config, secret_keys, preview, workdir)
            target = str(program / "__main__.py" if program.is_dir() else program)
            runtime = pulumi.runtime
            runtime.sync_await._sync_await(runtime.stack.run_in_stack(lambda: _run_program_file(target)))
    finally:
        _drain(loop)
        executor.close()
        asyncio.set_event_loop(None)
        loop.close()


async def _run_program_file(target: str) -> None:
    """Execute the program like the language host does, then let its outputs settle in bulk.

    Pulumi's own shutdown (``wait_for_rpcs``) waits for outstanding outputs one
    ``asyncio.wait(FIRST_COMPLETED)`` at a time, re-adding a callback to every pending output on
    each round: quadratic in the number of outputs (a 512-node program has ~60,000). Waiting for
    all of them at once first is the same wait, linear; failed outputs stay tracked, so
    ``wait_for_rpcs`` still raises their errors exactly as before.
    """
    SETTINGS = pulumi.runtime.settings.SETTINGS
    runpy.run_path(target, run_name="__main__")
    while True:
        with SETTINGS.lock:
            pending = [t for t in SETTINGS.outputs if not t.done()]
        if not pending:
            return
        await asyncio.wait(pending)


class _Executor(ThreadPoolExecutor):
    """The run's RPC threads. Pulumi's mock monitor gives each worker thread an event loop of its
    own; this executor creates those loops itself so it can close them when the run ends."""

    def __init__(self) -> None:
        self._loops: list = []
        self._loops_lock = threading.Lock()
        super().__init__(max_workers=min(32, (os.cpu_count() or 1) + 4), thread_name_prefix="trainstack-preview-rpc",
                         initializer=self._give_loop)

    def _give_loop(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        with self._loops_lock:
            self._loops.append(loop)

    def close(self) -> None:
        self.shutdown(wait=True, cancel_futures=True)
        for loop in self._loops:
            loop.close()


def _configure_runtime(recording: Recording, cloud: OfflineCloud, config: dict[str, str],
                       secret_keys: tuple[str, ...], preview: bool, workdir: Path) -> None:
    """Fresh runtime settings, root resource and config for this thread (never the caller's)."""
    settings, pulumi_config = pulumi.runtime.settings, pulumi.runtime.config
    mocks = _mocks_class()(cloud, recording)
    monitor = _monitor_class()(mocks, recording)
    mocks.monitor = monitor
    engine = _engine_class()(recording, monitor.lock)
    fresh = settings.Settings(project=recording.project, stack=recording.stack, monitor=monitor,
                              engine=engine, dry_run=preview, organization="organization",
                              root_directory=str(workdir))
    fresh.monitor_features = set(monitor.GetDeploymentInfo(empty_pb2.Empty()).supportedFeatures)
    settings.configure(fresh)
    settings.ROOT.set(None)
    pulumi_config.set_all_config(dict(config), list(secret_keys))


def _drain(loop) -> None:
    """Cancel whatever a failed program left scheduled, so nothing outlives its run."""
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in pending:
        task.cancel()
    if pending:
        with contextlib.suppress(BaseException):
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))


#: Cyclic-GC thresholds during a run. A program run allocates hundreds of thousands of futures and
#: tasks; with the default (700, 10, 10) the collector rescans the whole (large) heap so often
#: that a 512-node plan spends half its time there. Measured: 9.9 s -> 5.3 s, peak RSS 431 ->
#: 553 MB. Restored after the run.
GC_THRESHOLDS = (100_000, 50, 100)


@contextlib.contextmanager
def _fewer_gc_passes():
    before = gc.get_threshold()
    gc.set_threshold(*(max(a, b) for a, b in zip(before, GC_THRESHOLDS)))
    try:
        yield
    finally:
        gc.set_threshold(*before)


@contextlib.contextmanager
def _program_environment(workdir: Path, chdir: bool):
    """The program's directory first on sys.path (and as cwd), restored afterwards."""
    entry = str(workdir)
    added = entry not in sys.path
    if added:
        sys.path.insert(0, entry)
    before = os.getcwd()
    if chdir:
        os.chdir(workdir)
    try:
        yield
    finally:
        if chdir:
            os.chdir(before)
        if added:
            with contextlib.suppress(ValueError):
                sys.path.remove(entry)


__all__ = ["RecordedInvoke", "RecordedResource", "Recording", "Secret", "UNKNOWN_TEXT", "record_program"]
