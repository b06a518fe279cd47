"""benchmarks/second_round_sizes.py: a session's second round of duet pairs recomputed from its results."""

import json
import math

import stand_ins
from pytest_mxperf.measure import planning
from pytest_mxperf.measure.ledger import CellRecord
from pytest_mxperf.model.measurement import CellMeasurement, RunResult
from pytest_mxperf.model.workload import Workload
from pytest_mxperf.outcome import ab_judging
from pytest_mxperf.store.results import make_record

S = stand_ins.repository_module("benchmarks/second_round_sizes.py")

#: first-stage pair log ratios (candidate faster > 0): one cell whose own 3 pairs spread far
#: more than the session's, the others close together
FIRST = {"noisy": [-0.12, 0.06, -0.03], "a": [-0.004, 0.003, 0.001], "b": [0.002, -0.003, 0.0],
         "c": [0.001, 0.0, -0.002], "d": [-0.001, 0.002, 0.0], "e": [0.0, -0.002, 0.003]}


def _pairs(w, ratios):
    """Duet pairs numbered from 0 (a stage), each side 5 rounds; the candidate's rounds
    shorter by exp(ratio)."""
    runs, refs = [], []
    for i, lr in enumerate(ratios):
        for side, seconds, out in (("candidate", 0.1, runs), ("reference", 0.1 * math.exp(lr), refs)):
            out.append(RunResult(w, "ok", batches_per_round=1, round_seconds=[seconds] * 5,
                                 meta={"duet": {"pair": i, "side": side, "rounds": 5}}))
    return runs, refs


def _cell(name, stages):
    w = Workload("alexnet", batch_size=2 ** list(FIRST).index(name))  # a cell key of its own for each name
    runs, refs = [], []
    for ratios in stages:
        r, f = _pairs(w, ratios)
        runs += r
        refs += f
    return CellMeasurement(w, runs, refs)


def test_a_session_is_cut_back_to_its_first_stage_and_sized_again_as_it_ran(tmp_path):
    first = {name: _cell(name, [ratios]) for name, ratios in FIRST.items()}
    tests = len(first)
    sizing = ab_judging.second_stage_pairs({c.workload.key(): CellRecord(c.workload.key(), c, duets=True)
                                            for c in first.values()}, 0.05, planning.ab_pairs(tests))
    second = {name: sizing(first[name].workload.key()) for name in ("noisy", "a")}
    # the second stage as the product sizes it (each a stage of its own, numbered from 0)
    cells = {name: _cell(name, [FIRST[name]] + ([[0.0] * second[name]] if name in second else []))
             for name in FIRST}
    doc = {"records": [make_record(c) for c in cells.values()], "session": {"options": {"min_effect": 0.05}}}
    ran, product, pooled, spread = S.sizes(json.loads(json.dumps(doc)), 0.05)

    key = {name: c.workload.key() for name, c in cells.items()}
    assert ran == {key["noisy"]: second["noisy"], key["a"]: second["a"]}
    assert product == ran  # the product's sizing, from the first stage alone, gives what ran
    assert pooled[key["a"]] == product[key["a"]]  # a cell within the session's spread: the same
    assert pooled[key["noisy"]] < product[key["noisy"]]  # its own spread, not the session's, sized it
    assert spread is not None and 0 < spread < 0.12

    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    assert S.main([str(path)]) == 0
    broken = dict(doc, records=[make_record(_cell("noisy", [FIRST["noisy"], [0.0] * (second["noisy"] + 1)]))]
                  + doc["records"][1:])
    path.write_text(json.dumps(broken))
    assert S.main([str(path)]) == 1  # a second round that is not what the sizing gives is said
    assert S.main([]) == 2
