"""Pairs from the start where the baseline cannot settle alone (issue 76, part 1).

A session against a baseline whose recorded setup is ready takes one of two paths from its
first process (``planning.first_path``): **paired**, every cell the baseline records measured
in pairs with that setup and judged by the pairs, when the baseline alone is expected to clear
few cells (a one-session baseline clears none; or this machine's last sessions against it sent
most of their cells on to the duet); else the **cheap path**: the cells alone, the duet only for
what the baseline cannot settle. The first line says which and why.

The sessions run stand-in workers that speak the real worker and duet protocols
(tests/stub_worker.py), the recorded setup one of them found in the venv cache as a first
build leaves it.
"""

import json

import pytest

import stand_ins

from pytest_mxperf.history.store import open_store
from pytest_mxperf.measure import planning
from pytest_mxperf.model.measurement import CellMeasurement, RunResult
from pytest_mxperf.model.workload import Workload
from pytest_mxperf.store import results

# -- the rule, pure -------------------------------------------------------------------------


def test_a_one_session_baseline_is_paired_from_the_start():
    path = planning.first_path({"cells": 24, "provisional": 24, "sessions": 1}, [], provisional_clears=False)
    assert path.paired and path.why == ("24 of the baseline's 24 cells rest on one recorded session, whose "
                                        "resolution clears no cell alone"), path


def test_a_baseline_of_several_sessions_keeps_the_cheap_path_until_its_sessions_say_otherwise():
    summary = {"cells": 24, "provisional": 0, "sessions": 3}
    cheap = planning.first_path(summary, [], provisional_clears=False)
    assert not cheap.paired and "clears cells alone here (24 of its 24 cells" in cheap.why, cheap
    quiet = planning.first_path(summary, [0.1, 0.0, 0.25], provisional_clears=False)
    assert not quiet.paired and "its last 3 session(s) sent 10% of their cells on to the duet" in quiet.why, quiet
    noisy = planning.first_path(summary, [0.96, 0.9, 1.0], provisional_clears=False)
    assert noisy.paired and noisy.why == ("this machine's last 3 session(s) against its baseline sent 96% of their "
                                          "cells on to the duet"), noisy


def test_the_share_the_rule_turns_at():
    summary = {"cells": 10, "provisional": 5, "sessions": 2}
    # five of ten clear: half, not less than half
    assert not planning.first_path(summary, [], provisional_clears=False).paired
    assert planning.first_path(dict(summary, provisional=6), [], provisional_clears=False).paired
    # a provisional resolution that clears makes every cell clearable
    assert not planning.first_path(dict(summary, provisional=10), [], provisional_clears=True).paired
    assert planning.first_path(dict(summary, provisional=0), [0.5, 0.6, 0.7], provisional_clears=False).paired
    assert not planning.first_path(dict(summary, provisional=0), [0.5, 0.4, 0.3], provisional_clears=False).paired


# -- what the history store says of the last sessions ---------------------------------------

def _doc(sid, started, paired_models, models=("lenet", "alexnet", "mlp", "inception-bn"), kind="baseline"):
    records = []
    for model in models:
        w = Workload(model, batch_size=8)
        runs = [RunResult(w, "ok", batches_per_round=1, round_seconds=[0.1]) for _ in range(2)]
        ref = [RunResult(w, "ok", batches_per_round=1, round_seconds=[0.1]) for _ in range(3)] \
            if model in paired_models else None
        records.append(results.make_record(CellMeasurement(w, runs, ref)))
    return {"schema": results.SCHEMA_VERSION, "kind": results.KIND,
            "machine": {"id": "box", "hardware": {"cpu_model": "X"}},
            "session": {"id": sid, "started": started, "kind": kind,
                        "software": {"mxnet_version": "1.9.1", "python": "3.11.7", "features": ["MKLDNN"]},
                        "verdicts": {}, "complete": True},
            "records": records}


def test_the_store_gives_the_share_of_each_session_s_cells_that_went_on_to_the_duet(tmp_path):
    with open_store(str(tmp_path / "h.sqlite")) as s:
        s.append(_doc("old", 1.0, ("lenet",)))
        s.append(_doc("mid", 2.0, ("lenet", "alexnet", "mlp")))
        s.append(_doc("ab", 2.5, ("lenet", "alexnet", "mlp", "inception-bn"), kind="ab"))
        s.append(_doc("new", 3.0, ()))
        assert s.duet_shares("box", "baseline", 3) == [0.0, 0.75, 0.25]  # newest first, its kind only
        assert s.duet_shares("box", "baseline", 1) == [0.0]
        assert s.duet_shares("other", "baseline", 3) == []


# -- sessions --------------------------------------------------------------------------------

CELLS = """
import pytest

@pytest.mark.mxperf_grid(models=("mlp", "lenet"), batch_sizes=(1,))
def test_cells(mxperf, ctx, model, batch_size):
    mxperf.expect_ok(mxperf.measure(model, batch_size, contexts=ctx))
"""
KEYS = ("score/mlp/b1/cpu:0/float32/threads=auto", "score/lenet/b1/cpu:0/float32/threads=auto")
BUILD = {"name": "mxnet", "version": "1.9.1", "direct_url": None, "libmxnet": "mxnet/libmxnet.so",
         "libmxnet_sha256": "a" * 64}
THIS_MXNET = {"rate": 100.0, "install": BUILD}


@pytest.fixture
def box(pytester, make_stub_python):
    """record(sessions) then run(*args) -> (RunResult, the first line, results.json) of a session
    against the baseline of machine "box" recorded by ``sessions`` sessions of the same stand-in."""
    pytester.makepyfile(test_cells=CELLS)
    bdir = pytester.path / "bl"
    here = make_stub_python("here", **THIS_MXNET)
    history = str(pytester.path / "history.sqlite")
    common = ["-p", "no:cacheprovider", "-m", "cpu", "--perf-no-probe", "--perf-machine", "box",
              "--perf-baselines-dir", str(bdir), "--perf-python", here, "--perf-store", history]

    def record(sessions):
        for i in range(sessions):
            r = stand_ins.session(pytester, *common, "--perf-update-baselines" + ("=add" if i else ""))
            assert r.ret == 0, r.stdout.str()
        stand_ins.recorded_setup_is(pytester.path, bdir, here, here)

    def run(*args, report="rep"):
        r = stand_ins.session(pytester, *common, "--perf-report", report, *args)
        first = next(line for line in r.stdout.lines if line.startswith("mxperf: ") and "expected about" in line)
        return r, first, json.loads((pytester.path / report / "results.json").read_text())
    return record, run, history


def _passed_after(box, recordings):
    """(the output, the first line, results.json) of a session that passed against a baseline of
    ``recordings`` sessions."""
    record, run, _ = box
    record(recordings)
    r, first, doc = run()
    assert r.ret == 0, r.stdout.str()
    return r.stdout.str(), first, doc


def test_against_a_one_session_baseline_every_cell_is_paired_from_its_first_process(box):
    out, first, doc = _passed_after(box, 1)
    assert "against the baseline, its recorded setup as the reference: 2 cell(s) x 3 duet pairs" in first, first
    assert ("paired from the first process because 2 of the baseline's 2 cells rest on one recorded session, whose "
            "resolution clears no cell alone") in first, first
    assert doc["session"]["kind"] == "paired"
    assert ("mxperf: every cell the baseline records is measured in pairs with the recorded setup from its first "
            "process: mxnet==1.9.1 (the build the baseline recorded") in out
    for key in KEYS:
        rec = next(c for c in doc["records"] if c["key"] == key)
        # the first processes are the pairs: as many on each side, each reference run paired with its candidate
        assert len(rec["runs"]) == len(rec["reference_runs"]) >= 3, rec
        assert {x["meta"]["pair_of"] for x in rec["reference_runs"]} == {x["process"] for x in rec["runs"]}
        assert all(x["meta"]["duet"]["side"] == "candidate" for x in rec["runs"]), rec["runs"][0]["meta"]
        # the grid's two cells share each duet pair: one pair of processes, each cell in turn (issue 76, part 4)
        assert all(x["meta"]["duet"]["cells_in_pair"]["of"] == 2 and x["meta"]["process_cells"]["of"] == 2
                   for x in rec["runs"] + rec["reference_runs"]), rec["runs"][0]["meta"]
        assert rec["verdict"]["kind"] == "unchanged" and rec["verdict"]["reason"].startswith(
            "against the recorded setup: x1.000"), rec["verdict"]


def test_a_baseline_that_clears_cells_alone_keeps_the_cheap_path_and_says_so(box):
    out, first, doc = _passed_after(box, 2)
    assert "mxperf: 2 measuring test(s), 2 process(es) a cell" in first, first
    assert "the cheap path, because the baseline clears cells alone here (2 of its 2 cells" in first, first
    assert doc["session"]["kind"] == "baseline"
    assert "mxperf: suspects are settled in a duet against the recorded setup: mxnet==1.9.1" in out
    for key in KEYS:
        rec = next(c for c in doc["records"] if c["key"] == key)
        # measured alone in processes of the grid's two cells: no duet pair among the first processes
        assert all("duet" not in (x["meta"] or {}) for x in rec["runs"][:2]), rec["runs"][0]["meta"]
        assert rec["runs"][0]["meta"]["process_cells"]["of"] == 2, rec["runs"][0]["meta"]


def test_a_machine_whose_last_sessions_sent_most_cells_on_to_the_duet_is_paired_from_the_start(box):
    record, run, history = box
    record(2)
    with open_store(history) as s:  # three sessions against the baseline, each sending both cells on
        for i in range(3):
            d = _doc(f"busy-{i}", 10.0 + i, ("mlp", "lenet"), models=("mlp", "lenet"))
            s.append(d)
    r, first, doc = run()
    assert r.ret == 0, r.stdout.str()
    assert ("paired from the first process because this machine's last 3 session(s) against its baseline sent 100% "
            "of their cells on to the duet") in first, first
    assert doc["session"]["kind"] == "paired"


def test_a_deadline_too_short_for_one_test_s_pairs_keeps_the_cheap_path_and_says_why(box):
    record, run, _ = box
    record(1)
    r, first, doc = run("--perf-deadline", "40s")
    assert r.ret == 0, r.stdout.str()
    assert ("the cheap path, because 2 of the baseline's 2 cells rest on one recorded session, whose resolution clears "
            "no cell alone, but a test's pairs take about") in first, first
    assert "and --perf-deadline 40 s holds 34 s of measuring" in first, first
    assert doc["session"]["kind"] == "baseline"


# -- one pair before the first look where this machine's history knows the spread (part 2) ----

def test_one_pair_first_for_each_cell_whose_own_spread_and_its_kind_s_the_history_holds():
    enough = {"score": {"rounds/score": planning.ONE_PAIR_DF}, "train": {"rounds/train": 40},
              "latency": {"latency_p50_ms": 38, "latency_p99_ms": 38}, "dist": {"rounds/dist": 4},
              "convergence": {"seconds_to_target": planning.ONE_PAIR_DF - 1}}
    own = {"score/a/b1/cpu:0": 2, "score/b/b1/cpu:0": 1, "train/a/b8/cpu:0": 5, "latency/a/b1/cpu:0": 11,
           "dist/mlp/b256/cpu:0": 4, "convergence/lenet/b64/cpu:0": 4}
    one = planning.first_pairs(3, enough, own, 2)
    assert one.pairs == 3 and one.cells == ("latency/a/b1/cpu:0", "score/a/b1/cpu:0", "train/a/b8/cpu:0"), one
    assert one.why == ("1 for the 3 cell(s) whose own spread of duet pairs and their kind's this machine's history "
                       "holds: latency 38 df, score 12 df, train 40 df"), one
    # a cell of its own history too short (score/b), of a kind short of degrees of freedom (dist,
    # convergence) or unknown to the history keeps the first stage's pairs; a figure key is its cell's
    assert [one.of(k) for k in ("score/a/b1/cpu:0", "latency/a/b1/cpu:0#latency_p50_ms", "score/b/b1/cpu:0",
                                "dist/mlp/b256/cpu:0", "convergence/lenet/b64/cpu:0", "mine/net/b1/cpu:0")] == \
        [1, 1, 3, 3, 3, 3]
    # a kind one of whose figures is short of degrees of freedom keeps the first stage's pairs
    short = planning.first_pairs(3, {"latency": {"latency_p50_ms": 38, "latency_p99_ms": planning.ONE_PAIR_DF - 1}},
                                 {"latency/a/b1/cpu:0": 11}, 2)
    assert short == planning.FirstPairs(3), short
    # no history, or a first stage of one pair already: as asked
    assert planning.first_pairs(3, {}, {}, 2) == planning.FirstPairs(3)
    assert planning.first_pairs(1, enough, own, 2) == planning.FirstPairs(1)
    # the plan carries it: one pair for the cells named, the plan's (else the options') pairs for the rest
    plan = planning.Plan(duet_pairs=3, one_pair_cells=one.cells)
    assert plan.first_pairs_of("train/a/b8/cpu:0", 5) == 1 and plan.first_pairs_of("io/x/b1/cpu:0", 5) == 3
    assert planning.Plan().first_pairs_of("io/x/b1/cpu:0", 5) == 5


def test_the_history_s_figure_rows_are_summed_per_kind_and_its_kind_rows_not_counted_again():
    from types import SimpleNamespace

    from pytest_mxperf.measure import known
    o = SimpleNamespace(duet_pairs=3)
    rows = [(KEYS[0], 0.01, 6), (KEYS[1], 0.01, 6), ("rounds/score", 0.02, 12)]
    assert known.first_pairs(o, rows).cells == tuple(sorted(KEYS))
    assert known.first_pairs(o, rows[:1] + rows[2:]).cells == ()  # 6 df of score figures, the kind row aside
    # another kind short of degrees of freedom does not hold the score cells to three pairs
    dist = "dist/mlp/b256/cpu:0/float32/threads=1/kv=local"
    first = known.first_pairs(o, rows + [(dist, 0.0001, 2)])
    assert first.cells == tuple(sorted(KEYS)) and first.of(dist) == 3, first
    # a cell's own rows: the least of its figures' degrees of freedom
    lat = "latency/lenet/b1/cpu:0/float32/threads=auto"
    rows = [(lat, 0.1, 12), (lat + "#latency_p50_ms", 0.01, 1), (lat.replace("lenet", "mlp"), 0.1, 12),
            (lat.replace("lenet", "mlp") + "#latency_p50_ms", 0.01, 12)]
    assert known.first_pairs(o, rows).cells == (lat.replace("lenet", "mlp"),)


def test_a_paired_session_whose_machine_knows_the_spread_gives_each_cell_one_pair_before_its_first_look(box):
    record, run, history = box
    record(1)
    with open_store(history) as s:  # this machine's last paired session, its pairs' spread kept
        d = _doc("last", 10.0, ("mlp", "lenet"), models=("mlp", "lenet"), kind="paired")
        d["session"]["pair_spreads"] = {KEYS[0]: [0.0004, 8], KEYS[1]: [0.0004, 8], "rounds/score": [0.0008, 16]}
        s.append(d)
    r, first, doc = run()
    assert r.ret == 0, r.stdout.str()
    assert ("2 cell(s) x 3 duet pairs before its first look, or 1 for the 2 cell(s) whose own spread of duet pairs "
            "and their kind's this machine's history holds: score 16 df (resident") in first, first
    for key in KEYS:
        rec = next(c for c in doc["records"] if c["key"] == key)
        # the stand-in's two sides read alike: one pair is enough at the history's spread
        assert len(rec["runs"]) == len(rec["reference_runs"]) == 1, rec
        assert rec["verdict"]["kind"] == "unchanged", rec["verdict"]
