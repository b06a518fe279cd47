"""Throughput plots: one PNG per (model, mode), with baseline and documented curves."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_mxperf.model.measurement import CellMeasurement, RunResult
from pytest_mxperf.model.workload import Workload
from pytest_mxperf.output.plots import plot_throughput
from pytest_mxperf.store import baseline_store

pytest.importorskip("matplotlib")


def cell(model, batch, medians, mode="score"):
    w = Workload(model, mode=mode, batch_size=batch)
    return CellMeasurement(w, [RunResult(w, "ok", batches_per_round=1, round_seconds=[batch / m] * 3)
                               for m in medians])


def test_one_png_per_model_and_mode(tmp_path):
    cells = [cell("resnet50_v2", b, [10 * b ** 0.5 * f for f in (0.9, 1.0, 1.1)]) for b in (1, 2, 4, 8, 16)]
    cells += [cell("alexnet", b, [30.0 * b, 31.0 * b]) for b in (1, 8)]
    cells += [cell("lenet", 64, [5000.0], mode="train")]
    baseline_store.update("m", cells[:3], {}, {}, baselines_dir=tmp_path / "bl")
    baseline = baseline_store.BaselineStore(tmp_path / "bl").load("m")
    paths = plot_throughput([c.to_dict() for c in cells], baseline, tmp_path / "plots")
    names = sorted(p.name for p in paths)
    assert names == ["throughput-alexnet-score.png", "throughput-lenet-train.png", "throughput-resnet50_v2-score.png"]
    for p in paths:
        assert Path(p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and Path(p).stat().st_size > 5000


def test_no_baseline_and_cell_objects(tmp_path):
    paths = plot_throughput([cell("inception-bn", 4, [70.0, 75.0])], None, tmp_path)
    assert len(paths) == 1 and paths[0].exists()
    assert plot_throughput([], None, tmp_path / "empty") == []


def test_other_modes_and_missing_medians_are_not_plotted(tmp_path):
    kv = Workload("resnet50_v2", mode="kvstore", batch_size=8)
    records = [CellMeasurement(kv, [RunResult(kv, "ok", batches_per_round=1, round_seconds=[0.1])]).to_dict(),
               CellMeasurement(Workload("alexnet", batch_size=8), [RunResult(Workload("alexnet", batch_size=8), "oom",
                                                                            message="out of memory")]).to_dict()]
    assert plot_throughput(records, None, tmp_path) == []


def test_a_session_with_nothing_to_plot_does_not_import_matplotlib(tmp_path):
    """matplotlib's import costs about a CPU-second a session: only one that plots pays it."""
    code = ("import json, sys\nfrom pytest_mxperf.output.plots import plot_throughput\n"
            "paths = plot_throughput(json.load(open(sys.argv[1])), None, sys.argv[2])\n"
            "print([p.name for p in paths], 'matplotlib' in sys.modules)")

    def plotted(name, w):  # (the PNGs written, whether matplotlib was imported) in a fresh interpreter
        (tmp_path / name).write_text(json.dumps(
            [CellMeasurement(w, [RunResult(w, "ok", batches_per_round=1, round_seconds=[0.1])]).to_dict()]))
        r = subprocess.run([sys.executable, "-c", code, str(tmp_path / name), str(tmp_path / "out")],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout.split()
    assert plotted("kvstore.json", Workload("resnet50_v2", mode="kvstore", batch_size=8)) == ["[]", "False"]
    assert plotted("score.json", Workload("alexnet", batch_size=8)) == ["['throughput-alexnet-score.png']", "True"]
