"""One duet pair serving a grid's cells in turn (``duet.run_cells_pair``; issue 76, part 4): both
workers import MXNet once, each cell is bound, warmed up and timed in alternating rounds, then
the next. Run against stand-in workers that speak the real worker and round protocols
(tests/stub_worker.py); with real MXNet on both sides in tests/test_duet.py."""

import pytest

from stand_ins import new_children

from pytest_mxperf.measure import duet
from pytest_mxperf.model.workload import Workload

GRID = [Workload(model="lenet", mode="score", batch_size=4), Workload(model="mlp", mode="train", batch_size=8),
        Workload(model="alexnet", mode="latency", batch_size=1)]


def test_each_cell_of_the_grid_gets_its_own_rounds_in_one_pair_of_processes(make_stub_python):
    cand = make_stub_python("cand", rate=90.0)
    ref = make_stub_python("ref", rate=100.0, factors={"mlp": 2.0})
    pairs = duet.run_cells_pair(GRID, candidate=cand, reference=ref, seed=1, candidate_first=False, time_budget=0.5,
                                memory_limit=None)
    assert not new_children()  # every process of the pair reaped
    assert len(pairs) == 3 and all(p is not None for p in pairs)
    for i, (w, (c, r)) in enumerate(zip(GRID, pairs)):
        assert c.ok and r.ok, (c.message, r.message)
        assert c.workload == r.workload == w
        assert c.meta["duet"]["cells_in_pair"] == r.meta["duet"]["cells_in_pair"] == {"index": i, "of": 3}
        # one process a side for the whole grid: each cell is a cell of several in it
        assert c.meta.process_cells["index"] == i and c.meta.process_cells["of"] == 3
        assert c.meta["duet"]["side"] == "candidate" and r.meta["duet"]["side"] == "reference"
        assert r.meta["duet"]["ran_first"] and not c.meta["duet"]["ran_first"]
        assert len(c.round_seconds) == len(r.round_seconds) == c.meta["duet"]["rounds"] >= duet.MIN_ROUNDS
        assert c.batches_per_round == r.batches_per_round == c.meta["duet"]["batches_per_round"]
    # the rounds are each cell's own: the stand-in reference is twice as fast on mlp only
    ratio = [sorted(rr / cc for cc, rr in zip(c.round_seconds, r.round_seconds))[3] for c, r in pairs]
    assert ratio[0] == pytest.approx(0.9, rel=0.03) and ratio[2] == pytest.approx(0.9, rel=0.03), ratio
    assert ratio[1] == pytest.approx(0.45, rel=0.03), ratio


def test_a_cell_whose_rounds_crash_a_side_fails_and_the_cells_after_it_are_not_reached(make_stub_python):
    cand = make_stub_python("cand", duet_crash_models=["mlp"])
    ref = make_stub_python("ref")
    pairs = duet.run_cells_pair(GRID, candidate=cand, reference=ref, seed=0, time_budget=0.5, memory_limit=None)
    assert not new_children()  # the healthy side stopped too: nothing left running
    first, failed, after = pairs
    assert first[0].ok and first[1].ok  # measured before the crash: kept
    c, r = failed
    assert c.status == "crash" and "exited with code 3" in c.message, c.message
    assert not r.ok and r.message.startswith("its duet partner (the candidate) failed"), r.message
    assert after is None  # the caller measures it in a fresh pair


def test_a_cell_one_side_cannot_run_is_said_and_the_next_cell_is_measured(make_stub_python):
    cand = make_stub_python("cand", unsupported_models=["mlp"])
    ref = make_stub_python("ref")
    pairs = duet.run_cells_pair(GRID, candidate=cand, reference=ref, seed=0, time_budget=0.5, memory_limit=None)
    c, r = pairs[1]
    assert c.status == "unsupported" and "not supported" in c.message, c.message
    assert not r.ok and r.message.startswith("its duet partner (the candidate) could not measure it: unsupported"), \
        r.message
    assert len(r.round_seconds) == 0  # no rounds on either side
    assert all(p[0].ok and p[1].ok for p in (pairs[0], pairs[2]))


def test_only_cpu_zoo_cells_of_the_throughput_worker_share_a_pair():
    assert duet.shares_a_pair(GRID[0])
    assert not duet.shares_a_pair(Workload(model="lenet", mode="score", batch_size=4, contexts=("gpu:0",)))
    assert not duet.shares_a_pair(Workload(model="mlp", mode="io", batch_size=4))
    assert not duet.shares_a_pair(Workload(model="net", mode="score", batch_size=4, source='{"kind": "symbol"}'))
    with pytest.raises(ValueError, match="cannot share a duet pair"):
        duet.run_cells_pair([GRID[0], Workload(model="mlp", mode="kvstore", batch_size=4)], candidate=None,
                            reference=None)


# -- the end of the session: a look's grid cells share their pairs ---------------------------

def test_a_looks_grid_cells_share_pairs_each_to_its_own_count_and_other_cells_run_alone(monkeypatch):
    """``Scheduler.confirm_all``: the duet cells of grids against the same two sides go through
    pairs that serve them in turn (pair i serves the cells that want more than i pairs, a cell
    left alone in a pair of its own), each cell said done once it has its count; a cell that
    cannot share (measured alone: no ``Remeasure.grid``) is measured alone, in the round's order."""
    import dataclasses

    from pytest_mxperf.measure.ledger import CellRecord
    from pytest_mxperf.measure.scheduler import MoreToMeasure, Remeasure, Side
    from pytest_mxperf.measure.session import PerfSession
    from pytest_mxperf.model.measurement import CellMeasurement, RunResult
    from pytest_mxperf.model.options import PerfOptions
    from pytest_mxperf.measure.comparison import comparison_for

    def ok(w, side, seed):
        return RunResult(workload=w, status="ok", batches_per_round=1, round_seconds=[0.01] * 6,
                         meta={"duet": {"side": side}, "seed": seed})
    calls = []

    def run_cells_pair(cells, **kw):
        calls.append(("shared", [w.model for w in cells], kw["seed"], kw["candidate_first"]))
        return [(ok(w, "candidate", kw["seed"]), ok(w, "reference", kw["seed"])) for w in cells]

    def run_pair(w, **kw):
        calls.append(("own", [w.model], kw["seed"], kw["candidate_first"]))
        return ok(w, "candidate", kw["seed"]), ok(w, "reference", kw["seed"])
    monkeypatch.setattr(duet, "run_cells_pair", run_cells_pair)
    monkeypatch.setattr(duet, "run_pair", run_pair)
    s = PerfSession(PerfOptions(machine_probe=False), environ={})
    s.context = dataclasses.replace(s.context, comparison=comparison_for("/ref/python"))
    sched = s.scheduler
    io = Workload(model="mlp", mode="io", batch_size=4)
    alone = []

    def finished(cell):
        return cell.mapped(lambda r: r.with_facts(tf32={"finished": True}))  # any declared fact
    other = Workload(model="lenet", mode="train", batch_size=4)  # a cell of another grid
    for w in GRID + [io, other]:
        first = CellMeasurement(w, [ok(w, "candidate", 0)], [ok(w, "reference", 0)])
        how = (Remeasure(lambda more, w=w: alone.append(more) or CellMeasurement(w, [ok(w, "candidate", 9)]))
               if w is io else
               Remeasure(lambda more, w=w: alone.append(more) or CellMeasurement(w, [ok(w, "candidate", 9)]),
                         frozenset([other.key(), "train/mlp"]), (), finished) if w is other else
               Remeasure(lambda more: pytest.fail("a grid cell measured alone"),
                         frozenset(g.key() for g in GRID), (), finished))
        s.ledger.add(CellRecord("t", first, remeasure=how, duets=True))
    sides = dict(candidate=Side(), reference=Side("/ref/python"))
    wanted = [MoreToMeasure(GRID[0].key(), 1, "duet", **sides), MoreToMeasure(io.key(), 2, "duet", **sides),
              MoreToMeasure(other.key(), 1, "duet", **sides), MoreToMeasure(GRID[1].key(), 3, "duet", **sides)]
    said = []
    sched.confirm_all(wanted, lambda more: said.append((more.key, len(calls))))
    # pair 0 serves both grid cells; pairs 1 and 2 the one that wants 3, in pairs of its own,
    # the candidate first in the odd one
    assert calls == [("shared", ["lenet", "mlp"], 0, False), ("own", ["mlp"], 1, True), ("own", ["mlp"], 2, False)]
    assert said == [(GRID[0].key(), 1), (GRID[1].key(), 3), (io.key(), 3), (other.key(), 3)]  # once it had its count
    # the cell of another grid shares no pair with this one's: alone, as the input pipeline's
    assert [(m.key, m.count) for m in alone] == [(io.key(), 2), (other.key(), 1)]
    cells = s.ledger.cells()
    assert len(cells[GRID[0].key()].cell.runs) == 2 and len(cells[GRID[1].key()].cell.runs) == 4
    assert len(cells[GRID[2].key()].cell.runs) == 1  # not asked for
    added = cells[GRID[1].key()].cell
    assert all(r.meta.get("tf32") for r in added.runs[1:] + added.reference[1:])  # its test's finish
    assert [r.meta["seed"] for r in added.reference] == [0, 0, 1, 2]
