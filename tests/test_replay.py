"""Replay: the real gate (``gate.end_session``, default settings) on per-process figures
measured on a shared 2-vCPU machine in separate sessions.

``benchmarks/data/replay-*-quiet.json`` (12 processes per cell, nothing else running) is
the baseline session; ``replay-*.json`` without ``-quiet`` (40 processes per cell, measured
another time while other engineers' measurements ran on the same cores) is the current
session. Each simulated session: a baseline of 5 quiet processes per cell, recorded through
``baseline_store.summarize_cell``; 2 current processes per cell (the default); suspects are
re-measured through the gate's own confirmation path (``CellRecord.remeasure``), which
draws further processes of the same current session. Every current value is multiplied by
the effect.

Machine-state labels: these files were recorded before the machine-state probe existed,
with each process's CPU utilisation. A process that got under 75% of the best CPU share
of its cell had a neighbour taking the rest of the 2 CPUs, which is what the probe's load
meter measures (other processes' CPU time); those processes are labelled "slowed", the
rest "quiet". Nothing else about the data is changed.

What is asserted (the figures go into the closing note):
* x1.00: sessions that fail, every failing kind counted (a regression, an unresolved
  slowdown, anything else the default failure policy fails on: ``SessionOutcome.failed``), at
  most FDR_Q (5%), held by ``benchmarks/error_claims.py``'s rule (at most 8 failing sessions
  of 300 support "at most 5%" at 95% one-sided confidence). These sessions are not held to
  their floors (no fixture runs here; ``benchmarks/false_failures.py`` holds the same
  recordings to them: its "baseline intel-quiet+loaded" rows). Today's rules miss it: the
  loaded current sessions are mostly unresolved, so the check is a strict xfail with the
  measured count.
* x0.76: every session fails (regression, or unresolved on a busy machine), never passes.
* x0.90 and x0.93: reported, with the share of sessions that fail; at x0.90 a slowdown
  passes silently in at most 10% of sessions.

The session's clock stands still (a replay takes no time): the suspects' confirmation budget
is CONFIRM_FLOOR_S however fast this machine replays, so the fixed seeds give the same
sessions on any machine.
"""

import dataclasses
import json
import random
import sys
from pathlib import Path

import pytest
from stand_ins import no_profile_worker

from pytest_mxperf.measure.session import CellRecord, PerfSession
from pytest_mxperf.model.measurement import CellMeasurement, RunResult
from pytest_mxperf.model.options import PerfOptions
from pytest_mxperf.model.workload import Workload
from pytest_mxperf.outcome import finish as gate
from pytest_mxperf.measure.comparison import comparison_for
from pytest_mxperf.store import baseline_store
from pytest_mxperf.store.baselines import Baseline

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import error_claims as E  # noqa: E402

DATA_DIR = Path(__file__).resolve().parent.parent / "benchmarks" / "data"
QUIET = sorted(DATA_DIR.glob("replay-*-quiet.json"))
RESAMPLES = 300
SEED = 20261122
BASE_PROCESSES = 5
STARVED = 0.75

assert E.allowed(RESAMPLES) == 8

pytestmark = pytest.mark.skipif(not QUIET, reason="no replay data (run benchmarks/collect_replay_data.py)")



def load_pool(path):
    """key -> [(per-process median, "quiet"|"slowed")]"""
    data = json.loads(path.read_text())
    pools = {}
    for key, cell in data["cells"].items():
        procs = [p for p in cell["processes"] if p.get("status") == "ok" and p.get("median")]
        utils = [p.get("cpu_utilization") or 0.0 for p in procs]
        best = max(utils)
        pools[key] = [(p["median"], "slowed" if u < STARVED * best else "quiet") for p, u in zip(procs, utils)]
    return pools


def _workload(key):
    mode, model, b, ctx, dtype, threads = key.split("/")[:6]
    return Workload(model=model, mode=mode, batch_size=int(b[1:]), contexts=tuple(ctx.split(",")), dtype=dtype,
                    threads=threads.split("=")[1])


def _run(w, value, state):
    # one round whose time per batch gives exactly this process's median
    return RunResult(w, "ok", batches_per_round=1, round_seconds=[w.total_batch / value],
                     meta={"machine_state": {"state": state}, "env": {}, "mxnet_version": "1.9.1",
                           "peak_rss_bytes": 10 ** 9})


def simulate(base_pools, cur_pools, scale, rng, resamples=RESAMPLES):
    """Per cell: counts of final verdict kinds; per session: how many failed ("any": the
    session fails, ``SessionOutcome.failed``), and by each failing kind (every kind of a failing
    verdict or in the failure policy)."""
    per_cell = {k: {} for k in cur_pools}
    failed = {"any": 0, "regression": 0, "unresolved": 0}
    for _ in range(resamples):
        doc = {"schema": 1, "cells": {}}
        records = []
        for key, pool in cur_pools.items():
            w = _workload(key)
            base = rng.sample(base_pools[key], BASE_PROCESSES)
            rec = baseline_store.summarize_cell(CellMeasurement(w, [_run(w, v, s) for v, s in base]))
            doc["cells"][key] = {"workload": w.to_dict(), "history": [rec]}
            order = rng.sample(range(len(pool)), len(pool))
            drawn = iter(order)

            def draw(n, w=w, pool=pool, drawn=drawn):
                return CellMeasurement(w, [_run(w, pool[i][0] * scale, pool[i][1]) for i in
                                           (next(drawn) for _ in range(n))])

            cell = draw(2)
            records.append(CellRecord("replay", cell, remeasure=lambda more, draw=draw: draw(more.count)))
        s = PerfSession(PerfOptions(machine_probe=False))
        s.clock.now = lambda: 0.0   # a replay takes no time: the confirmation budget is CONFIRM_FLOOR_S
        s.context = dataclasses.replace(s.context, started=0.0)
        s.begin({"id": "replay"}, Baseline.from_doc(doc), s.context.options, comparison_for(None))
        for rec in records:
            s.ledger.add(rec)
        with no_profile_worker():  # a replayed session has no worker to profile
            out = gate.end_session(s)
        kinds = {k: v.kind for k, v in out.verdicts.items() if "#" not in k}
        for k, kind in kinds.items():
            per_cell[k][kind] = per_cell[k].get(kind, 0) + 1
        failed["any"] += bool(out.failed)
        for kind in {v.kind for v in out.verdicts.values() if v.failed or v.kind in s.context.options.fail_on}:
            failed[kind] = failed.get(kind, 0) + 1
    return per_cell, failed


def _rates(counts):
    n = sum(counts.values())
    return {k: round(v / n, 3) for k, v in sorted(counts.items())}


@pytest.fixture(scope="module", params=QUIET, ids=lambda p: p.stem)
def pools(request):
    quiet = load_pool(request.param)
    busy_path = request.param.with_name(request.param.name.replace("-quiet", ""))
    busy = load_pool(busy_path) if busy_path.exists() else quiet
    assert all(len(p) >= 12 for p in quiet.values()) and set(busy) == set(quiet)
    return quiet, busy


@pytest.mark.xfail(strict=True, raises=E.ClaimNotMet, reason=(
    "today's rules: 298 of 300 unchanged sessions fail (99.3%; a quiet baseline, the current session from the "
    "loaded re-runs: 298 with an unresolved slowdown, 5 with a regression); the rule allows 8 in 300"))
def test_false_alarms_at_or_below_fdr(pools):
    quiet, busy = pools
    per_cell, failed = simulate(quiet, busy, 1.0, random.Random(SEED))
    print(f"\nx1.00: sessions failed {failed['any']} of {RESAMPLES} (by kind: "
          f"{ {k: v for k, v in failed.items() if k != 'any'} }); per cell:",
          {k.split('/')[1]: _rates(c) for k, c in per_cell.items()})
    E.hold(failed["any"], RESAMPLES, f"unchanged sessions failed (by kind: {failed})")


def test_a_large_slowdown_always_fails(pools):
    quiet, busy = pools
    per_cell, failed = simulate(quiet, busy, 0.76, random.Random(SEED + 1))
    print("\nx0.76 per cell:", {k.split('/')[1]: _rates(c) for k, c in per_cell.items()})
    for key, counts in per_cell.items():
        r = _rates(counts)
        assert r.get("regression", 0) + r.get("unresolved", 0) == 1.0, (key, r)


@pytest.mark.parametrize("scale", [0.90, 0.93])
def test_small_slowdowns(pools, scale):
    quiet, busy = pools
    per_cell, failed = simulate(quiet, busy, scale, random.Random(SEED + int(scale * 100)))
    rates = {k.split('/')[1]: _rates(c) for k, c in per_cell.items()}
    print(f"\nx{scale:.2f} per cell:", rates)
    if scale == 0.90:
        for key, r in rates.items():
            assert r.get("unchanged", 0) + r.get("improvement", 0) <= 0.10, (key, r)


def _report(path, machine, key, pairs, duet=True):
    """A report directory (results.json) of one A/A cell: ``pairs`` (candidate, reference) figures."""
    runs, refs = [], []
    for i, (c, r) in enumerate(pairs):
        meta = {"mxnet_version": "1.9.1", "features": ["MKLDNN"]}
        if duet:
            meta["duet"] = {"ran_first": i % 2 == 0}
        runs.append({"process": i, "status": "ok", "figures": {"seconds_to_target": c}, "meta": dict(meta)})
        refs.append({"process": i, "status": "ok", "figures": {"seconds_to_target": r},
                     "meta": dict(meta, pair_of=i)})
    path.mkdir()
    (path / "results.json").write_text(json.dumps({"machine": {"id": machine}, "records": [
        {"key": key, "workload": {"mode": "convergence"}, "runs": runs, "reference_runs": refs}]}))
    return path


def test_a_corpus_cell_gets_pairs_measured_the_new_way_and_keeps_the_rest(tmp_path):
    """``corpus_from_sessions.py --replace-pairs``: the named reports' A/A pairs replace the
    cell's own (its fresh processes and every other cell untouched, the corpus saying from
    where); a report of another machine or of no corpus cell is refused and writes nothing."""
    import corpus_from_sessions as C
    tta, other = "convergence/lenet/b64", "score/alexnet/b1"
    corpus = tmp_path / "aa-corpus-m1-default.json"
    before = {"schema": 1, "machine": {"id": "m1"}, "sources": {"sessions": ["s"]}, "cells": {
        tta: {"fresh": [{"t": 1.0}], "pairs": [{"old": True}], "workload": {}, "meta_common": {}},
        other: {"fresh": [{"t": 2.0}], "pairs": [{"old": True}], "workload": {}, "meta_common": {}}}}
    corpus.write_text(json.dumps(before))
    rep = _report(tmp_path / "r1", "m1", tta, [(2.0, 2.1), (3.0, 2.9), (1.0, 1.0)])
    assert C.main(["--replace-pairs", str(corpus), "--pairs-from", str(rep)]) == 0
    after = json.loads(corpus.read_text())
    pairs = after["cells"][tta]["pairs"]
    assert [(p["candidate"]["figures"]["seconds_to_target"], p["reference"]["figures"]["seconds_to_target"])
            for p in pairs] == [(2.0, 2.1), (3.0, 2.9), (1.0, 1.0)]
    assert all("duet" in p["candidate"]["meta"] for p in pairs)  # the replay reads them as duet pairs
    assert after["cells"][tta]["fresh"] == [{"t": 1.0}] and after["cells"][other] == before["cells"][other]
    assert after["sources"]["pairs_replaced"][0]["cells"] == {tta: 3}
    assert after["sources"]["sessions"] == ["s"]
    # refused: another machine's report, a cell the corpus does not have; the file is left as it was
    kept = corpus.read_text()
    assert C.main(["--replace-pairs", str(corpus), "--pairs-from",
                   str(_report(tmp_path / "r2", "m2", tta, [(1.0, 1.0)]))]) == 2
    assert C.main(["--replace-pairs", str(corpus), "--pairs-from",
                   str(_report(tmp_path / "r3", "m1", "score/vgg/b1", [(1.0, 1.0)]))]) == 2
    assert corpus.read_text() == kept
