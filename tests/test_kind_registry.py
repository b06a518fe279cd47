"""A kind of cell declared in one place (``pytest_mxperf/model/kinds.py``): a toy kind
registered from a test's own files (its worker module and its entry, nothing of the package
touched) is measured, judged, dueted in A/B mode, estimated and reported; a figure or a kind
the registry does not know is an error where it is declared or first seen, in one line."""

import json

import pytest
import stand_ins
from stand_ins import session

from pytest_mxperf.measure import runner
from pytest_mxperf.model import kinds
from pytest_mxperf.model.workload import Workload, WorkloadError
from pytest_mxperf.proc.worker import ProcessOutcome

#: the toy kind's entry: its figure and its kind, as a team's own conftest.py declares them
TOY_CONFTEST = '''
from pytest_mxperf.model import kinds

kinds.add_figure(kinds.Metric("toy_rate", "toys/s", True, "processes", "toys made per second", paired="rounds"))
kinds.register(kinds.Kind("toy", "toy_worker", "toy_rate", "toys made per second (a kind of this project's own)",
                          marker="toy", resident=True, process_seconds=2.0, cost="toy workshops"))


def pytest_unconfigure(config):
    kinds.unregister("toy")
'''

#: the toy kind's worker: no MXNet; a toy takes 1/toy_rate seconds (reported, not slept), the
#: rate from the stand-in interpreter's configuration (MXPERF_STUB), one process a little off
#: another by its seed; in a duet it serves the parent's rounds through the real protocol
TOY_WORKER = '''
import json
import os
import sys

from pytest_mxperf.workers import protocol


def main(spec_path, result_path):
    with open(spec_path) as fh:
        spec = json.load(fh)
    config = json.loads(os.environ.get("MXPERF_STUB") or "{}")
    seed = int(spec.get("seed", 0))
    per_toy = (1.0 + 0.01 * (((seed * 7919) % 21) - 10) / 10.0) / float(config.get("toy_rate", 50.0))
    rounds, k, extra = [per_toy] * 6, 1, {}
    if spec.get("control"):

        class Cell:
            def timed(self, n):
                return n * per_toy

        rounds, k = protocol.serve_rounds(Cell(), spec["control"], {"warmup_window": None})
        extra = {"duet": True}
    with open(result_path, "w") as fh:
        json.dump(dict({"status": "ok", "message": "", "toy_rate": k * len(rounds) / sum(rounds),
                        "round_seconds": rounds, "batches_per_round": k,
                        "meta": {"mxnet_version": config.get("version", "1.9.1")}}, **extra), fh)


if __name__ == "__main__":
    main(*sys.argv[-2:])
'''

TOY_TEST = '''
import pytest
from pytest_mxperf.model.workload import Workload


@pytest.mark.cpu
@pytest.mark.toy
def test_toys(mxperf):
    mxperf.expect_ok(mxperf.measure_kind(Workload(model="workshop", mode="toy", batch_size=4), {"toys": 4}))
'''

KEY = "toy/workshop/b4/cpu:0/float32/threads=auto"


@pytest.fixture
def toy_project(pytester):
    """A project with its own kind of cell: conftest.py (the entry), toy_worker.py (the worker),
    test_toys.py; the kind unregistered again whatever happens."""
    pytester.makeconftest(TOY_CONFTEST)
    pytester.makepyfile(toy_worker=TOY_WORKER, test_toys=TOY_TEST)
    yield pytester
    kinds.unregister("toy")


def _run(pytester, *args):
    return session(pytester, "-p", "no:cacheprovider", "-m", "cpu", "--perf-machine", "box", "--perf-no-probe",
                   "--perf-baselines-dir", str(pytester.path / "bl"), *args)


def test_a_toy_kind_is_measured_estimated_judged_and_reported_against_its_baseline(toy_project, make_stub_python):
    base, now = make_stub_python("base", toy_rate=50.0), make_stub_python("now", toy_rate=40.0)
    r = _run(toy_project, "--perf-python", base, "--perf-update-baselines")
    out = r.stdout.str()
    assert r.ret == 0, out
    # estimated from its entry's cost, named as it names its processes
    assert "toy workshops" in out, out
    recorded = json.loads((toy_project.path / "bl" / "box.json").read_text())["cells"][KEY]["history"][-1]
    assert recorded["metric"] == "toy_rate" and recorded["unit"] == "toys/s", recorded
    assert all(abs(v - 50.0) < 1.0 for v in recorded["process_medians"]), recorded
    stand_ins.recorded_setup_is(toy_project.path, toy_project.path / "bl", base, now)
    r = _run(toy_project, "--perf-python", now, "--perf-report", "rep")
    out = r.stdout.str()
    assert r.ret == pytest.ExitCode.TESTS_FAILED, out
    line = next(x for x in out.splitlines() if x.startswith(f"mxperf: REGRESSION {KEY}"))
    assert "x0.800" in line, line
    report = (toy_project.path / "rep" / "report.txt").read_text()
    assert KEY in report and "toys/s" in report, report


def test_a_toy_kind_duets_in_ab_mode(toy_project, make_stub_python):
    cand, ref = make_stub_python("cand", toy_rate=40.0), make_stub_python("ref", toy_rate=50.0)
    r = _run(toy_project, "--perf-python", cand, "--perf-reference", ref, "--perf-report", "rep")
    out = r.stdout.str()
    assert r.ret == pytest.ExitCode.TESTS_FAILED, out
    assert "timed rounds: score, train, latency, kvstore, dist, convergence, io, serving_peak, serving, toy, your own network" in out, out
    line = next(x for x in out.splitlines() if x.startswith(f"mxperf: REGRESSION {KEY}"))
    assert "candidate/reference 0.800 [" in line and "duet pair(s)" in line, line
    record = next(c for c in json.loads((toy_project.path / "rep" / "results.json").read_text())["records"]
                  if c["key"] == KEY)
    # every pair a duet of two resident toy workers, the rounds taken in turns
    assert record["reference_runs"] and all(run["meta"]["duet"]["rounds"] >= 6 for run in record["reference_runs"])
    assert {run["meta"]["duet"]["side"] for run in record["reference_runs"]} == {"reference"}


def test_a_figure_the_registry_does_not_know_fails_at_once_in_one_line():
    with pytest.raises(kinds.UnknownFigure) as info:
        kinds.Kind("toy2", "toy_worker", "toys_per_hour", "toys", process_seconds=1.0)
    assert "toys_per_hour" in str(info.value) and "\n" not in str(info.value)
    assert "toy2" not in kinds.MODES


def test_an_unknown_kind_is_an_error_where_first_seen_in_one_line():
    with pytest.raises(WorkloadError) as info:
        Workload(model="lenet", mode="toys", batch_size=4)
    assert "'toys'" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(kinds.UnknownKind) as info:
        kinds.kind("toys")
    assert "\n" not in str(info.value)


def test_a_kind_whose_cost_the_plan_would_guess_is_refused():
    with pytest.raises(ValueError, match="process_seconds"):
        kinds.Kind("toy3", "toy_worker", "throughput", "toys")


def test_a_pair_budget_is_a_duets_and_caps_by_the_pairs_cost():
    with pytest.raises(ValueError, match="pair budget"):
        kinds.Kind("toy4", "toy_worker", "throughput", "toys", process_seconds=1.0, pair_budget=kinds.PairBudget(60, 2))
    for seconds, least in ((0, 2), (60, 0)):
        with pytest.raises(ValueError, match="pair budget"):
            kinds.PairBudget(seconds, least)
    budget = kinds.PairBudget(720.0, 6)
    k = kinds.Kind("toy4", "toy_worker", "throughput", "toys", process_seconds=1.0, resident=True, pair_budget=budget)
    assert "toy4" not in kinds.PAIR_BUDGETS                              # not registered: no view holds it
    # as many pairs as 12 min holds, at least 6, at most the rule's most
    assert [k.most_pairs(s, 40) for s in (40.0, 70.0, 240.0, 5.0)] == [18, 10, 6, 40]
    assert k.most_pairs(None, 40) == 6 and k.most_pairs(0.0, 40) == 6     # its cost not known yet: its least
    assert k.most_pairs(40.0, 4) == 4                                     # never above the most asked
    assert kinds.kind("score").most_pairs(240.0, 40) == 40               # no budget: the rule's most
    assert dict(kinds.PAIR_BUDGETS) == {"serving": kinds.kind("serving").pair_budget,
                                        "serving_peak": kinds.kind("serving").pair_budget}
    assert kinds.kind("serving").pair_budget == kinds.PairBudget(kinds.SERVING_PAIRS_BUDGET_S,
                                                                 kinds.SERVING_LEAST_PAIRS)


def test_a_figure_a_worker_yields_that_its_kind_does_not_declare_is_the_processs_error():
    out = ProcessOutcome(status="ok", message="", payload={"status": "ok", "comm_seconds": 0.05, "toy_rate": 3.0},
                         stderr_tail=[], returncode=0, wall_seconds=1.0)
    w = Workload(model="resnet50_v2", mode="kvstore", batch_size=8, contexts=("cpu:0", "cpu:1"))
    r = runner.run_result(out, w, {}, figures=lambda p: {"comm_seconds": p["comm_seconds"], "toy_rate": p["toy_rate"]})
    assert r.status == "error" and "'toy_rate'" in r.message and "\n" not in r.message, r
    ok = runner.run_result(out, w, {}, figures=lambda p: {"comm_seconds": p["comm_seconds"]})
    assert ok.status == "ok" and ok.figures == {"comm_seconds": 0.05}


def test_the_registrys_views_follow_it():
    toy = kinds.Kind("toyv", "toyv_worker", "throughput", "toys", marker="toyv", resident=True, process_seconds=1.0)
    kinds.register(toy)
    try:
        assert "toyv" in kinds.MODES and kinds.PRIMARY["toyv"] == "throughput"
        assert "toyv_worker" in kinds.RESIDENT_MODULES and "toyv" in kinds.RESIDENT_MARKERS
        assert Workload(model="m", mode="toyv", batch_size=2).key() == "toyv/m/b2/cpu:0/float32/threads=auto"
    finally:
        kinds.unregister("toyv")
    assert "toyv" not in kinds.MODES and "toyv_worker" not in kinds.RESIDENT_MODULES


def test_the_child_sides_copies_of_the_kinds_are_the_registrys():
    from pytest_mxperf.workers import profile
    from pytest_mxperf.zoo import flops
    assert set(profile.PROFILED_MODES) == set(kinds.THROUGHPUT_MODES) == {"score", "train", "latency"}
    # the FLOP counter's kinds: every kind whose throughput counts network passes, each once
    assert set(flops.SCORE_MODES) | set(flops.TRAIN_MODES) == set(kinds.FLOP_MODES)
    assert not set(flops.SCORE_MODES) & set(flops.TRAIN_MODES)


def test_a_tests_kind_is_read_from_its_markers_and_decides_whether_its_grid_shares_workers():
    """The plan and the deadline read a collected test's kind from the registry
    (``kinds.of_test``): ``training`` is a grid's training throughput with a grid cell and a
    time-to-accuracy run without; a grid whose kind keeps processes of its own is not priced
    nor scheduled as one worker process measuring every cell."""
    from types import SimpleNamespace

    from pytest_mxperf.measure import planning
    assert kinds.of_test({"cpu", "training"}, True).name == "train"
    assert kinds.of_test({"cpu", "training"}, False).name == "convergence"
    assert kinds.of_test({"cpu", "scoring"}, False).name == "score"  # no kind of its own: the marker's
    assert kinds.of_test({"cpu", "slow"}, True) is None
    assert planning.kind_shares({"latency"}) and planning.kind_shares({"cpu"})
    assert not planning.kind_shares({"io"})

    def item(*marks, ctx=("cpu:0",)):
        return SimpleNamespace(callspec=SimpleNamespace(params={"model": "m", "batch_size": 1, "ctx": list(ctx)}),
                               iter_markers=lambda: [SimpleNamespace(name=m) for m in marks])
    two = [{"model": "m"}, {"model": "n"}]
    assert planning.grid_shares_workers(item("scoring"), two)
    assert not planning.grid_shares_workers(item("scoring"), two[:1])
    assert not planning.grid_shares_workers(item("scoring", ctx=("gpu:0",)), two)
    lone = kinds.Kind("toyg", "toyg_worker", "throughput", "toys", marker="toyg", process_seconds=2.0)
    kinds.register(lone)
    try:
        assert not planning.grid_shares_workers(item("toyg"), two)
        tests = [planning.Planned(measuring=True, priority=None, group=("t", m), markers=frozenset({"toyg", "cpu"}),
                                  cell=(m, 1, "cpu"), function="f.py::t", nodeid=f"f.py::t[{m}]") for m in "mn"]
        est = planning.estimate(tests, processes=1, can_share=True)
        assert est.shared_cells == 0 and est.fresh_tests == 2 and est.fresh_kinds == ("toyg",)
        assert est.fresh_seconds == pytest.approx(2 * 2.0 * planning.ZEN3_SECOND)  # its own cost, twice
    finally:
        kinds.unregister("toyg")
