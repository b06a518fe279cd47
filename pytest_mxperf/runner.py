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
import time
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence

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
    if workload.device == "gpu":
        # CUDA_DEVICE_ORDER=PCI_BUS_ID (gpu:N is the GPU that NVML facts name) and a
        # persistent CUDA JIT cache; a value the user set is kept
        from . import nvml
        for name, choice in nvml.gpu_env_sources(env).items():
            env[name] = choice["value"]
            if choice["set_by"] == "suite":
                defaults[name] = choice["value"]
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
    utilisation: Optional[Dict] = None  # utilisation.Sampler's summary, sampled from here


WATCHDOG_POLL_S = 0.25


def tree_rss(pid: int) -> int:
    """Resident memory of a process and its descendants, in bytes (0 when it is gone)."""
    import psutil
    try:
        p = psutil.Process(pid)
        procs = [p] + p.children(recursive=True)
    except psutil.Error:
        return 0
    total = 0
    for q in procs:
        try:
            total += q.memory_info().rss
        except psutil.Error:
            pass
    return total


def _wait(proc, timeout: float, rss_limit: Optional[int], phase_path: Optional[Path] = None,
          warmup_timeout: Optional[float] = None) -> Optional[str]:
    """Wait for ``proc``; returns "timeout", "warmup-timeout", "rss" (over ``rss_limit``) or
    None when it ended. With ``warmup_timeout``, the time until the worker creates
    ``phase_path`` (its warm-up is done: CUDA context, cuDNN autotune, JIT) is bounded by it,
    and ``timeout`` bounds the measurement after that."""
    if not rss_limit and not warmup_timeout:
        try:
            proc.wait(timeout=timeout)
            return None
        except subprocess.TimeoutExpired:
            return "timeout"
    start = time.monotonic()
    measuring_since = None if warmup_timeout else start
    while True:
        try:
            proc.wait(timeout=WATCHDOG_POLL_S)
            return None
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        if rss_limit and tree_rss(proc.pid) > rss_limit:
            return "rss"
        if measuring_since is None:
            if phase_path is not None and phase_path.exists():
                measuring_since = now
            elif now - start > warmup_timeout:
                return "warmup-timeout"
        elif now - measuring_since > timeout:
            return "timeout"


def _sampler(pid: int, spec: Dict, env: Optional[Mapping[str, str]]):
    """A started utilisation sampler for the worker (its GPUs too, when its contexts are);
    None when it cannot start: sampling never stops a measurement."""
    from . import utilisation
    try:
        contexts = ((spec.get("workload") or {}).get("contexts")) or spec.get("contexts") or ()
        gpus = utilisation.gpu_indices(list(contexts), env or os.environ)
        return utilisation.Sampler(pid, gpus, env=env).start()
    except Exception:  # noqa: BLE001 - a broken NVML must not fail the run
        return None


def run_process(command: Sequence[str], spec: Dict, *, timeout: float = DEFAULT_TIMEOUT,
                env: Optional[Mapping[str, str]] = None, rss_limit: Optional[int] = None,
                warmup_timeout: Optional[float] = None) -> ProcessOutcome:
    """Run ``command SPEC.json RESULT.json`` in a fresh session; never hangs, never leaks.

    The worker protocol: read the spec, write a JSON object with at least ``status``
    ("ok", "error", "oom", "unavailable", ...) and ``message`` to RESULT.json.
    ``rss_limit``: a watchdog on the worker's resident memory (GPU workers, which cannot
    have an address-space cap: CUDA reserves huge virtual ranges at context creation).
    ``warmup_timeout``: a separate bound for the worker's untimed warm-up (the worker
    signals its end by creating ``spec["phase_path"]``); ``timeout`` then bounds the rest.
    """
    with spawn.WorkDir() as tmp:
        spec_path = tmp / "spec.json"
        result_path = tmp / "result.json"
        log_path = tmp / "worker.log"
        phase_path = tmp / "measuring"
        if warmup_timeout:
            spec = dict(spec, phase_path=str(phase_path))
        spec_path.write_text(json.dumps(spec, sort_keys=True))
        t0 = time.perf_counter()
        proc = spawn.start(list(command) + [str(spec_path), str(result_path)], env=env, log_path=log_path)
        sampler = _sampler(proc.pid, spec, env)
        try:
            stopped = _wait(proc, timeout, rss_limit, phase_path, warmup_timeout)
        finally:
            # Always reap the whole group: a worker that exited may leave children.
            usage = sampler.stop() if sampler is not None else None
            spawn.kill_process_tree(proc.pid, proc.pid)
            proc.wait()
        wall = time.perf_counter() - t0
        tail = spawn.tail(log_path)
        rc = proc.returncode
        payload = read_result(result_path)

    return classify(stopped, payload, tail, rc, wall, usage, timeout=timeout, warmup_timeout=warmup_timeout,
                    rss_limit=rss_limit)


def read_result(path: Path) -> Optional[Dict]:
    """The JSON a worker wrote to its RESULT.json, or None (none written, or cut short)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def classify(stopped: Optional[str], payload: Optional[Dict], tail: List[str], rc: Optional[int], wall: float,
             usage: Optional[Dict] = None, *, timeout: float = DEFAULT_TIMEOUT,
             warmup_timeout: Optional[float] = None, rss_limit: Optional[int] = None) -> ProcessOutcome:
    """What became of a worker process: its own result, or crash / timeout / oom from how it
    ended (``stopped``: "timeout", "warmup-timeout", "rss" or None when it ended by itself)."""
    last = tail[-1] if tail else "(no output)"
    from .workers.protocol import looks_like_oom
    oom_line = next((ln.strip() for ln in tail if looks_like_oom(ln)), None)

    def outcome(status, message):
        return ProcessOutcome(status, message, payload, tail, rc, wall, usage)

    if stopped == "timeout":
        what = "its measurement" if warmup_timeout else "worker"
        return outcome("timeout", f"{what} timed out after {timeout:g} s; last output: {last}")
    if stopped == "warmup-timeout":
        return outcome("timeout", f"worker's warm-up (first batch, autotune) took over {warmup_timeout:g} s; "
                                  f"last output: {last}")
    if stopped == "rss":
        return outcome("oom", f"worker exceeded the host memory cap of {rss_limit / 2 ** 30:.1f} GiB "
                              "(resident memory watchdog; GPU workers have no address-space cap)")
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


def worker_figures(payload: Dict) -> Dict[str, float]:
    """Figures a throughput worker reports besides its round timings (latency, GPU memory)."""
    figs = payload.get("figures") or {}
    return {k: float(v) for k, v in figs.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def run_result(out: ProcessOutcome, workload: Workload, env: Optional[Mapping[str, str]],
               defaults_applied: Optional[Mapping[str, str]] = None,
               figures: Callable[[Dict], Dict[str, float]] = worker_figures,
               python: Optional[str] = None) -> RunResult:
    """A ProcessOutcome as a RunResult: its figures (``figures(payload)`` when it measured),
    the environment it ran with and what the suite filled in. A GPU worker that failed
    because the MXNet build has no kernel for the GPU gets one line saying which GPU,
    which architectures the wheel of ``python`` carries and which extra would run."""
    payload = out.payload or {}
    meta = dict(payload.get("meta") or {})
    # the scalar facts of a worker result without a "meta" of its own (sizes, counts, names)
    meta.setdefault("result", {k: v for k, v in payload.items()
                               if k not in ("status", "message", "meta") and isinstance(v, (str, int, float, bool))})
    meta["env"] = topology.recorded_env(env or os.environ)
    if out.utilisation:
        meta["utilisation"] = out.utilisation
    meta["env_defaults_applied"] = dict(defaults_applied or {})
    ok = out.status == "ok"
    try:
        figs = figures(payload) if ok else {}
    except (KeyError, TypeError, ValueError) as exc:
        return RunResult(workload=workload, status="error", meta=meta, stderr_tail=out.stderr_tail,
                         message=f"worker result has no usable figures ({type(exc).__name__}: {exc})",
                         returncode=out.returncode, wall_seconds=out.wall_seconds)
    message = out.message
    if workload.device == "gpu" and not ok:
        from . import hardware
        message = hardware.explain_gpu_failure([out.message] + list(out.stderr_tail), workload.contexts, env,
                                               hardware.mxnet_distribution(python)) or message
    return RunResult(workload=workload, status=out.status, message=message,
                     batches_per_round=int(payload.get("batches_per_round", 0) or 0),
                     round_seconds=[float(x) for x in payload.get("round_seconds", [])] if ok else [],
                     figures={k: float(v) for k, v in figs.items() if v is not None},
                     meta=meta, stderr_tail=out.stderr_tail, returncode=out.returncode,
                     wall_seconds=out.wall_seconds)


def run_spec(spec: Dict, workload: Workload, *, timeout: float = DEFAULT_TIMEOUT,
             env: Optional[Mapping[str, str]] = None, command: Optional[Sequence[str]] = None,
             defaults_applied: Optional[Mapping[str, str]] = None) -> RunResult:
    """Run the measurement worker on ``spec`` and turn whatever happens into a RunResult."""
    out = run_process(command or worker_command(), spec, timeout=timeout, env=env)
    return run_result(out, workload, env, defaults_applied)


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
                 seed: int = 0, warmup_timeout: Optional[float] = None, **options) -> RunResult:
    """Measure one workload in one fresh worker process.

    ``memory_limit=-1`` means the default cap (75% of RAM); None means no cap.
    ``env`` replaces os.environ as the base environment; ``extra_env`` is laid over it
    (both before the suite's defaults fill what is still unset).
    """
    as_cap, rss_cap = memory_caps(workload, resolve_memory_limit(memory_limit))
    full_env, defaults = build_env(workload, env, extra_env)
    spec = make_spec(workload, time_budget=time_budget, smoke=smoke, memory_limit=as_cap,
                     seed=seed, **options)
    out = run_process(command or worker_command(python), spec, timeout=timeout, env=full_env, rss_limit=rss_cap,
                      warmup_timeout=warmup_timeout)
    return run_result(out, workload, full_env, defaults, python=python)


def memory_caps(workload: Workload, limit: Optional[int]):
    """(address-space cap for the worker, resident-memory watchdog for the parent).

    A CPU worker gets the address-space cap (RLIMIT_AS, set in the worker before MXNet is
    imported; a CPU cell under a CUDA build creates no CUDA context, so it is safe). A GPU
    worker cannot: the CUDA driver reserves very large virtual ranges when it creates a
    context, and an address-space cap makes that fail as "out of memory". Its host memory
    is capped by the parent's watchdog on resident memory instead."""
    if workload.device == "gpu":
        return None, limit
    return limit, None


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
