"""A/B mode's one error budget per session and the deadline of its second stage, on the
product's functions (outcome/ab_judging.py, judge/ab_pairs.py)."""

import dataclasses
import math
import time

import pytest

from pytest_mxperf.judge import ab_pairs
from pytest_mxperf.judge.thresholds import FDR_Q
from pytest_mxperf.measure import planning
from pytest_mxperf.measure.session import CellRecord, PerfSession
from pytest_mxperf.model.measurement import METRICS, CellMeasurement, RunResult
from pytest_mxperf.model.options import PerfOptions
from pytest_mxperf.model.workload import Workload
from pytest_mxperf.outcome import ab_judging
from pytest_mxperf.measure.comparison import comparison_for


def test_the_two_families_share_one_budget_in_proportion():
    assert ab_judging.family_q({"a": 1}, {}) == (FDR_Q, FDR_Q)
    assert ab_judging.family_q({}, {"b": 1, "c": 1}) == (FDR_Q, FDR_Q)
    qp, qd = ab_judging.family_q({"a": 1}, {"b": 1, "c": 1, "d": 1})
    assert qp == pytest.approx(FDR_Q / 4) and qd == pytest.approx(3 * FDR_Q / 4)
    assert qp + qd == pytest.approx(FDR_Q)


def _pairing(ratios):
    """Process pairs whose fast ends are equal but whose pairs show ``ratios``."""
    ref = [100.0 + i for i in range(len(ratios))]
    cand = [r * x for r, x in zip(ref, ratios)]
    cand[ref.index(max(ref))] = max(ref)  # the fast ends agree
    return ab_pairs.Pairing(METRICS["throughput"], cand, ref, final=True)


def test_the_pairs_guard_is_adjusted_across_the_session():
    """Eight pairs all 8% slower but one: alone, the pairs' signed-rank test fails the cell
    (unresolved); among 40 unchanged figures its p is adjusted across the session and the
    cell passes on its fast ends, as the 40 do."""
    slow = _pairing([0.92] * 7 + [1.0])
    alone = ab_pairs.judge_ab({"slow": slow})
    assert alone["slow"].kind == "unresolved"
    flat = {f"c{i}": ab_pairs.Pairing(METRICS["throughput"], [100.0 + (j % 3) for j in range(8)],
                                      [100.0 + ((j + i) % 3) for j in range(8)], final=True) for i in range(40)}
    among = ab_pairs.judge_ab(dict(flat, slow=slow))
    p = alone["slow"].p_value
    assert p is not None and math.isfinite(p)
    assert among["slow"].kind == "unchanged"
    assert all(v.kind == "unchanged" for k, v in among.items() if k != "slow")


def _cell(wall):
    w = Workload("lenet", mode="score", batch_size=8)
    runs = [RunResult(w, "ok", batches_per_round=1, round_seconds=[0.08], wall_seconds=wall, meta={})
            for _ in range(3)]
    return CellRecord("t", CellMeasurement(w, runs, list(runs)))


def _started(options, ago):
    s = PerfSession(options)
    s.context = dataclasses.replace(s.context, started=time.time() - ago)
    return s


def _said(wanted, cut):
    from pytest_mxperf.measure.scheduler import MoreToMeasure
    from pytest_mxperf.outcome.comparators import Confirmation
    from pytest_mxperf.output.messages import said
    return said(Confirmation("second-stage", tuple(MoreToMeasure(k, n) for k, n in wanted.items()), deadline_cut=cut))


def test_the_second_stage_is_cut_to_what_the_deadline_leaves():
    s = _started(PerfOptions(machine_probe=False, deadline=100.0), 50.0)  # 85 s are for measuring: about 35 s are left
    cells = {"a": _cell(10.0), "b": _cell(10.0)}
    each = {k: planning.pair_seconds(c.cell) for k, c in cells.items()}
    wanted, cut = ab_judging.within_deadline({"a": 4, "b": 2}, each, s.clock.measuring_left())  # 60 s wanted
    assert sum(wanted.values()) * 10.0 <= 35.0
    assert wanted == {"a": 2, "b": 1}
    assert "cut to 3 of 6 pair(s) by --perf-deadline" in _said(wanted, cut)


def test_a_second_stage_that_fits_or_has_no_deadline_is_left_whole():
    cells = {"a": planning.pair_seconds(_cell(10.0).cell)}
    s = PerfSession(PerfOptions(machine_probe=False, deadline=1000.0))
    assert ab_judging.within_deadline({"a": 4}, cells, s.clock.measuring_left()) == ({"a": 4}, None)
    s = _started(PerfOptions(machine_probe=False), 10 ** 6)
    assert s.clock.measuring_left() is None
    assert ab_judging.within_deadline({"a": 4}, cells, s.clock.measuring_left()) == ({"a": 4}, None)


def test_past_the_deadline_the_second_stage_adds_nothing():
    s = _started(PerfOptions(machine_probe=False, deadline=60.0), 120.0)
    wanted, cut = ab_judging.within_deadline({"a": 4}, {"a": planning.pair_seconds(_cell(10.0).cell)},
                                             s.clock.measuring_left())
    assert wanted == {} and "cut to 0 of 4" in _said(wanted, cut)


QUIET = {"probe": {"gemm_gflops": 200.0, "stream_gbps": 30.0, "seconds": 0.4},
         "load": {"other_cpus": 0.02, "steal_frac": 0.0, "wall_s": 1.0}}


def test_a_duet_pair_is_bracketed_by_the_machine_probe_on_both_sides():
    from pytest_mxperf.measure.scheduler import CellRun
    w = Workload("lenet", mode="score", batch_size=8)
    calls = []

    def pair(cand, ref, seed, first):
        calls.append(seed)
        mk = [RunResult(w, "ok", batches_per_round=1, round_seconds=[0.08] * 6, meta={"duet": {}}) for _ in "cr"]
        return mk[0], mk[1]
    options = PerfOptions(reference="/ref/python")
    s = PerfSession(options, given_machine_state=lambda part: QUIET[part])
    s.begin({"id": "m"}, None, options, comparison_for("/ref/python"))
    cell = s.scheduler.run_processes(w, CellRun(lambda py, seed: None, pair), 2)
    assert calls == [0, 1] and len(cell.runs) == len(cell.reference) == 2
    for c, r in cell.pairs():
        assert c.machine_state["probe_before"] == QUIET["probe"] and c.machine_state["load"] == QUIET["load"]
        assert r.machine_state == c.machine_state


def test_an_unclear_duet_cell_whose_pairs_ran_beside_other_work_says_so():
    w = Workload("lenet", mode="score", batch_size=8)

    def side(seconds, state):
        return RunResult(w, "ok", batches_per_round=1, round_seconds=[seconds] * 6,
                         meta={"duet": {}}).labelled(state, "other processes took 1.2 CPUs")
    cand = [side(0.08 * f, "slowed") for f in (1.3, 0.95, 1.2)]
    ref = [side(0.08, "slowed") for _ in range(3)]
    rec = CellRecord("t", CellMeasurement(w, cand, ref))
    v = ab_judging.judge_ab_once({w.key(): rec}, {w.key()}, 0.05)[w.key()]
    assert v.kind == "unresolved" and v.busy and "3 of 3 pair(s) ran while other processes took the CPUs" in v.reason


def _each(confirm):
    """``settle``'s round of cells as one ``confirm`` each, in order, each said done after it."""
    def confirm_all(wanted, done):
        for more in wanted:
            confirm(more)
            done(more)
    return confirm_all


def _duet_cell(w, logs):
    """One duet cell whose pairs read ``logs`` (log candidate / reference, one a pair, in turn):
    (the cells, holding its first 3 pairs; ``confirm``, which adds ``more.count`` pairs as the
    second stage would)."""
    def pair():
        x = next(logs)
        return (RunResult(w, "ok", batches_per_round=1, round_seconds=[0.08 / math.exp(x)] * 6, wall_seconds=30.0,
                          meta={"duet": {}}),
                RunResult(w, "ok", batches_per_round=1, round_seconds=[0.08] * 6, wall_seconds=30.0,
                          meta={"duet": {}}))
    first = [pair() for _ in range(3)]
    cells = {w.key(): CellRecord("t", CellMeasurement(w, [c for c, _ in first], [r for _, r in first]),
                                 remeasure=lambda more: None, duets=True)}

    def confirm(more):
        old = cells[more.key].cell
        new = [pair() for _ in range(more.count)]
        cells[more.key] = dataclasses.replace(cells[more.key], cell=CellMeasurement(
            w, list(old.runs) + [c for c, _ in new], list(old.reference) + [r for _, r in new]))
    return cells, confirm


def test_a_noisy_duet_cell_is_below_resolution_only_when_its_second_stage_was_not_cut():
    """A cell whose pairs spread 30% (an ndarray loader's, here) reads -6%, not significant,
    after its second stage. With every pair it asked for, that is the machine's noise: below
    its resolution, not failing. Cut by the deadline, it is unresolved: a slowdown it could not
    confirm is never passed."""
    from pytest_mxperf.measure.session import SessionContext
    from pytest_mxperf.outcome import comparators

    w = Workload("lenet", mode="score", batch_size=8)

    def session(left):
        # log candidate / reference, about -6% a pair on average
        cells, confirm = _duet_cell(w, iter([-0.36, 0.24, -0.06] + [-0.36, 0.24] * 100))
        ctx = SessionContext(PerfOptions(reference="/ref/python"), {}, comparison=comparison_for("/ref/python"),
                             plan=planning.Plan(tests=1, cells=1, ab_pairs=8, duet_pairs=3))
        comparator = comparators.ABComparator(ctx, left)
        v = comparators.settle(comparator, lambda: cells, _each(confirm), lambda what: None, time.monotonic).verdicts
        return v[w.key()], len(cells[w.key()].cell.runs)

    whole, n = session(lambda: None)
    assert n > 3 and whole.kind == "below-resolution" and not whole.failed, whole
    assert whole.change < -0.05 and whole.interval[0] < 1.0 < whole.interval[1]
    cut, n = session(lambda: 0.0)
    assert n == 3 and cut.kind == "unresolved" and cut.failed, cut


def test_the_settling_lines_say_the_sessions_time_gone_and_the_rounds_time_left():
    """While the end of the session measures suspects again, each line's time gone is the
    session's (as on the progress lines before it: 21.0 min, not the 1 min of this round), and
    what settle passes on as left is the round's cells after this one and the looks expected
    after the round (``Confirmation.after``)."""
    from pytest_mxperf.measure.session import SessionContext
    from pytest_mxperf.outcome import comparators
    from pytest_mxperf.output import messages

    w = Workload("lenet", mode="score", batch_size=8)
    cells, add_pairs = _duet_cell(w, iter([-0.02, -0.06, -0.04] * 50))  # about -4% a pair: not called at stage 1
    clock = [1000.0 + 20 * 60]               # the session started at 1000 s, 20 min ago

    def confirm(more):
        add_pairs(more)
        clock[0] += 60.0                     # the round's one cell took a minute
    ctx = SessionContext(PerfOptions(reference="/ref/python"), {}, comparison=comparison_for("/ref/python"),
                         plan=planning.Plan(tests=1, cells=1, ab_pairs=8, duet_pairs=3), started=1000.0)
    said, raw = [], []
    comparators.settle(comparators.ABComparator(ctx, lambda: None), lambda: cells, _each(confirm),
                       lambda what: raw.append(what) or said.append(messages.said(what)), lambda: clock[0])
    lines = [s for s in said if "re-measured" in s]
    # each look's one cell is the round's last: what is left is what the looks after it are
    # expected to take (``Confirmation.after``), said before the round
    after = [what.after for what in raw if isinstance(what, comparators.Confirmation)]
    assert after[0] > 0
    # one line a look, each with the session's time gone: a minute more each
    assert lines[:2] == [f"mxperf: re-measured 1 of 1 suspect cell(s) ({w.key()}), {m:.1f} min gone, about "
                         f"{a / 60:.1f} min left" for m, a in zip((21.0, 22.0), after)], said


def test_the_settling_lines_time_left_is_the_plans_when_that_is_more():
    """The session's time left on a settling line: the plan expected 20 min, 10 of them for its
    one test and 10 outside it (this machine's last sessions settled their suspects there);
    15 min gone, the test took its 10: 5 min left, unless the round's cells still to measure
    take longer."""
    from types import SimpleNamespace

    from pytest_mxperf.outcome.finish import _with_session_left

    plan = planning.Plan(tests=1, cells=1, estimate_seconds=1200.0, test_estimates=(("t::a", 600.0),))
    session = SimpleNamespace(context=SimpleNamespace(plan=plan), clock=SimpleNamespace(tests_done=[("t::a", 600.0)]))
    got = []
    said = _with_session_left(got.append, session)
    said((1, 2, "more", 900.0, 60.0))
    said((2, 2, "more", 900.0, 420.0))
    said("a confirmation")
    assert got == [(1, 2, "more", 900.0, 300.0), (2, 2, "more", 900.0, 420.0), "a confirmation"]


def test_in_the_last_round_planned_the_settling_lines_time_left_is_the_rounds():
    """A round of second stages only is the last one planned (``Confirmation.last``): its lines
    say what its cells after this one take, not the plan's rest of the session, which stood for
    settling that is now measured. Seen on the Zen 4: "re-measured 5 of 5 suspect cell(s), 12.2
    min gone, about 13.5 min left", and the session ended at 12.3 min. A round after it that is
    not the last weighs the plan again."""
    from types import SimpleNamespace

    from pytest_mxperf.outcome.comparators import Confirmation
    from pytest_mxperf.outcome.finish import _with_session_left

    plan = planning.Plan(tests=1, cells=1, estimate_seconds=1200.0, test_estimates=(("t::a", 600.0),))
    session = SimpleNamespace(context=SimpleNamespace(plan=plan), clock=SimpleNamespace(tests_done=[("t::a", 600.0)]))
    got = []
    said = _with_session_left(got.append, session)
    first, last = Confirmation("recorded-setup", ()), Confirmation("recorded-setup", (), last=True)
    said(first)
    said((1, 1, "more", 900.0, 0.0))
    said(last)
    said((1, 2, "more", 960.0, 60.0))
    said((2, 2, "more", 1000.0, 0.0))
    said(Confirmation("recorded-setup", ()))
    said((1, 1, "more", 1010.0, 0.0))
    assert [g for g in got if isinstance(g, tuple)] == [
        (1, 1, "more", 900.0, 300.0), (1, 2, "more", 960.0, 60.0), (2, 2, "more", 1000.0, 0.0),
        (1, 1, "more", 1010.0, 190.0)]


def test_the_cells_sent_against_the_recorded_setup_are_named_apart():
    """Two distributed cells that differ only in their kvstore were both said as
    "dist/mlp/b256/cpu:0/float32 +12" (the key cut at its threading profile, the kvstore after it)."""
    from pytest_mxperf.measure.scheduler import MoreToMeasure
    from pytest_mxperf.outcome.comparators import Confirmation
    from pytest_mxperf.output.messages import said
    keys = ["dist/mlp/b256/cpu:0/float32/threads=auto/kv=dist_sync",
            "dist/mlp/b256/cpu:0/float32/threads=auto/kv=dist_device_sync",
            "score/alexnet/b1/cpu:0/float32/threads=auto"]
    line = said(Confirmation("recorded-setup", tuple(MoreToMeasure(k, 3, kind="duet") for k in keys),
                             setup="mxnet==1.9.1"))
    assert "dist/mlp/b256/cpu:0/float32/kv=dist_sync +3" in line
    assert "dist/mlp/b256/cpu:0/float32/kv=dist_device_sync +3" in line
    assert "score/alexnet/b1/cpu:0/float32 +3" in line and "threads=" not in line
    # keys that differ only in their threading profile keep it
    line = said(Confirmation("second-stage", (MoreToMeasure("score/lenet/b1/cpu:0/float32/threads=1", 2),
                                              MoreToMeasure("score/lenet/b1/cpu:0/float32/threads=auto", 2))))
    assert "threads=1 +2" in line and "threads=auto +2" in line


def test_a_round_that_says_what_the_looks_after_it_take_is_trusted_over_the_plan():
    """A round of pairs whose comparator says what the looks after it are expected to take
    (``Confirmation.after``, the pair-by-pair rule's pairs to a call) says that, not the plan's
    rest of the session, which came from sessions under other rules: the first Zen 4 session
    judged per kind of cell said "about 16.1 min left" at 29.7 min and ended at 33.6."""
    from types import SimpleNamespace

    from pytest_mxperf.outcome.comparators import Confirmation
    from pytest_mxperf.outcome.finish import _with_session_left

    plan = planning.Plan(tests=1, cells=1, estimate_seconds=1200.0, test_estimates=(("t::a", 600.0),))
    session = SimpleNamespace(context=SimpleNamespace(plan=plan), clock=SimpleNamespace(tests_done=[("t::a", 600.0)]))
    got = []
    said = _with_session_left(got.append, session)
    said(Confirmation("look", (), after=90.0))
    said((1, 2, "more", 900.0, 30.0 + 90.0))   # settle adds ``after`` to the round's own rest
    said(Confirmation("confirm", ()))            # baseline mode's processes: the plan weighs in again
    said((1, 1, "more", 950.0, 10.0))
    assert [g for g in got if isinstance(g, tuple)] == [(1, 2, "more", 900.0, 120.0), (1, 1, "more", 950.0, 250.0)]


def test_settle_adds_the_looks_after_a_round_to_its_progress_lines():
    from types import SimpleNamespace

    from pytest_mxperf.measure.scheduler import MoreToMeasure
    from pytest_mxperf.output import messages
    from pytest_mxperf.outcome import comparators
    from pytest_mxperf.outcome.comparators import Confirmation

    class Two:
        confirms, rounds, late_final = True, 1, False
        context = SimpleNamespace(started=0.0)

        def judge(self, cells, final, state):
            return {"a": SimpleNamespace(kind="suspect")}, {}, state

        def suspects(self, verdicts, judged, state):
            return frozenset({"a"}), state

        def more(self, verdicts, judged, suspects, spent, state, foretell=True):
            return Confirmation("look", (MoreToMeasure("a", 2, seconds=10.0),), after=70.0), frozenset(), state

        def conclude(self, verdicts, judged, state):
            return verdicts
    got = []
    comparators.settle(Two(), dict, lambda wanted, done: [done(m) for m in wanted], got.append, lambda: 5.0)
    assert [g[4] for g in got if isinstance(g, tuple)] == [70.0]
    line = messages.said(got[0])
    assert "then about 70 s in the looks after it" in line


def test_a_session_that_says_nothing_while_settling_foretells_nothing():
    """``Confirmation.after`` is only said: settled with ``foretell=False`` (``finish.end_session``
    without a ``say``, as the replays run) a round carries no expectation of the looks after it,
    and its looks are the same."""
    from pytest_mxperf.measure.session import SessionContext
    from pytest_mxperf.outcome import comparators

    def rounds(foretell):
        w = Workload("lenet", mode="score", batch_size=8)
        cells, add_pairs = _duet_cell(w, iter([-0.02, -0.06, -0.04] * 50))
        ctx = SessionContext(PerfOptions(reference="/ref/python"), {}, comparison=comparison_for("/ref/python"),
                             plan=planning.Plan(tests=1, cells=1, ab_pairs=8, duet_pairs=3), started=0.0)
        raw = []
        comparators.settle(comparators.ABComparator(ctx, lambda: None), lambda: cells, _each(add_pairs),
                           raw.append, lambda: 1.0, foretell)
        return [(tuple((m.key, m.count) for m in c.wanted), c.after) for c in raw
                if isinstance(c, comparators.Confirmation)]
    said, silent = rounds(True), rounds(False)
    assert said and [w for w, _ in said] == [w for w, _ in silent]
    assert said[0][1] > 0 and all(after is None for _, after in silent)


def test_a_figure_measured_after_the_rounds_is_complete_when_its_cell_has_every_pair_before_its_duet_is_called():
    """An unchanged paired session on the Zen 3 (benchmarks/results/paired-session-zen3-2026-12-03b.txt)
    failed on LeNet b64's trainer alone: 12 pairs, median pair ratio 1.001, its fast end x0.906,
    "unresolved". The cell's duet figure was called at its 12th pair, as many as a figure measured
    after the rounds gets (``planning.ab_pairs``), so its last look asked for nothing more (0,
    final) and the cell never counted as having every pair it was planned: it was judged as if
    cut. With nothing cut it is below its resolution, as a cell whose last look asked for pairs."""
    from pytest_mxperf.measure.session import SessionContext
    from pytest_mxperf.outcome import comparators

    w = Workload("lenet", mode="score", batch_size=8)
    n = planning.ab_pairs(1)
    trainer = [(100.0, 100.0)] * (n - 1) + [(100.0, 110.0)]  # (candidate, reference): the fast end x0.909, pairs alike

    def run(seconds, trainer_rate):
        return RunResult(w, "ok", batches_per_round=1, round_seconds=[seconds] * 6, wall_seconds=30.0,
                         meta={"duet": {}}, figures={"trainer_samples_per_s": trainer_rate})
    cand = [run(0.08 * (1.0 + 0.03 * (-1) ** i), c) for i, (c, _) in enumerate(trainer)]
    ref = [run(0.08, r) for _, r in trainer]
    cells = {w.key(): CellRecord("t", CellMeasurement(w, cand, ref), remeasure=lambda more: None, duets=True)}
    ctx = SessionContext(PerfOptions(reference="/ref/python"), {}, comparison=comparison_for("/ref/python"),
                         plan=planning.Plan(tests=1, cells=1, ab_pairs=n, duet_pairs=3))
    asked = []
    v = comparators.settle(comparators.ABComparator(ctx, lambda: None), lambda: cells,
                           _each(lambda more: asked.append(more)), lambda what: None, time.monotonic).verdicts
    key = w.key() + "#trainer_samples_per_s"
    assert v[w.key()].kind == "unchanged", v[w.key()]
    assert not asked  # nothing more to measure: the cell had every pair its figures ask for
    assert v[key].kind == "below-resolution" and not v[key].failed, v[key]
    assert v[key].change < -0.05 and "median within -5%" in v[key].reason, v[key].reason
