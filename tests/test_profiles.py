"""Per-operator profiles: the profile worker (in a fresh process, real MXNet), the pure
parent-side helpers, and profile-on-failure end to end through pytester (a scripted
stand-in throughput worker makes the regression; the profile worker is the real one)."""

import json
import os
import sys

import pytest

import stand_ins

from pytest_mxperf.measure import profiling as profiles
from pytest_mxperf.measure import runner
from pytest_mxperf.model.measurement import CellMeasurement, RunResult
from pytest_mxperf.model.workload import Workload
from pytest_mxperf.outcome import finish
from pytest_mxperf.proc import spawn
from pytest_mxperf.store import baseline_store, baselines, kept_profiles

CMD = [sys.executable, "-m", "pytest_mxperf.workers.profile"]


def profile(tmp_path, model, batch, mode="score", extra_env=None, **spec):
    env = spawn.with_package_path(os.environ)
    env.pop("MXNET_SUBGRAPH_BACKEND", None)  # the wheel's default unless the test says otherwise
    env.update(extra_env or {})
    trace = tmp_path / f"{model}-{len(os.listdir(tmp_path))}" / "trace.json"
    full = {"workload": Workload(model, mode=mode, batch_size=batch).to_dict(), "trace_path": str(trace)}
    full.update(spec)
    out = runner.run_process(CMD, full, timeout=600, env=env)
    assert out.payload is not None, f"{out.status}: {out.message} {out.stderr_tail}"
    assert out.payload["status"] == "ok", out.payload["message"]
    return out.payload


# -- the worker --------------------------------------------------------------------------

def test_lenet_score_profile_names_its_operators_and_writes_a_chrome_trace(tmp_path):
    res = profile(tmp_path, "lenet", 1, warmup_batches=2, batches=4, top=15)
    ops = res["operators"]
    names = profiles.operator_names(ops)
    assert any("conv" in n.lower() for n in names) and any("fully_connected" in n.lower() or
                                                           n == "FullyConnected" for n in names)
    assert not any(n.startswith("[") for n in names)  # bulk execution was off: one entry per operator
    assert [o["total_ms"] for o in ops] == sorted((o["total_ms"] for o in ops), reverse=True)
    assert sum(o["share"] for o in ops) == pytest.approx(1.0)
    conv = next(o for o in ops if "conv" in o["name"].lower())
    assert conv["calls"] == 2 * 4  # two convolutions per batch
    assert conv["ms_per_batch"] == pytest.approx(conv["total_ms"] / 4)
    assert res["batches"] == 4 and res["meta"]["bulk_exec"]["MXNET_EXEC_BULK_EXEC_INFERENCE"] == "0"
    with open(res["trace_path"]) as fh:
        trace = json.load(fh)
    assert trace["traceEvents"]


def test_lenet_train_profile_has_backward_and_update_operators(tmp_path):
    res = profile(tmp_path, "lenet", 8, mode="train", warmup_batches=1, batches=2, top=0)
    names = profiles.operator_names(res["operators"])
    assert "_backward_Convolution" in names and any("sgd" in n for n in names)
    assert all(o["name"] != profiles.OTHER for o in res["operators"])  # top 0: nothing folded


def test_subgraph_backend_changes_the_operator_set_of_resnet50(tmp_path):
    fused = profile(tmp_path, "resnet50_v2", 1, warmup_batches=1, batches=2)
    plain = profile(tmp_path, "resnet50_v2", 1, warmup_batches=1, batches=2,
                    extra_env={"MXNET_SUBGRAPH_BACKEND": "NONE"})
    f, p = set(profiles.operator_names(fused["operators"])), set(profiles.operator_names(plain["operators"]))
    assert "_sg_mkldnn_conv" in f and "Convolution" not in f
    assert "Convolution" in p and "_sg_mkldnn_conv" not in p
    assert plain["meta"]["subgraph_backend"] == "NONE" and fused["meta"]["subgraph_backend"] is None
    conv = next(o for o in plain["operators"] if o["name"] == "Convolution")
    assert conv["calls"] == 53 * 2  # ResNet-50 v2: 53 convolutions per forward pass
    lines = profiles.compare_profiles(fused["operators"], plain["operators"])
    assert "_sg_mkldnn_conv" in lines[0] and "Convolution" in lines[0]
    assert any(ln.startswith("_sg_mkldnn_conv") and ln.endswith("only in current") for ln in lines)
    assert any(ln.startswith("Convolution") and ln.endswith("only in reference") for ln in lines)


def test_a_bad_profile_spec_gives_a_one_line_error(tmp_path):
    out = runner.run_process(CMD, {"workload": {"model": "lenet", "mode": "dist"}, "trace_path": str(tmp_path / "t")},
                             timeout=120, env=spawn.with_package_path(os.environ))
    assert out.payload["status"] == "error"
    assert "profile mode must be one of score, latency, train" in out.payload["message"]
    assert "\n" not in out.payload["message"]


def test_the_profiled_batches_fill_the_profile_time_within_bounds(tmp_path):
    res = profile(tmp_path, "lenet", 1, profile_seconds=0.5, min_batches=3, max_batches=7)
    assert 3 <= res["batches"] <= 7 and res["warmup_batches"] >= 3
    assert all(o["calls"] % res["batches"] == 0 for o in res["operators"] if o["name"] == "SoftmaxOutput")


# -- operators_from_aggregate ----------------------------------------------------------------

AGGREGATE = {
    "Time": {
        "MXNET_C_API": {"MXNDArrayWaitAll": {"Count": 2, "Total": 50.0, "Min": 0, "Max": 50, "Avg": 25.0}},
        "operator": {
            "Convolution": {"Count": 8, "Total": 40.0, "Min": 1, "Max": 9, "Avg": 5.0},
            "FullyConnected": {"Count": 4, "Total": 6.0, "Min": 1, "Max": 2, "Avg": 1.5},
            "Pooling": {"Count": 8, "Total": 2.0, "Min": 0, "Max": 1, "Avg": 0.25},
            "Flatten": {"Count": 4, "Total": 1.5, "Min": 0, "Max": 1, "Avg": 0.375},
            "CopyCPU2CPU": {"Count": 4, "Total": 0.5, "Min": 0, "Max": 1, "Avg": 0.125},
        },
    },
    "Memory": {},
    "Unit": {"Time": "ms", "Memory": "kB"},
}


def test_operators_from_aggregate_sorts_shares_and_folds_the_rest():
    ops = profiles.operators_from_aggregate(AGGREGATE, batches=4, top=2)
    assert [o["name"] for o in ops] == ["Convolution", "FullyConnected", "other"]
    conv, fc, other = ops
    assert conv == {"name": "Convolution", "calls": 8, "total_ms": 40.0, "avg_ms": 5.0,
                    "ms_per_batch": 10.0, "share": 0.8}
    assert fc["share"] == pytest.approx(0.12)
    assert other["names"] == ["Pooling", "Flatten", "CopyCPU2CPU"]
    assert other["calls"] == 16 and other["total_ms"] == pytest.approx(4.0)
    assert other["avg_ms"] == pytest.approx(0.25) and other["share"] == pytest.approx(0.08)
    assert "MXNDArrayWaitAll" not in profiles.operator_names(ops)  # C API calls are not operators
    assert len(profiles.operators_from_aggregate(AGGREGATE, batches=1, top=None)) == 5
    assert len(profiles.operators_from_aggregate(AGGREGATE, batches=1, top=10)) == 5  # nothing to fold


def test_operators_from_aggregate_refuses_what_is_not_an_aggregate():
    with pytest.raises(profiles.ProfileFormatError, match="no 'Time' section"):
        profiles.operators_from_aggregate({"traceEvents": []}, batches=1)
    with pytest.raises(profiles.ProfileFormatError, match="'us'"):
        profiles.operators_from_aggregate(dict(AGGREGATE, Unit={"Time": "us"}), batches=1)
    with pytest.raises(profiles.ProfileFormatError, match="batches"):
        profiles.operators_from_aggregate(AGGREGATE, batches=0)
    assert profiles.operators_from_aggregate({"Time": {}, "Unit": {"Time": "ms"}}, batches=1) == []


# -- compare_profiles ------------------------------------------------------------------------

def op(name, ms, **kw):
    return dict(name=name, ms_per_batch=ms, **kw)


def test_compare_profiles_puts_the_heaviest_operators_side_by_side():
    cur = [op("Convolution", 12.0), op("BatchNorm", 3.0), op("Pooling", 1.0)]
    ref = [op("Convolution", 10.0), op("BatchNorm", 3.0), op("Pooling", 0.5)]
    lines = profiles.compare_profiles(cur, ref, top=10)
    assert lines[0].split() == ["operator", "current", "ms/batch", "reference", "ms/batch", "change"]
    rows = [ln.split() for ln in lines[1:]]
    assert rows[0] == ["Convolution", "12.000", "10.000", "+20%"]
    assert rows[1] == ["BatchNorm", "3.000", "3.000", "+0%"]
    assert rows[2] == ["Pooling", "1.000", "0.500", "+100%"]
    assert rows[-1] == ["(total)", "16.000", "13.500", "+19%"]
    assert not any("only in" in ln for ln in lines)


def test_compare_profiles_marks_operators_seen_on_one_side_only():
    cur = [op("_sg_mkldnn_conv", 110.0), op("BatchNorm", 4.0)]
    ref = [op("Convolution", 85.0), op("elemwise_add", 7.0), op("BatchNorm", 4.0)]
    lines = profiles.compare_profiles(cur, ref)
    assert lines[0] == ("operators only in current: _sg_mkldnn_conv; "
                        "only in reference: Convolution, elemwise_add")
    by_name = {ln.split()[0]: ln for ln in lines[2:]}
    assert by_name["_sg_mkldnn_conv"].split()[1:3] == ["110.000", "-"]
    assert by_name["_sg_mkldnn_conv"].endswith("only in current")
    assert by_name["Convolution"].split()[1:3] == ["-", "85.000"]
    assert by_name["Convolution"].endswith("only in reference")
    assert by_name["elemwise_add"].endswith("only in reference")
    assert [ln.split()[0] for ln in lines[2:5]] == ["_sg_mkldnn_conv", "Convolution", "elemwise_add"]


def test_compare_profiles_keeps_top_rows_and_knows_what_other_holds():
    cur = [op("A", 9.0), op("B", 5.0), op("other", 1.5, names=["C", "D"])]
    ref = [op("A", 8.0), op("C", 6.0), op("B", 0.5), op("D", 0.2)]
    lines = profiles.compare_profiles(cur, ref, top=2)
    assert not lines[0].startswith("operators only in")  # C and D exist on both sides
    names = [ln.split()[0] for ln in lines[1:]]
    assert names == ["A", "C", "B", "(rest)", "(total)"]  # union of each side's top 2, heaviest first
    c_row = lines[2]
    assert c_row.split()[1:3] == ["-", "6.000"] and c_row.endswith("in the other side's 'other'")
    assert lines[-2].split() == ["(rest)", "1.500", "0.200"]  # cur's other bucket; ref's D
    assert lines[-1].split()[:3] == ["(total)", "15.500", "14.700"]


def test_compare_profiles_accepts_records_without_a_batch_count():
    lines = profiles.compare_profiles([{"name": "X", "total_ms": 4.0}], [{"name": "X", "total_ms": 2.0}])
    assert lines[1].split() == ["X", "4.000", "2.000", "+100%"]


def test_compare_profiles_names_its_sides():
    lines = profiles.compare_profiles([op("Convolution", 9.0)], [op("_sg_mkldnn_conv", 7.0)],
                                      labels=("now", "baseline"))
    assert lines[0] == "operators only in now: Convolution; only in baseline: _sg_mkldnn_conv"
    assert lines[1].split() == ["operator", "now", "ms/batch", "baseline", "ms/batch", "change"]
    assert lines[2].endswith("only in now") and lines[3].endswith("only in baseline")


# -- what a baseline keeps, and the failure message -------------------------------------------

def worker_result(ops, **meta):
    return {"status": "ok", "operators": ops, "batches": 10, "trace_path": "/r/profiles/x.trace.json",
            "meta": dict({"mxnet_version": "1.9.1", "subgraph_backend": None}, **meta)}


def test_summary_keeps_the_top_operators_and_folds_the_rest_with_their_names():
    ops = [op(f"op{i}", 10.0 - i, calls=2, total_ms=10 * (10.0 - i), share=0.1) for i in range(5)]
    ops.append(op("other", 0.5, calls=4, total_ms=5.0, share=0.05, names=["tiny1", "tiny2"]))
    s = kept_profiles.summary(worker_result(ops), top=2)
    assert [o["name"] for o in s["operators"]] == ["op0", "op1", "other"]
    other = s["operators"][-1]
    assert other["names"] == ["op2", "op3", "op4", "tiny1", "tiny2"]
    assert other["ms_per_batch"] == pytest.approx(8.0 + 7.0 + 6.0 + 0.5) and other["calls"] == 10
    assert s["batches"] == 10 and s["mxnet_version"] == "1.9.1" and "trace_path" not in s
    assert set(profiles.operator_names(s["operators"])) == set(profiles.operator_names(ops))


def _cell(key_model="lenet"):
    w = Workload(key_model, batch_size=8)
    runs = [RunResult(workload=w, status="ok", batches_per_round=1, round_seconds=[0.1, 0.1, 0.1]) for _ in range(5)]
    return CellMeasurement(w, runs)


def test_a_recorded_baseline_keeps_the_profile_and_gives_it_back(tmp_path):
    cell = _cell()
    key = cell.workload.key()
    kept = kept_profiles.summary(worker_result([op("_sg_mkldnn_conv", 0.7, calls=20, total_ms=7.0, share=0.8)]))
    path = baseline_store.update("box", [cell], baselines_dir=tmp_path, profiles={key: kept})
    store = baseline_store.BaselineStore(tmp_path)
    baseline = store.load("box")
    assert baseline.recordings(key)[-1]["profile"]["operators"][0]["name"] == "_sg_mkldnn_conv"
    got = baseline.profile(key)
    assert got["operators"] == kept["operators"] and got["date"]
    # a later recording without a profile (pool "add") still compares with the kept one;
    # a "replace" recording without one starts a comparison set that has none
    baseline_store.update("box", [cell], baselines_dir=tmp_path, pool="add")
    assert store.load("box").profile(key)["operators"] == kept["operators"]
    baseline_store.update("box", [cell], baselines_dir=tmp_path)
    assert store.load("box").profile(key) is None
    doc = json.loads(path.read_text())
    doc["cells"][key]["history"][-1]["profile"] = "not an object"
    path.write_text(json.dumps(doc))
    with pytest.raises(baselines.BaselineError, match="profile that is not an object"):
        store.load("box")


def test_the_failure_message_sets_the_profile_beside_the_baselines():
    now = worker_result([op("Convolution", 80.0, calls=106, share=0.7), op("elemwise_add", 9.0, share=0.1)],
                        subgraph_backend="NONE")
    base = dict(kept_profiles.summary(worker_result([op("_sg_mkldnn_conv", 60.0, calls=106, share=0.9)])),
                date="2026-11-23T10:00:00+00:00")
    lines = profiles.failure_lines("score/resnet50_v2/b2", "regression", now, base)
    assert lines[0].startswith("mxperf: profile of score/resnet50_v2/b2 (regression): top operators by time, now "
                               "(mxnet 1.9.1, MXNET_SUBGRAPH_BACKEND=NONE, 10 batches) beside the baseline "
                               "(mxnet 1.9.1, MXNET_SUBGRAPH_BACKEND=unset, 10 batches, recorded 2026-11-23")
    assert lines[1] == "  operators only in now: Convolution, elemwise_add; only in baseline: _sg_mkldnn_conv"
    assert any(ln.split()[0] == "Convolution" and ln.endswith("only in now") for ln in lines)
    assert any(ln.split()[0] == "_sg_mkldnn_conv" and ln.endswith("only in baseline") for ln in lines)
    assert lines[-1] == "  chrome trace: /r/profiles/x.trace.json"


def test_without_a_baseline_profile_the_message_says_so_and_shows_the_current_one():
    now = worker_result([op("Convolution", 80.0, calls=106, share=0.9), op("Pooling", 8.0, calls=2, share=0.1)])
    lines = profiles.failure_lines("k", "below its floor", now, None, missing="the baseline has no operator profile")
    assert lines[0] == ("mxperf: profile of k (below its floor): the baseline has no operator profile; top "
                        "operators by time now (mxnet 1.9.1, MXNET_SUBGRAPH_BACKEND=unset, 10 batches):")
    assert lines[1].split() == ["operator", "ms/batch", "calls", "share"]
    assert lines[2].split() == ["Convolution", "80.000", "106", "90%"]
    assert lines[-2].split() == ["(total)", "88.000"]
    failed = profiles.failure_lines("k", "regression", {"status": "timeout", "message": "timed out after 600 s"}, None)
    assert failed == ["mxperf: profile of k (regression): the profile worker failed: timeout: timed out after 600 s"]
    ref_failed = profiles.failure_lines("k", "regression", now, {"status": "error", "message": "no mxnet"},
                                        side="reference")
    assert "the reference profile worker failed: error: no mxnet" in ref_failed[0]


def test_which_cells_can_be_profiled_and_where_their_traces_go(tmp_path, monkeypatch):
    assert profiles.unprofiled_reason(Workload("resnet50_v2", mode="latency")) is None
    assert "kvstore" in profiles.unprofiled_reason(Workload("resnet50_v2", mode="kvstore"))
    assert "int8" in profiles.unprofiled_reason(Workload("resnet50_v2", dtype="int8"))
    assert profiles.trace_dir(str(tmp_path / "rep"), 0.0) == tmp_path / "rep" / "profiles"
    monkeypatch.setenv("MXPERF_CACHE_DIR", str(tmp_path / "cache"))
    assert profiles.trace_dir(None, 0.0).parent == tmp_path / "cache" / "profiles"
    p = profiles.trace_path(tmp_path, "score/resnet50_v2/b2/cpu:0/float32/threads=auto", "reference")
    assert p.parent == tmp_path and p.name == "score_resnet50_v2_b2_cpu_0_float32_threads=auto.reference.trace.json"


# -- end to end: a failing cell is profiled ---------------------------------------------------

STUB = os.path.join(os.path.dirname(__file__), "stub_worker.py")

CELL = """
import pytest

@pytest.mark.cpu
def test_cell(mxperf):
    mxperf.expect_ok(mxperf.measure("lenet", 8))
"""


@pytest.fixture
def stub_with_real_profiler(tmp_path):
    """An interpreter whose throughput worker is the scripted stand-in (tests/stub_worker.py:
    figures from its configuration, so a regression is made to order) and whose profile
    worker is the real one under this venv's MXNet."""
    def make(name, **config):
        path = tmp_path / f"python-{name}"
        path.write_text("#!/bin/sh\n"
                        f'if [ "$1" = "-m" ] && [ "$2" = "pytest_mxperf.workers.profile" ]; then '
                        f'exec {sys.executable} "$@"; fi\n'
                        f"MXPERF_STUB='{json.dumps(config)}' exec {sys.executable} {STUB} \"$@\"\n")
        os.chmod(path, 0o755)
        return str(path)
    return make


def test_a_regressed_cell_is_profiled_beside_the_baselines_profile(pytester, stub_with_real_profiler, monkeypatch):
    monkeypatch.delenv("MXNET_SUBGRAPH_BACKEND", raising=False)
    pytester.makepyfile(test_cell=CELL)
    bdir, report = pytester.path / "bl", pytester.path / "rep"
    common = ["-p", "no:cacheprovider", "-m", "cpu", "--perf-machine", "box", "--perf-baselines-dir", str(bdir),
              "--perf-no-probe"]
    base = stub_with_real_profiler("base", rate=100.0)
    r = stand_ins.session(pytester, *common, "--perf-python", base, "--perf-update-baselines", "-v")
    out = r.stdout.str()  # -v: the full report, with each recorded cell's profile
    assert r.ret == 0, out
    stand_ins.recorded_setup_is(pytester.path, bdir, base, base)  # found in the venv cache: the duet settles
    key = "score/lenet/b8/cpu:0/float32/threads=auto"
    # recording profiles every cell; its fused convolution is among the top operators (which
    # of LeNet's three comes first depends on the machine: a loaded one put FullyConnected first)
    brief = next(ln for ln in out.splitlines() if ln.startswith(f"mxperf: profile of {key}: "))
    assert "_sg_mkldnn_conv " in brief.split("; chrome trace")[0], brief
    kept = json.loads((bdir / "box.json").read_text())["cells"][key]["history"][-1]["profile"]
    assert "_sg_mkldnn_conv" in profiles.operator_names(kept["operators"])
    assert kept["subgraph_backend"] is None

    # the same cell, 40% slower (scripted), with MKLDNN fusion switched off for real
    monkeypatch.setenv("MXNET_SUBGRAPH_BACKEND", "NONE")
    r = stand_ins.session(pytester, *common, "--perf-python", stub_with_real_profiler("now", rate=60.0),
                                      "--perf-report", str(report))
    out = r.stdout.str()
    assert r.ret == pytest.ExitCode.TESTS_FAILED, out
    assert f"REGRESSION {key}" in out
    lines = out.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith(f"mxperf: profile of {key} (regression)"))
    assert "beside the baseline" in lines[head] and "MXNET_SUBGRAPH_BACKEND=NONE" in lines[head]
    block = lines[head + 1:head + 20]
    assert block[0].startswith("  operators only in now: ") and "Convolution" in block[0]
    assert "only in baseline: " in block[0] and "_sg_mkldnn_conv" in block[0].split("only in baseline: ")[1]
    assert any(ln.split()[0] == "Convolution" and ln.endswith("only in now") for ln in block if ln.strip())
    trace = next(ln for ln in block if ln.startswith("  chrome trace: ")).split(": ", 1)[1]
    assert trace == str(report / "profiles" / "score_lenet_b8_cpu_0_float32_threads=auto.trace.json")
    assert json.loads(open(trace).read())["traceEvents"]
    results = json.loads((report / "results.json").read_text())
    assert results["session"]["profiles"][key]["trace_path"] == trace

    # a baseline without a profile: the recorded setup, at hand, is profiled beside it; without
    # --perf-report the trace goes to the cache
    monkeypatch.setenv("MXPERF_CACHE_DIR", str(pytester.path / "cache"))
    stand_ins.cached_setup_in(pytester.path / "cache", bdir, "box", base, base)
    doc = json.loads((bdir / "box.json").read_text())
    del doc["cells"][key]["history"][-1]["profile"]
    (bdir / "box.json").write_text(json.dumps(doc))
    r = stand_ins.session(pytester, *common, "--perf-python", stub_with_real_profiler("now", rate=60.0))
    out = r.stdout.str()
    assert r.ret == pytest.ExitCode.TESTS_FAILED, out
    head = next(ln for ln in out.splitlines() if ln.startswith(f"mxperf: profile of {key} (regression): "))
    assert "beside the recorded setup (mxnet 1.9.1, MXNET_SUBGRAPH_BACKEND=unset" in head, head
    traces = next(ln for ln in out.splitlines() if ln.startswith("  chrome trace: ")).split(": ", 1)[1]
    for trace in traces.split("; recorded setup: "):
        assert trace.startswith(str(pytester.path / "cache" / "profiles") + os.sep) and os.path.exists(trace)


def test_an_ab_regression_is_profiled_under_both_interpreters(pytester, stub_with_real_profiler, monkeypatch):
    monkeypatch.delenv("MXNET_SUBGRAPH_BACKEND", raising=False)
    pytester.makepyfile(test_cell=CELL)
    r = stand_ins.session(pytester, "-p", "no:cacheprovider", "-m", "cpu", "--perf-machine", "box",
                                      "--perf-baselines-dir", str(pytester.path / "bl"), "--perf-no-probe",
                                      "--perf-report", str(pytester.path / "rep"),
                                      "--perf-python", stub_with_real_profiler("new", rate=60.0),
                                      "--perf-reference", stub_with_real_profiler("old", rate=100.0))
    out = r.stdout.str()
    assert r.ret == pytest.ExitCode.TESTS_FAILED, out
    key = "score/lenet/b8/cpu:0/float32/threads=auto"
    assert f"REGRESSION {key}" in out
    head = next(ln for ln in out.splitlines() if ln.startswith(f"mxperf: profile of {key} (regression)"))
    assert "beside the reference" in head
    assert "now ms/batch" in out and "reference ms/batch" in out
    prof = pytester.path / "rep" / "profiles"
    assert sorted(p.name for p in prof.iterdir()) == ["score_lenet_b8_cpu_0_float32_threads=auto.reference.trace.json",
                                                      "score_lenet_b8_cpu_0_float32_threads=auto.trace.json"]


def test_a_recording_keeps_profiles_only_of_an_install_a_later_session_cannot_rebuild():
    """A release from a package index (NAME==VERSION, no path or URL) is rebuilt as the
    recorded setup when a later cell fails and profiled then: its recording keeps none. A
    custom build (installed from a path or URL), an install whose build could not be read or
    one with no pinned distribution keeps a profile of every recorded cell."""
    release = {"name": "mxnet", "version": "1.9.1", "direct_url": None, "libmxnet_sha256": "a" * 64}
    assert finish.keeps_profiles("mxnet==1.9.1", release) is False
    custom = dict(release, direct_url={"url": "file:///src/incubator-mxnet/python", "dir_info": {}})
    assert finish.keeps_profiles("mxnet==1.9.1", custom) is True
    assert finish.keeps_profiles("mxnet==1.9.1", None) is True
    assert finish.keeps_profiles(None, release) is True


def test_a_custom_builds_recording_keeps_every_cells_profile_and_a_releases_none(pytester, make_stub_python):
    pytester.makepyfile(test_cell=CELL)
    bdir = pytester.path / "bl"
    common = ["-p", "no:cacheprovider", "-m", "cpu", "--perf-machine", "box", "--perf-baselines-dir", str(bdir),
              "--perf-no-probe", "--perf-update-baselines"]
    key = "score/lenet/b8/cpu:0/float32/threads=auto"
    release = {"name": "mxnet", "version": "1.9.1", "direct_url": None, "libmxnet_sha256": "a" * 64}
    custom = dict(release, direct_url={"url": "file:///src/incubator-mxnet/python", "dir_info": {}})
    for install, kept in ((custom, True), (release, False)):
        r = stand_ins.session(pytester, *common, "--perf-python", make_stub_python("rec", install=install))
        out = r.stdout.str()
        assert r.ret == 0, out
        last = json.loads((bdir / "box.json").read_text())["cells"][key]["history"][-1]
        assert ("profile" in last) is kept, (install, sorted(last))
        if kept:
            assert last["profile"]["operators"][0]["name"] == "_sg_mkldnn_conv"
