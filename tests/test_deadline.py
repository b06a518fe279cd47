"""--perf-deadline (tests by priority, the rest not reached) and the report written after every
cell (a killed session keeps what it finished), end to end with stand-in workers."""

import json
import signal
import subprocess
import sys
import time

import pytest

import stand_ins

from pytest_mxperf.model import options
from pytest_mxperf.store import results

GRID = """
import pytest

@pytest.mark.mxperf_grid(models=("lenet", "mlp", "alexnet"), batch_sizes=(1, 8))
def test_cells(mxperf, ctx, model, batch_size):
    mxperf.expect_ok(mxperf.measure(model, batch_size, contexts=ctx))

@pytest.mark.mxperf_priority(1)
@pytest.mark.mxperf_grid(models=("resnet50_v2",), batch_sizes=(2,))
def test_first(mxperf, ctx, model, batch_size):
    mxperf.expect_ok(mxperf.measure(model, batch_size, contexts=ctx))
"""


KILLED = """
import pytest

@pytest.mark.mxperf_grid(models=("lenet", "mlp"), batch_sizes=(1, 8))
def test_cells(mxperf, ctx, model, batch_size):
    mxperf.expect_ok(mxperf.measure(model, batch_size, contexts=ctx))

@pytest.mark.cpu
def test_hangs(mxperf):
    mxperf.expect_ok(mxperf.measure("alexnet", 1))
"""


def _args(pytester, make_stub_python, *extra, **stub):
    return ["-p", "no:cacheprovider", "-m", "cpu", "--perf-machine", "box", "--perf-baselines-dir",
            str(pytester.path / "bl"), "--perf-no-probe", "--perf-python", make_stub_python("now", **stub),
            "--perf-report", "rep", *extra]


def test_durations_parse_and_bad_ones_are_one_line_errors():
    assert options.parse_duration("--perf-deadline", "25m") == 1500.0
    assert options.parse_duration("--perf-deadline", "90") == 90.0
    assert options.parse_duration("--perf-deadline", "1.5h") == 5400.0
    assert options.parse_duration("--perf-deadline", None) is None
    for bad in ("soon", "-5m", "0", "5 d"):
        with pytest.raises(options.OptionError, match="--perf-deadline: .* is not a positive duration"):
            options.parse_duration("--perf-deadline", bad)
    assert "not-reached" in options.DEFAULT_FAIL_ON


def _clock(deadline, plan_test_seconds, now, test_estimates=()):
    from types import SimpleNamespace

    from pytest_mxperf.measure.session import Clock
    ctx = SimpleNamespace(started=0.0, options=SimpleNamespace(deadline=deadline),
                          plan=SimpleNamespace(test_seconds=plan_test_seconds, test_estimates=test_estimates))
    return Clock(lambda: ctx, lambda line: None, now=lambda: now[0])


def test_a_grids_first_test_is_expected_to_take_the_grid_and_the_others_are_never_late():
    """Under --perf-deadline a grid of CPU cells shares worker processes: its first test (any
    of them, in the deadline's order) measures every cell, so it is expected to take what the
    plan expects of the whole grid (its cost on whichever test the plan put it), and once it
    started, the grid's other tests find their cells measured and are never 'not reached'."""
    grid = "perf_tests/test_scoring.py::test_scoring_throughput"
    plan = ((f"{grid}[cpu0-alexnet-b1]", 300.0), (f"{grid}[cpu0-alexnet-b8]", 0.0),
            ("perf_tests/test_latency.py::test_batch_latency[cpu0-lenet-b1]", 20.0))
    now = [500.0]
    clock = _clock(1000.0, 30.0, now, plan)                   # 850 s for measuring
    clock.test_took(60.0, "perf_tests/test_kvstore.py::test_wide_mlp_is_communication_bound")
    late = clock.past_deadline(f"{grid}[cpu0-alexnet-b8]", grid=True)   # 500 + 300 > 850? no: 800
    assert late is None
    assert clock.past_deadline(f"{grid}[cpu0-alexnet-b1]", grid=True) is None  # started: its cell is measured
    now[0] = 840.0
    assert clock.past_deadline(f"{grid}[cpu0-resnet50_v2-b1]", grid=True) is None
    # the same test alone (a grid that does not share): the longest test so far, 60 s
    assert "a test takes about 60 s" in clock.past_deadline(f"{grid}[cpu0-resnet50_v2-b1]")
    fresh = _clock(1000.0, 30.0, [600.0], plan)
    assert "a test takes about 300 s" in fresh.past_deadline(f"{grid}[cpu0-alexnet-b8]", grid=True)


def test_a_test_is_expected_to_take_what_its_own_function_took_else_the_longest_so_far():
    """Seen on a 2-vCPU Zen 3: the upgrade gate's float16 precision test (on CPU it skips in
    seconds) was 'not reached' 5 minutes before the deadline's reserve, behind training tests
    of 4 minutes, and failed an A/A session; its int8 twin had taken 2 minutes."""
    now = [0.0]
    clock = _clock(1000.0, 30.0, now)                      # 850 s for measuring
    prec = "perf_tests/test_cpu_precision.py::test_reduced_precision_beside_float32"
    train = "perf_tests/test_training.py::test_training_throughput"
    assert clock.past_deadline(f"{prec}[int8]") is None     # nothing ran: the plan's 30 s
    now[0] = 830.0
    assert "a test takes about 30 s" in clock.past_deadline(f"{prec}[int8]")
    now[0] = 100.0
    clock.test_took(100.0, f"{prec}[int8]")
    clock.test_took(240.0, f"{train}[cpu-resnet50_v2-8]")
    clock.test_took(5.0, "perf_tests/test_own_model.py::test_mine", measured=False)  # measured nothing
    now[0] = 700.0
    assert clock.past_deadline(f"{prec}[float16]") is None  # 700 + 100 <= 850
    late = clock.past_deadline(f"{train}[cpu-alexnet-8]")    # 700 + 240 > 850
    assert late and "a test takes about 240 s" in late
    late = clock.past_deadline("perf_tests/test_latency.py::test_batch_latency[cpu-lenet-1]")  # the longest so far
    assert late and "a test takes about 240 s" in late
    now[0] = 760.0
    assert "a test takes about 100 s" in clock.past_deadline(f"{prec}[float16]")
    assert _clock(None, 30.0, [1e9]).past_deadline(f"{prec}[int8]") is None  # no deadline


def test_a_deadline_runs_tests_by_priority_breadth_first(pytester, make_stub_python):
    pytester.makepyfile(test_grid=GRID)
    r = stand_ins.session(pytester, *_args(pytester, make_stub_python, "--perf-deadline", "1h",
                                             "--collect-only", "-q"))
    ids = [ln.split("test_grid.py::", 1)[1] for ln in r.stdout.lines if "test_grid.py::" in ln]
    assert ids[0].startswith("test_first["), ids
    # the first cell of every model before the second cell of any
    models = [i.split("-")[1] for i in ids[1:]]
    assert models[:3] == ["lenet", "mlp", "alexnet"] and models[3:] == ["lenet", "mlp", "alexnet"], ids


def test_tests_past_the_deadline_are_not_reached_and_fail_unless_allowed(pytester, make_stub_python):
    pytester.makepyfile(test_grid=GRID)
    # one process a cell, each sleeping 2 s: the seven tests take at least 14 s, more than the
    # 13.6 s a 16-s deadline leaves for measuring, so some are never reached on any machine;
    # the first starts while the plan's 4.3 s for a test (0.3-s budget, one process, no probe)
    # still fit, i.e. when the session started within 9.3 s; the grid's six cells share a
    # process, and its first test is expected to take the plan's 26.4 s for the whole grid
    stub = dict(sleep_models={m: 2.0 for m in ("lenet", "mlp", "alexnet", "resnet50_v2")})
    one = ("--perf-processes", "1", "--perf-time-budget", "0.3")
    r = stand_ins.session(pytester, *_args(pytester, make_stub_python, "--perf-deadline", "16s", *one, **stub))
    out = r.stdout.str()
    assert r.ret == pytest.ExitCode.TESTS_FAILED, out
    assert "not reached before --perf-deadline" in out
    assert "failing the session: tests not reached" in out
    doc = json.loads((pytester.path / "rep" / "results.json").read_text())
    reached = [rec["nodeid"] for rec in doc["records"]]
    assert reached and "test_grid.py::test_first[" in reached[0], reached
    assert len(doc["session"]["not_reached"]) == 7 - len(reached) > 0
    assert doc["session"]["complete"] is True
    # a deadline no test fits in (1 s against the plan's 4.3 s): none is reached, and the
    # policy without not-reached passes the session
    r = stand_ins.session(pytester, *_args(pytester, make_stub_python, "--perf-deadline", "1s", *one,
                                             "--perf-fail-on=-not-reached", **stub))
    assert r.ret == 0, r.stdout.str()
    assert "mxperf: 7 measuring test(s) not reached before --perf-deadline (1 s)" in r.stdout.str()
    r.assert_outcomes(skipped=7)


SHARED = """
import pytest

@pytest.mark.mxperf_grid(models=("lenet", "mlp"), batch_sizes=(1,))
def test_cells(mxperf, ctx, model, batch_size):
    mxperf.expect_ok(mxperf.measure(model, batch_size, contexts=ctx))
"""


def test_a_deadline_session_shares_a_grids_processes_and_judges_it_against_a_baseline_recorded_without_one(
        pytester, make_stub_python):
    """A baseline recorded by the default command (no deadline: a grid's cells share worker
    processes) and a session under --perf-deadline: its grid is measured the same way, so every
    cell is judged against the recording. Kept in processes of their own, its cells were 'not
    compared' (a figure measured one way is not judged against one measured the other)."""
    pytester.makepyfile(test_grid=SHARED)
    five = ("--perf-processes", "5", "--perf-time-budget", "0.3")  # a gated baseline holds 5 processes a cell
    r = stand_ins.session(pytester, *_args(pytester, make_stub_python, *five, "--perf-update-baselines"))
    assert r.ret == 0, r.stdout.str()
    r = stand_ins.session(pytester, *_args(pytester, make_stub_python, *five, "--perf-deadline", "1h"))
    out = r.stdout.str()
    assert r.ret == 0 and "not compared" not in out and "not reached" not in out, out
    doc = json.loads((pytester.path / "rep" / "results.json").read_text())
    primary = {k: v["kind"] for k, v in doc["session"]["verdicts"].items() if "#" not in k}
    assert sorted(k.split("/")[1] for k in primary) == ["lenet", "mlp"], primary
    assert set(primary.values()) <= {"unchanged", "improvement", "regression", "below-resolution", "unclear",
                                     "unresolved", "suspect"}, primary
    assert all(run["meta"].get("process_cells") for rec in doc["records"] for run in rec["runs"]), doc["records"]


def test_a_killed_session_keeps_every_finished_cell(pytester, make_stub_python):
    """results.json and summary.md are written after each cell: kill -9 pytest while the
    fifth cell (alexnet, a test of its own after a grid whose four cells are measured
    together) hangs, and the first four are there, with their figures."""
    pytester.makepyfile(test_grid=KILLED)
    args = _args(pytester, make_stub_python, "--perf-processes", "1", sleep_models={"alexnet": 3600})
    proc = subprocess.Popen([sys.executable, "-m", "pytest", *args], cwd=pytester.path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    path = pytester.path / "rep" / "results.json"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if path.exists() and len(json.loads(path.read_text())["records"]) >= 4:
                break
            time.sleep(0.2)
        time.sleep(1.0)  # the hanging cell has started
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    doc = results.load_results(path)
    assert doc["session"]["complete"] is False
    keys = [rec["key"] for rec in doc["records"]]
    assert len(keys) == 4 and all(k.split("/")[1] in ("lenet", "mlp") for k in keys), keys
    assert all(rec["median"] > 0 for rec in doc["records"])
    summary = (pytester.path / "rep" / "summary.md").read_text()
    assert "in progress" in summary and "4 cell(s) measured" in summary
