"""results.json round trip and the compare / promote CLI (run in a subprocess, no mxnet)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_mxperf.cli import compare as C
from pytest_mxperf.store.baseline_store import BaselineStore
from pytest_mxperf.store import results as R
from pytest_mxperf.model.measurement import CellMeasurement, RunResult
from pytest_mxperf.model.workload import Workload

ROOT = Path(__file__).resolve().parent.parent


def cell(model, medians, env=None, version="1.9.1", batch=8):
    w = Workload(model, batch_size=batch)
    return CellMeasurement(w, [RunResult(w, "ok", batches_per_round=1, round_seconds=[batch / m] * 3,
                                         meta={"env": env or {}, "mxnet_version": version}) for m in medians])


def write(path, cells, machine_id="box"):
    return R.Results([R.make_record(c) for c in cells], {"id": machine_id, "hardware": {}},
                     {"software": {"mxnet_version": "1.9.1"}}).dump(path)


def load(machine_id, directory):
    return BaselineStore(directory).load(machine_id)


def cli(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "pytest_mxperf.cli.compare", *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=120)


BASE = [30.0, 30.5, 29.5, 30.2, 29.8, 30.1]


def test_results_round_trip(tmp_path):
    c = cell("alexnet", [100.0, 101.0])
    p = R.Results([R.make_record(c, floor={"value": 50.0}, verdict={"kind": "unchanged"}, outcome="passed")],
                  {"id": "box"}, {"date": "d"}).dump(tmp_path / "r" / "results.json")
    res = R.Results.load(p)
    doc = res.doc
    assert doc["schema"] == R.SCHEMA_VERSION and doc["machine"]["id"] == "box"
    rec = doc["records"][0]
    assert rec["floor"] == {"value": 50.0} and rec["outcome"] == "passed" and rec["verdict"]["kind"] == "unchanged"
    [back] = res.cells()
    assert back.process_medians == pytest.approx(c.process_medians)
    assert res.machine_id == "box" and res.date == "d" and res.by_key() == {c.workload.key(): rec}
    # the old names history/__main__.py uses give the same document
    assert R.load_results(p) == doc and R.markdown_summary(doc) == res.markdown_summary()


@pytest.mark.parametrize("content,word", [(b'{"schema": 1, "records": [', "not valid JSON"),
                                          (b'{"schema": 9, "records": []}', "newer"),
                                          (b'[1, 2]', "not a pytest-mxperf results file"),
                                          (b'{"schema": 1, "records": [{"workload": {"model": 3, "mode": "?"}}]}',
                                           "malformed record")])
def test_load_results_errors_are_one_line(tmp_path, content, word):
    p = tmp_path / "results.json"
    p.write_bytes(content)
    with pytest.raises(R.ResultsError) as ei:
        R.Results.load(p)
    assert word in str(ei.value) and str(p) in str(ei.value) and "\n" not in str(ei.value)


def test_compare_cli_flags_regression_and_env_change(tmp_path):
    old = write(tmp_path / "old.json", [cell("resnet50_v2", BASE), cell("alexnet", [100, 101, 99, 100, 102])])
    new = write(tmp_path / "new.json", [cell("resnet50_v2", [x * 0.76 for x in BASE], env={"MXNET_SUBGRAPH_BACKEND": "NONE"}),
                                        cell("alexnet", [100, 101, 99, 100.5, 101])])
    out = cli(old, new)
    assert out.returncode == 1, out.stderr
    assert "regression" in out.stdout and "-24.0%" in out.stdout
    assert "MXNET_SUBGRAPH_BACKEND: unset -> NONE" in out.stdout
    lines = {ln.split()[0]: ln for ln in out.stdout.splitlines() if ln.startswith(("score/",))}
    assert lines[Workload("alexnet", batch_size=8).key()].rstrip().endswith("unchanged")


def test_compare_cli_no_regression_exit_0(tmp_path):
    old = write(tmp_path / "old.json", [cell("resnet50_v2", BASE)])
    out = cli(old, old)
    assert out.returncode == 0 and "unchanged" in out.stdout


def test_compare_cli_bad_input_exit_2(tmp_path):
    good = write(tmp_path / "old.json", [cell("resnet50_v2", BASE)])
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    for args in [(good, bad), (good, tmp_path / "missing.json"), (good,)]:
        out = cli(*args)
        assert out.returncode == 2, out
        assert out.stdout == "" and len(out.stderr.strip().splitlines()) == 1


def test_compare_results_same_statistics_as_verdict(tmp_path):
    from pytest_mxperf.judge import verdict as V
    old = R.Results.load(write(tmp_path / "o.json", [cell("resnet50_v2", BASE)]))
    new = R.Results.load(write(tmp_path / "n.json", [cell("resnet50_v2", [x * 0.9 for x in BASE])]))
    [(k, v)] = C.compare_results(old, new).items()
    direct = V.judge([x * 0.9 for x in BASE], BASE, confirmed=True)  # offline: nothing to re-measure
    assert (v.kind, v.change, v.p_value) == (direct.kind, pytest.approx(direct.change), pytest.approx(direct.p_value))


def test_promote_cli(tmp_path):
    res = write(tmp_path / "results.json", [cell("resnet50_v2", BASE)], machine_id="ci-1")
    out = cli("promote", res, "--baselines-dir", tmp_path / "bl")
    assert out.returncode == 0, out.stderr
    assert "promoted 1 cell" in out.stdout
    assert load("ci-1", tmp_path / "bl").values(Workload("resnet50_v2", batch_size=8).key())
    out = cli("promote", res, "--baselines-dir", tmp_path / "bl", "--machine", "Bad/Name")
    assert out.returncode == 2 and "\n" not in out.stderr.strip()
    (tmp_path / "bl" / "ci-1.json").write_text('{"schema": 1, "cells": ')
    before = (tmp_path / "bl" / "ci-1.json").read_bytes()
    out = cli("promote", res, "--baselines-dir", tmp_path / "bl")
    assert out.returncode == 2 and "corrupt" in out.stderr
    assert (tmp_path / "bl" / "ci-1.json").read_bytes() == before


def test_promote_keeps_the_operator_profiles_of_a_profiled_run(tmp_path):
    key = Workload("resnet50_v2", batch_size=8).key()
    profile = {"status": "ok", "batches": 5, "trace_path": "/tmp/t.json", "meta": {"mxnet_version": "1.9.1"},
               "operators": [{"name": "_sg_mkldnn_conv", "calls": 5, "total_ms": 500.0, "ms_per_batch": 100.0,
                              "share": 0.9}]}
    res = R.Results([R.make_record(cell("resnet50_v2", BASE))], {"id": "ci-1", "hardware": {}},
                    {"software": {"mxnet_version": "1.9.1"}, "profiles": {key: profile}})
    res = res.dump(tmp_path / "results.json")
    assert cli("promote", res, "--baselines-dir", tmp_path / "bl").returncode == 0
    kept = load("ci-1", tmp_path / "bl").profile(key)
    assert kept["operators"][0]["name"] == "_sg_mkldnn_conv" and kept["batches"] == 5


def test_modules_do_not_import_mxnet():
    code = ("import sys; import pytest_mxperf.machine.fingerprint, pytest_mxperf.store.baselines, pytest_mxperf.judge.verdict, "
            "pytest_mxperf.store.results, pytest_mxperf.cli.compare, pytest_mxperf.output.plots; "
            "pytest_mxperf.machine.fingerprint.machine_fingerprint(); assert 'mxnet' not in sys.modules, 'mxnet imported'")
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(ROOT)),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def test_a_cell_this_machine_cannot_run_is_not_listed_as_failing():
    """An unsupported cell (float16 on a CPU: its test skips) is named apart, never under
    "Failing"; a cell that crashed is failing."""
    doc = {"schema": 1, "machine": {"id": "box"}, "session": {"verdicts": {}},
           "records": [{"key": "score/lenet/b8/cpu:0/float16/threads=auto", "status": "unsupported",
                        "message": "float16 on CPU: no kernel"},
                       {"key": "score/mlp/b8/cpu:0/float32/threads=auto", "status": "crash",
                        "message": "worker died"}]}
    text = "\n".join(R.markdown_summary(doc))
    failing = text.split("### Failing")[1].split("figure(s) unchanged")[0]
    assert "mlp" in failing and "float16" not in failing
    assert "1 cell(s) not measurable here (skipped, not failing): `score/lenet/b8/cpu:0/float16/threads=auto`" in text
    assert "0 cell(s) measured" in text
