"""One frozen outcome (issue 34, parts 3 and 4): the end of a session is one immutable value
whose failures are typed; ``output/`` renders every line of the screen, report.txt and
summary.md from it; the exit status comes from its failures, never from a line's text; a
writer that fails is a failure of its own and stops no other writer."""

import dataclasses
import errno
import re
from pathlib import Path

import pytest
import stand_ins
from stand_ins import no_profile_worker

from pytest_mxperf.cli import find_release
from pytest_mxperf.judge.verdict_record import Verdict
from pytest_mxperf.measure.ledger import NOT_REACHED, CellRecord, Event
from pytest_mxperf.measure.session import PerfSession, SessionContext
from pytest_mxperf.model import outcome as model
from pytest_mxperf.model.measurement import CellMeasurement, RunResult
from pytest_mxperf.model.options import PerfOptions, parse_fail_on
from pytest_mxperf.model.outcome import EXIT_FAILED, EXIT_PASSED, EXIT_WRITER, WRITER, Failure, SessionOutcome
from pytest_mxperf.model.workload import Workload
from pytest_mxperf.outcome import finish
from pytest_mxperf.measure.comparison import comparison_for
from pytest_mxperf.outcome.session_files import results_document
from pytest_mxperf.output import messages, report
from pytest_mxperf.store.results import Results

ROOT = Path(__file__).resolve().parent.parent
A, B = Workload("alexnet", batch_size=8), Workload("lenet", batch_size=1)


def _run(w, rate, **meta):
    return RunResult(w, "ok", batches_per_round=1, round_seconds=[w.total_batch / rate] * 3,
                     meta={"mxnet_version": "1.9.1", "env": {}, **meta}, wall_seconds=3.0)


def _by_hand():
    ctx = SessionContext(PerfOptions(deadline=600.0), {}, machine={"id": "box-1"})
    cells = {A.key(): CellRecord("t::a", CellMeasurement(A, [_run(A, 90.0), _run(A, 91.0)])),
             B.key(): CellRecord("t::b", CellMeasurement(B, [_run(B, 500.0), _run(B, 510.0)]))}
    verdicts = {A.key(): Verdict("regression", "worse by 10.0% (img/s)", change=-0.10, current_median=90.5,
                                 baseline_median=100.0),
                B.key(): Verdict("unchanged", "within the noise", change=0.01)}
    failures = (Failure("regression", 1, (A.key(),)), Failure("not-reached", 1, ("t::c",)))
    return SessionOutcome(ctx, cells, verdicts, failures, events=(Event(NOT_REACHED, "late", "t::c"),))


def test_an_outcome_made_by_hand_renders_the_screen_the_report_and_the_summary():
    out = _by_hand()
    screen = report.session_lines(out, exitstatus=0)
    assert screen[0].startswith("mxperf: FAILED: 1 regressed, 0 improved, 0 unclear, 1 unchanged of 2 cells")
    assert any(x.startswith(f"mxperf: REGRESSION {A.key()}: worse by 10.0%") for x in screen)
    assert any("failing the session: 1 confirmed regression(s) against baseline box-1" in x for x in screen)
    assert any("1 measuring test(s) not reached before --perf-deadline" in x for x in screen)
    full = report.full_lines(out)
    assert any(x.startswith("machine id: box-1") for x in full)
    assert any(x.startswith("score alexnet b8 cpu:0") and "regression" in x for x in full)
    doc = results_document(out)
    assert doc["session"]["failures"][0] == {"kind": "regression", "count": 1, "subjects": [A.key()], "detail": "",
                                             "busy": 0}
    assert doc["session"]["exit_status"] == EXIT_FAILED
    summary = "\n".join(Results.from_doc(doc).markdown_summary())
    assert A.key() in summary and "regression" in summary


def test_the_outcome_is_frozen_and_holds_no_rendered_text():
    out = _by_hand()
    with pytest.raises(dataclasses.FrozenInstanceError):
        out.failures = ()
    texts = [f for f in dataclasses.fields(SessionOutcome)]
    assert not any(f.name in ("messages", "headline", "details", "profile_lines") for f in texts)
    found = [p for p in (ROOT / "pytest_mxperf" / "outcome").glob("*.py")
             if re.search(r"[\"']mxperf: ", p.read_text())]
    assert not found, found


def test_the_exit_status_comes_from_the_failures_alone():
    assert model.exit_status(()) == EXIT_PASSED
    assert model.exit_status((Failure(WRITER, 1, ("history",), "disk full"),)) == EXIT_WRITER
    assert model.exit_status((Failure(WRITER), Failure("unresolved"))) == EXIT_FAILED   # a verdict outranks a writer
    for kind in ("regression", "unresolved", "floor", "answers", "not-reached", "no-gpu", "none-measured",
                 "no-baseline", "below-resolution", "unclear"):
        assert model.exit_status((Failure(kind),)) == EXIT_FAILED, kind


def test_the_exit_statuses_are_documented_and_find_release_reads_the_usable_ones():
    doc = (ROOT / "docs" / "how-it-measures.md").read_text()
    table = doc[doc.index("## Exit statuses"):]
    for status in model.EXIT_STATUSES:
        assert re.search(rf"^\| {status} \|", table, re.M), status
    assert set(find_release.USABLE_EXIT_CODES) == {EXIT_PASSED, EXIT_FAILED, EXIT_WRITER}


def test_no_line_of_text_decides_anything():
    """No ``startswith("mxperf: ...")`` or ``"mxperf: ..." in`` test remains in the package."""
    bad = []
    for p in (ROOT / "pytest_mxperf").rglob("*.py"):
        for n, line in enumerate(p.read_text().splitlines(), 1):
            if re.search(r"startswith\(\(?[\"']mxperf:|[\"']mxperf: [^\"']*[\"']\s+in\b", line):
                bad.append(f"{p.name}:{n}")
    assert not bad, bad


# ----------------------------------------------------------------------------- whole ends of sessions

def _session(tmp_path, runs_a, options=None, baseline_runs=None):
    """A session of two cells ended by the real ``end_session`` (a baseline recorded from
    ``baseline_runs`` when given)."""
    from pytest_mxperf.store import baseline_store
    from pytest_mxperf.store.baselines import Baseline
    options = options or PerfOptions(machine_probe=False)
    baseline = None
    if baseline_runs is not None:
        baseline = Baseline.new("box-1")
        for w, runs in baseline_runs.items():
            rec = baseline_store.summarize_cell(CellMeasurement(w, runs), requirement="mxnet==1.9.1")
            baseline.add_recordings({w.key(): rec}, {w.key(): w.to_dict()})
    s = PerfSession(options, environ={})
    s.begin({"id": "box-1"}, baseline, options, comparison_for(None))
    s.ledger.add(CellRecord("t::a", CellMeasurement(A, runs_a),
                            remeasure=lambda more: CellMeasurement(A, [_run(A, 80.0) for _ in range(more.count)])))
    s.ledger.add(CellRecord("t::b", CellMeasurement(B, [_run(B, 500.0 + i) for i in range(5)])))
    return s


def _baseline_runs():
    return {A: [_run(A, 100.0 + i) for i in range(5)], B: [_run(B, 500.0 + i) for i in range(5)]}


def test_rewording_or_dropping_every_line_leaves_every_exit_status(tmp_path, monkeypatch):
    """The same sessions ended twice: as they are, and with every renderer of output/
    rewording or dropping its lines; the exit statuses are the same."""
    cases = [
        (lambda: _session(tmp_path, [_run(A, 100.0 + i) for i in range(5)], baseline_runs=_baseline_runs()), EXIT_PASSED),
        (lambda: _session(tmp_path, [_run(A, 80.0 + i * 0.1) for i in range(5)], baseline_runs=_baseline_runs()),
         EXIT_FAILED),
        (lambda: _session(tmp_path, [_run(A, 100.0)], PerfOptions(machine_probe=False, fail_on=parse_fail_on(
            "+no-baseline"))), EXIT_FAILED),
    ]

    def end_all():
        statuses = []
        for make, _ in cases:
            with no_profile_worker():
                statuses.append(finish.end_session(make()).exit_status)
        return statuses
    as_said = end_all()
    assert as_said == [want for _, want in cases]
    for name in dir(messages):
        if callable(getattr(messages, name)) and not name.startswith("_") and name.endswith(("lines", "headline")):
            monkeypatch.setattr(messages, name, lambda *a, **k: [])
    monkeypatch.setattr(messages, "said", lambda what: "reworded")
    monkeypatch.setattr(messages, "PREFIX", "perf: ")
    assert end_all() == as_said


def test_a_writer_that_fails_stops_no_other_and_is_a_failure_of_its_own(tmp_path, monkeypatch):
    """--perf-update-baselines on a full disk: the baseline is not written (a typed WRITER
    failure naming it, exit status 6), the report files and the history entry are."""
    from pytest_mxperf.store import baseline_store

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(baseline_store.BaselineStore, "update", full)
    report_dir = tmp_path / "rep"
    options = PerfOptions(machine_probe=False, update_baselines=True, baselines_dir=str(tmp_path / "bl"),
                          report_dir=str(report_dir), history=str(tmp_path / "h.sqlite"))
    s = _session(tmp_path, [_run(A, 100.0 + i) for i in range(5)], options)
    with no_profile_worker():
        out = finish.end_session(s)
    assert out.exit_status == EXIT_WRITER
    (f,) = [f for f in out.failures if f.kind == WRITER]
    assert f.subjects == ("baseline",) and "No space left on device" in f.detail
    doc = Results.load(report_dir / "results.json")
    assert doc.session["complete"] and doc.session["failures"][0]["kind"] == WRITER
    assert {r["key"] for r in doc.records} == {A.key(), B.key()}
    assert out.written.history and (report_dir / "summary.md").exists()
    (line,) = messages.writer_lines(out)
    assert line.startswith("mxperf: the baseline was not recorded: OSError") and "No space left" in line


def test_the_screen_tells_a_cell_measured_another_way_from_one_the_baseline_does_not_hold():
    """A cell whose baseline recording was had another way (among other cells, or alone) is
    not compared, and the screen says so: not "not in this machine's baseline", which it is."""
    from pytest_mxperf.judge.verdict import NOT_COMPARED_UNLIKE
    from pytest_mxperf.output import report
    ctx = SessionContext(PerfOptions(), {}, machine={"id": "box-1"})
    cells = {A.key(): CellRecord("t::a", CellMeasurement(A, [_run(A, 90.0), _run(A, 91.0)])),
             B.key(): CellRecord("t::b", CellMeasurement(B, [_run(B, 500.0), _run(B, 510.0)]))}
    verdicts = {A.key(): Verdict("no-baseline", f"{NOT_COMPARED_UNLIKE} among other cells in worker processes, this "
                                                "session in processes of its own"),
                B.key(): Verdict("no-baseline", "no baseline for this cell")}
    lines = report.change_lines(SessionOutcome(ctx, cells, verdicts, ()))
    assert any(ln.startswith(f"mxperf: 1 cell not in this machine's baseline, not compared: {B.key()}")
               for ln in lines), lines
    assert any(ln.startswith(f"mxperf: 1 cell in this machine's baseline but measured another way than it recorded "
                             f"it (among other cells, or alone), not compared: {A.key()}") for ln in lines), lines


def test_a_figure_measured_among_other_cells_is_not_judged_against_one_measured_alone():
    """#37 part 2: baselines record how a cell's processes were had (among other cells, or
    each alone); a session that measured it the other way does not judge it against that
    recording (not even a 20% slowdown: it says why and to record again); the same way, or
    a recording from before the suite kept it, is judged."""
    from pytest_mxperf.outcome import judging
    from pytest_mxperf.store import baseline_store
    from pytest_mxperf.store.baselines import Baseline
    shared = {"index": 0, "of": 2}

    def baseline(runs, drop_field=False):
        b = Baseline.new("box-1")
        rec = baseline_store.summarize_cell(CellMeasurement(A, runs), requirement="mxnet==1.9.1")
        if drop_field:
            rec["suite"].pop("processes")
        b.add_recordings({A.key(): rec}, {A.key(): A.to_dict()})
        return b
    alone_base = [_run(A, 100.0 + i) for i in range(5)]
    shared_base = [_run(A, 100.0 + i, process_cells=shared) for i in range(5)]
    assert baseline_store.summarize_cell(CellMeasurement(A, alone_base))["suite"]["processes"] == "own"
    assert baseline_store.summarize_cell(CellMeasurement(A, shared_base))["suite"]["processes"] == "shared"
    slower = [_run(A, 80.0 + 0.1 * i, process_cells=shared) for i in range(5)]
    cells = {A.key(): CellRecord("t::a", CellMeasurement(A, slower))}
    v = judging.judge_baseline_once(cells, baseline(alone_base), None, set(), 0.05)[A.key()]
    assert v.kind == "no-baseline" and not v.failed
    assert "the baseline measured this cell in processes of its own, this session among other cells" in v.reason
    for b in (baseline(shared_base), baseline(alone_base, drop_field=True)):
        judged = judging.judge_baseline_once(cells, b, None, set(), 0.05)[A.key()]
        assert judged.kind == "suspect" and judged.change < -0.15, judged  # to be confirmed, as any slowdown


def test_an_input_pipeline_loaders_memory_is_read_its_own_way_and_the_other_cells_stay_comparable():
    """Two changes of how a loader cell's memory is read, each kept apart from the baselines
    recorded before it (measurement.memory_method): the ndarray loaders' worker keeps freed
    memory in glibc's heap (849 against 780 MiB on the Intel VM; an unchanged daily session read
    "REGRESSION ... peak_rss_mib: worse by 9.3%"), and a loader-alone cell's figure is now the
    peak less the pages that map files, as every other cell's (its test read the whole resident
    set, 261 MiB in one session and 339 in the next for the same imagerecord install, as the
    page cache mapped libmxnet.so in huge pages or not: an unchanged session read a
    regression). A recording from before is not compared on memory for those cells; every
    other cell's memory stays comparable with it, and every cell's throughput."""
    from pytest_mxperf.model.measurement import (MEMORY_METHOD, MEMORY_METHOD_HEAP_KEPT, MEMORY_METHOD_IO_LOADER,
                                                 memory_method)
    from pytest_mxperf.store import baseline_store
    from pytest_mxperf.store.baselines import Baseline

    io_nd = Workload("ndarray-3x224x224", mode="io", batch_size=32)
    io_fed = Workload("lenet+prefetch-ndarray-1x28x28", mode="io", batch_size=64)
    io_fed_rec = Workload("lenet+imagerecord-t1-1x28x28", mode="io", batch_size=64)
    io_rec = Workload("imagerecord-t1-3x224x224", mode="io", batch_size=32)
    assert [memory_method(w.key()) for w in (io_nd, io_fed, io_fed_rec, io_rec, A)] == [
        MEMORY_METHOD_IO_LOADER, MEMORY_METHOD_HEAP_KEPT, MEMORY_METHOD, MEMORY_METHOD_IO_LOADER, MEMORY_METHOD]
    memory = {"peak_rss_bytes": 800 << 20, "rss_file_bytes": 80 << 20}  # 720 MiB less the files
    # the suite's own loader test reads it so (perf_tests/test_input_pipeline.loader_figures)
    suite = stand_ins.repository_module("perf_tests/test_input_pipeline.py")
    assert suite.loader_figures({"samples_per_s": 100.0, "meta": memory}) == {"samples_per_s": 100.0,
                                                                              "peak_rss_mib": 720.0}
    assert suite.loader_figures({"samples_per_s": 100.0, "meta": {"peak_rss_bytes": 800 << 20}}) == {
        "samples_per_s": 100.0}   # no file share read: no memory figure, rather than the whole set

    def run(w, rate):
        if w.mode == "io":
            return RunResult(w, "ok", figures=suite.loader_figures({"samples_per_s": rate, "meta": memory}),
                             meta={"mxnet_version": "1.9.1", "env": {}, **memory}, wall_seconds=3.0)
        return _run(w, rate, **memory)

    b = Baseline.new("box-1")
    for w in (io_nd, io_rec, A):
        rec = baseline_store.summarize_cell(CellMeasurement(w, [run(w, 100.0 + i) for i in range(3)]))
        assert rec["suite"]["memory"] == memory_method(w.key())
        rec["suite"]["memory"] = MEMORY_METHOD  # recorded before either change
        b.add_recordings({w.key(): rec}, {w.key(): w.to_dict()})
    assert b.values(io_nd.key(), "peak_rss_mib") is None
    assert b.values(io_rec.key(), "peak_rss_mib") is None
    assert b.values(A.key(), "peak_rss_mib") == [720.0] * 3
    assert b.values(io_nd.key()) == [100.0, 101.0, 102.0] == b.values(io_rec.key())  # throughput as before


def test_a_converted_cells_memory_is_compared_only_with_one_read_after_its_conversion():
    """An int8 or bfloat16 cell's high-water mark starts again after its conversion
    (MEMORY_METHOD_CONVERTED; _SHARED among other cells): its figure is what the converted
    network holds running, no longer the float32 network and the calibration before it
    (ResNet-50 v2 b8 int8: 714 MiB read the old way, 514 the new). A recording from before is
    not compared on memory, one read the new way is, the throughput of both stays comparable,
    and float32 cells keep their method."""
    from pytest_mxperf.model.measurement import (MEMORY_METHOD, MEMORY_METHOD_CONVERTED,
                                                 MEMORY_METHOD_CONVERTED_SHARED, memory_method)
    from pytest_mxperf.store import baseline_store
    from pytest_mxperf.store.baselines import Baseline
    int8 = Workload("resnet50_v2", "score", 8, dtype="int8")
    bf16 = Workload("resnet50_v2", "latency", 1, dtype="bfloat16")
    fp32 = Workload("resnet50_v2", "score", 8)
    assert [memory_method(w.key()) for w in (int8, bf16, fp32)] == [
        MEMORY_METHOD_CONVERTED, MEMORY_METHOD_CONVERTED, MEMORY_METHOD]
    assert memory_method(int8.key(), "shared") == MEMORY_METHOD_CONVERTED_SHARED
    assert len({MEMORY_METHOD, MEMORY_METHOD_CONVERTED, MEMORY_METHOD_CONVERTED_SHARED}) == 3
    memory = {"peak_rss_bytes": 600 << 20, "rss_file_bytes": 88 << 20}  # 512 MiB less the files
    old, new = Baseline.new("box-1"), Baseline.new("box-1")
    for b, method in ((old, MEMORY_METHOD), (new, None)):
        for w in (int8, fp32):
            rec = baseline_store.summarize_cell(CellMeasurement(w, [_run(w, 60.0 + i, **memory) for i in range(3)]))
            assert rec["suite"]["memory"] == memory_method(w.key())
            if method is not None:
                rec["suite"]["memory"] = method  # recorded before the change
            b.add_recordings({w.key(): rec}, {w.key(): w.to_dict()})
    assert old.values(int8.key(), "peak_rss_mib") is None
    assert new.values(int8.key(), "peak_rss_mib") == [512.0] * 3
    assert old.values(fp32.key(), "peak_rss_mib") == new.values(fp32.key(), "peak_rss_mib") == [512.0] * 3
    assert old.values(int8.key()) == new.values(int8.key()) == [60.0, 61.0, 62.0]  # throughput as before


def test_a_shared_cells_memory_is_compared_only_with_one_read_after_the_freed_memory_was_given_back():
    """A cell measured among other cells in a worker process had a memory figure that held
    what the cells before it had freed (LeNet latency b1: 73 MiB first in its process, 210-214
    second; an allowance of 421 MiB). Its worker now gives that back before each cell
    (MEMORY_METHOD_SHARED): a shared recording from before is not compared on memory, one
    read the new way is (a growth beyond the allowance found), and a cell measured in
    processes of its own keeps its memory comparable with the recordings before it."""
    from pytest_mxperf.model.measurement import MEMORY_METHOD, MEMORY_METHOD_SHARED, memory_method
    from pytest_mxperf.outcome import judging
    from pytest_mxperf.store import baseline_store
    from pytest_mxperf.store.baselines import Baseline
    shared = {"index": 0, "of": 2}
    mem = {"peak_rss_bytes": 200 << 20, "rss_file_bytes": 50 << 20}   # 150 MiB less the files
    grown = {"peak_rss_bytes": 300 << 20, "rss_file_bytes": 50 << 20}  # 250 MiB
    assert memory_method(A.key(), "shared") == MEMORY_METHOD_SHARED
    # less what the cells before it left resident (carried_rss_bytes), read by the worker
    carried = _run(A, 100.0, process_cells={"index": 1, "of": 2}, carried_rss_bytes=40 << 20, **mem)
    assert carried.value("peak_rss_mib") == 110.0 and _run(A, 100.0, **mem).value("peak_rss_mib") == 150.0
    assert memory_method(A.key(), "own") == memory_method(A.key()) == MEMORY_METHOD

    def recorded(process_cells, method=None):
        runs = [_run(A, 100.0 + i, process_cells=process_cells, **mem) for i in range(5)]
        rec = baseline_store.summarize_cell(CellMeasurement(A, runs), requirement="mxnet==1.9.1")
        if method is not None:
            rec["suite"]["memory"] = method
        b = Baseline.new("box-1")
        b.add_recordings({A.key(): rec}, {A.key(): A.to_dict()})
        return b

    def memory_verdict(b, process_cells):
        runs = [_run(A, 100.0 + i, process_cells=process_cells, **grown) for i in range(5)]
        cells = {A.key(): CellRecord("t::a", CellMeasurement(A, runs))}
        return judging.judge_baseline_once(cells, b, None, set(), 0.05)[f"{A.key()}#peak_rss_mib"]

    new_shared = recorded(shared)
    assert new_shared.latest(A.key())["suite"]["memory"] == MEMORY_METHOD_SHARED
    assert new_shared.values(A.key(), "peak_rss_mib", "shared") == [150.0] * 5
    assert memory_verdict(new_shared, shared).kind == "regression"           # +100 MiB > max(24, 7.5)
    old_shared = recorded(shared, method=MEMORY_METHOD)
    assert old_shared.values(A.key(), "peak_rss_mib", "shared") is None
    assert memory_verdict(old_shared, shared).kind == "no-baseline"
    own = recorded(None, method=MEMORY_METHOD)                                # processes of its own, as before
    assert own.values(A.key(), "peak_rss_mib", "own") == [150.0] * 5
    assert memory_verdict(own, None).kind == "regression"
