"""Utilisation sampled from the parent: a worker's CPUs busy, its GPUs' utilisation (fake
NVML), and what the report says of them. No figure here is a speed claim: a busy loop is
busy and a sleeping process is not, whatever the machine's speed."""

import os
import subprocess
import sys

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
    assert idle["mean_cpus"] < 0.1  # sleeping takes no CPU on any machine
    assert busy["mean_cpus"] > idle["mean_cpus"] and busy["max_cpus"] > 0.3
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
    proc = subprocess.Popen([sys.executable, "-c", SLEEP.replace("2.0", "0.8")])
    summary = utilisation.Sampler(proc.pid, [1], interval=0.1, env=env).start()
    proc.wait()
    got = summary.stop()
    (g,) = got["gpus"]
    assert g["index"] == 1 and g["samples"] >= 2 and g["gpu_util_mean_pct"] < utilisation.HOST_BOUND_GPU_PCT
    (label,) = [t for t in utilisation.labels(got) if "host-bound" in t]
    assert label.startswith("GPU 1 busy")


def test_the_report_labels_host_bound_gpu_cells_and_underused_cpus():
    w = Workload("resnet50_v2", batch_size=32, contexts=("gpu:0",))
    gpu_run = RunResult(w, "ok", batches_per_round=1, round_seconds=[0.1],
                        meta={"utilisation": {"cpu": {"samples": 10, "mean_cpus": 1.0, "max_cpus": 1.0},
                                              "gpus": [{"index": 0, "samples": 20, "gpu_util_mean_pct": 31.0,
                                                        "mem_util_mean_pct": 12.0,
                                                        "slowdown_reasons_seen": []}]}})
    c = Workload("alexnet", batch_size=8)
    cpu_run = RunResult(c, "ok", batches_per_round=1, round_seconds=[0.1],
                        meta={"threads": {"openmp": 2},
                              "utilisation": {"cpu": {"samples": 10, "mean_cpus": 0.98, "max_cpus": 1.02}}})
    busy_run = RunResult(c, "ok", batches_per_round=1, round_seconds=[0.1],
                         meta={"threads": {"openmp": 2},
                               "utilisation": {"cpu": {"samples": 10, "mean_cpus": 1.95, "max_cpus": 2.0}}})
    lines = report.utilisation_lines([CellRecord("g", CellMeasurement(w, [gpu_run])),
                                      CellRecord("c", CellMeasurement(c, [cpu_run])),
                                      CellRecord("b", CellMeasurement(c, [busy_run]))])
    assert len(lines) == 2, lines
    assert "score resnet50_v2 b32 gpu:0 (median of 1 processes): CPUs busy 1.00" in lines[0] and "GPU 0 31% busy" in lines[0]
    assert "input- or host-bound" in lines[0]
    assert "kept 0.98 CPUs busy on average with 2 OpenMP threads" in lines[1]


@pytest.mark.parametrize("summary", [None, {}, {"cpu": {"samples": 0}}])
def test_nothing_to_say_without_samples(summary):
    assert utilisation.labels(summary, 2) == [] and utilisation.describe(summary) is None
