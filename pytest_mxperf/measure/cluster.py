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
* **Resident** (the spec has ``control``, as a duet's parent gives a resident worker its
  pipes, ``measure/duet.py``): the cluster is one side of a duet. Each worker gets pipes of
  its own and serves rounds (``workers/dist_worker.py``); the launcher relays (``_Relay``):
  every command of the parent goes to every worker at once, and once all have answered it
  says one answer back: "ready" when every worker has warmed up, a round's seconds the
  slowest worker's (a ``dist_sync`` step ends when both workers' pushes have been summed),
  "over" as soon as one says it. So a cluster launch is paid once a pair, not once a
  measurement, and its rounds alternate with the other install's cluster's, which waits
  meanwhile (its workers block on their pipes, its scheduler and server on their sockets).
  The result carries the relayed rounds (``round_seconds``, ``batches_per_round``) and
  samples/s from their median.
"""

from __future__ import annotations

import json
import os
import select
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
        self.pass_fds: tuple = ()

    def start(self):
        self.popen = spawn.start(self.cmd, env=self.env, log_path=self.log, pass_fds=self.pass_fds)
        for fd in self.pass_fds:  # the child's ends of its control pipes: its own now
            os.close(fd)
        self.pass_fds = ()

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


class _Relay:
    """A resident cluster's side of a duet: the parent's commands (JSON lines on ``control``,
    as ``workers/protocol.serve_duet`` reads them) to every worker, their answers back as one.
    ``poll(t)`` waits at most t seconds for a line from either end and relays what came."""

    def __init__(self, control, workers: List[_Proc]):
        # not closed with this object: the parent reads the end of its pipe as the launcher's
        # exit, which comes after the result is written
        self.up_in = os.fdopen(int(control[0]), "rb", buffering=0, closefd=False)
        self.up_out = os.fdopen(int(control[1]), "w", buffering=1, closefd=False)
        self.workers = workers
        self.unread: Dict[object, bytes] = {}
        self.ends: Dict[str, tuple] = {}       # worker name -> (to it, from it)
        self.command: Dict = {"op": "ready"}   # what the awaited answers answer: first, the warm-up
        self.answers: Dict[str, Optional[Dict]] = {w.name: None for w in workers}
        self.rounds: List[float] = []          # the timed rounds, as relayed (the slowest worker's)
        self.batches: Optional[int] = None
        self.lost = False                      # the parent closed its end
        self.gone: set = set()                 # workers whose end closed
        for w in workers:
            c_read, p_write = os.pipe()   # launcher -> worker
            p_read, c_write = os.pipe()   # worker -> launcher
            w.pass_fds = (c_read, c_write)
            self.ends[w.name] = (os.fdopen(p_write, "w", buffering=1), os.fdopen(p_read, "rb", buffering=0))

    def control_of(self, w: _Proc) -> List[int]:
        """The descriptors worker ``w`` reads and writes its control lines on (its spec's ``control``)."""
        return list(w.pass_fds)

    def close(self) -> None:
        for to_w, from_w in self.ends.values():
            for f in (to_w, from_w):
                try:
                    f.close()
                except OSError:
                    pass

    def _lines(self, f) -> List[Dict]:
        data = f.read(65536)
        if not data:
            return [None]
        buf = self.unread.get(f, b"") + data
        *whole, self.unread[f] = buf.split(b"\n")
        return [json.loads(line) for line in whole if line.strip()]

    def _up(self, msg: Dict) -> None:
        try:
            self.up_out.write(json.dumps(msg) + "\n")
            self.up_out.flush()
        except (BrokenPipeError, ValueError):
            self.lost = True

    def poll(self, timeout: float) -> None:
        by_file = {self.ends[w.name][1]: w for w in self.workers if w.popen is not None and w.name not in self.gone}
        ready, _, _ = select.select([self.up_in, *by_file], [], [], timeout)
        for f in ready:
            for msg in self._lines(f):
                if f is self.up_in:
                    self._from_parent(msg)
                elif msg is None:  # a worker's end closed: its exit, which the supervisor sees
                    self.gone.add(by_file[f].name)
                else:
                    self._from_worker(by_file[f], msg)

    def _from_parent(self, cmd: Optional[Dict]) -> None:
        if cmd is None:
            self.lost = True
            return
        for w in self.workers:
            try:
                self.ends[w.name][0].write(json.dumps(cmd) + "\n")
                self.ends[w.name][0].flush()
            except (BrokenPipeError, ValueError):
                pass  # a worker that is gone: the supervisor reports it
        if cmd.get("op") != "finish":
            self.command, self.answers = cmd, {w.name: None for w in self.workers}

    def _from_worker(self, w: _Proc, msg: Dict) -> None:
        if self.answers.get(w.name, False) is not None:
            return  # nothing awaited from it (a line it was not asked for)
        self.answers[w.name] = msg
        got = list(self.answers.values())
        over = next((a for a in got if a and a.get("op") == "over"), None)
        if over is not None:
            self.answers = {}
            self._up(over)
            return
        if any(a is None for a in got):
            return
        self.answers = {}
        if all(a.get("op") == "ready" for a in got):
            windows = [a.get("warmup_window") or {} for a in got]
            started = [x["started"] for x in windows if x.get("started") is not None]
            ended = [x["ended"] for x in windows if x.get("ended") is not None]
            self._up(dict(got[0], workers=len(got), warmup_window={
                "alone": all(x.get("alone") for x in windows), "started": min(started) if started else None,
                "ended": max(ended) if ended else None}))
        elif all(a.get("op") == "done" for a in got):
            seconds = max(float(a["seconds"]) for a in got)
            if self.command.get("timed", True):
                self.rounds.append(seconds)
                self.batches = int(self.command.get("batches", 1))
            self._up({"op": "done", "seconds": seconds})
        else:
            self._up({"op": "over", "status": "error",
                      "message": f"the cluster's workers answered {self.command.get('op')!r} unlike each other: "
                                 f"{sorted(str(a.get('op')) for a in got)}"})


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
        workers.append(add("worker", i, []))
    relay = _Relay(spec["control"], workers) if spec.get("control") else None
    for i, p in enumerate(workers):
        wspec = dict(spec.get("worker") or {})
        wspec["kvstore"] = kv
        if relay is not None:
            wspec["control"] = relay.control_of(p)
            if spec.get("solo_warmup"):
                wspec["solo_warmup"] = True
        if weights_dir:
            wspec["weights_path"] = str(Path(weights_dir) / f"{kv}-worker{i}.npz")
        p.spec_path.write_text(json.dumps(wspec, sort_keys=True))
        p.cmd = [python, "-m", worker_module, str(p.spec_path), str(p.result_path)]

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
            if relay is None:
                time.sleep(POLL_SECONDS)
                continue
            relay.poll(POLL_SECONDS)
            if relay.lost:  # the duet's parent is gone: nothing more will be asked
                status, message = "error", "the duet's parent closed the control channel"
                failure_at = time.perf_counter()
                break
        leftover_before = [p for p in procs if p.poll() is None]
        stop_reference = failure_at if failure_at is not None else time.perf_counter()
        teardown = stop_all(stop_reference)
        if failure is None and not timed_out and leftover_before and status == "ok":
            status = "error"
            message = ("workers finished but " + ", ".join(p.name for p in leftover_before)
                       + f" did not exit within {KILL_WITHIN_SECONDS:g} s; killed")
    finally:
        signal.signal(signal.SIGTERM, old)
        if relay is not None:
            relay.close()

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
        elif relay is None:
            out["samples_per_second"] = sum(r["samples_per_second"] or 0.0 for r in results)
            out["timed_seconds"] = max(r["timed_seconds"] for r in results)
        elif not relay.rounds:
            out["status"], out["message"] = "error", "the duet's parent asked for no timed round"
        else:  # the relayed rounds: each the slowest worker's k steps
            per_round = sorted(relay.rounds)[len(relay.rounds) // 2]
            out.update(round_seconds=relay.rounds, batches_per_round=relay.batches, duet=True,
                       timed_seconds=per_round,
                       samples_per_second=sum(r["worker_batch"] for r in results) * relay.batches / per_round)
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
