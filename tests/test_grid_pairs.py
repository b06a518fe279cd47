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
