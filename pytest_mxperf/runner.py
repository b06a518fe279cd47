"""Run one workload in a fresh worker process: spawn, time out, clean up, classify.

The worker is started with subprocess (never fork: MXNet reads its threading
environment only at import, and a forked copy of an initialised engine is unsafe), in its
own session so that the whole process group can be killed, with its output going to a
file (a full pipe must never block it). Whatever happens, the caller gets a RunResult:
ok, error, oom, crash, timeout or unavailable, with the worker's last stderr lines.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from typing import Dict, List, Mapping, Optional, Sequence

from . import spawn, topology
from .samples import RunResult
from .workload import Workload

WORKER_MODULE = "pytest_mxperf.workers.throughput"
DEFAULT_TIMEOUT = 600.0


def default_memory_limit() -> Optional[int]:
    """75% of physical memory as the worker's address-space cap (these machines have no swap)."""
    try:
        import psutil
        return int(psutil.virtual_memory().total * 0.75)
    except Exception:  # pragma: no cover
        return None


def resolve_memory_limit(limit: Optional[int]) -> Optional[int]:
    """-1 means the default cap (75% of RAM), None no cap, anything else bytes."""
    return default_memory_limit() if limit == -1 else limit


def worker_command(python: Optional[str] = None) -> List[str]:
    return spawn.python_command(python, WORKER_MODULE)


def build_env(workload: Workload, base: Optional[Mapping[str, str]] = None,
              extra: Optional[Mapping[str, str]] = None):
    base = dict(os.environ if base is None else base)
    if extra:
        base.update(extra)
    ncpu = workload.num_devices if workload.device == "cpu" else 1
    env, defaults = topology.worker_env(base, workload.threads, ncpu)
    return spawn.with_package_path(env), defaults


@dataclasses.dataclass
class ProcessOutcome:
    """What became of one worker process, whatever its kind of measurement."""

    status: str  # the worker's own status, or crash / timeout / oom when it left no result
    message: str
    payload: Optional[Dict]
    stderr_tail: List[str]
    returncode: Optional[int]
    wall_seconds: float


def run_process(command: Sequence[str], spec: Dict, *, timeout: float = DEFAULT_TIMEOUT,
                env: Optional[Mapping[str, str]] = None) -> ProcessOutcome:
    """Run ``command SPEC.json RESULT.json`` in a fresh session; never hangs, never leaks.

    The worker protocol: read the spec, write a JSON object with at least ``status``
    ("ok", "error", "oom", "unavailable", ...) and ``message`` to RESULT.json.
    """
    with spawn.WorkDir() as tmp:
        spec_path = tmp / "spec.json"
        result_path = tmp / "result.json"
        log_path = tmp / "worker.log"
        spec_path.write_text(json.dumps(spec, sort_keys=True))
        t0 = time.perf_counter()
        timed_out = False
        proc = spawn.start(list(command) + [str(spec_path), str(result_path)], env=env, log_path=log_path)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            # Always reap the whole group: a worker that exited may leave children.
            spawn.kill_process_tree(proc.pid, proc.pid)
            proc.wait()
        wall = time.perf_counter() - t0
        tail = spawn.tail(log_path)
        rc = proc.returncode
        payload = None
        if result_path.exists():
            try:
                payload = json.loads(result_path.read_text())
            except ValueError:
                payload = None

    last = tail[-1] if tail else "(no output)"
    from .workers.protocol import looks_like_oom
    oom_line = next((ln.strip() for ln in tail if looks_like_oom(ln)), None)

    def outcome(status, message):
        return ProcessOutcome(status, message, payload, tail, rc, wall)

    if timed_out:
        return outcome("timeout", f"worker timed out after {timeout:g} s; last output: {last}")
    if payload is None or not isinstance(payload, dict):
        if rc is not None and rc < 0:
            sig = spawn.signal_name(-rc)
            if oom_line:
                return outcome("oom", f"worker ran out of memory ({sig}): {oom_line}")
            hint = " (possibly the kernel's OOM killer)" if -rc == 9 else ""  # SIGKILL
            return outcome("crash", f"worker killed by {sig}{hint}; last output: {last}")
        if oom_line:
            return outcome("oom", f"worker ran out of memory: {oom_line}")
        return outcome("crash", f"worker exited with code {rc} and no result; last output: {last}")
    return outcome(str(payload.get("status", "error")), str(payload.get("message", "")))


def run_spec(spec: Dict, workload: Workload, *, timeout: float = DEFAULT_TIMEOUT,
             env: Optional[Mapping[str, str]] = None, command: Optional[Sequence[str]] = None,
             defaults_applied: Optional[Mapping[str, str]] = None) -> RunResult:
    """Run the measurement worker on ``spec`` and turn whatever happens into a RunResult."""
    out = run_process(command or worker_command(), spec, timeout=timeout, env=env)
    payload = out.payload or {}
    meta = dict(payload.get("meta") or {})
    meta["env"] = topology.recorded_env(env or os.environ)
    meta["env_defaults_applied"] = dict(defaults_applied or {})
    return RunResult(workload=workload, status=out.status, message=out.message,
                     batches_per_round=int(payload.get("batches_per_round", 0) or 0),
                     round_seconds=[float(x) for x in payload.get("round_seconds", [])] if out.status == "ok" else [],
                     meta=meta, stderr_tail=out.stderr_tail, returncode=out.returncode,
                     wall_seconds=out.wall_seconds)


def make_spec(workload: Workload, *, time_budget: float = 3.0, smoke: bool = False,
              memory_limit: Optional[int] = None, seed: int = 0, **options) -> Dict:
    spec = {"workload": workload.to_dict(), "time_budget": time_budget, "smoke": smoke,
            "memory_limit": memory_limit, "seed": seed}
    spec.update(options)
    return spec


def run_workload(workload: Workload, *, time_budget: float = 3.0, smoke: bool = False,
                 timeout: float = DEFAULT_TIMEOUT, memory_limit: Optional[int] = -1,
                 env: Optional[Mapping[str, str]] = None, extra_env: Optional[Mapping[str, str]] = None,
                 python: Optional[str] = None, command: Optional[Sequence[str]] = None,
                 seed: int = 0, **options) -> RunResult:
    """Measure one workload in one fresh worker process.

    ``memory_limit=-1`` means the default cap (75% of RAM); None means no cap.
    ``env`` replaces os.environ as the base environment; ``extra_env`` is laid over it
    (both before the suite's defaults fill what is still unset).
    """
    memory_limit = resolve_memory_limit(memory_limit)
    full_env, defaults = build_env(workload, env, extra_env)
    spec = make_spec(workload, time_budget=time_budget, smoke=smoke, memory_limit=memory_limit,
                     seed=seed, **options)
    return run_spec(spec, workload, timeout=timeout, env=full_env,
                    command=command or worker_command(python), defaults_applied=defaults)


def probe(python: Optional[str] = None, timeout: float = 120.0,
          env: Optional[Mapping[str, str]] = None) -> Dict:
    """Ask a fresh process what MXNet is installed: version, build features, GPUs, threads."""
    env = spawn.with_package_path(os.environ if env is None else env)
    env.pop("PYTHONWARNINGS", None)
    with spawn.WorkDir() as tmp:
        out = tmp / "probe.json"
        try:
            proc = subprocess.run(spawn.python_command(python, "pytest_mxperf.workers.protocol") + ["--probe", str(out)], env=env,
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  timeout=timeout, start_new_session=True)
        except subprocess.TimeoutExpired:
            return {"status": "timeout", "message": f"MXNet probe timed out after {timeout:g} s", "num_gpus": 0}
        if out.exists():
            try:
                return json.loads(out.read_text())
            except ValueError:
                pass
        lines = proc.stdout.decode("utf-8", "replace").strip().splitlines()
        return {"status": "error", "num_gpus": 0,
                "message": f"cannot import mxnet in a worker: {lines[-1] if lines else 'no output'}"}
