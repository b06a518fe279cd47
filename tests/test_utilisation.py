"""Utilisation sampled from the parent: a worker's CPUs busy, its GPUs' utilisation (fake
NVML), and what the report says of them. No figure here is a speed claim: a busy loop is
busy and a sleeping process is not, whatever the machine's speed."""

import os
import subprocess
import sys
import time

import pytest

import fake_nvml as F
from pytest_mxperf.machine import utilisation
from pytest_mxperf.measure import runner
from pytest_mxperf.model.measurement import RunResult
from pytest_mxperf.measure.session import CellRecord
from pytest_mxperf.model.measurement import CellMeasurement
from pytest_mxperf.model.workload import Workload
from pytest_mxperf.output import report

SPIN = "import time\nend = time.time() + 2.0\nwhile time.time() < end:\n    pass\n"
SLEEP = "import time\ntime.sleep(2.0)\n"


def _sampled(code):
    proc = subprocess.Popen([sys.executable, "-c", code])
    s = utilisation.Sampler(proc.pid, interval=0.1).start()
    proc.wait()
    return s.stop()["cpu"]


def test_a_busy_process_is_busy_and_a_sleeping_one_is_not():
    busy, idle = _sampled(SPIN), _sampled(SLEEP)
    assert busy["samples"] >= 5 and idle["samples"] >= 5
    # the sleeper beside the spinner, both measured here and now: a fraction of its CPUs
    # (a fixed share would depend on how much CPU this machine leaves a spinner)
    assert idle["mean_cpus"] < busy["mean_cpus"] / 2, (idle, busy)
    assert busy["max_cpus"] <= 1.5, busy  # one thread: CPUs (not percent), a tick's rounding at most
    assert len(busy["timeline"]) <= utilisation.TIMELINE_POINTS


def test_a_worker_result_carries_its_utilisation(tmp_path):
    out = runner.run_process([sys.executable, "-c", "import sys, json, time; time.sleep(0.6); "
                              "json.dump({'status': 'ok', 'message': ''}, open(sys.argv[2], 'w'))"],
                             {"workload": Workload("lenet").to_dict()}, timeout=30)
    assert out.status == "ok" and out.utilisation["cpu"]["samples"] >= 1
    rr = runner.run_result(out, Workload("lenet"), {}, figures=lambda p: {})
    assert rr.meta["utilisation"]["cpu"]["samples"] >= 1


def test_gpu_utilisation_comes_from_nvml_for_the_workers_gpus(tmp_path, monkeypatch):
    box = F.scripted(F.p100_pcie_box(), 1, gpu_util_pct=[20, 30, 25])
    F.use_in_process(monkeypatch, F.write(box, tmp_path / "nvml.json"))
    env = dict(os.environ, CUDA_DEVICE_ORDER="PCI_BUS_ID")  # the worker's env: it names the fake NVML
    assert utilisation.gpu_indices(["gpu:1"], env) == [1]
    assert utilisation.gpu_indices(["cpu:0"], env) == []
    proc = subprocess.Popen([sys.executable, "-c", SLEEP.replace("2.0", "1.5")])
    summary = utilisation.Sampler(proc.pid, [1], interval=0.1, env=env).start()
    proc.wait()
    got = summary.stop()
    (g,) = got["gpus"]
    assert g["index"] == 1 and g["samples"] >= 2 and g["gpu_util_mean_pct"] < utilisation.HOST_BOUND_GPU_PCT
    # every reading carries its time.monotonic(): here a window over all of them (>= 1.4 s:
    # the sampler read from the start to within 0.1 s of the 1.5 s sleeper's end)
    stamps = [r[0] for r in got["readings"]["gpus"][1]]
    assert stamps == sorted(stamps) and stamps[-1] - stamps[0] >= utilisation.NVML_PERIOD_MAX_S
    assert utilisation.labels(got) == []  # no timed window: the whole process is not labelled
    timed = utilisation.with_timed_rounds(got, [[stamps[0], stamps[-1]]])
    assert "readings" not in timed and timed["timed"]["gpus"][0]["samples"] == len(stamps)
    (label,) = [t for t in utilisation.labels(timed) if "host-bound" in t]
    assert label.startswith("GPU 1 busy") and "of the timed rounds" in label


def _timed(cpu, gpu=None):
    """A summary with the timed rounds' figures (as ``with_timed_rounds`` leaves them)."""
    out = {"windows": 1, "seconds": 2.0, "cpu": {"samples": 8, "mean_cpus": cpu, "max_cpus": cpu}}
    out["gpus"] = [] if gpu is None else [{"index": 0, "samples": 8, "gpu_util_mean_pct": gpu,
                                           "gpu_util_max_pct": gpu, "mem_util_mean_pct": 12.0}]
    return out


def test_the_report_labels_host_bound_gpu_cells_and_underused_cpus():
    w = Workload("resnet50_v2", batch_size=32, contexts=("gpu:0",))
    whole_gpu = [{"index": 0, "samples": 20, "gpu_util_mean_pct": 80.0, "mem_util_mean_pct": 12.0,
                  "slowdown_reasons_seen": []}]
    gpu_run = RunResult(w, "ok", batches_per_round=1, round_seconds=[0.1],
                        meta={"utilisation": {"cpu": {"samples": 10, "mean_cpus": 1.0, "max_cpus": 1.0},
                                              "gpus": whole_gpu, "timed": _timed(1.0, 31.0)}})
    c = Workload("alexnet", batch_size=8)
    cpu_run = RunResult(c, "ok", batches_per_round=1, round_seconds=[0.1],
                        meta={"threads": {"openmp": 2},
                              "utilisation": {"cpu": {"samples": 10, "mean_cpus": 1.9, "max_cpus": 2.0},
                                              "timed": _timed(0.98)}})
    busy_run = RunResult(c, "ok", batches_per_round=1, round_seconds=[0.1],
                         meta={"threads": {"openmp": 2},
                               "utilisation": {"cpu": {"samples": 10, "mean_cpus": 0.9, "max_cpus": 2.0},
                                               "timed": _timed(1.95)}})
    lines = report.utilisation_lines([CellRecord("g", CellMeasurement(w, [gpu_run])),
                                      CellRecord("c", CellMeasurement(c, [cpu_run])),
                                      CellRecord("b", CellMeasurement(c, [busy_run]))])
    assert len(lines) == 2, lines
    # the timed rounds' figures speak, the whole process's GPU figure is shown beside them
    assert ("score resnet50_v2 b32 gpu:0 (median of 1 processes): timed rounds (2.00 s): CPUs busy 1.00"
            in lines[0]) and "GPU 0 31% busy" in lines[0] and "whole process: GPU 0 80%" in lines[0]
    assert "GPU 0 busy 31% of the timed rounds (mean of 8 readings inside them): input- or host-bound" in lines[0]
    assert "kept 0.98 CPUs busy on average over its timed rounds with 2 OpenMP threads" in lines[1]


def test_a_worker_without_timed_windows_is_shown_whole_and_not_labelled():
    w = Workload("resnet50_v2", batch_size=32, contexts=("gpu:0",))
    run = RunResult(w, "ok", batches_per_round=1, round_seconds=[0.1],
                    meta={"utilisation": {"cpu": {"samples": 10, "mean_cpus": 1.0, "max_cpus": 1.0},
                                          "gpus": [{"index": 0, "samples": 20, "gpu_util_mean_pct": 9.0,
                                                    "mem_util_mean_pct": 1.0, "slowdown_reasons_seen": []}]}})
    (line,) = report.utilisation_lines([CellRecord("g", CellMeasurement(w, [run]))])
    assert "whole process (no timed window marked): CPUs busy 1.00 (max 1.00), GPU 0 9% busy" in line
    assert "host-bound" not in line


def _gpu(t0, t1, pct, step=0.25):
    """NVML readings (t, GPU %, memory %) every ``step`` s in [t0, t1)."""
    n = int(round((t1 - t0) / step))
    return [(t0 + i * step, pct, pct // 2) for i in range(n)]


def _cpu(t0, t1, busy, step=0.25):
    """psutil readings (start, end, CPUs busy) tiling [t0, t1)."""
    n = int(round((t1 - t0) / step))
    return [(t0 + i * step, t0 + (i + 1) * step, busy) for i in range(n)]


# a worker's life on the monotonic clock: import / bind / warm-up 100-110 s, timed rounds
# 110-112 s, exit 112-113 s
IMPORT_WARMUP, TIMED, EXIT = (100.0, 110.0), (110.0, 112.0), (112.0, 113.0)


def test_readings_outside_the_timed_windows_are_left_out():
    gpu = {0: _gpu(*IMPORT_WARMUP, 0) + _gpu(*TIMED, 95) + _gpu(*EXIT, 0)}
    cpu = _cpu(*IMPORT_WARMUP, 1.0) + _cpu(*TIMED, 2.0) + _cpu(*EXIT, 1.0)
    cpu.append((111.9, 112.15, 0.5))  # a reading across the window's end: not wholly inside
    got = utilisation.over_windows(cpu, gpu, [list(TIMED)])
    assert got["windows"] == 1 and got["seconds"] == 2.0
    assert got["cpu"] == {"samples": 8, "mean_cpus": 2.0, "max_cpus": 2.0}
    (g,) = got["gpus"]
    # 110.0, 110.25, ..., 111.75 are inside [110, 112]; 112.0 (an exit reading of 0%) is on its edge
    assert g["samples"] == 9 and g["gpu_util_max_pct"] == 95
    assert g["gpu_util_mean_pct"] == round(95 * 8 / 9, 2)
    # over the whole process the same GPU would have read 14% busy: the label it used to get
    whole = [r[1] for r in gpu[0]]
    assert sum(whole) / len(whole) < utilisation.HOST_BOUND_GPU_PCT


def test_the_label_is_computed_over_the_timed_rounds():
    def summary(before, during):
        usage = {"interval_s": 0.25, "cpu": {"samples": 52},
                 "gpus": [{"index": 0, "samples": 52, "gpu_util_mean_pct": 0.0, "slowdown_reasons_seen": []}],
                 "readings": {"cpu": _cpu(100.0, 113.0, 1.0),
                              "gpus": {0: _gpu(*IMPORT_WARMUP, before) + _gpu(*TIMED, during)
                                       + _gpu(*EXIT, before)}}}
        return utilisation.with_timed_rounds(usage, [list(TIMED)])

    busy = summary(before=0, during=95)  # idle through import and warm-up, busy when timed
    assert "readings" not in busy and busy["timed"]["gpus"][0]["gpu_util_mean_pct"] > 80
    assert not [t for t in utilisation.labels(busy) if "host-bound" in t]
    idle = summary(before=95, during=3)  # busy around the timed rounds, idle in them
    (label,) = [t for t in utilisation.labels(idle) if "host-bound" in t]
    assert label.startswith("GPU 0 busy ") and "of the timed rounds" in label
    assert "timed rounds (2.00 s): CPUs busy 1.00" in utilisation.describe(idle)


@pytest.mark.parametrize("windows,readings,why", [
    # 0.5 s of timed work: shorter than NVML's longest sample period (1 s)
    ([[110.0, 110.5]], _gpu(100.0, 113.0, 95, step=0.05), "shorter than the sample period"),
    # a duet's rounds, 0.15 s each with the partner's turns between them: 2.4 s in all,
    # but no window long enough for a reading to be this side's
    ([[110.0 + 0.3 * i, 110.15 + 0.3 * i] for i in range(16)], _gpu(100.0, 116.0, 95, step=0.05),
     "duet rounds"),
    # a long enough window with three readings in it (fewer than MIN_TIMED_READINGS)
    ([[110.0, 111.2]], _gpu(100.0, 113.0, 95, step=0.5)[20:23], "three readings"),
])
def test_too_few_readings_inside_the_windows_is_too_short_to_tell(windows, readings, why):
    usage = {"interval_s": 0.25, "cpu": {"samples": 1, "mean_cpus": 1.0, "max_cpus": 1.0},
             "gpus": [{"index": 0, "samples": len(readings), "gpu_util_mean_pct": 95.0,
                       "slowdown_reasons_seen": []}],
             "readings": {"cpu": _cpu(100.0, 113.0, 1.0, step=1.0), "gpus": {0: readings}}}
    got = utilisation.with_timed_rounds(usage, windows)
    (g,) = got["timed"]["gpus"]
    assert g["samples"] < utilisation.MIN_TIMED_READINGS and "gpu_util_mean_pct" not in g and g["too_short"], why
    assert "too_short" in got["timed"]["cpu"]  # CPU readings of 1 s lie in no such window
    (label,) = utilisation.labels(got)
    assert label.startswith("GPU 0: timed rounds too short to tell whether input- or host-bound"), label
    assert "CPUs: too short to tell, GPU 0: too short to tell" in utilisation.describe(got)


def test_back_to_back_windows_are_one_and_malformed_ones_are_ignored():
    assert utilisation.merged_windows([[2.0, 3.0], [1.0, 1.999], [5.0, 6.0], [7.0, 6.0], "x", [1, None], True]) \
        == [[1.0, 3.0], [5.0, 6.0]]
    assert utilisation.merged_windows(None) == [] and utilisation.with_timed_rounds({"cpu": {}}, None) == {"cpu": {}}
    # ten rounds of 0.2 s back to back (a process) are one 2 s window: readings in it count
    rounds = [[110.0 + 0.2 * i, 110.2 + 0.2 * i - 0.001] for i in range(10)]
    got = utilisation.over_windows([], {0: _gpu(*TIMED, 95)}, rounds)
    assert got["windows"] == 1 and got["gpus"][0]["samples"] == 8


@pytest.mark.parametrize("summary", [None, {}, {"cpu": {"samples": 0}}])
def test_nothing_to_say_without_samples(summary):
    assert utilisation.labels(summary, 2) == [] and utilisation.describe(summary) is None


def test_a_real_workers_timed_window_lies_in_its_life_and_its_cpu_figure_is_the_windows():
    """A real MXNet LeNet worker: its timed window (CLOCK_MONOTONIC, read in the child) lies
    between the parent's readings before the start and after the end of the process, and the
    CPU figure of its timed rounds is the mean of the parent's readings wholly inside it. Its
    rounds take 4 s: with 2 s, a clean clone's test command (the parent's sampler sharing two
    vCPUs with the other xdist worker) counted 3 readings inside, fewer than the 4 a figure
    needs."""
    w = Workload("lenet", batch_size=8)
    env, defaults = runner.build_env(w)
    spec = runner.make_spec(w, time_budget=4.0)
    born = time.monotonic()
    out = runner.run_process(runner.worker_command(), spec, timeout=300, env=env)
    ended = time.monotonic()
    assert out.status == "ok", out.message
    rr = runner.run_result(out, w, env, defaults)
    ((w0, w1),) = rr.meta["timed_windows"]  # a process's rounds run back to back: one window
    assert born < w0 < w1 < ended
    assert w1 - w0 <= rr.meta["timed_seconds"]  # taken inside the rounds' perf_counter() readings
    readings = out.utilisation["readings"]["cpu"]
    inside = [busy for start, end, busy in readings if w0 <= start and end <= w1]
    timed = rr.meta["utilisation"]["timed"]
    assert "readings" not in rr.meta["utilisation"] and timed["windows"] == 1
    assert timed["cpu"]["samples"] == len(inside) >= utilisation.MIN_TIMED_READINGS
    assert timed["cpu"]["mean_cpus"] == round(sum(inside) / len(inside), 3)
    # the readings of import mxnet, bind and warm-up (before the window) are not in it
    assert [end for _, end, _ in readings if end <= w0] and len(inside) < len(readings)
