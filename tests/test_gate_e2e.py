"""The gate end to end: a pytest session (pytester, ``stand_ins.session``) whose workers are a
stand-in MXNet (tests/stub_worker.py, through ``--perf-python`` / ``--perf-reference``)
that speaks the real worker protocol. These tests check the suite's decisions (exit
codes, verdicts, messages), not MXNet's speed; the machine-state probe around each
worker is the real one."""

import json
import subprocess
import sys

import psutil
import pytest
import stand_ins
from stand_ins import new_children, session

import fake_nvml as F
from pytest_mxperf.judge import verdict_duet

CELLS = """
import pytest

@pytest.mark.mxperf_grid(models={models!r}, batch_sizes=(8,))
def test_cells(mxperf, ctx, model, batch_size):
    mxperf.expect_ok(mxperf.measure(model, batch_size, contexts=ctx))
"""


def _run(pytester, *args):
    return session(pytester, "-p", "no:cacheprovider", *args)


@pytest.fixture
def two_sessions(pytester, make_stub_python):
    """session(models, record=config or None, now=config, *args) -> RunResult of the second run."""
    bdir = pytester.path / "bl"

    def run(models=("lenet",), record=None, now=None, args=(), ctx="cpu", record_args=()):
        pytester.makepyfile(test_cells=CELLS.format(models=tuple(models)))
        common = ["-m", ctx.split(":")[0], "--perf-machine", "box", "--perf-baselines-dir", str(bdir),
                  "--perf-ctx", ctx]
        now_python = make_stub_python("now", **now)
        if record is not None:
            base = make_stub_python("base", **record)
            r = _run(pytester, *common, "--perf-python", base, "--perf-update-baselines", *record_args)
            assert r.ret == 0, r.stdout.str()
            # the recorded setup is found in the venv cache, as a first build leaves it: what the
            # baseline alone cannot settle is measured against it in a duet
            stand_ins.recorded_setup_is(pytester.path, bdir, base, now_python)
        return _run(pytester, *common, "--perf-python", now_python, *args)
    return run


def _out(result):
    return result.stdout.str()


#: a stand-in that says it has 2 CUDA GPUs: its wheel (mxnet-cu117, the stub's default for a
#: CUDA build) has kernels for the P100 (sm_60) that ``_p100_box`` makes NVML see
GPU_SIDE = {"gpus": 2, "features": ["CUDA", "CUDNN"]}


def _p100_box(pytester, monkeypatch, pools=None):
    """The sessions started from now on see two P100s through a stand-in NVML, whatever GPU
    this machine has or has not: the session's GPU readiness check (machine/gpu_readiness.py)
    finds the stand-in's wheel covers them. ``pools``: GPU 0 lists the pools stand-in workers
    register there as its compute processes."""
    spec = F.p100_pcie_box()
    if pools is not None:
        spec["devices"][0]["processes_dir"] = str(pools)
    F.use_in_subprocesses(monkeypatch, F.write(spec, pytester.path / "nvml.json"))


def test_an_8_percent_slowdown_fails_after_a_duet_against_the_recorded_setup(two_sessions):
    # five cells against a one-session baseline: paired with the setup the baseline recorded (its
    # build found in the venv cache) from their first process; the slowed one is called a
    # regression at its first look, the others unchanged, none measured again
    models = ("lenet", "mlp", "alexnet", "resnet50_v2", "inception-bn")
    r = two_sessions(models, record={"rate": 100.0}, now={"rate": 100.0, "factors": {"resnet50_v2": 0.92}},
                args=("--perf-no-probe",), record_args=("--perf-no-probe",))
    out = _out(r)
    assert r.ret == pytest.ExitCode.TESTS_FAILED, out
    line = next(x for x in out.splitlines() if x.startswith("mxperf: REGRESSION score/resnet50_v2/b8"))
    assert "against the recorded setup" in line and "x0.9" in line, line
    assert "paired from the first process because" in out and "over 3 duet pair(s)" in line, line
    assert "measured again against the recorded setup" not in out and "mxperf: re-measured" not in out
    assert "failing the session: 1 confirmed regression" in out
    assert "REGRESSION score/lenet" not in out


def test_an_unchanged_session_passes(two_sessions):
    r = two_sessions(("lenet", "mlp"), record={"rate": 100.0}, now={"rate": 100.0}, args=("--perf-no-probe",),
                record_args=("--perf-no-probe",))
    assert r.ret == 0, _out(r)
    assert "REGRESSION" not in _out(r) and "UNRESOLVED" not in _out(r)


QUIET = {"probe": {"gemm_gflops": 200.0, "stream_gbps": 30.0, "seconds": 0.4},
         "load": {"other_cpus": 0.02, "steal_frac": 0.0, "wall_s": 1.0}}


def _quiet_machine(pytester):
    """The sessions' machine state is given as quiet, through the plugin's hook
    pytest_mxperf_machine_state in a conftest.py of the test's project."""
    pytester.makeconftest(f"def pytest_mxperf_machine_state(config, part):\n    return {QUIET!r}[part]\n")


def test_a_less_parallel_workload_on_an_idle_machine_fails(two_sessions, pytester):
    """On a quiet machine (the probe's own figures and the other processes' load say so: set
    here, since a test cannot make this shared machine quiet) a workload that got 73% slower
    is a regression, not "machine busy". tests/test_machine_state.py checks the real probe."""
    _quiet_machine(pytester)
    r = two_sessions(("lenet",), record={"rate": 100.0}, now={"rate": 27.0})
    out = _out(r)
    assert r.ret == pytest.ExitCode.TESTS_FAILED, out
    assert "REGRESSION score/lenet/b8" in out


@pytest.fixture
def neighbour():
    """Two processes spinning on the CPUs while the session runs; none left afterwards."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        yield procs
    finally:
        for p in procs:
            p.kill()
            p.wait()
        assert not [p.pid for p in procs if psutil.pid_exists(p.pid)
                    and psutil.Process(p.pid).status() != psutil.STATUS_ZOMBIE]


@pytest.mark.spins
def test_a_neighbour_slowed_machine_is_not_a_regression_and_does_not_pass(pytester, make_stub_python,
                                                                          neighbour):
    bdir = pytester.path / "bl"
    pytester.makepyfile(test_cells=CELLS.format(models=("lenet",)))
    common = ["-m", "cpu", "--perf-machine", "box", "--perf-baselines-dir", str(bdir)]
    # the baseline is recorded before the neighbour starts: stop it for that
    for p in neighbour:
        p.send_signal(19)  # SIGSTOP
    r = _run(pytester, *common, "--perf-python", make_stub_python("base", rate=100.0), "--perf-update-baselines")
    assert r.ret == 0, _out(r)
    for p in neighbour:
        p.send_signal(18)  # SIGCONT
    r = _run(pytester, *common, "--perf-python", make_stub_python("now", rate=60.0))
    out = _out(r)
    assert r.ret == pytest.ExitCode.TESTS_FAILED, out
    assert "REGRESSION" not in out
    assert "UNRESOLVED score/lenet/b8" in out and "busy machine" in out
    assert "could not be confirmed or ruled out (1 on a busy machine)" in out


def test_gpu_cells_are_judged_not_excused(two_sessions, pytester, monkeypatch):
    """A GPU-shaped result (its worker keeps one core busy) slowed by 10% fails."""
    _p100_box(pytester, monkeypatch)
    r = two_sessions(("resnet50_v2",), record=dict(GPU_SIDE, rate=300.0), now=dict(GPU_SIDE, rate=270.0),
                     ctx="gpu:0")
    out = _out(r)
    assert r.ret == pytest.ExitCode.TESTS_FAILED, out
    assert "REGRESSION score/resnet50_v2/b8/gpu:0" in out


def test_policy_can_turn_off_what_fails(two_sessions, pytester):
    _quiet_machine(pytester)
    r = two_sessions(("lenet",), record={"rate": 100.0}, now={"rate": 27.0}, args=("--perf-fail-on=-regression",))
    assert r.ret == 0, _out(r)
    assert "REGRESSION score/lenet/b8" in _out(r)


# ----------------------------------------------------------------------------- A/B

def _ab(pytester, make_stub_python, cand, ref, *args):
    pytester.makepyfile(test_cells=CELLS.format(models=("lenet",)))
    return _run(pytester, "-m", "cpu", "--perf-machine", "box", "--perf-baselines-dir", str(pytester.path / "bl"),
                "--perf-python", make_stub_python("cand", **cand), "--perf-reference",
                make_stub_python("ref", **ref), "--perf-report", "rep", "--perf-no-probe", *args)


def test_ab_a_10_percent_slower_candidate_fails(pytester, make_stub_python):
    r = _ab(pytester, make_stub_python, {"rate": 90.0, "version": "1.9.1"}, {"rate": 100.0, "version": "1.8.0"})
    out = _out(r)
    assert r.ret == pytest.ExitCode.TESTS_FAILED, out
    assert f"A/B mode: 1 cell(s) x {verdict_duet.STAGE1_PAIRS} duet pairs" in out and "expected about" in out
    assert "REGRESSION score/lenet/b8" in out and "candidate/reference 0.9" in out
    # the first line says against what; the full report, what each side ran
    assert "of 1 cell against mxnet 1.8.0 at " in out and "(A/B; candidate mxnet 1.9.1)" in out
    full = (pytester.path / "rep" / "report.txt").read_text()
    assert "candidate: mxnet 1.9.1" in full and "reference: mxnet 1.8.0" in full
    doc = json.loads((pytester.path / "rep" / "results.json").read_text())
    (rec,) = [r for r in doc["records"] if r["key"].startswith("score/lenet")]
    ab = rec["ab"]
    assert ab["verdict"] == "regression" and ab["low"] <= ab["ratio"] <= ab["high"] < 1.0
    assert ab["reference"]["mxnet_version"] == "1.8.0" and ab["candidate"]["mxnet_version"] == "1.9.1"
    # called pair by pair at its first look: the stand-in's pairs agree to 0.5% (the spread's
    # floor, verdict_duet.MIN_SD), 10% apart, so no more pairs are measured (its boundary said)
    assert len(rec["runs"]) == len(rec["reference_runs"]) == ab["pairs"] == verdict_duet.STAGE1_PAIRS
    assert "pair by pair (|z| " in out and "after 3 of at most 40 pairs" in out
    assert "mxperf: next look:" not in out and "re-measured" not in out
    assert all(r["meta"]["duet"]["side"] == "candidate" for r in rec["runs"])


def test_ab_an_equal_pair_passes(pytester, make_stub_python):
    r = _ab(pytester, make_stub_python, {"rate": 100.0}, {"rate": 100.0})
    assert r.ret == 0, _out(r)
    assert "REGRESSION" not in _out(r)


def _ab_gpu(pytester, make_stub_python, monkeypatch, cand, ref, *args, pools=None):
    """An A/B session of one GPU cell of two stand-ins, NVML a stand-in's P100 box."""
    _p100_box(pytester, monkeypatch, pools)
    pytester.makepyfile(test_cells=CELLS.format(models=("resnet50_v2",)))
    return _run(pytester, "-m", "gpu", "--perf-ctx", "gpu:0", "--perf-machine", "box", "--perf-baselines-dir",
                str(pytester.path / "bl"), "--perf-python", make_stub_python("cand", **dict(GPU_SIDE, **cand)),
                "--perf-reference", make_stub_python("ref", **dict(GPU_SIDE, **ref)), "--perf-report", "rep",
                "--perf-no-probe", *args)


def test_ab_gpu_cells_run_as_duets_of_stand_ins_and_are_judged(pytester, make_stub_python, monkeypatch):
    """The parent side of a GPU A/B (no GPU ran this): stand-in workers that say they have 2
    CUDA GPUs serve duet rounds of score/resnet50_v2/b8/gpu:0 with GPU-shaped results (GPU
    memory, low host CPU); a candidate 10% slower is a regression, with both sides' GPU
    memory recorded: each process's own, as the stand-in NVML lists it per PID."""
    pools = pytester.path / "pools"
    r = _ab_gpu(pytester, make_stub_python, monkeypatch,
                {"rate": 270.0, "gpu_memory_mib": 3000.0, "gpu_pool_dir": str(pools)},
                {"rate": 300.0, "gpu_memory_mib": 2900.0, "gpu_pool_dir": str(pools)}, pools=pools)
    out = _out(r)
    assert r.ret == pytest.ExitCode.TESTS_FAILED, out
    assert "REGRESSION score/resnet50_v2/b8/gpu:0" in out and "candidate/reference 0.9" in out
    doc = json.loads((pytester.path / "rep" / "results.json").read_text())
    (rec,) = [x for x in doc["records"] if x["key"].startswith("score/resnet50_v2/b8/gpu:0")]
    assert rec["ab"]["verdict"] == "regression"
    assert all(run["meta"]["duet"]["side"] == "candidate" for run in rec["runs"])
    assert all(run["meta"]["duet"]["side"] == "reference" for run in rec["reference_runs"])
    assert {run["figures"]["gpu_memory_mib"] for run in rec["runs"]} == {3000.0}
    assert not new_children()


def test_ab_a_gpu_side_out_of_memory_is_a_one_line_error_and_leaves_no_process(pytester, make_stub_python,
                                                                                 monkeypatch):
    """MXNet's text of a CUDA allocation failure (a C++ stack between its header and the
    message), raised in the candidate's worker: the cell is "oom" with the allocation line."""
    oom = ("MXNetError: Traceback (most recent call last):\n  [bt] (0) libmxnet.so(+0x1f5e3a)\n"
           "  File \"src/storage/./pooled_storage_manager.h\", line 161\n"
           "MXNetError: cudaMalloc retry failed: out of memory")
    r = _ab_gpu(pytester, make_stub_python, monkeypatch, {"rate": 300.0, "raise": oom}, {"rate": 300.0})
    out = _out(r)
    assert r.ret == pytest.ExitCode.TESTS_FAILED, out
    row = next(x for x in out.splitlines() if x.startswith("score resnet50_v2 b8 gpu:0"))
    assert "oom: MXNetError: cudaMalloc retry failed: out of memory" in row, row
    doc = json.loads((pytester.path / "rep" / "results.json").read_text())
    (rec,) = [x for x in doc["records"] if x["key"].startswith("score/resnet50_v2/b8/gpu:0")]
    assert rec["status"] == "oom" and rec["message"].endswith("cudaMalloc retry failed: out of memory")
    assert "\n" not in rec["message"]
    assert not new_children()


def test_a_bad_user_setting_is_advised_against_and_shown_on_the_failing_cell(two_sessions, pytester, monkeypatch):
    """The user's OMP_NUM_THREADS above the physical cores (oversubscription) comes with
    advice: once on the screen, and on each failing cell in the full report; the suite's own
    fill-in never does."""
    r = two_sessions(("lenet", "mlp"), record={"rate": 100.0}, now={"rate": 100.0}, args=("--perf-no-probe",),
                     record_args=("--perf-no-probe",))
    assert "advice" not in _out(r)
    many = 4 * (psutil.cpu_count(logical=True) or 64)  # above the physical cores of any machine it runs on
    monkeypatch.setenv("OMP_NUM_THREADS", str(many))
    r = two_sessions(("lenet", "mlp"), now={"rate": 60.0}, args=("--perf-no-probe", "--perf-report", "rep"))
    out = _out(r)
    assert r.ret == pytest.ExitCode.TESTS_FAILED, out
    # the screen says the advice once, with how many of its cells fail; the full report on each failing cell
    assert "mxperf: advice (2 cell(s), 2 of them failing): [" in out and f"OMP_NUM_THREADS={many}" in out
    assert sum(f"OMP_NUM_THREADS={many}" in line for line in out.splitlines()) == 1, out
    assert "advice:" not in out
    full = (pytester.path / "rep" / "report.txt").read_text()
    for cell in ("lenet", "mlp"):
        assert f"note score/{cell}/b8/cpu:0/float32/threads=auto: advice: [" in full, full


KVSTORE = """
import pytest
from pytest_mxperf.model.workload import Workload

def figures(payload):
    return {"comm_seconds": payload["comm_seconds"], "bandwidth_gbps": payload["bandwidth_gbps"]}

@pytest.mark.cpu
def test_kv(mxperf):
    w = Workload(model="resnet50_v2", mode="kvstore", batch_size=8, contexts=("cpu:0", "cpu:1"), kvstore="device")
    mxperf.expect_ok(mxperf.measure_module("pytest_mxperf.workers.commbench", {"kvstore": "device"}, w, figures))

@pytest.mark.cpu
def test_score(mxperf):
    mxperf.expect_ok(mxperf.measure("lenet", 8))
"""


def _kv_sessions(pytester, make_stub_python, base, now):
    pytester.makepyfile(test_kv=KVSTORE)
    common = ["-m", "cpu", "--perf-machine", "box", "--perf-baselines-dir", str(pytester.path / "bl"), "--perf-no-probe"]
    base_python, now_python = make_stub_python("base", **base), make_stub_python("now", **now)
    r = _run(pytester, *common, "--perf-python", base_python, "--perf-update-baselines")
    assert r.ret == 0, _out(r)
    stand_ins.recorded_setup_is(pytester.path, pytester.path / "bl", base_python, now_python)
    doc = json.loads((pytester.path / "bl" / "box.json").read_text())
    kv = doc["cells"]["kvstore/resnet50_v2/b8/cpu:0,cpu:1/float32/threads=auto/kv=device"]["history"][-1]
    assert kv["metric"] == "comm_seconds" and kv["unit"] == "s/batch" and len(kv["process_medians"]) == 5
    score = doc["cells"]["score/lenet/b8/cpu:0/float32/threads=auto"]["history"][-1]
    assert len(score["figures"]["peak_rss_mib"]) == 5
    return _run(pytester, *common, "--perf-python", now_python)


def test_a_slowed_kvstore_fails_against_its_baseline(pytester, make_stub_python):
    r = _kv_sessions(pytester, make_stub_python, {"comm_seconds": 0.05}, {"comm_seconds": 0.08})
    out = _out(r)
    assert r.ret == pytest.ExitCode.TESTS_FAILED, out
    line = next(x for x in out.splitlines()
                if x.startswith("mxperf: REGRESSION kvstore/resnet50_v2/b8/cpu:0,cpu:1/float32/threads=auto/kv=device"))
    # settled against the recorded setup: its seconds a batch x1.6 of the recorded setup's
    assert "against the recorded setup" in line and "x1.600" in line, line
    assert "REGRESSION score/lenet" not in out


def test_a_cell_whose_peak_memory_grew_fails(pytester, make_stub_python):
    r = _kv_sessions(pytester, make_stub_python, {"rss_mib": 800}, {"rss_mib": 1100})
    out = _out(r)
    assert r.ret == pytest.ExitCode.TESTS_FAILED, out
    assert "REGRESSION score/lenet/b8/cpu:0/float32/threads=auto#peak_rss_mib" in out
    assert "out-of-memory" in out


def test_a_regressed_cell_comes_with_its_profile_beside_the_baselines(two_sessions):
    """Recording keeps each cell's operator profile; a confirmed regression runs the profile
    worker once more and shows its operators beside the baseline's, the ones on one side
    only named, with a chrome trace. The stand-in's "operators" play MKLDNN fusion on (the
    baseline) and off (now)."""
    unfused = {"Convolution": 95.0, "BatchNorm": 9.0, "Pooling": 3.0, "FullyConnected": 2.5}
    r = two_sessions(("lenet",), record={"rate": 100.0}, now={"rate": 70.0, "operators": unfused},
                     args=("--perf-no-probe",), record_args=("--perf-no-probe",))
    out = _out(r)
    assert r.ret == pytest.ExitCode.TESTS_FAILED, out
    assert "REGRESSION score/lenet/b8" in out
    assert "top operators by time, now (mxnet 1.9.1" in out and "beside the baseline" in out
    assert ("operators only in now: BatchNorm" not in out
            and "operators only in now: Convolution, FullyConnected; only in baseline: _sg_mkldnn_conv, "
                "_sg_mkldnn_fully_connected" in out), out
    trace = next(line.split("chrome trace: ", 1)[1].split(";")[0] for line in out.splitlines()
                 if "chrome trace: " in line)
    assert json.loads(open(trace).read())["traceEvents"][0]["name"] == "Convolution"


def test_zoo_cells_show_gflops_against_the_sessions_peak(two_sessions):
    """Derived, not judged: GFLOP/s per cell and its share of the peak the (stand-in) peak
    worker measured once for the session."""
    r = two_sessions(("resnet50_v2",), now={"rate": 10.0, "peak_gflops": 200.0}, args=("--perf-no-probe", "-v"))
    out = _out(r)  # -v: the full report, with what is shown, not judged
    assert r.ret == 0, out
    from pytest_mxperf.zoo import flops
    g = 10.0 * flops.flops_per_sample("resnet50_v2", "score") / 1e9
    line = next(x for x in out.splitlines() if x.startswith("shown, not judged [hardware limit score/resnet50_v2"))
    figs = dict(kv.split("=") for kv in line.split("] ", 1)[1].split(" -- ")[0].split(", "))
    assert float(figs["peak_gflops"]) == 200.0, line
    assert float(figs["gflops"]) == pytest.approx(g, rel=0.02), line  # the stand-in's +-1% per process
    assert float(figs["pct_of_peak"]) == pytest.approx(100 * g / 200.0, rel=0.02), line


# ----------------------------------------------------------------------------- resolution

def test_a_baseline_pooled_over_sessions_states_its_resolution_and_a_slowdown_inside_it_is_named(
        pytester, make_stub_python):
    """Recorded over three sessions whose speed differed (the stand-in at 100, 90 and 108
    img/s: a machine drifting about 9% between sessions), the baseline states a resolution
    near 36% (three sessions say little) and the MXNet it was measured with; a later session 12% slower is named first,
    "below this machine's resolution", with the A/B hint, and passes, unless the policy
    asks (--perf-fail-on +below-resolution). Its build is one the session cannot rebuild (the
    install pip gives for its requirement is another build): no duet settles it, the baseline
    alone judges."""
    pytester.makepyfile(test_cells=CELLS.format(models=("lenet",)))
    bdir = pytester.path / "bl"
    common = ["-m", "cpu", "--perf-machine", "box", "--perf-baselines-dir", str(bdir), "--perf-no-probe"]
    for i, (rate, pool) in enumerate(((100.0, ""), (90.0, "=add"), (108.0, "=add"))):
        r = _run(pytester, *common, "--perf-python", make_stub_python(f"base{i}", rate=rate, install=BUILD_191),
                 f"--perf-update-baselines{pool}")
        assert r.ret == 0, _out(r)
    out = _out(r)
    now = make_stub_python("now", rate=88.0, install=BUILD_191)
    stand_ins.recorded_setup_is(pytester.path, bdir, make_stub_python(
        "rebuilt", rate=100.0, install=dict(BUILD_191, libmxnet_sha256="b" * 64)), now)
    assert "mxperf: resolution (the smallest slowdown a later session can tell" in out and "from up to 3" in out
    assert "mxperf: recorded with mxnet==1.9.1 (--perf-reference baseline" in out
    doc = json.loads((bdir / "box.json").read_text())
    rec = doc["cells"]["score/lenet/b8/cpu:0/float32/threads=auto"]["history"][-1]
    res = rec["resolution"]["throughput"]
    assert res["basis"] == "sessions" and res["sessions"] == 3 and 0.3 < res["value"] < 0.45, res
    assert rec["mxnet_requirement"] == doc["mxnet_requirement"] == "mxnet==1.9.1"
    r = _run(pytester, *common, "--perf-python", now, "--perf-report", "rep")
    out = _out(r)
    assert r.ret == 0, out
    lines = out.splitlines()
    section = next(i for i, x in enumerate(lines) if "mxperf" in x and x.startswith("="))
    first = next(i for i, x in enumerate(lines) if x.startswith("mxperf: ") and i > section) + 1  # after the outcome
    assert lines[first - 1].startswith("mxperf: passed: 0 regressed, 0 improved, 1 unclear, 0 unchanged of 1 cell "
                                       "against baseline box (recorded "), out
    assert first < next(i for i, x in enumerate(lines) if x.startswith("score lenet b8")), out  # above the table
    assert lines[first].startswith("mxperf: BELOW RESOLUTION: 1 slowdown(s) below this machine's resolution"), out
    md = (pytester.path / "rep" / "summary.md").read_text().splitlines()
    assert md[1].startswith("> BELOW RESOLUTION: 1 slowdown(s)") and "--perf-reference baseline" in md[1], md
    assert sum("BELOW RESOLUTION" in x for x in lines) == 1  # said once, first
    assert "--perf-reference baseline (mxnet==1.9.1, the install the baseline was recorded with)" in lines[first]
    assert "score/lenet/b8/cpu:0/float32/threads=auto: -12" in out and "REGRESSION" not in out
    r = _run(pytester, *common, "--perf-python", now, "--perf-fail-on", "+below-resolution")
    assert r.ret == pytest.ExitCode.TESTS_FAILED, _out(r)
    assert "failing the session: 1 slowdown(s) below this machine's resolution" in _out(r)


#: a build of MXNet 1.9.1 a stand-in says it is (``distributions.install_identity``)
BUILD_191 = {"name": "mxnet", "version": "1.9.1", "direct_url": None, "libmxnet": "mxnet/libmxnet.so",
             "libmxnet_sha256": "a" * 64}


def _cached_reference(cache, spec, candidate, python):
    """Put ``python`` where ``installs.reference_python(spec, like=candidate)`` finds the
    finished venv of ``spec`` (what a first build leaves), under the cache ``cache``."""
    import os
    from pytest_mxperf.proc import installs
    from pytest_mxperf.proc import distributions
    reqs = installs.requirements_for(spec, distributions.companion_requirements(candidate))
    root = cache / "venvs" / installs.venv_slug(spec, reqs)
    exe = installs.venv_python(root / "venv")
    exe.parent.mkdir(parents=True)
    os.symlink(python, exe)
    (root / installs.COMPLETE_MARKER).write_text(json.dumps({"spec": spec, "requirements": reqs}))


def test_reference_baseline_runs_the_ab_against_the_install_the_baseline_recorded(
        pytester, make_stub_python, monkeypatch):
    """``--perf-reference baseline``: the A/B reference is the install this machine's
    baseline was recorded with (its stored requirement, here mxnet==1.8.0 from the stand-in's
    metadata), built into (here: found in) the venv cache; a candidate 20% slower than it is a
    regression, and the summary names the requirement."""
    pytester.makepyfile(test_cells=CELLS.format(models=("lenet",)))
    bdir, cache = pytester.path / "bl", pytester.path / "cache"
    monkeypatch.setenv("MXPERF_CACHE_DIR", str(cache))
    common = ["-m", "cpu", "--perf-machine", "box", "--perf-baselines-dir", str(bdir), "--perf-no-probe"]
    dists = [["mxnet", "1.8.0"]]
    r = _run(pytester, *common, "--perf-python", make_stub_python("old", rate=100.0, version="1.8.0", dists=dists),
             "--perf-update-baselines")
    assert r.ret == 0 and "mxperf: recorded with mxnet==1.8.0" in _out(r), _out(r)
    now = make_stub_python("now", rate=80.0)
    _cached_reference(cache, "mxnet==1.8.0", now, make_stub_python("ref", rate=100.0, version="1.8.0", dists=dists))
    r = _run(pytester, *common, "--perf-python", now, "--perf-reference", "baseline", "--perf-report", "rep")
    out = _out(r)
    assert r.ret == pytest.ExitCode.TESTS_FAILED, out
    assert "A/B mode" in out and "REGRESSION score/lenet/b8" in out and "candidate/reference 0.8" in out
    assert ("of 1 cell against mxnet==1.8.0, the install this machine's baseline was recorded with (A/B; candidate "
            "mxnet 1.9.1)") in out
    assert "reference: mxnet 1.8.0" in (pytester.path / "rep" / "report.txt").read_text()
    doc = json.loads((pytester.path / "rep" / "results.json").read_text())
    assert doc["session"]["ab"]["reference"]["recorded_baseline_requirement"] == "mxnet==1.8.0"
    assert not list(cache.glob("venvs/*/build.log"))  # nothing was built: the cached venv was used


def test_reference_baseline_without_a_usable_baseline_is_a_one_line_usage_error(pytester, make_stub_python):
    pytester.makepyfile(test_cells=CELLS.format(models=("lenet",)))
    bdir = pytester.path / "bl"
    common = ["-m", "cpu", "--perf-machine", "box", "--perf-baselines-dir", str(bdir), "--perf-no-probe",
              "--perf-python", make_stub_python("now", rate=100.0)]
    r = _run(pytester, *common, "--perf-reference", "baseline")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    err = [x for x in r.stderr.lines if "--perf-reference baseline" in x]
    assert err and "machine box has no baseline" in err[0] and "--perf-update-baselines" in err[0], r.stderr.lines
    # a baseline recorded before requirements were stored, and its build's features not either:
    # no install fits it (one that records its features is run against the wheel that fits them)
    assert _run(pytester, *common, "--perf-update-baselines").ret == 0
    path = bdir / "box.json"
    doc = json.loads(path.read_text())
    doc.pop("mxnet_requirement", None)
    for cell in doc["cells"].values():
        for rec in cell["history"]:
            rec.pop("mxnet_requirement", None)
            rec["software"]["features"] = None
    path.write_text(json.dumps(doc))
    r = _run(pytester, *common, "--perf-reference", "baseline")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    err = [x for x in r.stderr.lines if "--perf-reference baseline" in x]
    assert err and "does not say which MXNet install" in err[0] and "features are not recorded" in err[0], \
        r.stderr.lines
    assert json.loads(path.read_text()) == doc  # refused, not rewritten


def test_a_baseline_naming_an_install_that_is_not_a_pinned_release_is_refused_before_any_install(
        pytester, make_stub_python, monkeypatch):
    """The baseline file names the install ``--perf-reference baseline`` rebuilds: a URL (or
    anything but NAME==VERSION of an MXNet distribution) is one usage line, exit 4, and no
    venv is built (issue 35, part 1)."""
    pytester.makepyfile(test_cells=CELLS.format(models=("lenet",)))
    bdir, cache = pytester.path / "bl", pytester.path / "cache"
    monkeypatch.setenv("MXPERF_CACHE_DIR", str(cache))
    common = ["-m", "cpu", "--perf-machine", "box", "--perf-baselines-dir", str(bdir), "--perf-no-probe",
              "--perf-python", make_stub_python("now", rate=100.0, dists=[["mxnet", "1.9.1"]])]
    assert _run(pytester, *common, "--perf-update-baselines").ret == 0
    path = bdir / "box.json"
    for named in ("mxnet @ https://host/x.whl", "mxnet>=1.8", "numpy==1.23.5", "mxnet==1.9.1+mine"):
        doc = json.loads(path.read_text())
        for cell in doc["cells"].values():
            for rec in cell["history"]:
                rec["mxnet_requirement"] = named
        path.write_text(json.dumps(doc))
        r = _run(pytester, *common, "--perf-reference", "baseline")
        assert r.ret == pytest.ExitCode.USAGE_ERROR, (named, _out(r))
        err = [x for x in r.stderr.lines if "--perf-reference baseline" in x]
        assert len(err) == 1 and "names an install that is not rebuilt" in err[0] and repr(named) in err[0], err
        assert not cache.exists() or not list(cache.glob("venvs/*")), named  # nothing was installed


BUILD = {"name": "mxnet", "version": "1.8.0", "direct_url": None, "libmxnet": "mxnet/libmxnet.so",
         "libmxnet_sha256": "a" * 64}


def test_a_baseline_records_its_build_and_a_rebuilt_install_of_another_build_is_refused(
        pytester, make_stub_python, monkeypatch):
    """A recording keeps which build of MXNet measured (the sha256 of its libmxnet, where pip
    took it from, numpy's version, its features). ``--perf-reference baseline`` takes the
    install rebuilt from the recorded requirement only when it is that build: the same
    version built otherwise is one usage line, exit 4 (issue 35, part 1); the same build runs."""
    pytester.makepyfile(test_cells=CELLS.format(models=("lenet",)))
    bdir, cache = pytester.path / "bl", pytester.path / "cache"
    monkeypatch.setenv("MXPERF_CACHE_DIR", str(cache))
    common = ["-m", "cpu", "--perf-machine", "box", "--perf-baselines-dir", str(bdir), "--perf-no-probe"]
    dists = [["mxnet", "1.8.0"]]
    r = _run(pytester, *common, "--perf-update-baselines", "--perf-python",
             make_stub_python("old", rate=100.0, version="1.8.0", dists=dists, install=BUILD))
    assert r.ret == 0 and "mxperf: its build: mxnet 1.8.0 from a package index, mxnet/libmxnet.so sha256 aaaa" in _out(r)
    (rec,) = json.loads((bdir / "box.json").read_text())["cells"]["score/lenet/b8/cpu:0/float32/threads=auto"]["history"]
    assert rec["install"]["libmxnet_sha256"] == "a" * 64 and rec["install"]["numpy_version"] == "1.23.5"
    now = make_stub_python("now", rate=100.0)
    other = make_stub_python("other-build", rate=100.0, version="1.8.0", dists=dists,
                             install=dict(BUILD, libmxnet_sha256="b" * 64))
    _cached_reference(cache, "mxnet==1.8.0", now, other)
    r = _run(pytester, *common, "--perf-python", now, "--perf-reference", "baseline")
    assert r.ret == pytest.ExitCode.USAGE_ERROR, _out(r)
    err = [x for x in r.stderr.lines if "--perf-reference baseline" in x]
    assert len(err) == 1 and "is not the build" in err[0] and "bbbbbbbbbbbbbbbb… against aaaaaaaaaaaaaaaa…" in err[0], err
    # the same build rebuilt: the A/B runs against it
    import os
    from pytest_mxperf.proc import distributions, installs
    reqs = installs.requirements_for("mxnet==1.8.0", distributions.companion_requirements(now))
    exe = installs.venv_python(cache / "venvs" / installs.venv_slug("mxnet==1.8.0", reqs) / "venv")
    exe.unlink()
    os.symlink(make_stub_python("same-build", rate=100.0, version="1.8.0", dists=dists, install=BUILD), exe)
    r = _run(pytester, *common, "--perf-python", now, "--perf-reference", "baseline")
    assert r.ret == 0 and "A/B mode" in _out(r), _out(r)


def test_a_baseline_with_a_tampered_install_is_refused_before_anything_is_measured(pytester, make_stub_python):
    pytester.makepyfile(test_cells=CELLS.format(models=("lenet",)))
    bdir = pytester.path / "bl"
    common = ["-m", "cpu", "--perf-machine", "box", "--perf-baselines-dir", str(bdir), "--perf-no-probe",
              "--perf-python", make_stub_python("now", rate=100.0, install=dict(BUILD, version="1.9.1"))]
    assert _run(pytester, *common, "--perf-update-baselines").ret == 0
    path = bdir / "box.json"
    good = path.read_text()
    for bad in ("x", {"libmxnet_sha256": "not-a-hash"}, {"version": 191}, {"features": "MKLDNN"}):
        doc = json.loads(good)
        for cell in doc["cells"].values():
            cell["history"][-1]["install"] = bad
        path.write_text(json.dumps(doc))
        r = _run(pytester, *common)
        assert r.ret == pytest.ExitCode.USAGE_ERROR, (bad, _out(r))
        assert any("has an install" in x for x in r.stderr.lines), (bad, r.stderr.lines)
        assert "score/lenet" not in r.stdout.str()  # nothing measured


def test_a_baseline_of_one_session_says_its_resolution_is_provisional(two_sessions):
    r = two_sessions(("lenet",), record={"rate": 100.0}, now={"rate": 100.0}, args=("--perf-no-probe",),
                     record_args=("--perf-no-probe",))
    out = _out(r)
    assert r.ret == 0, out
    assert "resolution provisional for 1 of 1 figure(s)" in out and "--perf-update-baselines=add" in out
