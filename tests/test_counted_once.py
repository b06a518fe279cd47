"""Every process is counted once (issue: a cell measured by two tests was judged, written
and stored with some processes twice when the interim report merged the cells in place),
and a cell two tests ask for is measured once (#26: one cell, one measurement).

Two tests measure the same cell, in a real pytest session whose workers are the stand-in
MXNet (tests/stub_worker.py): the table, results.json, the baseline and the history store
each hold each of the cell's processes once, in baseline mode (recording) and in A/B mode
(duet pairs). ``--perf-report`` writes the interim report after every cell, which is what
used to count processes again.
"""

import json
import re
import sqlite3

import pytest

import stand_ins

TWO_TESTS = """
def test_one(mxperf):
    mxperf.expect_ok(mxperf.measure("lenet", 8, contexts=["cpu:0"]))

def test_two(mxperf):
    mxperf.expect_ok(mxperf.measure("lenet", 8, contexts=["cpu:0"]))
"""

KEY = "score/lenet/b8/cpu:0/float32/threads=auto"


def _session(pytester, python, *args):
    pytester.makepyfile(test_cells=TWO_TESTS)
    return stand_ins.session(pytester, 
        "-p", "no:cacheprovider", "--perf-machine", "box", "--perf-baselines-dir", str(pytester.path / "bl"),
        "--perf-python", python, "--perf-report", "rep", "--perf-store", str(pytester.path / "h.sqlite"),
        "--perf-no-probe", *args)


def _table_count(out: str, label: str) -> int:
    rows = [line for line in out.splitlines() if line.startswith(label)]
    assert len(rows) == 1, out  # one row for the cell, not one per test
    return int(re.search(r"[pr](\d+)\s", rows[0]).group(1))


def _stored_processes(db, side="candidate"):
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT COUNT(*) FROM processes WHERE cell_key = ? AND side = ?", (KEY, side)).fetchone()[0]
    finally:
        con.close()


def _results(pytester):
    doc = json.loads((pytester.path / "rep" / "results.json").read_text())
    recs = [r for r in doc["records"] if r["key"] == KEY]
    assert len(recs) == 1
    return doc, recs[0]


def test_a_cell_two_tests_measure_is_counted_once_when_recorded(pytester, make_stub_python):
    r = _session(pytester, make_stub_python("now", rate=100.0), "--perf-update-baselines", "--perf-processes", "3")
    out = r.stdout.str()
    assert r.ret == 0, out
    _, rec = _results(pytester)
    runs = rec["runs"]
    assert len(runs) == 3  # one measurement of 3 processes, shared by the two tests
    assert sorted(n.rsplit("::", 1)[1] for n in rec["nodeids"]) == ["test_one", "test_two"]
    assert _table_count(out, "score lenet b8 cpu:0") == 3
    from pytest_mxperf.store.baselines import Baseline
    baseline = Baseline.load(next((pytester.path / "bl").glob("*.json")))
    assert len(baseline.values(KEY)) == 3
    assert _stored_processes(pytester.path / "h.sqlite") == 3


def test_a_cell_two_tests_measure_is_counted_once_in_a_duet(pytester, make_stub_python):
    r = _session(pytester, make_stub_python("now", rate=100.0), "--perf-reference",
                 make_stub_python("ref", rate=100.0), "--perf-processes", "3")
    out = r.stdout.str()
    assert r.ret == 0, out
    doc, rec = _results(pytester)
    pairs = doc["session"]["verdicts"][KEY]["n_current"]
    # 3 duet pairs for the cell, shared by the two tests, each pair once (a second stage
    # would add pairs, counted once too)
    assert pairs >= 3
    assert len(rec["runs"]) == len(rec["reference_runs"]) == pairs
    assert sorted(n.rsplit("::", 1)[1] for n in rec["nodeids"]) == ["test_one", "test_two"]
    # no process twice: each pair's position in its duet, once each
    assert sorted(x["meta"]["duet"]["pair"] for x in rec["runs"]) == sorted(list(range(3)) + list(range(pairs - 3)))
    assert _table_count(out, "score lenet b8 cpu:0") == pairs
    assert _stored_processes(pytester.path / "h.sqlite") == pairs
    assert _stored_processes(pytester.path / "h.sqlite", "reference") == pairs


@pytest.mark.parametrize("interim", [1, 3])
def test_judging_a_session_any_number_of_times_changes_nothing_measured(interim):
    """The merge of a cell's records returns new values, and judging them (what the interim
    report does after every cell) leaves the session's records as they were."""
    from pytest_mxperf.measure.session import CellRecord, PerfSession, merge_records
    from pytest_mxperf.model.measurement import CellMeasurement, RunResult
    from pytest_mxperf.model.options import PerfOptions
    from pytest_mxperf.model.workload import Workload
    from pytest_mxperf.outcome import comparators

    w = Workload("lenet", mode="score", batch_size=8)

    def run(v):
        return RunResult(w, "ok", batches_per_round=1, round_seconds=[8 / v], meta={"env": {}})

    s = PerfSession(PerfOptions(machine_probe=False))
    s.ledger.add(CellRecord("t::one", CellMeasurement(w, [run(100.0), run(101.0)])))
    s.ledger.add(CellRecord("t::two", CellMeasurement(w, [run(99.0), run(102.0)])))
    before = [list(r.cell.runs) for r in s.ledger.records]
    for _ in range(interim):
        comparators.interim(comparators.choose(s.context, s.clock), s.ledger.measured_cells())
        merged = merge_records(s.ledger.records)
    assert [list(r.cell.runs) for r in s.ledger.records] == before
    assert len(merged[w.key()].cell.runs) == 4
    assert merged[w.key()].cell is not s.ledger.records[0].cell
