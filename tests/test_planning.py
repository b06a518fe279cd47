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
