"""benchmarks/first_round_pairs.py: a baseline session's first round against the recorded setup,
its expected cost (the product's ``planning.setup_pair_seconds``) against what it took."""

import json

import stand_ins
from pytest_mxperf.measure import planning
from pytest_mxperf.model.measurement import RunResult
from pytest_mxperf.model.options import PerfOptions
from pytest_mxperf.model.workload import Workload

F = stand_ins.repository_module("benchmarks/first_round_pairs.py")

LOG = """mxperf: 24 of 25 cell(s) measured, 4.7 min gone, about 42.0 min left
mxperf: 2 suspect cell(s) measured again against the recorded setup (mxnet==1.9.1, its recorded variables), 6 duet pair(s) (a +3, b +3); expected about 1 min more
mxperf: re-measured 1 of 2 suspect cell(s) (score/mlp/b8/cpu:0/float32/threads=auto), 5.2 min gone, about 1.0 min left
mxperf: re-measured 2 of 2 suspect cell(s) (score/lenet/b8/cpu:0/float32/threads=auto), 6.1 min gone, about 0.1 min left
mxperf: 1 suspect cell(s) measured again against the recorded setup (mxnet==1.9.1, its recorded variables), 9 duet pair(s) (a +9); expected about 2 min more
mxperf: re-measured 1 of 1 suspect cell(s) (score/mlp/b8/cpu:0/float32/threads=auto), 8.0 min gone, about 0.0 min left
"""


def test_each_cells_first_round_is_the_time_since_the_line_before():
    got = F.first_round_minutes(LOG, 4.7)
    assert set(got) == {"score/mlp/b8/cpu:0/float32/threads=auto", "score/lenet/b8/cpu:0/float32/threads=auto"}
    assert abs(got["score/mlp/b8/cpu:0/float32/threads=auto"] - 0.5) < 1e-9  # not the second round's 1.9
    assert abs(got["score/lenet/b8/cpu:0/float32/threads=auto"] - 0.9) < 1e-9


def test_a_cells_pair_is_the_products_estimate_against_its_share_of_the_round(tmp_path, capsys):
    w = Workload("mlp", batch_size=8)
    run = RunResult(w, "ok", batches_per_round=10, round_seconds=[0.02] * 3, wall_seconds=2.0,
                    meta={"timed_seconds": 0.06})
    duet_side = RunResult(w, "ok", batches_per_round=10, round_seconds=[0.02] * 3, wall_seconds=6.0,
                          meta={"duet": {"pair": 0, "side": "candidate"}})
    key = "score/mlp/b8/cpu:0/float32/threads=auto"
    doc = {"records": [{"key": key, "runs": [run.to_dict(), run.to_dict(), duet_side.to_dict()]}]}
    (tmp_path / "results.json").write_text(json.dumps(doc))
    (tmp_path / "s.log").write_text(LOG)
    assert F.main([str(tmp_path / "results.json"), str(tmp_path / "s.log"), "4.7"]) == 0
    out = capsys.readouterr().out
    pair = planning.setup_pair_seconds(type("R", (), {"duets": True, "cell": type("C", (), {"ok_runs": [run, run]})})(),
                                       PerfOptions())
    assert f"predicted {pair:5.1f} s, taken  10.0 s" in out, out  # 0.5 min over 3 pairs
    assert "first round: predicted" in out


def test_without_its_three_arguments_it_says_how_to_call_it(capsys):
    assert F.main([]) == 2
    assert "usage: python benchmarks/first_round_pairs.py" in capsys.readouterr().err
