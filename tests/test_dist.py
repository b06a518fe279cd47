"""The ps-lite launcher (pytest_mxperf.measure.cluster): correctness, fault handling, clean-up.

Every cluster runs in fresh processes (the launcher itself through runner.run_process);
this pytest process never imports mxnet. Each test takes a few seconds.
"""

import os
import re
import signal
import socket
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from pytest_mxperf.measure import cluster as dist
from pytest_mxperf.measure import runner
from pytest_mxperf.model.workload import Workload

LAUNCHER = [sys.executable, "-m", "pytest_mxperf.measure.cluster"]
WORKER = {"model": "mlp", "global_batch": 128, "steps": 30, "seed": 3, "learning_rate": 0.1,
          "momentum": 0.9, "report_every": 5}
TESTS = Path(__file__).resolve().parent


def launch(spec, timeout=180, env=None):
    out = runner.run_process(LAUNCHER, spec, timeout=timeout, env=env or dist.base_env())
    assert out.payload is not None, f"launcher left no result: {out.status} {out.message} {out.stderr_tail}"
    return out.payload


def assert_nothing_left(res):
    pids = [p["pid"] for p in res["processes"] if p["pid"]]
    assert pids, res
    still = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                still.append(pid)
        except psutil.Error:
            pass
    assert still == [], f"processes left behind: {still}"
    assert res["leftover_pids"] == [] and res["leftover_ports"] == []
    listening = {c.laddr.port for c in psutil.net_connections(kind="tcp")
                 if c.status == psutil.CONN_LISTEN and c.laddr}
    assert not listening & set(res["listen_ports"]), f"ports still listening: {listening & set(res['listen_ports'])}"


def load(path):
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def test_free_port_is_bindable_on_loopback():
    port = dist.free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_without_psutil_a_port_in_time_wait_is_not_left_behind_and_a_listener_is(monkeypatch):
    """Seen in an A/A session: every distributed launch of the reference venv (no psutil)
    ended "left behind: ports [45117]" (its own root port, closed, its connection in
    TIME_WAIT), so every dist_sync pair failed and the cell was unresolved. Without psutil a
    port counts as left behind only when something still listens on it."""
    monkeypatch.setitem(sys.modules, "psutil", None)   # import psutil raises ImportError
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # as ps-lite's ZeroMQ listeners do
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    cli = socket.create_connection(("127.0.0.1", port))
    conn, _ = srv.accept()
    conn.close()                     # the listening side closes first: TIME_WAIT on its port
    cli.close()
    srv.close()
    with socket.socket() as plain:   # what the old check did: this port reads as taken
        with pytest.raises(OSError):
            plain.bind(("127.0.0.1", port))
    assert dist.ports_still_listening([port]) == []
    with socket.socket() as live:
        live.bind(("127.0.0.1", 0))
        live.listen(1)
        assert dist.ports_still_listening([live.getsockname()[1]]) == [live.getsockname()[1]]


def test_unknown_kvstore_is_rejected_without_starting_anything():
    res = dist.launch({"kvstore": "dist_nonsense"})
    assert res["status"] == "error" and "dist_nonsense" in res["message"]


@pytest.mark.parametrize("kvstore", ["dist_sync", "dist_device_sync"])
def test_dist_sync_weights_match_local_run(tmp_path, kvstore):
    local = launch({"kvstore": "local", "worker": WORKER, "weights_dir": str(tmp_path)})
    assert local["status"] == "ok", local["message"]
    res = launch({"kvstore": kvstore, "num_workers": 2, "num_servers": 1, "worker": WORKER,
                  "weights_dir": str(tmp_path)})
    assert res["status"] == "ok", res["message"]
    assert sorted(w["rank"] for w in res["workers"]) == [0, 1]
    assert all(w["worker_batch"] == 64 for w in res["workers"])
    assert res["samples_per_second"] > 0
    ref = load(tmp_path / "local-worker0.npz")
    for i in range(2):
        got = load(tmp_path / f"{kvstore}-worker{i}.npz")
        assert sorted(got) == sorted(ref)
        for name in ref:
            np.testing.assert_allclose(got[name], ref[name], rtol=1e-4, atol=1e-5, err_msg=name)
    # The run really trained (same total data, same seed, same SGD as the local run).
    w0 = res["workers"][0]
    assert w0["final_loss"] < w0["first_loss"]
    assert_nothing_left(res)


def test_dist_async_runs_to_completion():
    res = launch({"kvstore": "dist_async", "num_workers": 2, "worker": WORKER})
    assert res["status"] == "ok", res["message"]
    assert [w["status"] for w in res["workers"]] == ["ok", "ok"]
    assert all(np.isfinite(w["weights_checksum"]) for w in res["workers"])
    assert_nothing_left(res)


class WorkerKiller(threading.Thread):
    """SIGKILLs one worker of a running cluster from outside, as the OOM killer or an operator
    would: it finds the worker among this process's descendants (the launcher runs it as
    ``python -m pytest_mxperf.workers.dist_worker .../worker<index>.spec.json ...``),
    waits until the worker's log (``worker<index>.log`` beside its spec) shows ``after_step``,
    and kills that one process. It gives up ``within`` seconds after it started."""

    def __init__(self, index, after_step, within):
        super().__init__(daemon=True)
        self.index, self.after_step, self.within = index, after_step, within
        self.done = threading.Event()  # the test has its result: stop looking
        self.killed_pid = None
        self.seen = "worker not found"  # what it last saw, for the failure message

    def find(self):
        spec_name = f"worker{self.index}.spec.json"
        try:
            procs = psutil.Process().children(recursive=True)
        except psutil.Error:
            return None, None
        for proc in procs:
            try:
                cmd = proc.cmdline()
            except psutil.Error:
                continue
            specs = [Path(arg) for arg in cmd if Path(arg).name == spec_name]
            if dist.WORKER_MODULE in cmd and specs:
                return proc, specs[0].with_name(f"worker{self.index}.log")
        return None, None

    def last_step(self, log):
        try:
            text = log.read_text(errors="replace")
        except OSError:
            return 0
        return max((int(m) for m in re.findall(r"mxperf-dist-worker: rank=\d+ step=(\d+)", text)), default=0)

    def run(self):
        end = time.monotonic() + self.within
        proc = log = None
        while not self.done.is_set() and time.monotonic() < end:
            if proc is None:
                proc, log = self.find()
            if proc is not None:
                step = self.last_step(log)
                self.seen = f"worker {self.index} (pid {proc.pid}) at step {step}"
                if step >= self.after_step:
                    try:
                        proc.send_signal(signal.SIGKILL)  # psutil: refuses a reused pid
                        self.killed_pid = proc.pid
                    except psutil.Error as exc:
                        self.seen += f", could not kill it: {exc!r}"
                    return
            self.done.wait(0.05)


def test_sigkilled_worker_stops_the_whole_cluster():
    worker = dict(WORKER, steps=100000, step_sleep=0.02)
    killer = WorkerKiller(index=1, after_step=5, within=150)
    killer.start()
    try:
        res = launch({"kvstore": "dist_sync", "num_workers": 2, "worker": worker, "timeout": 120})
    finally:
        killer.done.set()
        killer.join(timeout=10)
    assert not killer.is_alive()
    assert killer.killed_pid is not None, f"the test never killed worker 1: {killer.seen}"
    assert res["status"] == "crash", res["message"]
    dead = res["dead"]
    assert dead["role"] == "worker" and dead["index"] == 1
    assert dead["pid"] == killer.killed_pid
    assert dead["state"] == "killed by SIGKILL"
    assert "worker 1" in res["message"] and "SIGKILL" in res["message"]
    # its last output travels with the result
    assert any("step=" in line for line in dead["tail"])
    assert "step=" in res["message"]
    # every other process was stopped and reaped, and the teardown was timed (how long it takes
    # against KILL_WITHIN_SECONDS is this machine's figure: benchmarks/dist_teardown.py)
    assert 0 <= res["teardown_seconds"] <= res["wall_seconds"]
    assert all(p["returncode"] is not None for p in res["processes"])
    assert_nothing_left(res)


def test_worker_error_stops_the_cluster_and_reports_it():
    # tests/failing_dist_worker.py: the dist worker, but rank 1 raises after its 3rd update.
    # The workers inherit the launcher's PYTHONPATH (cluster.base_env keeps it).
    worker = dict(WORKER, steps=100000, step_sleep=0.02)
    env = dist.base_env()
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(TESTS)])
    res = launch({"kvstore": "dist_sync", "num_workers": 2, "worker": worker, "timeout": 120,
                  "worker_module": "failing_dist_worker"}, env=env)
    assert res["status"] == "error", res["message"]
    assert res["dead"]["role"] == "worker" and res["dead"]["rank"] == 1
    assert "injected failure at step 3" in res["message"]
    assert 0 <= res["teardown_seconds"] <= res["wall_seconds"]  # its seconds: benchmarks/dist_teardown.py
    assert all(p["returncode"] is not None for p in res["processes"])
    assert_nothing_left(res)


def test_overall_timeout_stops_everything():
    worker = dict(WORKER, steps=100000, step_sleep=0.05)
    res = launch({"kvstore": "dist_sync", "num_workers": 2, "worker": worker, "timeout": 4})
    assert res["status"] == "timeout"
    assert "timed out after 4 s" in res["message"]
    assert_nothing_left(res)


def _cluster_processes(since, token):
    """The cluster roles started since ``since`` whose PYTHONPATH holds ``token``: this test's
    own, not another test's running beside it (an xdist worker's)."""
    found = []
    for p in psutil.process_iter(["cmdline", "create_time"]):
        cmd = p.info["cmdline"] or []
        if (p.info["create_time"] or 0) < since - 1:
            continue
        if "pytest_mxperf.workers.dist_worker" in cmd or cmd[-2:] == ["-c", dist.ROLE_CODE]:
            try:
                if token in p.environ().get("PYTHONPATH", "") and p.status() != psutil.STATUS_ZOMBIE:
                    found.append((p.pid, cmd))
            except psutil.Error:
                pass
    return found


def test_killing_the_launcher_leaves_no_role_behind():
    t0 = time.time()
    worker = dict(WORKER, steps=100000, step_sleep=0.05)
    env = dist.base_env()
    token = f"/nonexistent/mxperf-test-{os.getpid()}-{time.time_ns()}"  # every role inherits it
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], token])
    seen, done = set(), threading.Event()

    def watch():  # the roles as they run: the search below finds this cluster's
        while not done.is_set():
            seen.update(pid for pid, _ in _cluster_processes(t0, token))
            time.sleep(0.2)
    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        out = runner.run_process(LAUNCHER, {"kvstore": "dist_sync", "num_workers": 2, "worker": worker,
                                            "timeout": 120}, timeout=8, env=env)
    finally:
        done.set()
        watcher.join()
    assert out.status == "timeout"
    assert len(seen) >= 4, seen  # scheduler, server, two workers
    deadline = time.time() + 5
    while _cluster_processes(t0, token) and time.time() < deadline:
        time.sleep(0.1)
    assert _cluster_processes(t0, token) == []


# ------------------------------------------------------------------ a duet of two clusters

DIST_SYNC = Workload(model="mlp", mode="dist", batch_size=128, threads="1", kvstore="dist_sync")


def _cluster_pair(spec, payloads=None, **kw):
    """One duet pair of two clusters of this interpreter; ``payloads`` gets each side's
    launcher result (candidate first), as the figures are read from it."""
    from pytest_mxperf.measure import duet

    def figures(payload):
        if payloads is not None:
            payloads.append(payload)
        return {"samples_per_s": payload["samples_per_second"]}
    return duet.run_pair(DIST_SYNC, candidate=None, reference=None, module="pytest_mxperf.measure.cluster",
                         spec=spec, figures=figures, memory_limit=None, **kw)


def test_a_duet_of_two_clusters_takes_turns_at_rounds_of_every_worker_and_leaves_nothing():
    from stand_ins import new_children
    from pytest_mxperf.measure import duet
    assert duet.resident("pytest_mxperf.measure.cluster")
    spec = {"kvstore": "dist_sync", "num_workers": 2, "num_servers": 1, "timeout": 120,
            "worker": dict(WORKER, warmup_steps=3)}
    payloads = []
    c, r = _cluster_pair(spec, payloads, seed=1, candidate_first=False, time_budget=0.3)
    assert c.ok and r.ok, (c.message, r.message)
    assert len(payloads) == 2
    # both clusters ran the same rounds of the same size, alternated (the reference first here)
    assert len(c.round_seconds) == len(r.round_seconds) == duet.rounds_for(0.3, c.meta["duet"]["sizing_round_seconds"])
    assert c.batches_per_round == r.batches_per_round >= 1
    assert (c.meta["duet"]["ran_first"], r.meta["duet"]["ran_first"]) == (False, True)
    for side, res in zip((c, r), payloads):
        # every worker served every round: its own rounds are the relayed ones' count, each
        # at most the relayed (the slowest worker's) seconds
        assert [w["rank"] for w in sorted(res["workers"], key=lambda w: w["rank"])] == [0, 1]
        for w in res["workers"]:
            assert len(w["round_seconds"]) == len(res["round_seconds"])
            assert all(own <= relayed + 1e-9 for own, relayed in zip(w["round_seconds"], res["round_seconds"]))
        # samples/s: the global batch's steps in the median relayed round
        k, rounds = res["batches_per_round"], sorted(res["round_seconds"])
        assert side.value("samples_per_s") == pytest.approx(128 * k / rounds[len(rounds) // 2])
        assert_nothing_left(res)
    assert new_children() == []


def test_a_worker_that_fails_in_a_cluster_duet_ends_the_pair_in_one_line_and_leaves_nothing():
    # tests/failing_dist_worker.py: rank 1 raises after its 3rd update, inside its warm-up here
    from stand_ins import new_children
    env = dist.base_env()
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(TESTS)])
    spec = {"kvstore": "dist_sync", "num_workers": 2, "worker": dict(WORKER, warmup_steps=5), "timeout": 120,
            "worker_module": "failing_dist_worker"}
    c, r = _cluster_pair(spec, seed=0, time_budget=0.3, env=env, reference_env=env, timeout=60)
    assert not c.ok and not r.ok
    failed, partner = (c, r) if "partner" not in c.message else (r, c)
    # ps-lite gives ranks in the order workers reach the scheduler: rank 1 may be either launch's worker
    assert re.search(r"worker [01] \(pid \d+, rank 1\) died", failed.message), failed.message
    assert "injected failure at step 3" in failed.message, failed.message
    assert "\n" not in failed.message
    assert "its duet partner" in partner.message, partner.message
    assert new_children() == []


def test_a_cluster_whose_worker_hangs_in_a_round_fails_the_pair_at_its_timeout_and_leaves_nothing():
    from stand_ins import new_children
    spec = {"kvstore": "dist_sync", "num_workers": 2, "timeout": 120,
            "worker": dict(WORKER, warmup_steps=1, step_sleep=2.5)}
    c, r = _cluster_pair(spec, seed=0, time_budget=0.3, timeout=1, warmup_timeout=60)
    assert not c.ok and not r.ok
    failed = c if "no answer" in c.message else r
    assert "no answer from the" in failed.message and "in 1 s" in failed.message, (c.message, r.message)
    deadline = time.time() + 5
    while new_children() and time.time() < deadline:
        time.sleep(0.1)
    assert new_children() == []
