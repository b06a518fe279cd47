"""The machine-state probe and its labels (machine/state.py, judge/machine_states.py, workers/calibrate.py)."""

import math
import sys

import psutil
import pytest

from pytest_mxperf.judge import machine_states as L
from pytest_mxperf.machine import state as M
from pytest_mxperf.proc import spawn

CHILD_WORK = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass\n"
STAT = "cpu  {user} 0 {system} {idle} 0 0 0 {steal} 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 5 6\n"


def stat(user, system, idle, steal=0):
    return STAT.format(user=user, system=system, idle=idle, steal=steal)


def test_the_probe_runs_in_its_own_process_and_measures_positive_finite_figures():
    p = M.run_probe()
    assert p is not None
    for k in ("gemm_gflops", "stream_gbps", "seconds", "process_seconds"):
        assert math.isfinite(p[k]) and p[k] > 0, (k, p)


def test_the_probe_ignores_the_users_thread_settings():
    env = dict(M.os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MXNET_ENGINE_TYPE="NaiveEngine")
    p = M.run_probe(env=env)
    assert p is not None and p["blas_threads"] == M.probe_threads(), p


def test_a_probe_that_cannot_run_gives_none(tmp_path):
    no_python = tmp_path / "python-that-fails"
    no_python.write_text("#!/bin/sh\nexit 3\n")
    no_python.chmod(0o755)
    assert M.run_probe(python=str(no_python), timeout=30) is None


def test_the_probe_environment_drops_the_users_threading_and_keeps_openblas_safety_settings():
    env = M.probe_env({"OMP_NUM_THREADS": "1", "GOMP_CPU_AFFINITY": "0", "MXNET_SUBGRAPH_BACKEND": "NONE",
                       "MXNET_ENGINE_TYPE": "NaiveEngine", "KMP_AFFINITY": "compact", "OPENBLAS_NUM_THREADS": "1",
                       "MKL_NUM_THREADS": "1", "GOTO_NUM_THREADS": "1", "OPENBLAS_CORETYPE": "Haswell",
                       "OPENBLAS_L2_SIZE": "1048576", "PYTHONWARNINGS": "error", "PATH": "/bin"})
    cores = str(M.probe_threads())
    for gone in ("GOMP_CPU_AFFINITY", "MXNET_SUBGRAPH_BACKEND", "MXNET_ENGINE_TYPE", "KMP_AFFINITY",
                 "GOTO_NUM_THREADS", "PYTHONWARNINGS"):
        assert gone not in env, gone
    assert env["OMP_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == env["MKL_NUM_THREADS"] == cores
    assert env["OPENBLAS_CORETYPE"] == "Haswell" and env["OPENBLAS_L2_SIZE"] == "1048576"
    assert env["PATH"] == "/bin" and env["PYTHONPATH"].split(":")[0] == spawn.package_path()


def test_parse_proc_stat():
    s = M.parse_proc_stat(stat(100, 50, 800, 10))
    assert s == {"busy": 150, "idle": 800, "steal": 10, "total": 960}
    real = "cpu  4705 356 584 3699 23 0 23 7 0 0\n"  # user nice system idle iowait irq softirq steal guest guest_nice
    assert M.parse_proc_stat(real) == {"busy": 4705 + 356 + 584 + 23, "idle": 3699 + 23, "steal": 7,
                                       "total": 4705 + 356 + 584 + 23 + 3699 + 23 + 7}
    with pytest.raises(ValueError):
        M.parse_proc_stat("cpu0 1 2 3 4\nintr 1 2 3\n")


def meter(texts, own, clock, hz=100):
    texts, own, clock = iter(texts), iter(own), iter(clock)
    m = M.LoadMeter(reader=lambda: next(texts), own_cpu=lambda: next(own), clock=lambda: next(clock), hz=hz)
    m.start()
    return m.stop()


def test_load_meter_counts_only_other_processes():
    # 400 busy ticks = 4 CPU-s at 100 Hz over 2 s of wall time; our children used 2 CPU-s of it
    load = meter([stat(0, 0, 0), stat(300, 100, 0)], [10.0, 12.0], [0.0, 2.0])
    assert load == {"wall_s": 2.0, "other_cpus": pytest.approx(1.0), "steal_frac": 0.0}
    # all of the machine's busy time was ours: nobody else; more than ours (tick rounding): floored at 0
    assert meter([stat(0, 0, 0), stat(150, 50, 200)], [0.0, 2.0], [0.0, 2.0])["other_cpus"] == 0.0
    assert meter([stat(0, 0, 0), stat(150, 50, 200)], [0.0, 2.3], [0.0, 2.0])["other_cpus"] == 0.0
    # steal: 40 of 400 ticks
    assert meter([stat(0, 0, 0), stat(100, 0, 260, 40)], [0.0, 1.0], [0.0, 2.0])["steal_frac"] == pytest.approx(0.1)


def test_a_waited_for_child_counts_as_our_own_cpu_time(tmp_path):
    """The real accounting the load meter subtracts: a child that burnt half a CPU-second
    (by its own CPU clock, whatever the machine's load) is in our CPU time once waited for."""
    own0 = M.own_cpu_seconds()
    spawn.start([sys.executable, "-c", CHILD_WORK], log_path=tmp_path / "child.log").wait()
    assert M.own_cpu_seconds() - own0 >= 0.5


def test_load_meter_without_proc_stat_gives_none():
    def unreadable():
        raise OSError("no /proc")
    m = M.LoadMeter(reader=unreadable)
    m.start()
    assert m.stop() is None


REF = {"gemm_gflops": 205.0, "stream_gbps": 20.0}
QUIET = {"gemm_gflops": 200.0, "stream_gbps": 21.0}
IDLE = {"wall_s": 5.0, "other_cpus": 0.1, "steal_frac": 0.0}


@pytest.mark.parametrize("before,after,load,state,words", [
    (QUIET, QUIET, IDLE, "quiet", ""),
    (QUIET, None, None, "quiet", ""),
    ({"gemm_gflops": 98.0, "stream_gbps": 21.0}, QUIET, IDLE, "slow-spell",
     "GEMM probe 98 GFLOP/s < 80% of the machine's 205"),
    (QUIET, {"gemm_gflops": 200.0, "stream_gbps": 9.0}, IDLE, "slow-spell",
     "memory probe 9 GB/s < 80% of the machine's 20"),
    (QUIET, QUIET, {"wall_s": 5.0, "other_cpus": 1.6, "steal_frac": 0.0}, "slowed", "other processes kept 1.6 CPUs"),
    (QUIET, QUIET, {"wall_s": 5.0, "other_cpus": 0.0, "steal_frac": 0.2}, "slowed", "steal time 20%"),
    (None, None, None, "unknown", "no machine probe"),
    (None, None, IDLE, "unknown", "no machine probe"),
    (None, None, {"wall_s": 5.0, "other_cpus": 1.6, "steal_frac": 0.0}, "slowed", "other processes kept"),
])
def test_labels(before, after, load, state, words):
    st = L.label(before, after, load, REF)
    assert st.state == state and words in st.reason, st
    assert (st.probe_before, st.probe_after, st.load) == (before, after, load)
    assert "\n" not in st.reason


def test_the_label_names_every_figure_that_was_off_and_needs_a_reference():
    st = L.label({"gemm_gflops": 90.0, "stream_gbps": 8.0}, QUIET, {"other_cpus": 1.0, "steal_frac": 0.1}, REF)
    assert st.state == "slowed"
    assert all(w in st.reason for w in ("GEMM probe 90", "memory probe 8", "other processes", "steal"))
    assert L.label(QUIET, QUIET, IDLE, None).state == "unknown"
    # exactly at the bar is not slowed
    assert L.label({"gemm_gflops": 0.8 * 205.0, "stream_gbps": 16.0}, None, None, REF).state == "quiet"


def test_the_reference_ignores_a_minority_of_slow_spells():
    # the recorded VM's pattern: a third of the processes in the slow regime (GEMM ~100
    # against ~205, ResNet-50 24 against 36 img/s), in spells
    gemm = [210, 205, 208, 100, 98, 102, 203, 207, 206, 101, 211, 204]
    probes = [{"gemm_gflops": g, "stream_gbps": 20.0 + i % 3} for i, g in enumerate(gemm)] + [None, {}]
    ref = L.reference_from(probes)
    assert 203 <= ref["gemm_gflops"] <= 211 and 20 <= ref["stream_gbps"] <= 22
    assert [L.label(p, p, None, ref).state for p in probes[:12]] == ["slow-spell" if g < 150 else "quiet" for g in gemm]
    # the median would have been dragged between the regimes once half were slow
    half = [{"gemm_gflops": g} for g in [210, 100, 205, 98, 208, 102, 206, 101]]
    assert L.reference_from(half)["gemm_gflops"] > 200
    assert L.reference_from([None, {}]) is None


# -- a real neighbour ----------------------------------------------------------------------

def reading(tmp_path, reference=None):
    """The session's bracket around one child that burns half a CPU-second: probe, load meter
    around the child, probe; labelled against ``reference`` (default: the probe before)."""
    before = M.run_probe()
    m = M.LoadMeter()
    m.start()
    child = spawn.start([sys.executable, "-c", CHILD_WORK], log_path=tmp_path / "child.log")
    child.wait()
    load = m.stop()
    after = M.run_probe()
    assert before and after and load, (before, after, load)
    return L.label(before, after, load, reference or before)


@pytest.mark.spins
def test_a_neighbour_spinning_on_every_cpu_turns_a_quiet_reading_into_slowed(tmp_path):
    """Quiet first (labelled against its own probe, so only a busy machine can spoil it; one
    retry), then the same reading with a spinning neighbour per CPU, labelled against the
    quiet probe. Asserts labels, never times."""
    quiet = reading(tmp_path)
    if quiet.state != "quiet":
        quiet = reading(tmp_path)
    if quiet.state != "quiet":
        pytest.skip(f"the machine is not quiet without our neighbour, so the contrast is untestable: {quiet.reason}")

    ncpu = len(M.topology.affinity_cpus())
    spinners = [spawn.start([sys.executable, "-c", "while True: pass"], log_path=tmp_path / f"spin{i}.log")
                for i in range(ncpu)]
    try:
        busy = reading(tmp_path, reference=quiet.probe_before)
    finally:
        for p in spinners:
            spawn.kill_process_tree(p.pid, p.pid)
            p.wait()
    assert not [p.pid for p in spinners if psutil.pid_exists(p.pid)]

    assert busy.state == "slowed", busy
    assert busy.load["other_cpus"] > quiet.load["other_cpus"], (quiet.load, busy.load)
    assert "other processes kept" in busy.reason or "probe" in busy.reason


def test_spell_depth_is_the_lowest_probe_ratio_of_the_spell_processes():
    from types import SimpleNamespace

    from pytest_mxperf.judge import machine_states as MS

    def run(state, gemm_before, gemm_after, stream=40.0):
        return SimpleNamespace(machine_state={
            "state": state, "probe_before": {"gemm_gflops": gemm_before, "stream_gbps": stream},
            "probe_after": {"gemm_gflops": gemm_after, "stream_gbps": stream}})

    ref = {"gemm_gflops": 140.0, "stream_gbps": 40.0}
    runs = [run("slow-spell", 109.0, 120.0), run("slow-spell", 87.0, 130.0), run("quiet", 50.0, 50.0)]
    assert MS.spell_depth(runs, ref) == pytest.approx(87.0 / 140.0)  # quiet ones do not count
    assert MS.spell_depth([run("quiet", 140.0, 140.0)], ref) is None
    assert MS.spell_depth(runs, None) is None
