"""Run one worker process: spawn it, bound it in time and memory, reap it, classify it.

The worker is started with subprocess (never fork: MXNet reads its threading
environment only at import, and a forked copy of an initialised engine is unsafe), in its
own session so that the whole process group can be killed, with its output going to a
file (a full pipe must never block it). Whatever happens, the caller gets a
ProcessOutcome: the worker's own status (ok, error, oom, unavailable, ...) or crash,
timeout or oom from how it ended, with the worker's last stderr lines. What a process
means (a workload's figures) is the measuring side's business (``measure/runner.py``).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from pytest_mxperf.model import options
from pytest_mxperf.model.workload import Workload
from pytest_mxperf.proc import spawn
from pytest_mxperf.proc.child_env import child_env

DEFAULT_TIMEOUT = options.TIMEOUT_S

#: ``observe(pid, spec, env)``: started beside a worker (e.g. a utilisation sampler); its
#: ``stop()`` returns a summary kept in ``ProcessOutcome.utilisation``, or None
Observer = Callable[[int, Dict, Optional[Mapping[str, str]]], Any]


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
    #: a worker of several cells: its progress lines ({"cell": i, "phase" | "result"}), in order
    progress: Optional[List[Dict]] = None


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


class _Progress:
    """A worker's progress lines (``{"cell": i, "phase": "start" | "measuring"}`` and
    ``{"cell": i, "result": {...}}``), read as they are appended; ``since`` is when the
    current phase began here and ``measuring`` whether the current cell's warm-up is over."""

    def __init__(self, path: Path):
        self.path, self.offset, self.lines = path, 0, []
        self.since, self.measuring = time.monotonic(), False

    def read(self) -> None:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return
        end = data.rfind(b"\n") + 1  # whole lines only: the rest is still being written
        self.offset += end
        for raw in data[:end].splitlines():
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            self.lines.append(line)
            self.since = time.monotonic()
            self.measuring = line.get("phase") == "measuring"


class _PhaseFile:
    """A one-cell worker's phase: measuring from the start without a warm-up bound, else once
    it has created ``path`` (its warm-up is done); ``since`` is when that phase began."""

    def __init__(self, path: Optional[Path], warming_up: bool):
        self.path, self.measuring, self.since = path, not warming_up, time.monotonic()

    def read(self) -> None:
        if not self.measuring and self.path is not None and self.path.exists():
            self.measuring, self.since = True, time.monotonic()


def _wait(proc, timeout: float, rss_limit: Optional[int], phase_path: Optional[Path] = None,
          warmup_timeout: Optional[float] = None, progress: Optional[_Progress] = None) -> Optional[str]:
    """Wait for ``proc``; returns "timeout", "warmup-timeout", "rss" (over ``rss_limit``) or
    None when it ended. With ``warmup_timeout``, the time until the worker creates
    ``phase_path`` (its warm-up is done: CUDA context, cuDNN autotune, JIT) is bounded by it,
    and ``timeout`` bounds the measurement after that. With ``progress`` (a worker of several
    cells) the same two bounds apply to each cell, from its progress lines."""
    if progress is None and not rss_limit and not warmup_timeout:
        try:
            spawn.wait(proc, timeout)
            return None
        except subprocess.TimeoutExpired:
            return "timeout"
    phase = progress if progress is not None else _PhaseFile(phase_path, bool(warmup_timeout))
    while True:
        try:
            spawn.wait(proc, WATCHDOG_POLL_S)
            phase.read()
            return None
        except subprocess.TimeoutExpired:
            pass
        phase.read()
        if rss_limit and tree_rss(proc.pid) > rss_limit:
            return "rss"
        gone = time.monotonic() - phase.since
        if phase.measuring and gone > timeout:
            return "timeout"
        if not phase.measuring and gone > (warmup_timeout or timeout):
            return "warmup-timeout" if warmup_timeout else "timeout"


def run_process(command: Sequence[str], spec: Dict, *, timeout: float = DEFAULT_TIMEOUT,
                env: Optional[Mapping[str, str]] = None, rss_limit: Optional[int] = None,
                warmup_timeout: Optional[float] = None, observe: Optional[Observer] = None,
                cells: bool = False) -> ProcessOutcome:
    """Run ``command SPEC.json RESULT.json`` in a fresh session; never hangs, never leaks.

    The worker protocol: read the spec, write a JSON object with at least ``status``
    ("ok", "error", "oom", "unavailable", ...) and ``message`` to RESULT.json.
    ``rss_limit``: a watchdog on the worker's resident memory (GPU workers, which cannot
    have an address-space cap: CUDA reserves huge virtual ranges at context creation).
    ``warmup_timeout``: a separate bound for the worker's untimed warm-up (the worker
    signals its end by creating ``spec["phase_path"]``); ``timeout`` then bounds the rest.
    ``observe``: started beside the worker; what its ``stop()`` returns is the outcome's
    ``utilisation``. ``cells``: a worker of several cells (``spec["cells"]``), which writes
    progress lines to ``spec["progress_path"]``: they bound each cell's warm-up and
    measurement and are the outcome's ``progress``.
    """
    with spawn.WorkDir() as tmp:
        spec_path = tmp / "spec.json"
        result_path = tmp / "result.json"
        log_path = tmp / "worker.log"
        phase_path = tmp / "measuring"
        progress = _Progress(tmp / "progress.jsonl") if cells else None
        if progress is not None:
            spec = dict(spec, progress_path=str(progress.path))
        elif warmup_timeout:
            spec = dict(spec, phase_path=str(phase_path))
        spec_path.write_text(json.dumps(spec, sort_keys=True))
        t0 = time.perf_counter()
        proc = spawn.start(list(command) + [str(spec_path), str(result_path)], env=env, log_path=log_path)
        sampler = observe(proc.pid, spec, env) if observe is not None else None
        try:
            stopped = _wait(proc, timeout, rss_limit, phase_path, warmup_timeout, progress)
        finally:
            # Always reap the whole group: a worker that exited may leave children.
            usage = sampler.stop() if sampler is not None else None
            spawn.kill_process_tree(proc.pid, proc.pid)
            proc.wait()
        wall = time.perf_counter() - t0
        tail = spawn.tail(log_path)
        rc = proc.returncode
        payload = read_result(result_path)

    out = classify(stopped, payload, tail, rc, wall, usage, timeout=timeout, warmup_timeout=warmup_timeout,
                   rss_limit=rss_limit)
    if progress is not None:
        out.progress = progress.lines
    return out


def progress_lines(path: Path) -> List[Dict]:
    """The whole progress lines a worker of several cells wrote to ``path`` (none if no file)."""
    progress = _Progress(path)
    progress.read()
    return progress.lines


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
    from pytest_mxperf.workers.protocol import looks_like_oom
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
    env = spawn.with_package_path(child_env(env))
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
