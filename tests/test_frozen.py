"""What was measured is never changed after: a process's result, its facts, a cell's
measurement and a cell's record are immutable, and whatever is derived later (a machine-state
label, TF32, GFLOP/s, a floor's outcome) is a new value beside them (issue 34, part 1)."""

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_mxperf.judge import floors
from pytest_mxperf.measure.session import CellRecord, FloorCheck, merge_records
from pytest_mxperf.model import run_facts
from pytest_mxperf.model.measurement import CellMeasurement, RunResult, with_flop_figures
from pytest_mxperf.model.workload import Workload
from pytest_mxperf.outcome.judging import label_machine_states

W = Workload("alexnet", batch_size=8)
PROBE = {"gemm_gflops": 100.0, "stream_gbps": 10.0}
SLOW = {"gemm_gflops": 40.0, "stream_gbps": 4.0}


def _run(seconds=0.5, **meta):
    return RunResult(W, "ok", batches_per_round=2, round_seconds=[seconds, seconds], figures={"peak_rss_mib": 900.0},
                     meta={"mxnet_version": "1.9.1", "env": {"OMP_NUM_THREADS": "2"}, **meta})


def test_a_process_result_refuses_every_assignment():
    r = _run()
    for field in dataclasses.fields(RunResult):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(r, field.name, getattr(r, field.name))
    with pytest.raises(TypeError):
        r.figures["throughput"] = 1.0          # figures: a read-only mapping
    with pytest.raises(TypeError):
        r.meta["mxnet_version"] = "1.8.0"      # a fact by key
    with pytest.raises(AttributeError):
        r.meta.mxnet_version = "1.8.0"         # a fact by attribute
    with pytest.raises(AttributeError):
        r.round_seconds.append(1.0)            # rounds: a tuple
    assert r.meta.mxnet_version == "1.9.1" and r.value("throughput") == pytest.approx(32.0)


def test_a_copy_with_more_facts_keeps_its_rounds_figures_and_reads_its_own_memory():
    r = RunResult(W, "ok", batches_per_round=2, round_seconds=[0.5, 0.5], meta={"peak_rss_bytes": 2 ** 30})
    assert r.value("throughput") == pytest.approx(32.0) and r.value("peak_rss_mib") == 1024.0
    grown = r.with_facts(peak_rss_bytes=2 ** 31)   # a fact the memory figure reads: asked again
    assert grown.value("peak_rss_mib") == 2048.0 and r.value("peak_rss_mib") == 1024.0
    assert grown.value("throughput") == pytest.approx(32.0) and grown.process == r.process
    assert grown.meta.peak_rss_bytes == 2 ** 31 and r.meta.peak_rss_bytes == 2 ** 30


def test_facts_are_typed_attributes_declared_in_run_facts():
    r = _run(import_seconds=1.5, num_gpus="two")
    assert r.meta.import_seconds == 1.5
    assert r.meta.num_gpus is None                       # declared int: a string is not read as one
    with pytest.raises(AttributeError, match="not a declared fact"):
        r.meta.no_such_fact
    with pytest.raises(KeyError, match="undeclared"):
        r.with_facts(no_such_fact=1)


def test_the_facts_are_a_copy_of_what_they_were_made_from():
    env = {"OMP_NUM_THREADS": "2"}
    r = RunResult(W, "ok", batches_per_round=1, round_seconds=[0.1], meta={"env": env})
    env["OMP_NUM_THREADS"] = "64"
    assert r.env == {"OMP_NUM_THREADS": "2"}
    # as deep as JSON goes: dicts in lists in dicts, tuples kept tuples
    state = {"before": [{"gflops": 1.0}], "pair": (1, [2])}
    r = r.with_facts(machine_state=state)
    state["before"][0]["gflops"] = 9.0
    state["pair"][1].append(3)
    assert r.machine_state == {"before": [{"gflops": 1.0}], "pair": (1, [2])}
    out = r.meta.to_dict()
    out["machine_state"]["before"].clear()
    assert r.machine_state["before"] == [{"gflops": 1.0}]


def test_a_cell_and_its_record_refuse_every_assignment():
    cell = CellMeasurement(W, [_run()])
    rec = CellRecord("t", cell)
    for obj, cls in ((cell, CellMeasurement), (rec, CellRecord)):
        for field in dataclasses.fields(cls):
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(obj, field.name, getattr(obj, field.name))
    assert isinstance(cell.runs, tuple)


def test_derived_facts_and_figures_are_new_values_of_the_same_process():
    r = _run()
    flops = with_flop_figures(r, 1e9, peak_gflops=64.0)
    labelled = r.with_machine_state(PROBE, SLOW, None).labelled("slow-spell", "the probe fell")
    tf32 = r.with_facts(tf32={"in_use": False, "why": "CPU"})
    assert "gflops" not in r.figures and r.machine_state == {} and r.tf32 is None  # the measured one as it was
    assert flops.figures["gflops"] == pytest.approx(32.0)
    assert labelled.state == "slow-spell" and labelled.machine_state["probe_after"] == SLOW
    assert tf32.tf32 == {"in_use": False, "why": "CPU"}
    assert {flops.process, labelled.process, tf32.process} == {r.process}


def test_labelling_returns_new_cells_and_leaves_the_measured_ones():
    a = _run().with_machine_state(PROBE, PROBE, None)
    b = _run().with_machine_state(SLOW, SLOW, None)
    cells = {W.key(): CellRecord("t", CellMeasurement(W, [a, b]))}
    labelled, reference = label_machine_states(cells, None)
    assert reference is not None
    assert [r.state for r in cells[W.key()].cell.runs] == [None, None]
    assert [r.state for r in labelled[W.key()].cell.runs] == ["quiet", "slow-spell"]


def test_merging_counts_a_shared_process_once_by_its_id_and_lays_the_floor_check_on():
    shared = _run(0.5)
    again = dataclasses.replace(shared)       # an equal value: the same process
    other = _run(0.5)                         # equal figures, another process
    recs = [CellRecord("t::one", CellMeasurement(W, [shared])),
            CellRecord("t::two", CellMeasurement(W, [again, other]))]
    floor = floors.Floor(10.0, None, "legacy-sanity", None, 0.1, False, "")
    cells = merge_records(recs, [FloorCheck("t::two", W.key(), floor, "passed", "above its floor")])
    merged = cells[W.key()]
    assert [r.process for r in merged.cell.runs] == [shared.process, other.process]
    assert merged.floor == floor and merged.outcome == "passed" and merged.nodeids == ("t::one", "t::two")
    assert recs[1].floor is None and recs[1].outcome == "measured"   # the records as they were
    assert merge_records(recs) == merge_records(recs)                # pure: the same cells every call


def test_the_ledgers_cells_follow_every_record_and_check_added():
    from pytest_mxperf.measure.ledger import Ledger
    ledger = Ledger()
    first = _run(0.5)
    ledger.add(CellRecord("t::one", CellMeasurement(W, [first])))
    cells = ledger.cells()
    cells.clear()                                                    # the caller's dict, not the ledger's
    assert [r.process for r in ledger.cells()[W.key()].cell.runs] == [first.process]
    second = _run(0.4)
    ledger.add(CellRecord("t::one", CellMeasurement(W, [second])))
    assert [r.process for r in ledger.cells()[W.key()].cell.runs] == [first.process, second.process]
    floor = floors.Floor(10.0, None, "legacy-sanity", None, 0.1, False, "")
    ledger.settle(FloorCheck("t::one", W.key(), floor, "passed", "above its floor"))
    assert ledger.cells()[W.key()].outcome == "passed"


def test_the_package_writes_no_fact_by_key_and_merges_by_no_identity():
    root = Path(__file__).resolve().parent.parent / "pytest_mxperf"
    out = subprocess.run(["grep", "-rnE", r"\.meta\[[^]]+\]\s*=[^=]|\.meta\.(update|setdefault)\(", str(root)],
                         capture_output=True, text=True)
    assert out.returncode == 1 and not out.stdout, out.stdout
    session = (root / "measure" / "session.py").read_text()
    assert not re.search(r"\bid\(", session)


def test_every_fact_a_worker_may_write_is_declared_with_a_type():
    assert all(isinstance(f.type, type) for f in run_facts.FACTS)
    assert "mxnet" not in sys.modules
