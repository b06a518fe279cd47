"""The plan without pytest (measure/planning.py): the order a deadline cuts tests in and
which tests run as duets in A/B mode."""

from pytest_mxperf.measure.planning import DEFAULT_PRIORITY, Planned, ab_pairs, by_priority, duet_tests


def test_priority_first_then_breadth_first_then_collection_order():
    tests = [Planned(False),                                                  # 0: not measuring: front
             Planned(True, None, ("score", "alexnet"), frozenset({"scoring"})),  # 1
             Planned(True, None, ("score", "alexnet"), frozenset({"scoring"})),  # 2: alexnet's second
             Planned(True, None, ("score", "resnet"), frozenset({"scoring"})),   # 3
             Planned(True, 10, ("dist", ""), frozenset({"distributed"}))]       # 4: urgent
    assert by_priority(tests) == [0, 4, 1, 3, 2]
    assert DEFAULT_PRIORITY > 10


def test_duet_tests_are_the_resident_kinds_only():
    tests = [Planned(True, markers=frozenset({"scoring", "cpu"})),
             Planned(True, markers=frozenset({"latency"})),
             Planned(True, markers=frozenset({"distributed", "training"})),
             Planned(True, markers=frozenset({"cpu"})),
             Planned(False, markers=frozenset({"scoring"}))]
    assert duet_tests(tests) == 2


def test_process_pairs_grow_with_the_session_s_cells():
    assert ab_pairs(1) < ab_pairs(20) < ab_pairs(200)


def test_the_estimate_counts_shared_processes_once_and_names_fresh_ones():
    from pytest_mxperf.measure.planning import (
        FRESH_PROCESS_S,
        SESSION_S,
        SHARED_CELL_S,
        SHARED_PROCESS_S,
        Planned,
        estimate,
    )
    grid = [Planned(True, markers=frozenset({"scoring", "cpu"}), cell=(m, b, "cpu"), function="t.py::test_scoring")
            for m in ("alexnet", "resnet50_v2") for b in (1, 8)]
    dist = Planned(True, markers=frozenset({"distributed", "cpu"}))
    lone = Planned(True, markers=frozenset({"training", "cpu"}), cell=("alexnet", 1, "cpu"), function="t.py::test_train")
    e = estimate(grid + [dist, lone, Planned(False)], processes=2)
    shared = 2 * (SHARED_PROCESS_S + 4 * SHARED_CELL_S)
    fresh = 2 * dict(FRESH_PROCESS_S)["distributed"] + 2 * 6.0  # a grid of one cell has processes of its own
    assert (e.shared_cells, e.fresh_tests) == (4, 2)
    assert e.shared_seconds == shared and e.fresh_seconds == fresh and e.seconds == SESSION_S + shared + fresh
    assert e.fresh_kinds == ("distributed launches", "other")
    # recording (5 processes) costs 5/2 of the measuring; with a deadline nothing is shared
    assert estimate(grid + [dist, lone], processes=5).seconds - SESSION_S == (shared + fresh) * 5 / 2
    assert estimate(grid, processes=2, can_share=False).shared_cells == 0


def test_known_tests_take_what_they_took_and_the_rest_the_constants():
    """This machine's last sessions (median per test, and of the time outside the tests) for the
    tests they ran; the constants for the others; a grid's cost on its first test, which
    measures every cell of it."""
    from pytest_mxperf.measure.planning import SHARED_CELL_S, SHARED_PROCESS_S, estimate, known_from
    rows = [{"wall_seconds": 100.0, "tests": {"a": 30.0, "b": 50.0}},
            {"wall_seconds": 130.0, "tests": {"a": 40.0, "b": 70.0}},
            {"wall_seconds": 90.0, "tests": {"a": 20.0}}]
    known = known_from(rows)
    assert known.by_test == {"a": 30.0, "b": 60.0} and known.overhead == 20.0 and known.sessions == 3
    grid = [Planned(True, cell=("alexnet", b, "cpu"), function="t.py::test_scoring", nodeid=f"g{b}")
            for b in (1, 2, 4)]
    tests = [Planned(True, nodeid="a"), Planned(True, nodeid="b"), *grid]
    e = estimate(tests, processes=2, known=known)
    group = 2 * (SHARED_PROCESS_S + 3 * SHARED_CELL_S)
    assert e.seconds == 20.0 + 30.0 + 60.0 + group and (e.known_tests, e.known_sessions) == (2, 3)
    assert dict(e.per_test) == {"a": 30.0, "b": 60.0, "g1": group, "g2": 0.0, "g4": 0.0}
    # nothing known: the constants, and the session's own start and end as SESSION_S
    assert estimate(tests, processes=2).known_tests == 0


def test_a_pair_against_the_recorded_setup_costs_what_the_cells_processes_took_here():
    """A duet pair's start is as long as one of the cell's processes took on this machine now
    (a neighbour slows both), never less than the constant; the deadline then keeps fewer."""
    import types

    from pytest_mxperf.measure.planning import DUET_STARTUP_S, duet_pair_seconds, setup_pair_seconds
    from pytest_mxperf.model.measurement import CellMeasurement, RunResult
    from pytest_mxperf.model.options import PerfOptions
    from pytest_mxperf.model.workload import Workload
    from pytest_mxperf.outcome.ab_judging import within_deadline
    o = PerfOptions(time_budget=0.3, machine_probe=False)
    w = Workload("mlp", batch_size=8)

    def record(wall):
        runs = [RunResult(w, "ok", batches_per_round=1, round_seconds=[0.01], wall_seconds=wall) for _ in range(5)]
        return types.SimpleNamespace(duets=True, cell=CellMeasurement(w, runs))
    rounds = duet_pair_seconds(o) - DUET_STARTUP_S
    assert setup_pair_seconds(record(2.0), o) == duet_pair_seconds(o)  # quicker than the constant: the constant
    assert setup_pair_seconds(record(30.0), o) == 30.0 + rounds
    kept, cut = within_deadline({"k": 3}, {"k": setup_pair_seconds(record(30.0), o)}, 21.0)
    assert kept == {} and cut == (0, 3, 21.0)
