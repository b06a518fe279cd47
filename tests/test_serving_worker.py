"""The serving worker with real MXNet and real LoadGen (workers/serving.py): LeNet served
under LoadGen's Server scenario, its figures read from LoadGen's log in its own folder; a
session that measures a serving cell through the fixture; its bad input in one line."""

import json
import subprocess
import sys

import pytest

from stand_ins import session

pytest.importorskip("mlperf_loadgen")

SETTINGS = {"percentile": 0.9, "latency_bound_ms": 100.0, "target_qps": 100.0, "max_batch": 4,
            "batch_timeout_ms": 2.0, "min_queries": 100, "min_duration_ms": 1000}


def _worker(tmp_path, spec, env=None):
    work = tmp_path / "cwd"
    work.mkdir(exist_ok=True)
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    subprocess.run([sys.executable, "-m", "pytest_mxperf.workers.serving", str(tmp_path / "spec.json"),
                    str(tmp_path / "result.json")], cwd=work, env=env, check=False, timeout=600,
                   capture_output=True)
    return json.loads((tmp_path / "result.json").read_text()), work


def _spec(**serving):
    return {"workload": {"model": "lenet", "mode": "serving", "batch_size": 4, "contexts": ["cpu:0"]},
            "serving": dict(SETTINGS, **serving)}


def test_lenet_served_at_a_target_rate_gives_its_percentiles_from_loadgens_log(tmp_path):
    result, work = _worker(tmp_path, dict(_spec(), log_dir=str(tmp_path / "logs")))
    assert result["status"] == "ok", result["message"]
    p50, p90, p99 = result["serving_p50_ms"], result["serving_p90_ms"], result["serving_p99_ms"]
    assert 0 < p50 <= p90 <= p99
    assert result["serving_latency_ms"] == p90  # the percentile the cell names
    run = result["meta"]["serving_run"]
    assert run["queries"] >= 100 and run["target_qps"] == 100.0 and "successful" in run["early_stopping"]
    assert (tmp_path / "logs" / "mlperf_log_detail.txt").is_file()
    assert not list(work.iterdir()), "LoadGen wrote into the working directory"


def test_a_bound_no_rate_meets_and_a_missing_loadgen_are_one_line(tmp_path):
    result, _ = _worker(tmp_path, dict(_spec(peak=True, latency_bound_ms=0.001, peak_start=4.0, peak_floor=2.0,
                                             min_queries=20, min_duration_ms=200), log_dir=str(tmp_path / "l")))
    assert result["status"] == "error" and "\n" not in result["message"]
    assert "keeps the 0.9 percentile within 0.001 ms" in result["message"], result["message"]
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "mlperf_loadgen.py").write_text("raise ImportError('no LoadGen here')\n")
    import os
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(blocked), os.environ.get("PYTHONPATH", "")]))
    result, _ = _worker(tmp_path, _spec(), env=env)
    assert result["status"] == "unavailable" and "pip install mlcommons-loadgen" in result["message"]


SERVING_TEST = '''
import pytest
from pytest_mxperf.model.workload import Workload


@pytest.mark.cpu
@pytest.mark.serving
def test_lenet_serving(mxperf):
    cell = mxperf.expect_ok(mxperf.measure_kind(Workload(model="lenet", mode="serving", batch_size=4),
                                                {"serving": %r}))
    assert cell.figure("serving_p50_ms") <= cell.figure("serving_p99_ms")
''' % SETTINGS


def test_a_serving_cell_is_measured_through_the_fixture_and_reported(pytester):
    pytester.makepyfile(test_srv=SERVING_TEST)
    result = session(pytester, "-p", "no:cacheprovider", "-m", "cpu", "--perf-machine", "box", "--perf-no-probe",
                     "--perf-processes", "1", "--perf-report", str(pytester.path / "rep"),
                     "--perf-baselines-dir", str(pytester.path / "bl"))
    assert result.ret == 0, result.stdout.str()[-3000:]
    doc = json.loads((pytester.path / "rep" / "results.json").read_text())
    cells = {c["key"]: c for c in doc["records"]}
    key = "serving/lenet/b4/cpu:0/float32/threads=auto"
    assert key in cells, sorted(cells)
    rec = cells[key]
    assert rec["status"] == "ok" and rec["metric"] == "serving_latency_ms" and rec["unit"] == "ms"
    assert {"serving_p50_ms", "serving_p90_ms", "serving_p99_ms", "serving_qps"} <= set(rec["figures"])
    assert "serving runs" in result.stdout.str()  # the first line prices it as its kind


def test_a_rate_the_machine_cannot_serve_is_one_line(tmp_path):
    result, _ = _worker(tmp_path, dict(_spec(target_qps=100000.0, min_duration_ms=200), log_dir=str(tmp_path / "l")))
    assert result["status"] == "error" and "\n" not in result["message"]
    assert "this machine cannot serve 100000 queries/s: it completed" in result["message"], result["message"]

