"""A fair duet on one GPU (measure/duet.py), rehearsed with stand-ins: workers that speak the
real duet protocol (tests/stub_worker.py) and a stand-in pynvml (tests/fake_nvml.py) whose
per-process figures are the pools the stand-in workers register. No GPU ran any of this: the
tests check the parent's protocol and decisions (who warms up when, which memory figure is
judged, when a pair falls back to process pairs), not a GPU's behaviour."""

import json
import os

import pytest
from stand_ins import new_children

import fake_nvml as F
from pytest_mxperf.measure import duet
from pytest_mxperf.workers import convergence
from pytest_mxperf.model.measurement import METRICS
from pytest_mxperf.model.workload import Workload

W = Workload(model="resnet50_v2", mode="score", batch_size=32, contexts=("gpu:0",))
CUDA = {"gpus": 1, "features": ["CUDA", "CUDNN", "NCCL"], "cudnn": "8.5.0"}
MIB = 2 ** 20


def _children():
    return new_children()


@pytest.fixture
def box(tmp_path, monkeypatch):
    """box(other_mib=0, processes=True) -> the pool directory: this process's pynvml is a
    P100 box (16280 MiB) whose GPU 0 lists the stand-in workers' pools as its compute
    processes (and ``other_mib`` used by another tenant); ``processes=False``: NVML does
    not support the per-process query there."""
    def make(other_mib=0, processes=True):
        pools = tmp_path / "pools"
        pools.mkdir(exist_ok=True)
        spec = F.p100_pcie_box()
        d = spec["devices"][0]
        d["processes_dir"] = str(pools)
        d["volatile"]["memory_used_bytes"] = int(other_mib * MIB)
        if not processes:
            d["unsupported"] = ["processes"]
        F.use_in_process(monkeypatch, F.write(spec, tmp_path / "nvml.json"))
        return pools
    return make


def _side(make_stub_python, name, pools, mib, other_mib=0, **extra):
    return make_stub_python(name, **dict(CUDA, gpu_pool_dir=str(pools), gpu_memory_mib=mib,
                                         gpu_other_mib=other_mib, **extra))


def test_a_gpu_duet_warms_up_one_side_at_a_time_and_judges_each_process_own_memory(
        make_stub_python, box, monkeypatch):
    pools = box(other_mib=1000)
    monkeypatch.setenv("MXNET_CUDNN_AUTOTUNE_DEFAULT", "2")
    cand = _side(make_stub_python, "cand", pools, 3000, other_mib=1000, warmup_seconds=0.3)
    ref = _side(make_stub_python, "ref", pools, 3100, other_mib=1000, warmup_seconds=0.3)
    c, r = duet.run_pair(W, candidate=cand, reference=ref, seed=1, candidate_first=False, time_budget=0.5,
                         memory_limit=None)
    assert c.ok and r.ok, (c.message, r.message)
    # the side that runs first warms up first, alone; the other starts only after it ended
    assert r.meta["duet"]["ran_first"] and r.meta["duet"]["warmup_turn"] == 1
    assert c.meta["duet"]["warmup_turn"] == 2
    first, second = r.meta["warmup_window"], c.meta["warmup_window"]
    assert first["alone"] is True and second["alone"] is True
    assert first["started"] < first["ended"] <= second["started"] < second["ended"]
    assert r.meta["duet"]["warmup_window"] == first and c.meta["duet"]["warmup_window"] == second
    # the autotune setting in effect, the cuDNN version, and that it autotuned alone, per side
    for side in (c, r):
        choice = side.meta["cudnn_choice"]
        assert choice["autotune"] == "2" and choice["autotune_set_by"] == "MXNET_CUDNN_AUTOTUNE_DEFAULT"
        assert choice["meaning"].startswith("fastest: cudnnFind* times each algorithm")
        assert choice["cudnn_version"] == "8.5.0" and choice["warmed_up_alone"] is True
        assert choice["algorithms"] is None
    # judged: each process's own memory (NVML per PID), never the device's
    assert c.figures["gpu_memory_mib"] == 3000.0 and r.figures["gpu_memory_mib"] == 3100.0
    assert c.meta["duet"]["gpu_memory"]["after_warmup"] == 3000.0
    assert c.meta["duet"]["gpu_memory"]["after_rounds"] == 3000.0
    assert "nvmlDeviceGetComputeRunningProcesses" in c.meta["duet"]["gpu_memory"]["source"]
    # the device-wide reading (the other tenant and, for the second side, the partner's pool
    # in it) is shown under its own name, not judged
    assert r.figures["gpu_device_memory_used_mib"] == 1000.0 + 3100.0
    assert c.figures["gpu_device_memory_used_mib"] == 1000.0 + 3100.0 + 3000.0
    assert METRICS["gpu_device_memory_used_mib"].rule == "derived"
    assert METRICS["gpu_memory_mib"].rule == "growth"
    assert not _children()


def test_the_autotune_default_is_recorded_as_mxnets_when_unset(make_stub_python, box, monkeypatch):
    pools = box()
    monkeypatch.delenv("MXNET_CUDNN_AUTOTUNE_DEFAULT", raising=False)
    c, r = duet.run_pair(W, candidate=_side(make_stub_python, "cand", pools, 2000),
                         reference=_side(make_stub_python, "ref", pools, 2000), seed=0, time_budget=0.5,
                         memory_limit=None)
    assert c.ok and r.ok, (c.message, r.message)
    assert c.meta["duet"]["warmup_turn"] == 1 and r.meta["duet"]["warmup_turn"] == 2  # candidate_first
    for side in (c, r):
        assert side.meta["cudnn_choice"]["autotune"] == "1"
        assert side.meta["cudnn_choice"]["autotune_set_by"] == "MXNet's default"


def test_without_nvmls_per_process_figure_no_memory_figure_is_judged(make_stub_python, box):
    """NVML that cannot list processes (NotSupported): the device-wide reading is still
    shown, and no judged memory figure takes its place."""
    pools = box(processes=False)
    c, r = duet.run_pair(W, candidate=_side(make_stub_python, "cand", pools, 2000),
                         reference=_side(make_stub_python, "ref", pools, 2000), seed=0, time_budget=0.5,
                         memory_limit=None)
    assert c.ok and r.ok, (c.message, r.message)
    for side in (c, r):
        assert "gpu_memory_mib" not in side.figures
        assert side.meta["duet"]["gpu_memory"]["after_rounds"] is None
    assert c.figures["gpu_device_memory_used_mib"] == 2000.0
    assert r.figures["gpu_device_memory_used_mib"] == 4000.0


def test_a_second_pool_that_would_not_fit_is_never_started(make_stub_python, box):
    """After the first side's warm-up NVML says it holds 9000 MiB and 7280 MiB are free on the
    16280-MiB P100: the second side is not told to warm up; the pair raises NoRoomForTwo."""
    pools = box()
    with pytest.raises(duet.NoRoomForTwo) as exc:
        duet.run_pair(W, candidate=_side(make_stub_python, "cand", pools, 9000),
                      reference=_side(make_stub_python, "ref", pools, 9000), seed=0, time_budget=0.5,
                      memory_limit=None)
    wanted = 9000 * (1 + duet.POOL_MARGIN) + duet.POOL_RESERVE_MIB
    assert str(exc.value) == ("two pools do not fit on gpu:0 (Tesla P100-PCIE-16GB): the candidate's warm-up "
                              f"holds 9000 MiB and 7280 MiB are free, {wanted:.0f} MiB wanted for the other side")
    assert len(os.listdir(pools)) == 1  # only the first side ever allocated
    assert not _children()


def test_a_second_warm_up_out_of_gpu_memory_is_no_room_not_a_failed_cell(make_stub_python, box):
    """NVML cannot say what the first side holds, so the second starts, and its warm-up runs
    out of GPU memory beside the first's pool (CUDA's error, through the real protocol)."""
    pools = box(processes=False)
    with pytest.raises(duet.NoRoomForTwo) as exc:
        duet.run_pair(W, candidate=_side(make_stub_python, "cand", pools, 9000),
                      reference=_side(make_stub_python, "ref", pools, 9000), seed=0, time_budget=0.5,
                      memory_limit=None)
    assert str(exc.value) == ("two pools do not fit on gpu:0 (Tesla P100-PCIE-16GB): the reference's warm-up "
                              "ran out of GPU memory beside the candidate's pool: MXNetError: cudaMalloc retry "
                              "failed: out of memory")
    assert not _children()


def test_a_cell_known_to_need_more_than_half_the_gpu_never_starts_a_duet(make_stub_python, box):
    pools = box()
    with pytest.raises(duet.NoRoomForTwo) as exc:
        duet.run_pair(W, candidate=_side(make_stub_python, "cand", pools, 9000),
                      reference=_side(make_stub_python, "ref", pools, 9000), seed=0, time_budget=0.5,
                      memory_limit=None, known_need_mib=9000.0)
    assert str(exc.value) == ("two pools do not fit on gpu:0 (Tesla P100-PCIE-16GB): 16280 MiB, and one process "
                              "of this cell held 9000 MiB")
    assert os.listdir(pools) == []  # no worker started
    assert not _children()


def test_the_fit_rules_at_their_edges():
    margin, reserve = duet.POOL_MARGIN, duet.POOL_RESERVE_MIB
    need = (16280 - reserve) / 2 / (1 + margin)
    assert duet.pools_fit_before(16280, need, "g") is None
    assert duet.pools_fit_before(16280, need + 1, "g") is not None
    assert duet.pools_fit_before(None, 9000, "g") is None and duet.pools_fit_before(16280, None, "g") is None
    assert duet.pools_fit_after("candidate", 4000, 4000 * (1 + margin) + reserve, "g") is None
    assert duet.pools_fit_after("candidate", 4000, 4000 * (1 + margin) + reserve - 1, "g") is not None
    assert duet.pools_fit_after("candidate", None, 100, "g") is None


def test_cpu_duets_warm_up_together_unless_asked(make_stub_python):
    """A CPU cell's sides warm up together (oneDNN does not time its kernels); the turn can
    still be asked for, and then holds on the CPU too."""
    cpu = Workload(model="lenet", mode="score", batch_size=4)
    cand, ref = make_stub_python("cand"), make_stub_python("ref")
    c, r = duet.run_pair(cpu, candidate=cand, reference=ref, seed=0, time_budget=0.5, memory_limit=None)
    assert c.ok and r.ok, (c.message, r.message)
    for side in (c, r):
        assert side.meta["duet"]["warmup_turn"] is None and side.meta["warmup_window"]["alone"] is False
        assert "gpu_memory" not in side.meta["duet"] and "cudnn_choice" not in side.meta
    c, r = duet.run_pair(cpu, candidate=cand, reference=ref, seed=0, time_budget=0.5, memory_limit=None,
                         solo_warmup=True)
    assert c.ok and r.ok, (c.message, r.message)
    assert (c.meta["duet"]["warmup_turn"], r.meta["duet"]["warmup_turn"]) == (1, 2)
    assert c.meta["warmup_window"]["ended"] <= r.meta["warmup_window"]["started"]
    assert not _children()


# ------------------------------------------------------------------------- a whole session

SCORE = """
import pytest

@pytest.mark.mxperf_grid(models=("resnet50_v2",), batch_sizes=(32,))
def test_score(mxperf, ctx, model, batch_size):
    mxperf.measure(model, batch_size, contexts=ctx)
"""
KEY = "score/resnet50_v2/b32/gpu:0/float32"


def _ab_session(pytester, make_stub_python, monkeypatch, cand_rate, ref_rate, mib):
    pools = pytester.path / "pools"
    pools.mkdir()
    spec = F.p100_pcie_box()
    spec["devices"][0]["processes_dir"] = str(pools)
    F.use_in_subprocesses(monkeypatch, F.write(spec, pytester.path / "nvml.json"))
    pytester.makepyfile(test_score=SCORE)
    side = dict(CUDA, gpus=2, gpu_pool_dir=str(pools), gpu_memory_mib=mib)
    r = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--perf-no-probe", "--perf-machine", "box", "-m", "gpu", "--perf-ctx", "gpu:0",
        "--perf-baselines-dir", str(pytester.path / "bl"), "--perf-report", "rep",
        "--perf-python", make_stub_python("cand", rate=cand_rate, **side),
        "--perf-reference", make_stub_python("ref", rate=ref_rate, **side))
    doc = json.loads((pytester.path / "rep" / "results.json").read_text())
    (rec,) = [x for x in doc["records"] if x["key"].startswith(KEY)]
    return r, r.stdout.str(), rec


def _fallback_line(out):
    lines = [x for x in out.splitlines() if "its A/B pairs run as process pairs" in x]
    assert len(lines) == 1, out  # said once, however many pairs the cell gets
    return lines[0]


@pytest.mark.parametrize("cand_rate,verdict,ret", [
    (300.0, "unchanged", pytest.ExitCode.OK),
    (270.0, "regression", pytest.ExitCode.TESTS_FAILED),
])
def test_ab_two_pools_out_of_gpu_memory_fall_back_to_process_pairs(pytester, make_stub_python, monkeypatch,
                                                                  cand_rate, verdict, ret):
    """ResNet-50 b32 holding 9000 MiB a process on a 16280-MiB P100: the first duet pair finds
    no room for the second pool after the first side's warm-up; the session says so in one
    line and measures the cell's A/B pairs as process pairs, which judge it (the exit code is
    the verdict's)."""
    r, out, rec = _ab_session(pytester, make_stub_python, monkeypatch, cand_rate, 300.0, 9000)
    line = _fallback_line(out)
    assert line.startswith(f"mxperf: {KEY}/threads=auto: two pools do not fit on gpu:0 (Tesla P100-PCIE-16GB): "
                           "the reference's warm-up holds 9000 MiB and 7280 MiB are free"), line
    assert line.endswith("; its A/B pairs run as process pairs"), line
    assert r.ret == ret, out
    assert rec["ab"]["verdict"] == verdict, rec["ab"]
    runs, refs = rec["runs"], rec["reference_runs"]
    assert len(runs) == len(refs) == rec["ab"]["pairs"] >= 3
    assert all("duet" not in x["meta"] and x["meta"]["duet_fallback"] == line.removeprefix("mxperf: ")
               for x in runs + refs)
    assert all(x["status"] == "ok" for x in runs + refs)
    # a process pair's memory: the device-wide reading is shown (derived), never judged
    assert all(x["figures"]["gpu_device_memory_used_mib"] == 9000.0 for x in runs + refs)
    assert not any(k.endswith("#gpu_device_memory_used_mib") for k in rec.get("verdicts") or {})
    assert not _children()


def test_ab_a_gpu_duet_that_fits_records_warm_ups_autotune_and_own_memory(pytester, make_stub_python, monkeypatch):
    r, out, rec = _ab_session(pytester, make_stub_python, monkeypatch, 300.0, 300.0, 3000)
    assert r.ret == pytest.ExitCode.OK, out
    assert "its A/B pairs run as process pairs" not in out
    assert rec["ab"]["verdict"] == "unchanged"
    for c, ref in zip(rec["runs"], rec["reference_runs"]):
        turns = {c["meta"]["duet"]["warmup_turn"], ref["meta"]["duet"]["warmup_turn"]}
        assert turns == {1, 2}
        a, b = sorted((c["meta"]["warmup_window"], ref["meta"]["warmup_window"]), key=lambda w: w["started"])
        assert a["ended"] <= b["started"]
        for side in (c, ref):
            assert side["meta"]["cudnn_choice"]["warmed_up_alone"] is True
            assert side["meta"]["cudnn_choice"]["cudnn_version"] == "8.5.0"
            assert side["figures"]["gpu_memory_mib"] == 3000.0
    assert rec["verdicts"][f"{rec['key']}#gpu_memory_mib"]["kind"] == "unchanged"
    assert not _children()


def test_the_real_throughput_worker_takes_its_warm_up_turn():
    """Real MXNet on both sides (this interpreter twice, a CPU cell, the turn asked for): the
    real worker blocks until its turn, records its window, and the two windows are disjoint."""
    cpu = Workload(model="lenet", mode="score", batch_size=4)
    c, r = duet.run_pair(cpu, candidate=None, reference=None, seed=0, time_budget=0.5, solo_warmup=True)
    assert c.ok and r.ok, (c.message, r.message, c.stderr_tail[-3:], r.stderr_tail[-3:])
    first, second = c.meta["warmup_window"], r.meta["warmup_window"]
    assert first["alone"] and second["alone"]
    assert first["started"] < first["ended"] <= second["started"] < second["ended"]
    assert c.meta["duet"]["warmup_window"] == first and (c.meta["duet"]["warmup_turn"], r.meta["duet"]["warmup_turn"]) == (1, 2)
    assert "cudnn_choice" not in c.meta  # a CPU cell
    assert not _children()


def test_a_gpu_time_to_accuracy_duet_binds_one_side_at_a_time(make_stub_python, box):
    """A GPU time-to-accuracy duet (stand-ins of the convergence worker): the parent gives each
    side its turn to bind alone, as for any GPU duet, and then runs both to their end."""
    pools = box()
    tta = Workload(model="lenet", mode="convergence", batch_size=64, contexts=("gpu:0",))
    cand = _side(make_stub_python, "cand", pools, 900, epochs=2)
    ref = _side(make_stub_python, "ref", pools, 900, epochs=3)
    c, r = duet.run_pair(tta, candidate=cand, reference=ref, seed=0, module="pytest_mxperf.workers.convergence",
                         spec={}, figures=convergence.figures, memory_limit=None)
    assert c.ok and r.ok, (c.message, r.message)
    assert sorted((c.meta["duet"]["warmup_turn"], r.meta["duet"]["warmup_turn"])) == [1, 2]
    first, second = sorted((c, r), key=lambda x: x.meta["duet"]["warmup_turn"])
    assert first.meta["duet"]["warmup_window"]["ended"] <= second.meta["duet"]["warmup_window"]["started"]
    assert (c.meta["duet"]["rounds"], r.meta["duet"]["rounds"]) == (8, 12)
    assert not _children()
