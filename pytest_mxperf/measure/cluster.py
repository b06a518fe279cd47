"""Launch a ps-lite cluster (scheduler, servers, workers) on 127.0.0.1 and supervise it.

Run as ``python -m pytest_mxperf.measure.cluster SPEC.json RESULT.json`` (through
``runner.run_process`` / ``mxperf.run_module``), or call :func:`launch` directly. This
module never imports mxnet: every role is its own fresh process.

* The scheduler and the servers are ``python -c ROLE_CODE`` (``import mxnet`` through
  ``workers.protocol.import_mxnet``, the operator wrappers from the cache) with ``DMLC_ROLE``
  = scheduler / server: MXNet runs that role at import and exits when the workers finalize.
  The workers are ``python -m pytest_mxperf.workers.dist_worker`` (or the spec's
  ``worker_module``) with ``DMLC_ROLE=worker``. (MXNet's bundled ``dmlc_tracker`` is not
  used.)
* Every process gets ``DMLC_PS_ROOT_URI=127.0.0.1``, a free ``DMLC_PS_ROOT_PORT`` (a
  socket bound to 127.0.0.1:0), ``DMLC_NUM_SERVER``, ``DMLC_NUM_WORKER``,
  ``DMLC_NODE_HOST=127.0.0.1`` and ``DMLC_INTERFACE=lo``, and its own session
  (``start_new_session=True``) so its whole process group can be killed.
* A supervisor loop polls every process every 50 ms. When a worker (or the scheduler or
  a server) dies with an error (whoever killed it), every other process is stopped
  (SIGTERM, then SIGKILL after ``term_grace`` s) within ``KILL_WITHIN_SECONDS`` of the
  poll that saw the death (``teardown_seconds``), and the result names the dead process
  and carries its last output. An overall ``timeout`` stops everything too.
  Whatever happens, nothing is left behind: the result lists any process still alive
  and any port the cluster listened on that is still listening (both must be empty).
* ``kvstore: "local"`` runs the same worker once, without a cluster: the reference that
  a ``dist_sync`` run's weights are compared with.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

from pytest_mxperf.model.jsonio import write_json
from pytest_mxperf.proc import spawn

#: after a process of the cluster dies with an error, all the others are gone within this
KILL_WITHIN_SECONDS = 10.0
DIST_KVSTORES = ("dist_sync", "dist_async", "dist_device_sync")
#: the module every worker runs unless the spec names another (``worker_module``)
WORKER_MODULE = "pytest_mxperf.workers.dist_worker"
#: what the scheduler and the servers run: MXNet runs the role at import and exits after it
ROLE_CODE = "from pytest_mxperf.workers.protocol import import_mxnet; import_mxnet()"
KVSTORES = ("local",) + DIST_KVSTORES
POLL_SECONDS = 0.05


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago (bind to port 0, read, close)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class _Proc:
    def __init__(self, role: str, index: int, cmd: List[str], env: Dict[str, str], workdir: Path):
        self.role, self.index = role, index
        self.name = f"{role} {index}"
        self.log = workdir / f"{role}{index}.log"
        self.spec_path = workdir / f"{role}{index}.spec.json"
        self.result_path = workdir / f"{role}{index}.result.json"
        self.cmd, self.env = cmd, env
        self.popen: Optional[subprocess.Popen] = None
        self.ended_at: Optional[float] = None

    def start(self):
        self.popen = spawn.start(self.cmd, env=self.env, log_path=self.log)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def poll(self) -> Optional[int]:
        rc = self.popen.poll()
        if rc is not None and self.ended_at is None:
            self.ended_at = time.perf_counter()
        return rc

    def signal_group(self, sig):
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def result(self) -> Optional[dict]:
        try:
            return json.loads(self.result_path.read_text())
        except (OSError, ValueError):
            return None

    def last_step(self) -> int:
        last = 0
        for line in spawn.tail(self.log, 40):
            if "mxperf-dist-worker:" in line and " step=" in line:
                try:
                    last = max(last, int(line.split(" step=")[1].split()[0]))
                except (IndexError, ValueError):
                    pass
        return last

    def report(self) -> dict:
        rc = self.popen.returncode if self.popen else None
        return {"role": self.role, "index": self.index, "pid": self.pid if self.popen else None,
                "returncode": rc, "state": spawn.describe_returncode(rc), "tail": spawn.tail(self.log)}


def _listening_ports(pids: List[int]) -> List[int]:
    """TCP ports in LISTEN state owned by any of ``pids`` (or their threads)."""
    try:
        import psutil
    except ImportError:  # pragma: no cover
        return []
    ports = set()
    for pid in pids:
        try:
            p = psutil.Process(pid)
            conns = p.net_connections(kind="tcp") if hasattr(p, "net_connections") else p.connections(kind="tcp")
        except Exception:
            continue
        for c in conns:
            if c.status == psutil.CONN_LISTEN and c.laddr:
                ports.add(c.laddr.port)
    return sorted(ports)


def ports_still_listening(ports: List[int]) -> List[int]:
    """Which of ``ports`` something on this machine still listens on (any owner)."""
    if not ports:
        return []
    try:
        import psutil
        conns = psutil.net_connections(kind="tcp")
        busy = {c.laddr.port for c in conns if c.status == psutil.CONN_LISTEN and c.laddr}
        return sorted(set(ports) & busy)
    except Exception:
        # Fall back to trying to bind each port (an interpreter without psutil: a reference
        # venv). SO_REUSEADDR: a port whose closed connections wait out TIME_WAIT binds, one
        # something still listens on does not; without it every cluster's own root port read
        # as left behind just after a clean teardown.
        left = []
        for port in ports:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    left.append(port)
        return left


def alive(pids: List[int]) -> List[int]:
    """Which of ``pids`` still exist as running (non-zombie) processes."""
    try:
        import psutil
    except ImportError:  # pragma: no cover
        return []
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.Error:
            pass
    return out


def base_env(threads: int = 1, base: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    env = {k: v for k, v in (os.environ if base is None else base).items()
           if not k.startswith(("DMLC_", "PS_"))}
    env = spawn.with_package_path(env)
    env.setdefault("OMP_NUM_THREADS", str(threads))
    env.pop("PYTHONWARNINGS", None)
    return env


def launch(spec: Dict, workdir: Optional[str] = None) -> Dict:
    """Run one cluster as ``spec`` says and return the result (see the module doc).

    spec keys: ``kvstore`` (local / dist_sync / dist_async / dist_device_sync),
    ``num_workers`` (2), ``num_servers`` (1), ``timeout`` (120 s), ``term_grace`` (1 s),
    ``threads`` (OpenMP threads per process, 1), ``python``, and
    ``worker``: the dist_worker spec (model, global_batch, steps, seed, learning_rate,
    momentum, ...). ``weights_dir``: where workers save their final weights (npz).
    ``worker_module`` (default ``WORKER_MODULE``): the module each worker runs, as
    ``python -m MODULE SPEC.json RESULT.json``; any module that speaks the dist worker's
    protocol: it reads the worker spec (with ``kvstore`` and ``weights_path`` filled in),
    writes a JSON result (``status``, ``message``, ``rank``, ``samples_per_second``,
    ``timed_seconds``), exits non-zero on an error, and prints
    ``mxperf-dist-worker: rank=R step=I`` lines, from which the launcher reads progress
    and the dead process's rank. The workers inherit the launcher's PYTHONPATH (see
    ``base_env``): the module must be importable with it.
    """
    if workdir is None:
        with spawn.WorkDir(prefix="mxperf-dist-") as tmp:
            return launch(spec, tmp)
    work = Path(workdir)
    kv = spec.get("kvstore", "dist_sync")
    if kv not in KVSTORES:
        return {"status": "error", "message": f"unknown kvstore {kv!r} (known: {', '.join(KVSTORES)})"}
    dist = kv in DIST_KVSTORES
    nworkers = int(spec.get("num_workers", 2)) if dist else 1
    nservers = int(spec.get("num_servers", 1)) if dist else 0
    timeout = float(spec.get("timeout", 120.0))
    grace = float(spec.get("term_grace", 1.0))
    python = spec.get("python") or sys.executable
    worker_module = spec.get("worker_module") or WORKER_MODULE
    env0 = base_env(int(spec.get("threads", 1)))
    port = free_port() if dist else None
    if dist:
        env0.update({"DMLC_PS_ROOT_URI": "127.0.0.1", "DMLC_PS_ROOT_PORT": str(port),
                     "DMLC_NUM_SERVER": str(nservers), "DMLC_NUM_WORKER": str(nworkers),
                     "DMLC_NODE_HOST": "127.0.0.1", "DMLC_INTERFACE": "lo"})
    weights_dir = spec.get("weights_dir")

    procs: List[_Proc] = []

    def add(role, index, cmd):
        env = dict(env0)
        if dist:
            env["DMLC_ROLE"] = role
        p = _Proc(role, index, cmd, env, work)
        procs.append(p)
        return p

    if dist:
        add("scheduler", 0, [python, "-c", ROLE_CODE])
        for i in range(nservers):
            add("server", i, [python, "-c", ROLE_CODE])
    workers = []
    for i in range(nworkers):
        p = add("worker", i, [])
        wspec = dict(spec.get("worker") or {})
        wspec["kvstore"] = kv
        if weights_dir:
            wspec["weights_path"] = str(Path(weights_dir) / f"{kv}-worker{i}.npz")
        p.spec_path.write_text(json.dumps(wspec, sort_keys=True))
        p.cmd = [python, "-m", worker_module, str(p.spec_path), str(p.result_path)]
        workers.append(p)

    t0 = time.perf_counter()
    listen_ports: List[int] = []
    failure: Optional[_Proc] = None
    failure_at: Optional[float] = None
    timed_out = False
    status, message = "ok", ""

    def stop_all(reason_time: float):
        running = [p for p in procs if p.popen and p.poll() is None]
        for p in running:
            p.signal_group(signal.SIGTERM)
        end = time.perf_counter() + grace
        while time.perf_counter() < end and any(p.poll() is None for p in running):
            time.sleep(0.02)
        for p in procs:
            # Only groups whose leader we have not reaped: a reaped pid may be reused.
            if p.popen and p.poll() is None:
                p.signal_group(signal.SIGKILL)
                try:
                    p.popen.kill()
                except OSError:
                    pass
        for p in procs:
            if p.popen:
                try:
                    p.popen.wait(timeout=10)
                except subprocess.TimeoutExpired:  # pragma: no cover - unkillable (D state)
                    pass
                p.poll()
        return time.perf_counter() - reason_time

    def on_sigterm(signum, frame):  # our own parent gave up on us: leave nothing behind
        stop_all(time.perf_counter())
        os._exit(3)

    old = signal.signal(signal.SIGTERM, on_sigterm)
    teardown = None
    try:
        for p in procs:
            p.start()
        while True:
            now = time.perf_counter()
            rcs = {p: p.poll() for p in procs}
            bad = [p for p in procs if rcs[p] not in (None, 0)]
            # A scheduler/server that exits 0 while workers still run: normal while the
            # workers finalize, broken if they are still running KILL_WITHIN_SECONDS later.
            early = [p for p in procs if p.role != "worker" and rcs[p] == 0
                     and any(rcs[w] is None for w in workers)
                     and now - (p.ended_at or now) > KILL_WITHIN_SECONDS]
            if bad or early:
                failure = min(bad or early, key=lambda p: p.ended_at or now)
                # ended_at: the poll that first saw it gone (at most POLL_SECONDS late)
                failure_at = failure.ended_at or now
                if not listen_ports and dist:  # it died before every worker reported a step
                    listen_ports = _listening_ports([p.pid for p in procs])
                break
            if all(rcs[w] == 0 for w in workers):
                # Workers finalized: scheduler and servers follow within moments.
                end = now + KILL_WITHIN_SECONDS
                while time.perf_counter() < end and any(p.poll() is None for p in procs):
                    time.sleep(POLL_SECONDS)
                break
            if now - t0 > timeout:
                timed_out = True
                failure_at = now
                break
            if not listen_ports and dist and all(w.last_step() >= 1 for w in workers):
                listen_ports = _listening_ports([p.pid for p in procs])
            time.sleep(POLL_SECONDS)
        leftover_before = [p for p in procs if p.poll() is None]
        stop_reference = failure_at if failure_at is not None else time.perf_counter()
        teardown = stop_all(stop_reference)
        if failure is None and not timed_out and leftover_before:
            status = "error"
            message = ("workers finished but " + ", ".join(p.name for p in leftover_before)
                       + f" did not exit within {KILL_WITHIN_SECONDS:g} s; killed")
    finally:
        signal.signal(signal.SIGTERM, old)

    wall = time.perf_counter() - t0
    pids = [p.pid for p in procs if p.popen]
    if port:
        listen_ports = sorted(set(listen_ports) | {port})
    results = [w.result() for w in workers]
    out = {
        "status": status, "message": message, "kvstore": kv, "num_workers": nworkers,
        "num_servers": nservers, "root_port": port, "wall_seconds": wall,
        "kill_within_seconds": KILL_WITHIN_SECONDS, "teardown_seconds": teardown,
        "processes": [p.report() for p in procs], "workers": results,
        "listen_ports": listen_ports,
        "leftover_pids": alive(pids), "leftover_ports": ports_still_listening(listen_ports),
        "dead": None,
    }
    if timed_out:
        out["status"] = "timeout"
        names = [p.name for p in procs]
        out["message"] = (f"cluster timed out after {timeout:g} s; stopped {', '.join(names)} "
                          f"in {teardown:.2f} s")
    elif failure is not None:
        rep = failure.report()
        res = failure.result() or {}
        rank = res.get("rank")
        for line in rep["tail"]:
            if "mxperf-dist-worker: rank=" in line and rank is None:
                try:
                    rank = int(line.split("rank=")[1].split()[0])
                except (IndexError, ValueError):
                    pass
        rep["rank"] = rank
        out["dead"] = rep
        last = rep["tail"][-1] if rep["tail"] else "(no output)"
        why = res.get("message") or last
        out["status"] = "crash" if (failure.popen.returncode or 0) < 0 else "error"
        out["message"] = (f"{failure.name} (pid {failure.pid}{', rank %s' % rank if rank is not None else ''}) "
                          f"died ({rep['state']}): {why}; stopped the other {len(procs) - 1} process(es) "
                          f"in {teardown:.2f} s")
    elif status == "ok":
        bad = [r for r in results if not r or r.get("status") != "ok"]
        if bad:
            out["status"] = "error"
            out["message"] = "a worker exited 0 without a result"
        else:
            out["samples_per_second"] = sum(r["samples_per_second"] or 0.0 for r in results)
            out["timed_seconds"] = max(r["timed_seconds"] for r in results)
    if out["leftover_pids"] or out["leftover_ports"]:
        out["status"] = "error" if out["status"] == "ok" else out["status"]
        out["message"] = (out["message"] + "; " if out["message"] else "") + (
            f"left behind: pids {out['leftover_pids']} ports {out['leftover_ports']}")
    return out


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) != 2:
        print("usage: python -m pytest_mxperf.measure.cluster SPEC.json RESULT.json", file=sys.stderr)
        return 2
    with open(argv[0]) as fh:
        spec = json.load(fh)
    # Work inside RESULT.json's directory: runner.run_process removes it even when it had
    # to kill this launcher (a TemporaryDirectory of our own would then be left behind).
    workdir = Path(argv[1]).resolve().parent / "cluster"
    try:
        workdir.mkdir(exist_ok=True)
        result = launch(spec, str(workdir))
    except Exception as exc:  # the launcher itself failed; launch() already cleaned up
        import traceback
        traceback.print_exc()
        result = {"status": "error", "message": f"launcher failed: {exc!r}"[:500]}
    write_json(argv[1], result)
    for p in result.get("processes", []):
        print(f"{p['role']} {p['index']} pid {p['pid']}: {p['state']}")
    print(f"status {result['status']}: {result.get('message', '')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
