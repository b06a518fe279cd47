"""Workers that stay: one worker process measures several cells in turn.

Real MXNet workers (small cells, short budgets) for what only a real process shows: one
import, each cell its own warm-up, timed windows and memory peak, and what a cell that dies
costs. The session's side (which cells run together, in which order, each once) with
``runner.run_cells`` replaced, as pure logic. Nothing here depends on the machine's speed.
"""

import dataclasses
import time

from pytest_mxperf.measure import planning
import sys
from pathlib import Path

import pytest

import stand_ins

from pytest_mxperf.measure import runner
from pytest_mxperf.measure.planning import Plan
from pytest_mxperf.measure.scheduler import Scheduler
from pytest_mxperf.measure.session import CellRecord, PerfSession, merge_records
from pytest_mxperf.model.measurement import CellMeasurement, RunResult
from pytest_mxperf.model.options import PerfOptions
from pytest_mxperf.model.workload import Workload

DYING = [sys.executable, str(Path(__file__).with_name("dying_cell_worker.py"))]


def cell(model="lenet", batch=1, mode="score"):
    return Workload(model=model, mode=mode, batch_size=batch, contexts=("cpu:0",))


def test_one_process_measures_each_cell_on_its_own():
    ws = [cell("lenet", 1), cell("mlp", 2), cell("lenet", 2, "train")]
    runs = runner.run_cells(ws, time_budget=0.2)
    assert [r.status for r in runs] == ["ok", "ok", "ok"], [r.message for r in runs]
    # glibc's freed memory given back before each cell (_give_back_freed; these machines have glibc)
    assert [r.meta["process_cells"] for r in runs] == [{"index": i, "of": 3, "freed_given_back": True}
                                                       for i in range(3)]
    # what the cells before each one left resident, beyond the first cell's start: recorded for
    # every cell, none for the first
    assert runs[0].meta["carried_rss_bytes"] == 0 and all(isinstance(r.meta["carried_rss_bytes"], int)
                                                         for r in runs)
    # MXNet was imported once: the same import, recorded for each cell
    assert len({r.meta["import_seconds"] for r in runs}) == 1
    for r, w in zip(runs, ws):
        assert r.workload == w and r.value("throughput") > 0
        assert r.meta["warmup_batches"] >= 2  # each cell warmed up on its own, untimed
        assert r.meta["peak_rss_bytes"] > 0
    # each cell's timed rounds lie inside its own part of the process, in order
    windows = [r.meta["timed_windows"] for r in runs]
    assert all(len(w) == 1 and w[0][0] < w[0][1] for w in windows)
    assert windows[0][0][1] <= windows[1][0][0] and windows[1][0][1] <= windows[2][0][0]


GIVE_BACK = r"""
import gc, json, sys
from pytest_mxperf.workers import throughput

anon = throughput._anonymous_bytes  # what measure_cells reads at a cell's start
before = anon()
# 160 MiB in 64-KiB blocks: under glibc's mmap threshold, so from the heap; a block kept
# after them holds the heap's top, so freeing them does not shrink the heap by itself
blocks = [bytearray(b"x" * (64 << 10)) for _ in range(2560)]
pin = bytearray(b"y" * (64 << 10))
del blocks
gc.collect()
freed = anon()
given = throughput._give_back_freed() if sys.argv[1] == "give" else None
print(json.dumps({"before": before, "freed": freed, "after": anon(), "given": given}))
"""


@pytest.mark.parametrize("give", [True, False])
def test_a_shared_processs_next_cell_does_not_start_with_what_the_last_one_freed(give):
    """A cell's memory peak in a shared process (``measure_cells``) holds what the process
    holds when the cell starts: what glibc kept of the cells before it (AlexNet b1 scored last
    in its process read 848-863 MiB, first 670) unless ``_give_back_freed`` returns it first.
    Here 160 MiB freed stay resident, and are given back: the same function, in a process of
    its own (this one's heap is not touched)."""
    import json
    import subprocess

    out = subprocess.run([sys.executable, "-c", GIVE_BACK, "give" if give else "keep"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    m = json.loads(out.stdout)
    mib = 1 << 20
    assert m["freed"] - m["before"] > 120 * mib, m  # freed, still resident: what a next cell would start with
    if give:
        assert m["given"] is True and m["freed"] - m["after"] > 120 * mib, m
    else:
        assert m["after"] - m["before"] > 120 * mib, m


@pytest.mark.parametrize("mode, status, says", [("kill", "crash", "SIGKILL"), ("raise", "error", "cannot be measured")])
def test_a_dying_cell_costs_only_itself(mode, status, says):
    ws = [cell("lenet", 1), cell("lenet", 3), cell("mlp", 1)]
    runs = runner.run_cells(ws, time_budget=0.2, command=DYING + [mode])
    assert runs[0].ok
    assert runs[1].status == status and says in runs[1].message, runs[1].message
    assert runs[2] is None  # not reached: the session measures it in a fresh process


def test_a_hanging_cell_is_bounded_by_its_own_warmup_timeout():
    ws = [cell("lenet", 1), cell("lenet", 3), cell("mlp", 1)]
    runs = runner.run_cells(ws, time_budget=0.2, warmup_timeout=5.0, timeout=60.0, command=DYING + ["hang"])
    assert runs[0].ok
    assert runs[1].status == "timeout" and "warm-up" in runs[1].message
    assert runs[2] is None


def test_cells_that_need_different_environments_are_refused():
    with pytest.raises(ValueError, match="another environment"):
        runner.run_cells([cell(), Workload(model="lenet", mode="score", batch_size=1, contexts=("cpu:0",),
                                           threads="1")], time_budget=0.2)


# -- the session's side, with run_cells replaced ------------------------------------------

def fake_run(throughput=10.0, fail=(), unreached=()):
    """A run_cells stand-in: records each process's cells in order; cells in ``fail`` crash,
    the cells after a crashed one are not reached when in ``unreached``."""
    calls = []

    def run_cells(workloads, **kw):
        calls.append((list(workloads), kw["seed"]))
        out, dead = [], False
        for w in workloads:
            if dead:
                out.append(None)
                continue
            if w.model in fail:
                out.append(RunResult(workload=w, status="crash", message="killed by SIGKILL"))
                dead = bool(unreached)
                continue
            out.append(RunResult(workload=w, status="ok", batches_per_round=1,
                                 round_seconds=[w.batch_size / throughput] * 5))
        return out
    return calls, run_cells


def whole_session(**kw):
    return PerfSession(PerfOptions(machine_probe=False, **kw), environ={})


def session(**kw):
    """A session's scheduler (what measures cells)."""
    return whole_session(**kw).scheduler


def test_cells_run_together_each_process_in_its_own_order(monkeypatch):
    calls, fake = fake_run()
    monkeypatch.setattr(runner, "run_cells", fake)
    ws = [cell("lenet", b) for b in (1, 2, 4, 8)]
    cells = session(processes=2).measure_cells(ws)
    assert [c[1] for c in calls] == [0, 1]  # two processes, process i's seed i
    assert calls[0][0] == ws and calls[1][0] == ws[::-1]
    assert all(len(cells[w.key()].runs) == 2 for w in ws)
    orders = [Scheduler.process_order(ws, i, 5) for i in range(5)]
    assert len({tuple(o) for o in orders}) == 5  # five processes, five orders
    assert all(sorted(o, key=ws.index) == ws for o in orders)


def test_a_cell_two_tests_ask_for_is_measured_once(monkeypatch):
    calls, fake = fake_run()
    monkeypatch.setattr(runner, "run_cells", fake)
    s = session(processes=2)
    ws = [cell("lenet", 1), cell("lenet", 2)]
    first = s.measure_cells(ws)
    again = s.measure_cells([ws[1]])
    assert len(calls) == 2 and again[ws[1].key()] is first[ws[1].key()]
    # both tests record the cell: its processes are counted once
    s.ledger.add(CellRecord("t1", first[ws[1].key()]))
    s.ledger.add(CellRecord("t2", again[ws[1].key()]))
    merged = merge_records(s.ledger.records)[ws[1].key()]
    assert len(merged.cell.runs) == 2 and merged.nodeids == ("t1", "t2")
    # another environment is another measurement
    other = s.measure_cells(ws, extra_env={"MXNET_SUBGRAPH_BACKEND": "NONE"})
    assert len(calls) == 4 and other[ws[1].key()] is not first[ws[1].key()]


def test_a_crashed_cell_is_not_repeated_and_the_rest_run_in_a_fresh_process(monkeypatch):
    calls, fake = fake_run(fail=("mlp",), unreached=True)
    monkeypatch.setattr(runner, "run_cells", fake)
    ws = [cell("lenet", 1), cell("mlp", 1), cell("lenet", 2)]
    cells = session(processes=2).measure_cells(ws)
    # process 0: lenet b1, mlp (crash) -> lenet b2 in a fresh process; process 1 without mlp
    assert [[w.key() for w in c[0]] for c in calls] == [
        [ws[0].key(), ws[1].key(), ws[2].key()], [ws[2].key()], [ws[2].key(), ws[0].key()]]
    assert [c[1] for c in calls] == [0, 0, 1]
    assert [r.status for r in cells[ws[1].key()].runs] == ["crash"]
    assert len(cells[ws[0].key()].ok_runs) == 2 and len(cells[ws[2].key()].ok_runs) == 2


def test_gpu_cells_keep_processes_of_their_own_and_a_deadline_shares_them(monkeypatch):
    """A session under --perf-deadline shares worker processes as the default command does:
    kept apart, its grid cells were "not compared" with a baseline recorded without one (a
    figure measured one way is not judged against one measured the other)."""
    calls, fake = fake_run()
    monkeypatch.setattr(runner, "run_cells", fake)
    alone = []
    monkeypatch.setattr(Scheduler, "measure", lambda self, w, processes=None, extra_env=None:
                        alone.append(w) or CellMeasurement(w, []))
    gpu = [Workload(model="lenet", mode="score", batch_size=b, contexts=("gpu:0",)) for b in (1, 2)]
    session().measure_cells(gpu)
    assert calls == [] and len(alone) == 2
    cells = session(deadline=600.0, processes=2).measure_cells([cell("lenet", 1), cell("lenet", 2)])
    assert [[w.key() for w in c[0]] for c in calls] == [[cell("lenet", b).key() for b in (1, 2)],
                                                       [cell("lenet", b).key() for b in (2, 1)]]
    assert len(alone) == 2 and all(len(c.runs) == 2 for c in cells.values())


def test_progress_line_counts_cells_and_time_left():
    """Time left: the plan's estimate of the tests not done, scaled by how the tests done went
    against theirs (a minute of the plan's own weighs in), and what is left of its start and end."""
    s = whole_session(processes=2)
    tests = tuple((f"t.py::test[{i}]", 10.0) for i in range(10))
    s.planned(Plan(tests=10, cells=10, estimate_seconds=108.0, test_estimates=tests))
    assert s.clock.progress_line().startswith("mxperf: 0 of 10 cell(s) measured")
    assert "about 1.8 min left" in s.clock.progress_line()  # 100 s of tests and 8 s of the rest
    s.clock.runs_done = 10  # five cells' two processes each
    for nodeid, _ in tests[:5]:
        s.clock.test_took(20.0, nodeid)  # each twice its estimate
    s.context = dataclasses.replace(s.context, started=s.context.started - 102.0)
    line = s.clock.progress_line()
    # 50 s planned left x (100 + 60) / (50 + 60), and 6 of the 8 s outside the tests
    assert "5 of 10 cell(s)" in line and "about 1.3 min left" in line, line
    on_plan = whole_session(processes=2)
    on_plan.planned(Plan(tests=10, cells=10, estimate_seconds=108.0, test_estimates=tests))
    for nodeid, _ in tests[:5]:
        on_plan.clock.test_took(10.0, nodeid)
    assert planning.time_left(on_plan.context.plan, on_plan.clock.tests_done, 52.0) == 56.0


def test_a_progress_line_in_the_middle_of_a_test_counts_its_time_so_far():
    """A line printed while a test of several cells is under way (a precision test's two
    cells, a grid's) counts what is left of that test's estimate, not all of it, and does not
    take its time so far for the session's own: time gone plus time left stays the plan's."""
    tests = (("t.py::test[0]", 40.0), ("t.py::test[1]", 60.0))
    plan = Plan(tests=2, cells=3, estimate_seconds=108.0, test_estimates=tests)
    # 30 s into the first test (and 2 s of the session's start before it): 10 s of it left
    mid = planning.time_left(plan, (), 32.0, ("t.py::test[0]", 30.0))
    assert mid == pytest.approx(10.0 + 60.0 + 6.0)          # the rest of the start and end: 8 - 2
    assert 32.0 + mid == pytest.approx(108.0)
    # without it, the whole first test still to come and its 30 s taken as the session's own
    assert planning.time_left(plan, (), 32.0) == pytest.approx(100.0)
    # past its estimate: nothing of it is left, the rest as planned
    assert planning.time_left(plan, (), 52.0, ("t.py::test[0]", 50.0)) == pytest.approx(60.0 + 6.0)
    # a test already done is not counted again; one the plan does not know adds nothing
    done = (("t.py::test[0]", 40.0),)
    assert planning.time_left(plan, done, 42.0, ("t.py::test[0]", 5.0)) == planning.time_left(plan, done, 42.0)
    assert planning.time_left(plan, done, 52.0, ("t.py::other", 10.0)) == pytest.approx(60.0 + 6.0)
    # through the clock: the plugin's start of a test, then its end
    s = whole_session(processes=2)
    s.planned(plan)
    s.clock.test_started("t.py::test[0]", time.monotonic() - 30.0)
    s.context = dataclasses.replace(s.context, started=s.context.started - 32.0)
    assert "about 1.3 min left" in s.clock.progress_line()   # 76 s, where 100 s was said before
    s.clock.test_took(40.0, "t.py::test[0]")
    assert s.clock._running is None


def test_what_the_end_of_the_session_measures_again_is_not_counted_as_the_plans_cells():
    """Settling suspects says its own progress ("re-measured 1 of 3 suspect cell(s)"); the
    progress line of the plan's cells stops at what the measuring tests measured (it counted
    a second stage's pairs on: "27 of 11 cell(s) measured")."""
    s = whole_session(processes=2)
    s.planned(Plan(tests=1, cells=1, estimate_seconds=10.0))
    run = RunResult(workload=cell(), status="ok", batches_per_round=1, round_seconds=[0.1])
    s.clock.measured([run, run], paired=False)
    assert s.clock.runs_done == 2 and s.clock.progress_line().startswith("mxperf: 1 of 1 cell(s) measured")
    s.clock.settling = True
    s.clock.measured([run] * 6, paired=False)
    assert s.clock.runs_done == 2 and s.clock.progress_line().startswith("mxperf: 1 of 1 cell(s) measured")


def test_a_cell_that_runs_more_processes_than_a_cell_gets_counts_once():
    """Seen in an A/A session of the default selection: "27 of 25 cell(s) measured" while
    three tests were still to run: a distributed cell's 12 process pairs counted as 4 cells of
    3. A cell counts once it has the processes a cell gets, never more than once."""
    s = whole_session(processes=3)
    s.planned(Plan(tests=2, cells=2, estimate_seconds=10.0))
    dist = RunResult(workload=cell("lenet", 1), status="ok", batches_per_round=1, round_seconds=[0.1])
    for _ in range(12):
        s.clock.measured([dist, dist], paired=True)
    assert s.clock.progress_line().startswith("mxperf: 1 of 2 cell(s) measured"), s.clock.progress_line()
    other = RunResult(workload=cell("lenet", 2), status="ok", batches_per_round=1, round_seconds=[0.1])
    s.clock.measured([other] * 3, paired=False)
    assert s.clock.progress_line().startswith("mxperf: 2 of 2 cell(s) measured"), s.clock.progress_line()


# -- confirming suspects in baseline mode: announced, with its cost, at most the first stage again

def _suspect(wall, runs=2, multi=True):
    meta = {"process_cells": {"index": 0, "of": 4}, "import_seconds": 1.5} if multi else {}
    return CellRecord("t", CellMeasurement(cell(), [RunResult(workload=cell(), status="ok", batches_per_round=1,
                                                              round_seconds=[0.1] * 5, wall_seconds=wall,
                                                              meta=dict(meta)) for _ in range(runs)]))


def test_confirming_suspects_is_planned_within_the_first_stages_time():
    from pytest_mxperf.judge.thresholds import CONFIRM_PROCESSES
    from pytest_mxperf.measure.planning import PROBE_OVERHEAD_S, SPAWN_S
    from pytest_mxperf.measure.scheduler import MoreToMeasure
    from pytest_mxperf.outcome.comparators import Confirmation
    from pytest_mxperf.outcome.judging import confirmation_plan
    from pytest_mxperf.output.messages import said

    def confirmation_line(plan, budget, cut):
        return said(Confirmation("confirm", tuple(MoreToMeasure(k, n, seconds=p) for k, (n, p) in plan.items()),
                                 budget=budget, cut=cut))
    o = PerfOptions()
    per = 3.0 + 1.5 + SPAWN_S + PROBE_OVERHEAD_S  # a cell of a shared process: its fresh process costs the import too
    plan, cut = confirmation_plan({"a": _suspect(3.0), "b": _suspect(3.0)}, budget_s=1e6, options=o)
    assert not cut and plan == {"a": (CONFIRM_PROCESSES - 2, per), "b": (CONFIRM_PROCESSES - 2, per)}
    # the first stage took less than that: every suspect's processes cut alike, at least one each
    budget = 0.5 * sum(n * p for n, p in plan.values())
    small, cut = confirmation_plan({"a": _suspect(3.0), "b": _suspect(3.0)}, budget_s=budget, options=o)
    assert cut and sum(n * p for n, p in small.values()) <= budget
    assert all(n == (CONFIRM_PROCESSES - 2) // 2 for n, _ in small.values())
    tiny, _ = confirmation_plan({"a": _suspect(3.0), "b": _suspect(3.0)}, budget_s=1.0, options=o)
    assert [n for n, _ in tiny.values()] == [1, 1]
    line = confirmation_line(small, budget, True)
    assert line.startswith("mxperf: confirming 2 suspect cell(s) with 8 more process(es)")
    assert "cut to fit" in line and "cut to fit" not in confirmation_line(plan, 1e6, False)


def test_a_grid_is_measured_together_and_the_session_says_where_it_is(pytester, make_stub_python):
    """A real pytest session with the stand-in worker: a grid test's four cells in two
    processes of four cells (process_cells), the estimate first, a progress line while the
    tests run (shown although pytest captures the tests' output)."""
    pytester.makepyfile(test_grid="""
import pytest

@pytest.mark.mxperf_grid(models=("lenet", "mlp"), batch_sizes=(1, 2))
def test_g(mxperf, ctx, model, batch_size):
    mxperf.expect_ok(mxperf.measure(model, batch_size, contexts=ctx))
""")
    r = stand_ins.session(pytester, "-p", "no:cacheprovider", "-m", "cpu", "--perf-machine", "box",
                                      "--perf-baselines-dir", str(pytester.path / "bl"), "--perf-no-probe",
                                      "--perf-python", make_stub_python("now"), "--perf-report", "rep")
    out = r.stdout.str()
    assert r.ret == 0, out
    assert "4 cell(s) in worker processes of several cells" in out
    assert "mxperf: 4 of 4 cell(s) measured" in out
    import json
    doc = json.loads((pytester.path / "rep" / "results.json").read_text())
    assert len(doc["records"]) == 4
    for rec in doc["records"]:
        assert sorted(run["meta"]["process_cells"]["of"] for run in rec["runs"]) == [4, 4]
    # process 0 measured the grid in order, process 1 in reverse
    first = {rec["key"]: [run["meta"]["process_cells"]["index"] for run in rec["runs"]] for rec in doc["records"]}
    assert sorted(map(tuple, first.values())) == [(0, 3), (1, 2), (2, 1), (3, 0)]
