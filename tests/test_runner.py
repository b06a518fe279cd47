"""The isolated measurement engine: real workers for the threading facts, stand-ins for faults."""

import os
import sys
import time
from pathlib import Path

import psutil
import pytest

from pytest_mxperf.measure import runner
from pytest_mxperf.proc import worker
from pytest_mxperf.machine import topology
from pytest_mxperf.model import run_facts
from pytest_mxperf.model.workload import Workload

FAULT = [sys.executable, str(Path(__file__).with_name("fault_worker.py"))]
LENET = Workload("lenet", batch_size=8)


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "MXNET_", "KMP_"))}
    env.update(extra)
    return env


@pytest.mark.parametrize("threads", ["1", "2"])
def test_user_omp_threads_reach_the_worker_and_are_recorded(threads):
    r = runner.run_workload(LENET, smoke=True, env=_env(OMP_NUM_THREADS=threads), timeout=120)
    assert r.status == "ok", r.message
    # threadpoolctl, inside the worker, reads MXNet's libgomp pool
    assert r.meta["threads"]["openmp"] == int(threads)
    assert r.meta["env"]["OMP_NUM_THREADS"] == threads
    assert r.meta["env_defaults_applied"] == {}
    # the variables are the ones the worker reports it got, the same the parent passed here
    assert r.meta["worker_env"] == r.meta["env"] == topology.recorded_env(_env(OMP_NUM_THREADS=threads))


def test_the_recorded_variables_are_the_ones_the_worker_got():
    """An interpreter that is a wrapper setting its own variables (``MXNET_SUBGRAPH_BACKEND=NONE
    exec python``): the parent passed none of them, the worker reports what it got, and that
    is what is recorded (and diffed against the baseline); a worker that reports nothing keeps
    what the parent passed."""
    got = {"MXNET_SUBGRAPH_BACKEND": "NONE", "OMP_NUM_THREADS": "2"}
    out = worker.ProcessOutcome("ok", "", {"round_seconds": [0.1], "meta": {"worker_env": got}}, [], 0, 1.0)
    r = runner.run_result(out, LENET, {"OMP_NUM_THREADS": "2", "PATH": "/bin"})
    assert r.meta["env"] == got
    out = worker.ProcessOutcome("ok", "", {"round_seconds": [0.1], "meta": {}}, [], 0, 1.0)
    assert runner.run_result(out, LENET, {"OMP_NUM_THREADS": "2", "PATH": "/bin"}).meta["env"] == {
        "OMP_NUM_THREADS": "2"}


def test_unset_threads_are_filled_with_physical_cores():
    r = runner.run_workload(LENET, smoke=True, env=_env(MXNET_SUBGRAPH_BACKEND="NONE"), timeout=120)
    assert r.status == "ok", r.message
    cores = topology.available_physical_cores()
    assert r.meta["env_defaults_applied"] == {"OMP_NUM_THREADS": str(cores)}
    assert r.meta["threads"]["openmp"] == cores
    assert r.meta["env"]["MXNET_SUBGRAPH_BACKEND"] == "NONE"
    assert r.meta["mxnet_version"] and isinstance(r.meta["features"], list)
    assert r.meta["bind_seconds"] > 0 and r.meta["first_batch_seconds"] > 0
    assert r.meta["peak_rss_bytes"] > 0
    # every fact a real worker and its runner record is declared (model/run_facts.py), and
    # the typed properties read them
    assert run_facts.undeclared(r.meta) == []
    assert r.env["MXNET_SUBGRAPH_BACKEND"] == "NONE" and r.openmp_threads == cores
    assert r.mxnet_version == r.meta["mxnet_version"]


def test_a_measurement_has_warmup_rounds_and_samples():
    r = runner.run_workload(LENET, time_budget=0.5, env=_env(), timeout=120)
    assert r.status == "ok", r.message
    assert len(r.round_seconds) >= 5 and r.batches_per_round >= 1
    assert r.meta["warmup_batches"] >= 3  # first batch + at least two untimed warm-up batches
    assert all(s > 0 for s in r.samples)
    assert min(r.samples) <= r.median <= max(r.samples)  # the process's figure lies among its rounds'


def test_a_rounds_length_follows_a_small_budget():
    """The timed seconds asked for are the budget: 5 rounds of 0.2 s at the default 1.5-s budget's
    scale, shorter rounds when the budget cannot hold 5 of them, never under 0.02 s; a spec's
    own round length is kept."""
    from pytest_mxperf.workers.throughput import round_seconds_for
    assert round_seconds_for({"time_budget": 1.5}) == 0.2
    assert round_seconds_for({"time_budget": 0.3}) == pytest.approx(0.06)
    assert round_seconds_for({"time_budget": 0.3, "min_rounds": 3}) == pytest.approx(0.1)
    assert round_seconds_for({"time_budget": 0.01}) == 0.02
    assert round_seconds_for({"time_budget": 0.3, "round_seconds": 0.5}) == 0.5


@pytest.mark.parametrize("per_batch, batches", [(0.3, 2), (0.1, 5), (0.04, 13), (0.001, 20)])
def test_the_warm_up_is_half_a_second_of_at_least_two_and_at_most_twenty_batches(per_batch, batches):
    """The throughput worker's untimed warm-up (``protocol.warm_up`` with its bounds, the clock
    replaced by one that each batch moves on by ``per_batch``): two batches however long they
    take, then until half a second has passed, never more than twenty."""
    from pytest_mxperf.workers import throughput
    from pytest_mxperf.workers.protocol import warm_up
    bounds = (throughput.WARMUP_BATCHES, throughput.WARMUP_SECONDS, throughput.WARMUP_MAX_BATCHES)
    assert bounds == (2, 0.5, 20)
    now = [0.0]

    class Cell:
        def timed(self, k):
            now[0] += per_batch * k
            return per_batch * k

    warm = warm_up(Cell(), *bounds, clock=lambda: now[0])
    assert len(warm) == batches, warm
    assert sum(warm) == pytest.approx(now[0])


@pytest.mark.parametrize("per_batch, latency, expected", [
    (0.05, False, (4, 7)),     # rounds of about 0.2 s: 4 batches, 7 of them in 1.5 s
    (0.35, False, (1, 5)),     # a batch longer than a round: rounds of one, never fewer than 5
    (0.001, False, (200, 7)),
    (0.055, True, (1, 50)),    # latency: batch by batch, at least 50
    (2 ** -10, True, (1, 1536)),  # as many as 1.5 s holds (2 ** -10 s a batch: exact in binary)
    (0.0001, True, (1, 2000)),  # and at most 2000
])
def test_the_timed_part_is_sized_from_the_warm_ups_seconds_a_batch(per_batch, latency, expected):
    from pytest_mxperf.workers.throughput import timed_rounds
    assert timed_rounds({"time_budget": 1.5}, per_batch, latency) == expected


def test_python_warnings_as_errors_do_not_break_the_worker():
    r = runner.run_workload(LENET, smoke=True, env=_env(PYTHONWARNINGS="error"), timeout=120)
    assert r.status == "ok", r.message


def test_training_mode_runs_forward_backward_update():
    r = runner.run_workload(Workload("lenet", mode="train", batch_size=8), smoke=True, env=_env(), timeout=120)
    assert r.status == "ok", r.message
    assert r.median > 0


def test_gpu_context_without_gpu_is_unavailable_not_a_crash():
    # CUDA_VISIBLE_DEVICES="": the worker's MXNet sees no GPU on any machine (a CUDA build
    # counts none; a CPU build has none), so this holds on a GPU box too
    r = runner.run_workload(Workload("lenet", contexts=("gpu:0",)), smoke=True, env=_env(CUDA_VISIBLE_DEVICES=""),
                            timeout=120)
    assert r.status == "unavailable", (r.status, r.message)
    assert "GPU" in r.message


def test_unknown_model_in_a_spec_is_a_clear_error():
    spec = runner.make_spec(LENET, smoke=True)
    spec["workload"]["model"] = "nope"
    env, _ = runner.build_env(LENET, _env())
    r = runner.run_result(runner.run_process(runner.worker_command(), spec, timeout=120, env=env), LENET, env)
    assert r.status == "error"
    assert "nope" in r.message and "\n" not in r.message


def test_real_out_of_memory_is_reported_as_oom():
    w = Workload("resnet152_v2", batch_size=32)
    r = runner.run_workload(w, smoke=True, memory_limit=1_500_000_000, env=_env(), timeout=300)
    assert r.status == "oom", (r.status, r.message)
    assert "alloc" in r.message.lower() or "memory" in r.message.lower()
    assert r.stderr_tail


def _fault(mode, timeout=60, tmp_path=None):
    env, _ = runner.build_env(LENET, _env())
    out = runner.run_process(FAULT + [mode], {"workload": LENET.to_dict()}, timeout=timeout, env=env)
    return runner.run_result(out, LENET, env)


def test_segfault_reports_crash_with_last_stderr_lines():
    r = _fault("segfault")
    assert r.status == "crash"
    assert "SIGSEGV" in r.message
    assert any("about to segfault" in ln for ln in r.stderr_tail)


def _child_pid_from(tail):
    for ln in tail:
        if "hanging with child" in ln:
            return int(ln.rsplit(" ", 1)[1])
    return None


def test_hang_reports_timeout_near_its_limit_and_leaves_no_process():
    t0 = time.monotonic()
    r = _fault("hang", timeout=3)
    elapsed = time.monotonic() - t0
    assert r.status == "timeout"
    assert "timed out after 3 s" in r.message
    assert elapsed >= 3  # it was given its time; the hung worker and its child are killed, not waited for
    child = _child_pid_from(r.stderr_tail)
    assert child is not None
    time.sleep(0.2)
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE


def test_children_left_by_a_finished_worker_are_reaped():
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    r = _fault("orphan")
    assert r.status == "ok"
    time.sleep(0.2)
    after = {p.pid for p in psutil.Process().children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE}
    assert after <= before


@pytest.mark.parametrize("mode,status,needle", [
    ("exit3", "crash", "code 3"),
    ("garbage", "crash", "no result"),
    ("oom-abort", "oom", "bad_alloc"),
])
def test_other_deaths_are_classified(mode, status, needle):
    r = _fault(mode)
    assert r.status == status
    assert needle in r.message
    assert "\n" not in r.message


def test_probe_reports_mxnet_without_importing_it_here():
    info = worker.probe()
    assert info["status"] == "ok"
    assert info["num_gpus"] >= 0
    assert "mxnet" not in sys.modules


def test_a_gpu_worker_gets_no_address_space_cap_and_a_cpu_worker_keeps_it(tmp_path):
    """The spec a worker receives: RLIMIT_AS for CPU cells, none for GPU cells (CUDA's
    context creation reserves huge virtual ranges); the GPU worker's host memory is
    watched by the parent instead. Checked with a worker that reports its own limit."""
    script = tmp_path / "report_cap.py"
    script.write_text(
        "import json, resource, sys\n"
        "from pytest_mxperf.workers.protocol import serve\n"
        "def run(spec):\n"
        "    soft, _ = resource.getrlimit(resource.RLIMIT_AS)\n"
        "    return {'status': 'ok', 'message': '', 'figures': {'throughput': 1.0},\n"
        "            'meta': {'rlimit_as': None if soft == resource.RLIM_INFINITY else soft,\n"
        "                     'spec_cap': spec.get('memory_limit')}}\n"
        "serve(run, sys.argv[1:])\n")
    cmd = [sys.executable, str(script)]
    cpu = runner.run_workload(Workload("lenet", batch_size=1), memory_limit=2 * 2 ** 30, command=cmd)
    gpu = runner.run_workload(Workload("lenet", batch_size=1, contexts=("gpu:0",)), memory_limit=2 * 2 ** 30,
                              command=cmd)
    assert cpu.ok and gpu.ok, (cpu.message, gpu.message)
    assert cpu.meta["rlimit_as"] == 2 * 2 ** 30 and cpu.meta["spec_cap"] == 2 * 2 ** 30
    assert gpu.meta["rlimit_as"] is None and gpu.meta["spec_cap"] is None
    assert runner.memory_caps(Workload("lenet", contexts=("gpu:0",)), 123) == (None, 123)
    assert runner.memory_caps(Workload("lenet"), 123) == (123, None)


def test_the_resident_memory_watchdog_stops_a_growing_worker(tmp_path):
    script = tmp_path / "grow.py"
    script.write_text("import time\nblocks = []\nwhile True:\n    blocks.append(bytearray(50 * 2 ** 20))\n"
                      "    time.sleep(0.05)\n")
    out = runner.run_process([sys.executable, str(script)], {}, timeout=120, rss_limit=300 * 2 ** 20)
    assert out.status == "oom" and "host memory cap" in out.message


def test_the_warm_up_is_bounded_apart_from_the_measurement(tmp_path):
    """A worker that warms up for longer than --perf-timeout but measures quickly is not
    killed; one whose warm-up exceeds the warm-up bound is, with that said."""
    script = tmp_path / "phases.py"
    script.write_text(
        "import json, sys, time\n"
        "spec = json.load(open(sys.argv[1]))\n"
        "time.sleep(spec['warm'])\n"
        "open(spec['phase_path'], 'w').close()\n"
        "time.sleep(spec['measure'])\n"
        "json.dump({'status': 'ok', 'message': ''}, open(sys.argv[2], 'w'))\n")
    cmd = [sys.executable, str(script)]
    ok = runner.run_process(cmd, {"warm": 2.0, "measure": 0.1}, timeout=1.0, warmup_timeout=30.0)
    assert ok.status == "ok", ok.message
    slow_warm = runner.run_process(cmd, {"warm": 60.0, "measure": 0.1}, timeout=100.0, warmup_timeout=1.0)
    assert slow_warm.status == "timeout" and "warm-up" in slow_warm.message
    slow_measure = runner.run_process(cmd, {"warm": 0.1, "measure": 60.0}, timeout=1.0, warmup_timeout=30.0)
    assert slow_measure.status == "timeout" and "measurement timed out" in slow_measure.message
