"""Utilisation over the timed rounds, end to end (#25 part 4): a pytest session (pytester,
separate process) measures a GPU cell with the stand-in MXNet (tests/stub_worker.py) while
the stand-in pynvml (tests/fake_nvml.py) reads the GPU's utilisation by the phase the
stand-in worker is in ("" while it starts, "warmup", "timed", "after"). The worker stays in
each phase until NVML was read there n times, so what is read when is driven by count, not
by the clock. No GPU is involved and no figure here is a GPU's: the test checks which
readings the labels are computed over."""

import json

import fake_nvml as F

MEASURE = """
import pytest

@pytest.mark.mxperf_grid(models=("resnet50_v2",), batch_sizes=(32,))
def test_score(mxperf, ctx, model, batch_size):
    mxperf.measure(model, batch_size, contexts=ctx)
"""

WARMUP_READS, TIMED_READS = 10, 6


def _session(pytester, make_stub_python, monkeypatch, timed_pct, other_pct):
    """One measured process of a GPU cell whose GPU reads ``timed_pct`` % busy while the
    worker is in its timed phase and ``other_pct`` % before (start, warm-up) and after."""
    phase = pytester.path / "phase"
    box = F.p100_pcie_box()
    box["devices"][0]["volatile"]["gpu_util_pct"] = {"phase_file": str(phase), "values": {"timed": timed_pct},
                                                     "default": other_pct}
    F.use_in_subprocesses(monkeypatch, F.write(box, pytester.path / "nvml.json"))
    pytester.makepyfile(test_score=MEASURE)
    python = make_stub_python("gpu", rate=5000.0, gpus=2, features=["CUDA", "CUDNN", "NCCL"],
                              phases={"file": str(phase), "warmup_reads": WARMUP_READS,
                                      "timed_reads": TIMED_READS, "timed_min_s": 1.1})
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--perf-no-probe", "--perf-machine", "box",
                                      "--perf-baselines-dir", str(pytester.path / "bl"), "-m", "gpu",
                                      "--perf-ctx", "gpu:0", "--perf-python", python, "--perf-processes", "1",
                                      "--perf-report", "rep")
    out = r.stdout.str()
    assert r.ret == 0, out
    (rec,) = json.loads((pytester.path / "rep" / "results.json").read_text())["records"]
    (run,) = rec["runs"]
    full = (pytester.path / "rep" / "report.txt").read_text()  # the full report has the utilisation lines
    (line,) = [ln for ln in full.splitlines() if ln.startswith("utilisation ")]
    return run["meta"], line


def _gpu0(meta):
    (whole,) = meta["utilisation"]["gpus"]
    (timed,) = meta["utilisation"]["timed"]["gpus"]
    assert whole["index"] == timed["index"] == 0
    return whole, timed


def test_a_gpu_busy_in_its_timed_rounds_and_idle_around_them_is_not_host_bound(pytester, make_stub_python,
                                                                                monkeypatch):
    meta, line = _session(pytester, make_stub_python, monkeypatch, timed_pct=95, other_pct=0)
    ((w0, w1),) = meta["timed_windows"]
    whole, timed = _gpu0(meta)
    # every reading taken inside the window saw "timed" but at most the one that ran across
    # its end (the worker's protocol, tests/stub_worker.py), and at least TIMED_READS - 1 did
    assert timed["samples"] >= TIMED_READS - 1
    assert timed["gpu_util_mean_pct"] >= 95 * (timed["samples"] - 1) / timed["samples"]
    # the whole process also read the start and the WARMUP_READS of the warm-up, all 0%
    assert whole["samples"] >= timed["samples"] + WARMUP_READS
    assert whole["gpu_util_mean_pct"] < timed["gpu_util_mean_pct"]
    assert "host-bound" not in line and "too short" not in line
    assert f"GPU 0 {timed['gpu_util_mean_pct']:.0f}% busy" in line
    assert f"whole process: GPU 0 {whole['gpu_util_mean_pct']:.0f}%" in line


def test_a_gpu_idle_in_its_timed_rounds_is_host_bound(pytester, make_stub_python, monkeypatch):
    meta, line = _session(pytester, make_stub_python, monkeypatch, timed_pct=3, other_pct=95)
    whole, timed = _gpu0(meta)
    assert timed["samples"] >= TIMED_READS - 1
    assert timed["gpu_util_mean_pct"] <= (3 * (timed["samples"] - 1) + 95) / timed["samples"] < 50
    assert whole["gpu_util_mean_pct"] > timed["gpu_util_mean_pct"]
    assert (f"GPU 0 busy {timed['gpu_util_mean_pct']:.0f}% of the timed rounds (mean of {timed['samples']} "
            "readings inside them): input- or host-bound") in line


def test_a_stand_in_worker_without_phases_is_too_short_to_tell(pytester, make_stub_python, monkeypatch):
    """The stand-in without phases computes its rounds in an instant: its window holds no
    reading, and the line says so instead of guessing."""
    box = F.scripted(F.p100_pcie_box(), 0, gpu_util_pct=[95])
    F.use_in_subprocesses(monkeypatch, F.write(box, pytester.path / "nvml.json"))
    pytester.makepyfile(test_score=MEASURE)
    python = make_stub_python("gpu", rate=5000.0, gpus=2, features=["CUDA", "CUDNN", "NCCL"])
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--perf-no-probe", "--perf-machine", "box",
                                      "--perf-baselines-dir", str(pytester.path / "bl"), "-m", "gpu",
                                      "--perf-ctx", "gpu:0", "--perf-python", python, "--perf-processes", "1", "-v")
    out = r.stdout.str()  # -v: the full report, with the utilisation lines
    assert r.ret == 0, out
    (line,) = [ln for ln in out.splitlines() if ln.startswith("utilisation ")]
    assert "GPU 0: timed rounds too short to tell whether input- or host-bound" in line, line
    assert "host-bound, the GPU waits" not in line
