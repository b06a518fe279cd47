"""benchmarks/where_seconds_go.py: a session's seconds per test, split into its processes'
phases, from the facts its results.json holds."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import where_seconds_go as W  # noqa: E402


def _run(process, wall, **meta):
    return {"process": process, "wall_seconds": wall, "meta": meta}


DOC = {
    "session": {"wall_seconds": 30.0, "test_seconds": {"t.py::test_fresh": 10.0, "t.py::test_grid[a]": 12.0,
                                                       "t.py::test_grid[b]": 0.5}},
    "records": [
        {"nodeid": "t.py::test_fresh", "runs": [
            # the worker's warm-up window opens before its bind: 1.0 s of it, 0.5 s the bind's
            _run("p1", 4.0, import_seconds=2.0, bind_seconds=0.5, warmup_window={"started": 10.0, "ended": 11.0},
                 timed_seconds=0.75),
            _run("p2", 5.0)]},  # a worker kind that reports no phase
        {"nodeid": "t.py::test_grid[a]", "runs": [
            _run("g1", 3.0, import_seconds=2.0, timed_seconds=1.0, process_cells={"index": 0, "of": 2})]},
        {"nodeid": "t.py::test_grid[b]", "runs": [
            _run("g2", 2.0, import_seconds=2.0, timed_seconds=1.0, process_cells={"index": 1, "of": 2}),
            _run("d1", 6.0, import_seconds=2.5, duet={"first": "candidate"})]},  # a pair settling a suspect
    ]}


def test_each_test_gets_its_processes_phases_and_the_rest_outside_them():
    rows = {r["test"]: r for r in W.by_test(DOC)}
    fresh = rows["t.py::test_fresh"]
    assert (fresh["processes"], fresh["process wall"], fresh["outside processes"]) == (2, 9.0, 1.0)
    assert (fresh["import"], fresh["bind"], fresh["warm-up"], fresh["timed"]) == (2.0, 0.5, 0.5, 0.75)
    assert fresh["process rest"] == 4.0 - 3.75 + 5.0  # the process without phases is all rest
    # a process of several cells imports once: on its first cell, not on the second
    assert rows["t.py::test_grid[a]"]["import"] == 2.0 and rows["t.py::test_grid[b]"]["import"] is None
    assert rows["t.py::test_grid[b]"]["processes"] == 0 and rows["t.py::test_grid[a]"]["processes"] == 1
    settling = rows[W.SETTLING]
    assert (settling["processes"], settling["import"]) == (1, 2.5) and rows["t.py::test_grid[b]"]["process wall"] == 2.0


def test_a_grid_is_one_row_by_function_and_the_table_says_the_session():
    grid = {r["test"]: r for r in W.by_function(W.by_test(DOC))}["t.py::test_grid"]
    assert (grid["wall"], grid["cells"], grid["processes"], grid["process wall"]) == (12.5, 2, 1, 5.0)
    text = W.table(DOC, functions=True)
    assert "session wall 30.0 s: 22.5 s in measuring tests, 7.5 s outside them" in text
