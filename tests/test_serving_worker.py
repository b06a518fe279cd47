"""The serving worker with real MXNet and real LoadGen (workers/serving.py): LeNet served
under LoadGen's Server scenario, its figures read from LoadGen's log in its own folder; a
session that measures a serving cell through the fixture; its bad input in one line."""

import json
import subprocess
import sys

import pytest

from stand_ins import new_children as _children, session
from pytest_mxperf.workers import serving

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
    assert (tmp_path / "logs" / "run-0" / "mlperf_log_detail.txt").is_file()  # a duet side's layout: run-<n>
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
    result = session(pytester, "-p", "no:cacheprovider", "-m", "cpu and serving", "--perf-machine", "box", "--perf-no-probe",
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
    assert rec["figures"]["target_qps"]["median"] == 100.0  # the rate served, what a baseline records
    assert "serving runs" in result.stdout.str()  # the first line prices it as its kind


def test_a_rate_the_machine_cannot_serve_is_one_line(tmp_path):
    result, _ = _worker(tmp_path, dict(_spec(target_qps=100000.0, min_duration_ms=200), log_dir=str(tmp_path / "l")))
    assert result["status"] == "error" and "\n" not in result["message"]
    assert "this machine cannot serve 100000 queries/s: it completed" in result["message"], result["message"]



# ----------------------------------------------------------------------------- A/B: duets of serving workers

def _duet(tmp_path, mode, serving, candidate_env=None):
    from pytest_mxperf.measure import duet
    from pytest_mxperf.model import kinds
    from pytest_mxperf.model.workload import Workload
    w = Workload(model="lenet", mode=mode, batch_size=4)
    return duet.run_pair(w, candidate=sys.executable, reference=sys.executable, module=kinds.SERVING_WORKER,
                         spec={"workload": w.to_dict(), "serving": serving}, figures=kinds.kind(mode).read_figures,
                         env=candidate_env)


def test_a_target_rate_duet_alternates_whole_runs_at_one_rate(tmp_path):
    """Two LeNet servers (the same install): each serves two whole LoadGen runs at the one
    target rate, their turns A,B,B,A; each side's figures the medians of its own runs."""
    c, r = _duet(tmp_path, "serving", SETTINGS)
    assert c.ok and r.ok, (c.message, r.message)
    for side in (c, r):
        runs = side.meta["serving_runs"]
        assert [run["target_qps"] for run in runs] == [100.0, 100.0] and len(side.round_seconds) == 2
        assert side.value("serving_p90_ms") == pytest.approx(sum(run["serving_p90_ms"] for run in runs) / 2)
        assert side.value("target_qps") == 100.0 and side.meta["duet"]["rounds"] == 2
    assert c.meta["duet"]["ran_first"] and not r.meta["duet"]["ran_first"]
    assert not _children()


def test_a_peak_duet_runs_each_sides_search_to_its_end(tmp_path):
    c, r = _duet(tmp_path, "serving_peak", dict(SETTINGS, peak=True, peak_start=100.0, peak_step=0.5,
                                                 peak_floor=25.0, min_duration_ms=300))
    assert c.ok and r.ok, (c.message, r.message)
    for side in (c, r):
        tried = side.meta["peak_runs"]
        assert len(side.round_seconds) == len(tried) >= 2  # a round a step, each side its own search
        # held: early stopping met, p99 within the bound, and the server kept up with the schedule
        held = [t["target_qps"] for t in tried if t["early_stopping_met"] and t["serving_latency_ms"] <= 100.0
                and t["serving_qps"] >= serving.SERVED_SHARE * t["scheduled_qps"]]
        assert side.value("peak_qps") == max(held) and held == [t["target_qps"] for t in tried if t["held"]]
    assert not _children()


DIES = """
import os, signal, sys, threading, time

def _arm():  # the worker runs as __main__ (python -m): patched once its module defined _Model
    while not hasattr(sys.modules.get("__main__"), "_Server"):
        time.sleep(0.005)
    m = sys.modules["__main__"]
    run, calls = m._Model.run, []
    def dying(self, inputs):
        calls.append(1)
        if len(calls) == 40:  # after the warm-up's 9 batches: inside the first LoadGen run
            os.kill(os.getpid(), signal.SIGKILL)
        return run(self, inputs)
    m._Model.run = dying

threading.Thread(target=_arm, daemon=True).start()
"""


def test_a_server_that_dies_mid_run_fails_its_pair_in_one_line_and_leaves_no_process(tmp_path):
    """The candidate's server is killed (SIGKILL) in its first LoadGen run: its side is a
    crash said in one line, the reference's an error naming its partner; no worker is left."""
    import os
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(DIES)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p))
    c, r = _duet(tmp_path, "serving", SETTINGS, candidate_env=env)
    assert not c.ok and "\n" not in c.message and c.status in ("crash", "error"), (c.status, c.message)
    assert r.status == "error" and "its duet partner (the candidate) failed" in r.message
    assert not _children()
