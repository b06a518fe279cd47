"""The terminal table: a cell that did not measure says why in its row."""

from pytest_mxperf.output import report
from pytest_mxperf.model.measurement import CellMeasurement, RunResult
from pytest_mxperf.measure.session import CellRecord
from pytest_mxperf.model.workload import Workload

W = Workload("lenet", batch_size=8)
WHY = "ValueError: Unknown initialization pattern for softmax_label"


def _rows(*cells):
    return report.cell_rows([CellRecord("t", c) for c in cells], {})


def test_the_row_of_a_cell_that_did_not_measure_carries_its_reason():
    ok = CellMeasurement(W, [RunResult(W, "ok", batches_per_round=1, round_seconds=[0.1] * 5)])
    failed = CellMeasurement(Workload("lenet", batch_size=4), [RunResult(W, "error", message=WHY)])
    timeout = CellMeasurement(Workload("lenet", batch_size=2), [RunResult(W, "timeout", message="")])
    rows = _rows(ok, failed, timeout)
    result = report.HEADER.index("result")
    assert rows[0][result] == "measured"  # a measured cell's row is as it was
    assert rows[1][0] == "score lenet b4 cpu:0" and rows[1][2] == "-"
    assert rows[1][result] == f"error: {WHY}"
    assert rows[2][result] == "timeout"  # no reason given: the status alone
    lines = report.summary_lines([CellRecord("t", c) for c in (ok, failed)], [], {})
    assert any(ln.startswith("score lenet b4 cpu:0") and ln.endswith(f"error: {WHY}") for ln in lines), lines


def test_a_long_or_multi_line_reason_is_cut_to_one_readable_line():
    long = "MXNetError: Check failed: " + "shape mismatch " * 20
    cell = CellMeasurement(W, [RunResult(W, "crash", message=long + "\nsecond line\n")])
    shown = _rows(cell)[0][report.HEADER.index("result")]
    assert shown.startswith("crash: MXNetError: Check failed: shape mismatch") and shown.endswith("…")
    assert len(shown) == len("crash: ") + report.REASON_WIDTH and "\n" not in shown
    assert report.reason("  a\n b ") == "a" and report.reason("") == ""
