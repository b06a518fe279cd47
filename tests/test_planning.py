"""The plan without pytest (measure/planning.py): the order a deadline cuts tests in and
which tests run as duets in A/B mode."""

import pytest

from pytest_mxperf.measure.planning import DEFAULT_PRIORITY, Planned, ab_pairs, by_priority, duet_tests
from pytest_mxperf.model import kinds, options


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
             Planned(True, markers=frozenset({"distributed", "training"})),  # a cluster relays its rounds
             Planned(True, markers=frozenset({"cpu"})),
             Planned(False, markers=frozenset({"scoring"}))]
    assert duet_tests(tests) == 3


def test_process_pairs_grow_with_the_session_s_cells():
    assert ab_pairs(1) < ab_pairs(20) < ab_pairs(200)


def test_the_estimate_counts_shared_processes_once_and_names_fresh_ones():
    from pytest_mxperf.measure.planning import (
        FRESH_OTHER_S,
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
    fresh = 2 * dict(FRESH_PROCESS_S)["distributed"] + 2 * FRESH_OTHER_S  # a grid of one cell has processes of its own
    assert (e.shared_cells, e.fresh_tests) == (4, 2)
    assert e.shared_seconds == pytest.approx(shared) and e.fresh_seconds == pytest.approx(fresh)
    assert e.seconds == pytest.approx(SESSION_S + shared + fresh)
    assert e.fresh_kinds == ("distributed launches", "other")
    # recording (5 processes) costs 5/2 of the measuring; in A/B mode nothing is shared
    assert estimate(grid + [dist, lone], processes=5).seconds - SESSION_S == pytest.approx((shared + fresh) * 5 / 2)
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


def test_a_session_s_setup_is_its_mxnet_python_and_the_variables_its_workers_start_with():
    """What decides whether another session's minutes are this one's (#37): the MXNet version,
    the Python and the recorded variables the interpreter starts with, as its probe read them;
    the thread count the suite fills counts only when the user set it."""
    from pytest_mxperf.measure.planning import same_setup, session_setup
    probe = {"status": "ok", "mxnet_version": "1.9.1", "python": "3.11.7", "worker_env": {}}
    mine = session_setup(probe)
    assert mine == {"mxnet_version": "1.9.1", "python": "3.11.7", "environment": {}}
    stored = {"mxnet_version": "1.9.1", "python": "3.11.7", "environment": {"OMP_NUM_THREADS": "2"}}
    assert same_setup(stored, mine)  # the suite's own thread count
    assert not same_setup({**stored, "mxnet_version": "1.6.0"}, mine)
    assert not same_setup({**stored, "python": "3.10.12"}, mine)
    fusion_off = {**stored, "environment": {"OMP_NUM_THREADS": "2", "MXNET_SUBGRAPH_BACKEND": "NONE"}}
    assert not same_setup(fusion_off, mine)
    assert same_setup(fusion_off, session_setup({**probe, "worker_env": {"MXNET_SUBGRAPH_BACKEND": "NONE"}}))
    one_thread = session_setup({**probe, "worker_env": {"OMP_NUM_THREADS": "1"}})
    assert not same_setup(stored, one_thread)
    assert same_setup({**stored, "environment": {"OMP_NUM_THREADS": "1"}}, one_thread)
    # a probe that read no MXNet: no setup, nothing to compare
    assert session_setup({"status": "error", "message": "cannot import mxnet"}) is None
    assert session_setup(None) is None
    # an older worker that did not say its variables: version and Python only
    assert same_setup(fusion_off, session_setup({"status": "ok", "mxnet_version": "1.9.1", "python": "3.11.7"}))


def test_a_pair_against_the_recorded_setup_costs_what_the_cells_processes_took_here():
    """Before a cell has a pair, a duet pair against the recorded setup costs what its
    processes took on this machine: their time outside the timed rounds (the shared process's
    import too) for the start, then both sides' settling and timed rounds, each as long as a
    round or one of the cell's batches where that is longer, and its probes. No constant
    floor (a light cell's pair took 8-16 s on the Zen 3, not the 17.1 s the constants gave); a
    neighbour slows the processes and so the pair, and the deadline then keeps fewer."""
    import types

    from pytest_mxperf.measure import duet
    from pytest_mxperf.measure.planning import SPAWN_S, duet_pair_seconds, setup_pair_seconds
    from pytest_mxperf.model.measurement import CellMeasurement, RunResult
    from pytest_mxperf.model.options import PerfOptions
    from pytest_mxperf.outcome.ab_judging import within_deadline
    from pytest_mxperf.model.workload import Workload
    o = PerfOptions(time_budget=0.3, machine_probe=False)
    w = Workload("mlp", batch_size=8)
    settle = duet.SETTLE_ROUNDS

    def record(wall, batch=0.001, duets=True, **meta):
        runs = [RunResult(w, "ok", batches_per_round=10, round_seconds=[10 * batch] * 3, wall_seconds=wall,
                          meta={"timed_seconds": 30 * batch, **meta}) for _ in range(5)]
        return types.SimpleNamespace(duets=duets, cell=CellMeasurement(w, runs))

    # a light cell: 2.0 s a process, 0.03 s of it timed; rounds of duet.ROUND_SECONDS, as many as the budget gives
    rounds = duet.rounds_for(0.3)
    light = (2.0 - 0.03 + SPAWN_S) + 2 * (rounds + settle) * duet.ROUND_SECONDS
    assert setup_pair_seconds(record(2.0), o) == pytest.approx(light)
    assert light < duet_pair_seconds(o)  # below what the constants said of every pair
    # measured in a process shared with other cells: the import that process made once is the pair's too
    shared = record(2.0, import_seconds=1.2, process_cells={"index": 1, "of": 2})
    assert setup_pair_seconds(shared, o) == pytest.approx(light + 1.2)
    # a batch longer than a round: rounds of one batch, fewer of them
    heavy = record(20.0, batch=0.5)  # 15 s of its 20 timed
    assert duet.rounds_for(0.3, 0.5) <= rounds
    assert setup_pair_seconds(heavy, o) == pytest.approx((20.0 - 15.0 + SPAWN_S)
                                                        + 2 * (duet.rounds_for(0.3, 0.5) + settle) * 0.5)
    # the probes around the cell's processes, when the session probes the machine
    probed = record(2.0, machine_state={"probe_before": {"process_seconds": 0.7},
                                        "probe_after": {"process_seconds": 0.9}})
    assert setup_pair_seconds(probed, PerfOptions(time_budget=0.3)) == pytest.approx(light + 0.8)
    # a GPU cell's sides warm up one after the other (cuDNN's autotune alone): its start twice
    g = Workload("mlp", batch_size=8, contexts=("gpu:0",))
    gpu_runs = [RunResult(g, "ok", batches_per_round=10, round_seconds=[0.01] * 3, wall_seconds=2.0,
                          meta={"timed_seconds": 0.03}) for _ in range(5)]
    gpu = types.SimpleNamespace(duets=True, cell=CellMeasurement(g, gpu_runs))
    assert setup_pair_seconds(gpu, o) == pytest.approx(light + (2.0 - 0.03 + SPAWN_S))
    # process pairs (a cell that cannot be resident): two of its processes
    assert setup_pair_seconds(record(2.0, duets=False), o) == pytest.approx(2 * 2.0)
    # a neighbour tripled the processes' walls: the pair costs more, and a deadline keeps fewer
    slow = setup_pair_seconds(record(30.0), o)
    assert slow > light + 27.0
    kept, cut = within_deadline({"k": 3}, {"k": slow}, 21.0)
    assert kept == {} and cut == (0, 3, 21.0)


def test_the_import_figure_places_a_cpu_when_both_sides_have_it():
    """#37 part 1: MXNet's import (its CPU seconds, what a worker's import from the cache
    costs) scales the share of the reference's seconds the options do not clock; it is used
    whenever the probe and the reference both hold it, whatever the convolution says (an
    Intel Xeon runs the convolution 1.4x faster than the Zen 4 reference and a session 1.08x
    slower); without it on either side the convolution decides as before."""
    from pytest_mxperf.measure.planning import CLOCKED_SHARE, CPU_SHARE, SPEED_RATIO_RANGE, speed_from
    reference = {"cpu": "ref CPU", "conv_gflops": 100.0, "import_cpu_s": 0.5}
    fast_conv_slow_import = speed_from({"mxnet_speed": {"conv_gflops": 140.0, "import_cpu_s": 0.6}}, reference)
    assert fast_conv_slow_import.figure == "import"
    assert fast_conv_slow_import.factor == pytest.approx(CLOCKED_SHARE + (1 - CLOCKED_SHARE) * 1.2)
    assert fast_conv_slow_import.factor > 1.0  # the convolution alone would have said faster
    assert speed_from({"mxnet_speed": {"conv_gflops": 140.0}}, reference).factor < 1.0
    same = speed_from({"mxnet_speed": {"conv_gflops": 30.0, "import_cpu_s": 0.5}}, reference)
    assert same.factor == pytest.approx(1.0) and (same.import_cpu_s, same.reference_import_cpu_s) == (0.5, 0.5)
    # held to the range like the convolution's ratio
    lo, hi = SPEED_RATIO_RANGE
    assert speed_from({"mxnet_speed": {"import_cpu_s": 50.0}}, reference).factor == pytest.approx(
        CLOCKED_SHARE + (1 - CLOCKED_SHARE) * hi)
    assert speed_from({"mxnet_speed": {"import_cpu_s": 1e-6}}, reference).factor == pytest.approx(
        CLOCKED_SHARE + (1 - CLOCKED_SHARE) * lo)
    # missing or broken on either side: the convolution's figure, or none
    no_import_ref = {"cpu": "ref CPU", "conv_gflops": 100.0}
    conv = speed_from({"mxnet_speed": {"conv_gflops": 50.0, "import_cpu_s": 0.6}}, no_import_ref)
    assert conv.figure == "convolution" and conv.factor == pytest.approx(1 - CPU_SHARE + CPU_SHARE * 2)
    for broken in (None, -1, 0, float("nan"), float("inf"), "x", "0.6", True):
        got = speed_from({"mxnet_speed": {"conv_gflops": 50.0, "import_cpu_s": broken}}, reference)
        assert got.figure == "convolution" and got.import_cpu_s is None, broken
    nothing = speed_from({"mxnet_speed": {"import_cpu_s": None}}, {"cpu": "ref CPU"})
    assert (nothing.figure, nothing.factor) == ("", 1.0)


def test_the_shipped_reference_holds_both_speed_figures():
    """The reference file the estimate scales from carries the import figure (a Zen 4's 0.67
    CPU-s) beside the convolution's, and says where it came from."""
    from pytest_mxperf.measure.planning import load_reference
    ref = load_reference()
    assert 0.2 < ref["import_cpu_s"] < 5.0 and "Zen 4" in ref["import_cpu_s_from"]
    assert "family 25 model 17" in ref["cpu"]

def test_a_machine_without_history_scales_the_reference_s_seconds_by_its_mxnet_speed():
    """#37 part 1: with no session of its own, a test the reference machine ran takes what it
    took there times this machine's factor; the constants take the same factor; a grid whose
    selection differs from the reference's takes the constants (its first test carried the
    reference's whole grid)."""
    from pytest_mxperf.measure.planning import (CPU_SHARE, FRESH_OTHER_S, SESSION_S, SHARED_CELL_S,
                                                SHARED_PROCESS_S, Known, estimate, speed_from)
    reference = {"cpu": "ref CPU", "conv_gflops": 50.0}
    slower = speed_from({"mxnet_speed": {"conv_gflops": 25.0}}, reference)
    assert slower.factor == 1 - CPU_SHARE + CPU_SHARE * 2 and slower.reference_cpu == "ref CPU"
    assert speed_from({"mxnet_speed": {"conv_gflops": 100.0}}, reference).factor == 1 - CPU_SHARE / 2
    # a figure far out of range is held to it; a missing or broken one scales nothing
    assert speed_from({"mxnet_speed": {"conv_gflops": 0.001}}, reference).factor == 1 - CPU_SHARE + CPU_SHARE * 4
    for broken in ({}, {"mxnet_speed": {"error": "x"}}, {"mxnet_speed": {"conv_gflops": -1}},
                   {"mxnet_speed": {"conv_gflops": float("nan")}}, None):
        assert speed_from(broken, reference).factor == 1.0 and speed_from(broken, reference).conv_gflops is None
    assert speed_from({"mxnet_speed": {"conv_gflops": 25.0}}, None).factor == 1.0
    # the reference's own spread (a VM's slow spells slow a whole probe): a figure within it is
    # the reference's speed; below its slowest reading, slower by the distance from that
    spread = dict(reference, conv_gflops_seen=[50.0, 35.0, 49.0])
    for within in (35.0, 42.0, 50.0):
        assert speed_from({"mxnet_speed": {"conv_gflops": within}}, spread).factor == 1.0
    assert speed_from({"mxnet_speed": {"conv_gflops": 17.5}}, spread).factor == 1 - CPU_SHARE + CPU_SHARE * 2
    assert speed_from({"mxnet_speed": {"conv_gflops": 100.0}}, spread).factor == 1 - CPU_SHARE / 2

    def grid(bs):
        return [Planned(True, cell=("alexnet", b, "cpu"), function="m.py::test_s", nodeid=f"m.py::test_s[b{b}]")
                for b in bs]
    ref = Known((("m.py::test_s[b1]", 40.0), ("m.py::test_s[b8]", 0.0), ("m.py::test_k", 10.0)), 6.0, 1)
    lone = Planned(True, nodeid="m.py::test_k")
    e = estimate(grid((1, 8)) + [lone], processes=2, reference=ref, speed=slower)
    f = slower.factor
    assert e.scaled_tests == 3 and e.known_tests == 0
    assert abs(e.seconds - (6.0 + 40.0 + 0.0 + 10.0) * f) < 1e-9
    assert dict(e.per_test) == {"m.py::test_s[b1]": 40.0 * f, "m.py::test_s[b8]": 0.0, "m.py::test_k": 10.0 * f}
    # one cell of the grid only: the reference's b1 held both cells, so the constants (scaled;
    # a grid of one cell has processes of its own)
    e1 = estimate(grid((1,)) + [lone], processes=2, reference=ref, speed=slower)
    assert e1.scaled_tests == 1 and abs(dict(e1.per_test)["m.py::test_s[b1]"] - 2 * FRESH_OTHER_S * f) < 1e-9
    e3 = estimate(grid((1, 4, 8)) + [lone], processes=2, reference=ref, speed=slower)
    assert e3.scaled_tests == 1 and e3.shared_cells == 3
    assert abs(e3.shared_seconds - 2 * (SHARED_PROCESS_S + 3 * SHARED_CELL_S) * f) < 1e-9
    # nothing from the reference: the session's own start and end scaled too
    e0 = estimate([lone], processes=2, speed=slower)
    assert e0.scaled_tests == 0 and abs(e0.seconds - (SESSION_S + 2 * FRESH_OTHER_S) * f) < 1e-9


def test_the_reference_s_seconds_count_only_for_its_processes_and_time_budget():
    from types import SimpleNamespace

    from pytest_mxperf.measure.planning import reference_known
    ref = {"sessions": {"suite": {"processes": 2, "time_budget": 1.5, "wall_seconds": 20.0,
                                  "tests": {"a": 8.0, "b": 10.0}}}}
    k = reference_known(ref, "suite", SimpleNamespace(processes=2, time_budget=1.5))
    assert k.by_test == {"a": 8.0, "b": 10.0} and k.overhead == 2.0
    assert reference_known(ref, "suite", SimpleNamespace(processes=3, time_budget=1.5)) is None
    assert reference_known(ref, "suite", SimpleNamespace(processes=2, time_budget=3.0)) is None
    assert reference_known(ref, "recording", SimpleNamespace(processes=2, time_budget=1.5)) is None
    assert reference_known(None, "suite", SimpleNamespace(processes=2, time_budget=1.5)) is None


def test_a_session_against_a_baseline_starts_from_the_reference_s_session_of_its_kind():
    """A session against a baseline takes the reference's unchanged session against its
    baseline, suspects settled at the end included, and says so; without one in the reference
    (and for A/B) it takes the reference's session with nothing to compare, and says more may
    come."""
    from types import SimpleNamespace

    from pytest_mxperf.measure.planning import estimate, reference_known
    from pytest_mxperf.model.options import PerfOptions
    from pytest_mxperf.output import report
    opts = SimpleNamespace(processes=2, time_budget=1.5)
    suite = {"processes": 2, "time_budget": 1.5, "wall_seconds": 20.0, "tests": {"m.py::test_a": 8.0, "m.py::test_b": 10.0}}
    settling = dict(suite, wall_seconds=98.0)  # the same tests, 80 s of suspects settled after them
    ref = {"sessions": {"suite": suite, "baseline": settling}}
    tests = [Planned(True, nodeid="m.py::test_a"), Planned(True, nodeid="m.py::test_b")]
    k = reference_known(ref, "baseline", opts)
    assert k.settles and k.overhead == 80.0
    e = estimate(tests, processes=2, reference=k)
    assert e.reference_settles and abs(e.seconds - 98.0) < 1e-9
    line = report.plan_line(2, PerfOptions(), 8, plan=e)
    assert "expected about 1.6 min" in line and "confirming suspects included as an unchanged session against a " \
        "baseline on the reference machine needed it" in line, line
    assert reference_known(ref, "ab", opts) is None  # a session of one install says nothing of a duet's cost
    for kind, reference in (("baseline", {"sessions": {"suite": suite}}), ("suite", ref)):
        k = reference_known(reference, kind, opts)
        assert not k.settles and k.overhead == 2.0, kind
        e = estimate(tests, processes=2, reference=k)
        assert not e.reference_settles
        assert "more if suspects are confirmed" in report.plan_line(2, PerfOptions(), 8, plan=e), kind


def test_the_shipped_reference_names_the_default_selection_s_tests():
    """The reference file in the wheel: its CPU and speed figure, a session of each kind at the
    default options, and node ids of tests that exist in perf_tests."""
    import re
    from pathlib import Path

    from pytest_mxperf.measure.planning import load_reference
    from pytest_mxperf.model import options as opts
    ref = load_reference()
    assert ref and ref["conv_gflops"] > 0 and "family" in ref["cpu"] and "vCPU" in ref["cpu"]
    root = Path(__file__).resolve().parents[1]
    kinds = {"suite": opts.PROCESSES, "baseline": opts.PROCESSES, "recording": opts.RECORDING_PROCESSES}
    assert set(ref["sessions"]) == set(kinds) | {"ab"}
    for kind, s in ref["sessions"].items():
        if kind == "ab":  # the upgrade gate's A/B session, under the workflow's deadline
            assert s["duet_pairs"] == opts.DUET_PAIRS and s["deadline"] == 1800.0 and "processes" not in s
        else:
            assert s["processes"] == kinds[kind]
        assert s["time_budget"] == opts.TIME_BUDGET_S
        assert s["wall_seconds"] >= sum(s["tests"].values()) > 0
        for nodeid in s["tests"]:
            path, _, rest = nodeid.partition("::")
            name = rest.split("[")[0]
            assert re.search(rf"^def {name}\(", (root / path).read_text(), re.M), nodeid


def test_the_first_line_says_which_tests_take_the_reference_s_seconds_and_at_what_factor():
    from pytest_mxperf.measure.planning import Known, estimate, speed_from
    from pytest_mxperf.model.options import PerfOptions
    from pytest_mxperf.output import report
    ref_doc = {"cpu": "a 2-vCPU Ref CPU", "conv_gflops": 80.0}
    speed = speed_from({"mxnet_speed": {"conv_gflops": 40.0}}, ref_doc)
    tests = [Planned(True, nodeid="m.py::test_a"), Planned(True, nodeid="m.py::test_b")]
    e = estimate(tests, processes=2, reference=Known((("m.py::test_a", 60.0), ("m.py::test_b", 30.0)), 10.0, 1),
                 speed=speed)
    line = report.plan_line(2, PerfOptions(), 8, plan=e, speed=speed)
    assert "2 process(es) a cell: 2 test(s) at what they took on the reference machine; expected about" in line, line
    assert f"expected about {100 * speed.factor / 60:.1f} min" in line, line
    assert "(costs measured on a 2-vCPU Ref CPU, x1.66 for this machine's MXNet speed (40 GFLOP/s against 80)" in line
    # without the speed figure: said, and nothing scaled
    plain = report.plan_line(2, PerfOptions(), 8, plan=estimate(tests, processes=2), speed=speed_from({}, ref_doc))
    assert "not scaled: this machine's MXNet speed was not read" in plain


def test_an_ab_session_is_estimated_from_this_machine_s_own_ab_sessions():
    """Seen on a 2-vCPU Zen 3: the upgrade gate's A/A said "about 12 min when no cell needs a
    second stage" (the constants' 17 s a duet pair) and its first stage took 20.5 min (an
    AlexNet b64 training pair 2 minutes). Its next session takes its tests' own times, its
    second stage and end with them; a test it has not run, the constants' first stage."""
    from pytest_mxperf.measure.planning import (Known, Planned, SESSION_S, ab_constants, ab_estimate, plan_for,
                                                planned_test_seconds)
    from pytest_mxperf.model.options import PerfOptions
    from pytest_mxperf.output import report
    options = PerfOptions(reference="/x/python", deadline=1800.0)
    tests = [Planned(True, markers=frozenset({"training"}), nodeid="t.py::test_train[b64]"),
             Planned(True, markers=frozenset({"scoring"}), nodeid="t.py::test_score[b1]"),
             Planned(True, markers=frozenset({"distributed"}), nodeid="t.py::test_dist"),
             Planned(False, nodeid="t.py::test_plain")]
    known = Known((("t.py::test_train[b64]", 410.0), ("t.py::test_score[b1]", 40.0), ("gone.py::test_x", 99.0)),
                  300.0, 2)
    made = plan_for(tests, options, ab=True, known=known)
    dist = planned_test_seconds(options, True, options.duet_pairs, made.plan.ab_pairs)  # a duet of clusters
    assert made.estimate is not None and made.estimate.known_tests == 2 and made.estimate.known_sessions == 2
    assert abs(made.plan.estimate_seconds - (410.0 + 40.0 + dist + 300.0)) < 1e-6
    assert dict(made.plan.test_estimates)["t.py::test_train[b64]"] == 410.0
    line = report.plan_line(made.plan.tests, options, made.plan.ab_pairs, plan=made.estimate, ab=True)
    assert "2 test(s) at what they took in this machine's last 2 A/B session(s), their second stage" in line, line
    assert f"expected about {report.duration_text(made.plan.estimate_seconds)}" in line
    assert "1 at the constants' first stage" in line and "when no cell needs a second stage" not in line
    assert "will leave some not reached" not in line
    # a long second stage last time is cut by the deadline, not the tests: none is said not reached
    long_end = plan_for(tests, options, ab=True, known=Known(known.tests, 5000.0, 2))
    assert "will leave some not reached" not in report.plan_line(3, options, 8, plan=long_end.estimate, ab=True)
    slow = plan_for(tests, options, ab=True, known=Known((("t.py::test_train[b64]", 1900.0),), 10.0, 1))
    assert "will leave some not reached" in report.plan_line(3, options, 8, plan=slow.estimate, ab=True)
    # none of its tests in the history: the constants, and the line says whose they are
    assert ab_estimate(tests, options, 8, Known((("gone.py::test_x", 99.0),), 300.0, 1)) is None
    plain = plan_for(tests, options, ab=True, known=None)
    assert plain.estimate is None and plain.plan.estimate_seconds is None
    line = report.plan_line(plain.plan.tests, options, plain.plan.ab_pairs, plan=plain.estimate, ab=True)
    assert "when no cell needs a second stage" in line and "own once an A/B session is in its history" in line
    # no time outside the tests recorded: the constant start and end
    e = ab_estimate(tests, options, 8, Known((("t.py::test_score[b1]", 40.0),), None, 1))
    # (a test of time to accuracy: its kind's pairs run each side to its end, ``ab_constants``)
    assert e.known_tests == 1 and abs(e.seconds - (40.0 + SESSION_S + ab_constants(
        [tests[0]], options, options.duet_pairs, 8)[0] + planned_test_seconds(options, True, options.duet_pairs, 8))) < 1e-6
    assert ab_constants([tests[0]], options, options.duet_pairs, 8)[0] > planned_test_seconds(
        options, True, options.duet_pairs, 8)


def test_an_ab_session_without_history_starts_from_the_reference_machine_s_ab_session():
    """The upgrade gate runs on a fresh runner: no A/B session of its own in any history. The
    reference machine's A/B session gives its tests' seconds, scaled by this machine's MXNet
    speed, and its second stage and end when it ran under the same deadline; a test the
    reference did not run, the constants' first stage; this machine's own tests first."""
    from types import SimpleNamespace

    from pytest_mxperf.measure.planning import (Known, Planned, ab_estimate, plan_for, planned_test_seconds,
                                                reference_known, speed_from)
    from pytest_mxperf.model.options import PerfOptions
    from pytest_mxperf.output import report
    ab = {"time_budget": 1.5, "duet_pairs": 3, "deadline": 1800.0, "wall_seconds": 900.0,
          "tests": {"t.py::test_train[b64]": 400.0, "t.py::test_score[b1]": 40.0}}
    doc = {"cpu": "a 2-vCPU Ref CPU", "conv_gflops": 80.0, "sessions": {"ab": ab}}
    gate = PerfOptions(reference="/x/python", deadline=1800.0)
    ref = reference_known(doc, "ab", gate)
    assert ref.by_test == ab["tests"] and ref.overhead == 460.0 and not ref.settles
    # held to the duet pairs and the time budget; the second stage only under the same deadline
    assert reference_known(doc, "ab", SimpleNamespace(time_budget=1.5, duet_pairs=5, deadline=1800.0)) is None
    assert reference_known(doc, "ab", SimpleNamespace(time_budget=3.0, duet_pairs=3, deadline=1800.0)) is None
    assert reference_known(doc, "ab", SimpleNamespace(time_budget=1.5, duet_pairs=3, deadline=None)).overhead is None
    speed = speed_from({"mxnet_speed": {"conv_gflops": 40.0}}, doc)
    f = speed.factor
    tests = [Planned(True, markers=frozenset({"training"}), nodeid="t.py::test_train[b64]"),
             Planned(True, markers=frozenset({"scoring"}), nodeid="t.py::test_score[b1]"),
             Planned(True, markers=frozenset({"scoring"}), nodeid="t.py::test_score[b8]"),
             Planned(False, nodeid="t.py::test_plain")]
    made = plan_for(tests, gate, ab=True, known=None, reference=ref, speed=speed)
    e = made.estimate
    other = planned_test_seconds(gate, True, gate.duet_pairs, made.plan.ab_pairs) * f
    assert e.scaled_tests == 2 and e.known_tests == 0 and e.reference_settles
    assert abs(e.seconds - (400.0 * f + 40.0 * f + other + 460.0 * f)) < 1e-6
    assert dict(e.per_test)["t.py::test_train[b64]"] == 400.0 * f
    line = report.plan_line(made.plan.tests, gate, made.plan.ab_pairs, plan=e, ab=True, speed=speed)
    assert (f"expected about {report.duration_text(e.seconds)}: 2 test(s) at what they took in the reference "
            "machine's A/B session, its second stage and end included (costs measured on a 2-vCPU Ref CPU, "
            f"x{f:.2f} for this machine's MXNet speed (40 GFLOP/s against 80); this machine's own once an A/B "
            "session is in its history), 1 at the constants' first stage") in line, line
    assert "when no cell needs a second stage" not in line
    # another deadline: the reference's tests, not its second stage, and the line says more may come
    free = PerfOptions(reference="/x/python")
    e2 = ab_estimate(tests, free, 8, None, speed, reference_known(doc, "ab", free))
    assert not e2.reference_settles and e2.seconds < e.seconds
    assert "more when a cell needs a second stage" in report.plan_line(3, free, 8, plan=e2, ab=True, speed=speed)
    # this machine's own A/B session wins where it ran the test, and its end is the session's
    own = Known((("t.py::test_score[b1]", 55.0),), 120.0, 1)
    e3 = ab_estimate(tests, gate, 8, own, speed, ref)
    assert e3.known_tests == 1 and e3.scaled_tests == 1 and dict(e3.per_test)["t.py::test_score[b1]"] == 55.0
    assert abs(e3.seconds - (55.0 + 400.0 * f + planned_test_seconds(gate, True, gate.duet_pairs, 8) * f
                             + 120.0)) < 1e-6
    # neither holds any of the tests: no estimate (the constants' line)
    assert ab_estimate([tests[2]], gate, 8, None, speed, ref) is None


def _serving_tests():
    from pytest_mxperf.measure.planning import Planned
    target = frozenset({"cpu", "serving"})
    peak = frozenset({"cpu", "serving", "serving_peak", "slow"})
    return [Planned(True, group=(f, m), markers=marks, function=f"t.py::{f}", nodeid=f"t.py::{f}[{m}]")
            for f, marks in (("test_target", target), ("test_peak", peak)) for m in ("lenet", "resnet50_v2")]


def test_a_serving_test_is_priced_at_its_kind_and_model():
    """A peak test carries ``serving`` (``-m serving`` selects it) and its kind's own marker,
    and is priced as a peak search; a ResNet-50 v2 serving process at its model's own cost
    (``Kind.model_seconds``: its runs last many LeNet ones), not LeNet's."""
    from pytest_mxperf.measure.planning import ZEN3_SECOND, estimate
    tests = _serving_tests()
    assert [kinds.of_test(t.markers, False).name for t in tests] == ["serving", "serving", "serving_peak",
                                                                     "serving_peak"]
    e = dict(estimate(tests, processes=5).per_test)
    for t in tests:
        k = kinds.of_test(t.markers, False)
        assert e[t.nodeid] == pytest.approx(5 * k.seconds_for(t.group[1]) * ZEN3_SECOND), t.nodeid
    assert e["t.py::test_target[resnet50_v2]"] > 10 * e["t.py::test_target[lenet]"]
    assert e["t.py::test_peak[lenet]"] > e["t.py::test_target[lenet]"]


def test_an_ab_session_of_whole_runs_is_priced_at_its_kinds_pairs_and_cap():
    """In A/B mode at the constants a serving cell's duet pair is its kind's whole runs, both
    sides one at a time (a peak pair each side's search), and its second stage stops at the
    kind's cap at that pair (``Kind.pair_budget``: ResNet-50 v2's long pairs at its least, LeNet's
    peak pairs a whole second stage); a zoo cell's pair stays the constants' short rounds."""
    from pytest_mxperf.measure.planning import (DUET_STARTUP_S, SECOND_STAGE_PAIRS, ZEN3_SECOND, ab_constants,
                                                duet_pair_seconds, kind_pair_seconds)
    opts = options.PerfOptions()
    target, _, peak, _ = _serving_tests()
    resnet = _serving_tests()[1]

    def pair_s(t):
        return kind_pair_seconds(kinds.of_test(t.markers, t.cell is not None), t, opts)
    s = kinds.kind("serving").seconds_for("resnet50_v2") * ZEN3_SECOND
    assert pair_s(resnet) == pytest.approx(DUET_STARTUP_S + 2 * kinds.SERVING_DUET_RUNS * s)
    assert pair_s(peak) == pytest.approx(
        DUET_STARTUP_S + 2 * kinds.kind("serving_peak").seconds_for("lenet") * ZEN3_SECOND)
    first, most = ab_constants([resnet], opts, 3, 8)
    assert first == pytest.approx(3 * pair_s(resnet))
    assert kinds.SERVING_PAIRS_BUDGET_S < (3 + SECOND_STAGE_PAIRS) * pair_s(resnet)
    assert most == pytest.approx(kinds.SERVING_LEAST_PAIRS * pair_s(resnet))
    assert kinds.SERVING_PAIRS_BUDGET_S > (3 + SECOND_STAGE_PAIRS) * pair_s(peak)
    assert ab_constants([peak], opts, 3, 8) == pytest.approx((3 * pair_s(peak), (3 + SECOND_STAGE_PAIRS) * pair_s(peak)))
    zoo = Planned(True, markers=frozenset({"scoring", "cpu"}), cell=("alexnet", 1, "cpu"))
    assert pair_s(zoo) is None
    assert ab_constants([zoo], opts, 3, 8) == pytest.approx(
        (3 * duet_pair_seconds(opts), (3 + SECOND_STAGE_PAIRS) * duet_pair_seconds(opts)))
