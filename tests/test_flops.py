"""zoo/flops.py (FLOPs per sample, achieved GFLOP/s, fraction of the peak) and how the parent
turns a cell's throughput into the derived figures ``gflops`` and ``pct_of_peak``
(measurement.with_flop_figures, fixture.Measurer), with the peak measured once per session.
No worker runs here: the cell's processes and the peak are stand-ins."""

import sys

import pytest

from pytest_mxperf.measure import fixture
from pytest_mxperf.measure import peak as peak_module
from pytest_mxperf.model.options import PerfOptions
from pytest_mxperf.measure.scheduler import MoreToMeasure
from pytest_mxperf.model.measurement import METRICS, CellMeasurement, RunResult, with_flop_figures
from pytest_mxperf.measure.session import PerfSession
from pytest_mxperf.model.workload import Workload
from pytest_mxperf.zoo import ModelSpec, flops, get_model

SPEC = ModelSpec(name="toy", table_column=None, input_shape=(3, 8, 8), num_classes=10, params=1000,
                 macs=250_000_000, builder="x:y", description="a constructed spec")


def test_flops_per_sample_is_twice_the_macs_and_three_times_that_for_training():
    assert flops.flops_per_sample(SPEC, "score") == 500_000_000
    assert flops.flops_per_sample(SPEC, "latency") == 500_000_000
    assert flops.flops_per_sample(SPEC, "train") == 1_500_000_000
    assert flops.forward_flops_per_sample(SPEC) == SPEC.flops_per_image
    with pytest.raises(ValueError, match="no FLOP count for mode 'kvstore'"):
        flops.flops_per_sample(SPEC, "kvstore")


def test_achieved_gflops_and_fraction_of_peak():
    # 40 samples/s of 0.5 GFLOP = 20 GFLOP/s; on an 80 GFLOP/s peak that is a quarter
    g = flops.achieved_gflops(40.0, flops.flops_per_sample(SPEC, "score"))
    assert g == pytest.approx(20.0)
    assert flops.fraction_of_peak(g, 80.0) == pytest.approx(0.25)
    assert flops.fraction_of_peak(g, None) is None
    assert flops.fraction_of_peak(g, 0.0) is None
    assert flops.model_fraction_of_peak(SPEC, "train", 40.0, 120.0) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        flops.achieved_gflops(-1.0, 1.0)


def test_zoo_names_are_accepted():
    r50 = get_model("resnet50_v2")
    assert flops.flops_per_sample("resnet50_v2", "score") == 2.0 * r50.macs
    assert flops.flops_per_sample("resnet50_v2", "score") == pytest.approx(8.178e9, rel=1e-3)


# --------------------------------------------------------------------------- derived figures

def _run(w, seconds_per_batch=(0.5, 0.5, 0.6), status="ok"):
    return RunResult(workload=w, status=status, batches_per_round=2,
                     round_seconds=[2 * s for s in seconds_per_batch] if status == "ok" else [],
                     message="" if status == "ok" else "boom")


def test_flop_figures_are_derived_from_the_throughput_as_new_values():
    w = Workload("resnet50_v2", "score", 8)
    measured = [_run(w), _run(w, (0.25, 0.25)), _run(w, status="crash")]
    runs = [with_flop_figures(r, 1e9, peak_gflops=64.0) for r in measured]
    assert all(m.figures == {} for m in measured)   # the measured processes are left as they were
    assert [r.process for r in runs] == [m.process for m in measured]  # the same processes
    # 8 images / 0.5 s = 16 img/s of 1 GFLOP each; 8 / 0.25 s = 32 img/s
    assert runs[0].figures["gflops"] == pytest.approx(16.0)
    assert runs[0].figures["pct_of_peak"] == pytest.approx(25.0)
    assert runs[1].figures["pct_of_peak"] == pytest.approx(50.0)
    assert runs[2].figures == {}
    assert METRICS["gflops"].rule == METRICS["pct_of_peak"].rule == "derived"
    assert not METRICS["pct_of_peak"].judged
    cell = CellMeasurement(w, runs[:2])
    assert {m.name for m in cell.metrics()} >= {"throughput", "gflops", "pct_of_peak"}
    assert cell.figure("gflops") == pytest.approx(24.0)

    no_peak = with_flop_figures(_run(w), 1e9, peak_gflops=None)
    assert "gflops" in no_peak.figures and "pct_of_peak" not in no_peak.figures
    other = with_flop_figures(_run(Workload("resnet50_v2", "kvstore", 8)), 1e9, 64.0)
    assert other.figures == {}


class _Fake:
    """Stand-ins for the cell's worker processes and the peak worker."""

    def __init__(self, monkeypatch, session, seconds_per_batch=0.5, peak=None):
        self.peak_calls = 0
        self.cells = []

        def run_processes(w, run, processes=None):
            cell = CellMeasurement(w, [_run(w, (seconds_per_batch,) * 3), _run(w, (seconds_per_batch,) * 3)])
            self.cells.append(cell)
            return cell

        self.peak_asked = []

        def measure_peak(s, context="cpu:0", dtype="float32"):
            self.peak_calls += 1
            self.peak_asked.append((context, dtype))
            return dict(peak, context=context, dtype=dtype)

        monkeypatch.setattr(session.scheduler, "run_processes", run_processes)
        monkeypatch.setattr(session.scheduler, "run_more", lambda w, run, more: run_processes(w, run, more.count))
        monkeypatch.setattr(peak_module, "measure_peak", measure_peak)


def _measurer(session):
    props = {}
    m = fixture.Measurer(session.scheduler, session.ledger, "test_node",
                         record_property=lambda k, v: props.__setitem__(k, v))
    return m, props


def test_each_cell_gets_gflops_and_pct_of_the_peak_measured_once(monkeypatch):
    session = PerfSession(PerfOptions(machine_probe=False), environ={})
    fake = _Fake(monkeypatch, session, peak={"status": "ok", "peak_gflops": 100.0, "omp_num_threads": "2"})
    m, props = _measurer(session)
    assert session.scheduler._peaks == {}  # nothing measured before a cell needs it
    cell = m.measure("resnet50_v2", 8)
    fps = flops.flops_per_sample("resnet50_v2", "score")
    assert cell.figure("gflops") == pytest.approx(16.0 * fps / 1e9)  # 8 images / 0.5 s
    assert cell.figure("pct_of_peak") == pytest.approx(16.0 * fps / 1e9)  # of 100 GFLOP/s
    train = m.measure("resnet50_v2", 8, mode="train")
    assert train.figure("gflops") == pytest.approx(3 * cell.figure("gflops"))
    int8 = m.measure("resnet50_v2", 8, dtype="int8")
    # int8 operations are not a fraction of the float32 peak: GFLOP/s alone
    assert int8.figure("gflops") == pytest.approx(cell.figure("gflops")) and int8.figure("pct_of_peak") is None
    assert fake.peak_calls == 1 and session.scheduler._peaks["cpu:0/float32"]["peak_gflops"] == 100.0
    shown = [f for f in session.ledger.findings if f.name.startswith("hardware limit")]
    assert [f.name for f in shown] == [f"hardware limit {c.workload.key()}" for c in (cell, train, int8)]
    assert shown[0].figures == {"gflops": round(cell.figure("gflops"), 2), "peak_gflops": 100.0,
                                "pct_of_peak": round(cell.figure("pct_of_peak"), 1)}
    assert "int8 operations per second, shown alone" in shown[2].note and "pct_of_peak" not in shown[2].figures
    assert props["mxperf_gflops"] == round(int8.figure("gflops"), 2)
    # the gate's re-measurement gets the same derived figures
    again = session.ledger.records[0].remeasure(MoreToMeasure(cell.workload.key(), 2))
    assert again.figure("pct_of_peak") == pytest.approx(cell.figure("pct_of_peak"))
    assert fake.peak_calls == 1


def test_cells_without_a_count_or_a_cpu_peak(monkeypatch):
    session = PerfSession(PerfOptions(machine_probe=False), environ={})
    fake = _Fake(monkeypatch, session, peak={"status": "crash", "peak_gflops": None, "message": "no MXNet"})
    m, _ = _measurer(session)
    cell = m.measure("alexnet", 4)
    assert cell.figure("gflops") > 0 and cell.figure("pct_of_peak") is None
    assert "peak not measured: crash: no MXNet" in session.ledger.findings[-1].note
    assert fake.peak_calls == 1
    w = Workload("mlp", "kvstore", 4)
    m.measure_module("some.worker", {}, w, lambda p: {})  # not a pass of a network: no FLOPs
    assert fake.cells[-1].figure("gflops") is None and len(session.ledger.findings) == 1


def test_no_peak_measures_no_peak_and_shows_gflops_alone(monkeypatch):
    """--perf-no-peak: no peak worker starts; a cell's GFLOP/s are shown without a share of a
    peak, and the line says why."""
    session = PerfSession(PerfOptions(machine_probe=False, machine_peak=False), environ={})
    fake = _Fake(monkeypatch, session, peak={"status": "ok", "peak_gflops": 100.0})
    m, _ = _measurer(session)
    cell = m.measure("resnet50_v2", 8)
    assert cell.figure("gflops") > 0 and cell.figure("pct_of_peak") is None
    assert fake.peak_calls == 0 and session.scheduler._peaks == {}
    (shown,) = session.ledger.findings
    assert "pct_of_peak" not in shown.figures and "peak not measured (--perf-no-peak)" in shown.note


def test_the_peak_worker_failing_is_a_status_not_an_exception(tmp_path):
    fake_python = tmp_path / "python"
    fake_python.write_text("#!/bin/sh\nexit 3\n")
    fake_python.chmod(0o755)
    session = PerfSession(PerfOptions(machine_probe=False, python=str(fake_python), timeout=30), environ={})
    peak = peak_module.machine_peak(session.scheduler)
    assert peak["status"] == "crash" and peak["peak_gflops"] is None and peak["message"]
    assert peak_module.machine_peak(session.scheduler) is peak  # cached for the session
    assert session.scheduler._peaks == {"cpu:0/float32": peak}


def test_gpu_cells_are_set_against_their_gpus_peak_in_their_dtype(monkeypatch):
    """Stand-ins: no GPU here. Two float16 GPUs: 2 x the first GPU's float16 peak; a float32
    GPU cell asks for the float32 peak of its GPU; each peak measured once."""
    session = PerfSession(PerfOptions(machine_probe=False), environ={})
    fake = _Fake(monkeypatch, session, peak={"status": "ok", "peak_gflops": 1000.0, "fc_gflops": 1000.0})
    monkeypatch.setattr(session.scheduler, "gpu_unavailable_reason", lambda contexts: None)  # two stand-in GPUs
    m, _ = _measurer(session)
    fp16 = m.measure("resnet50_v2", 8, contexts=("gpu:0", "gpu:1"), dtype="float16")
    fps = flops.flops_per_sample("resnet50_v2", "score")
    assert fp16.figure("gflops") == pytest.approx(32.0 * fps / 1e9)  # 16 images / 0.5 s
    assert fp16.figure("pct_of_peak") == pytest.approx(100 * fp16.figure("gflops") / 2000.0)
    m.measure("resnet50_v2", 8, contexts=("gpu:0",))
    m.measure("resnet50_v2", 8, contexts=("gpu:0",), dtype="float16")
    assert fake.peak_asked == [("gpu:0", "float16"), ("gpu:0", "float32")]
    note = session.ledger.findings[0].note
    assert "peak: 2 x best round of float16 cuBLAS / cuDNN kernels through MXNet on gpu:0" in note
    assert session.ledger.findings[0].figures["peak_gflops"] == 2000.0


def test_flops_per_sample_of_cells():
    assert peak_module.cell_flops_per_sample(Workload("lenet", "latency", 1)) == 2.0 * get_model("lenet").macs
    assert peak_module.cell_flops_per_sample(Workload("lenet", "io", 1)) is None
    own = Workload("my_net-abc123", "train", 1, source='{"ref": {}}')
    assert peak_module.cell_flops_per_sample(own) is None  # nothing counted yet
    counted = _run(own).with_facts(macs_per_sample=1_000_000)
    uncounted = _run(own).with_facts(macs_unknown=["ValueError: could not infer shapes"])
    assert peak_module.cell_flops_per_sample(own, [uncounted, counted]) == 6_000_000  # 3 x 2 x MACs: training
    assert peak_module.cell_flops_per_sample(own, [uncounted]) is None
    assert "mxnet" not in sys.modules
