"""One screen (#26): the ``mxperf`` section of a session opens with its outcome in one line,
then what failed or changed, then one compact table; what is shown but not judged, every
figure's row and the machine's facts go to the full report (--perf-report DIR/report.txt,
or the terminal with -v), and pytest-benchmark's tables stay off the terminal unless asked.
Real pytest sessions (pytester, separate processes) of stand-in workers (tests/stub_worker.py):
the stand-in's figures are its configuration's, so nothing here depends on this machine's
speed."""

import json
import re

import pytest

import stand_ins

from types import SimpleNamespace

from pytest_mxperf.measure.session import CellRecord, Finding
from pytest_mxperf.model.measurement import CellMeasurement, RunResult
from pytest_mxperf.model.workload import Workload
from pytest_mxperf.output import report

CELLS = """
import pytest

@pytest.mark.mxperf_grid(models={models!r}, batch_sizes=(8,))
def test_cells(mxperf, ctx, model, batch_size):
    mxperf.expect_ok(mxperf.measure(model, batch_size, contexts=ctx))
"""
FIVE = ("lenet", "mlp", "alexnet", "resnet50_v2", "inception-bn")
#: what the first lines of a screen are held to: everything a user needs is in them
FIRST = 25
DATE = r"\d{4}-\d\d-\d\d"


def _session(pytester, make_stub_python, name, models=("lenet", "mlp"), *args, **stub):
    pytester.makepyfile(test_cells=CELLS.format(models=tuple(models)))
    python = make_stub_python(name, **dict({"rate": 100.0, "peak_gflops": 200.0}, **stub))
    r = stand_ins.session(pytester,
        "-p", "no:cacheprovider", "-m", "cpu", "--perf-ctx", "cpu", "--perf-machine", "box", "--perf-no-probe",
        "--perf-baselines-dir", str(pytester.path / "bl"), "--perf-store", "none",
        "--perf-python", python, *args)
    if "--perf-update-baselines" in args and r.ret == 0:  # its setup found in the venv cache, as a first build leaves it
        stand_ins.recorded_setup_is(pytester.path, pytester.path / "bl", python, python)
    return r


def _screen(out: str):
    """The lines of the ``mxperf`` section, up to the next section of pytest's."""
    lines = out.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("=") and " mxperf " in x)
    end = next((i for i in range(start + 1, len(lines)) if re.fullmatch(r"[=-]{3,} \S.* [=-]{3,}", lines[i])),
               len(lines))
    return [x for x in lines[start + 1:end] if x.strip()]


def _show(title, screen):
    print(f"\n--- {title}: the first {FIRST} lines of the screen")
    print("\n".join(screen[:FIRST]))


def _benchmark_table_shown(out: str) -> bool:
    return "benchmark 'mxperf-score'" in out and "Legend:" in out


def test_a_new_machine_opens_with_what_to_do_next(pytester, make_stub_python):
    r = _session(pytester, make_stub_python, "now", ("lenet", "mlp"), "--benchmark-json", "bench.json")
    out = r.stdout.str()
    assert r.ret == 0, out
    screen = _screen(out)
    _show("a new machine", screen)
    assert screen[0].startswith("mxperf: passed: 2 cells measured; no baseline for this machine (box): record one "
                                "with pytest "), screen
    assert screen[0].endswith(" --perf-update-baselines"), screen[0]
    assert "--perf-python" in screen[0]  # the command line as given, with the option that records
    assert screen[1].startswith("mxperf: no baseline for this machine (box): nothing was compared"), screen
    table = screen.index(next(x for x in screen if x.startswith("cell ")))
    assert screen[table].split() == ["cell", "unit", "median", "spread", "result"]  # no empty columns
    assert [x.split()[:4] for x in screen[table + 2:table + 4]] == [["score", "lenet", "b8", "cpu:0"],
                                                                     ["score", "mlp", "b8", "cpu:0"]]
    # not on the screen: the figures shown, not judged, memory rows, the machine; said where they are
    assert "shown, not judged [" not in out and "peak host memory" not in out and "machine: " not in out
    assert screen[-1].startswith("mxperf: -v shows the full report (2 figures shown, not judged; every figure's row; "
                                 "machine, software, environment) and pytest-benchmark's tables"), screen[-1]
    # pytest-benchmark's tables are not on the terminal, its JSON is written as before
    assert not _benchmark_table_shown(out), out
    bench = json.loads((pytester.path / "bench.json").read_text())
    assert sorted(b["extra_info"]["cell"].split("/")[1] for b in bench["benchmarks"]) == ["lenet", "mlp"]
    # -v: the same screen first, then the full report and pytest-benchmark's tables
    r = _session(pytester, make_stub_python, "now", ("lenet", "mlp"), "-v")
    out = r.stdout.str()
    assert r.ret == 0, out
    again = _screen(out)
    assert again[0].split(" with pytest ")[0] == screen[0].split(" with pytest ")[0] and again[1] == screen[1]
    assert "mxperf: the full report follows" in out and "- mxperf: full report -" in out
    full = out.split("- mxperf: full report -", 1)[1]
    assert full.count("shown, not judged [hardware limit score/") == 2 and "machine: " in full
    assert full.count("  peak host memory (worker RSS less mapped files)") == 2  # every figure's row
    assert _benchmark_table_shown(out), out


def test_a_clean_compare_is_one_line_and_a_table(pytester, make_stub_python):
    r = _session(pytester, make_stub_python, "base", ("lenet", "mlp"), "--perf-update-baselines")
    out = r.stdout.str()
    assert r.ret == 0, out
    first = _screen(out)[0]
    assert first.startswith("mxperf: passed: 2 cells measured; recorded as this machine's first baseline (box: "), first
    r = _session(pytester, make_stub_python, "now", ("lenet", "mlp"), "--perf-report", "rep")
    out = r.stdout.str()
    assert r.ret == 0, out
    screen = _screen(out)
    _show("a clean compare", screen)
    assert re.fullmatch(rf"mxperf: passed: 0 regressed, 0 improved, 0 unclear, 2 unchanged of 2 cells against "
                        rf"baseline box \(recorded {DATE}\)", screen[0]), screen[0]
    assert not [x for x in screen if re.match(r"mxperf: (REGRESSION|UNRESOLVED|IMPROVEMENT|NOT MEASURED)", x)]
    rows = [x.split() for x in screen if x.startswith("score ")]
    assert [(r[1], r[-1]) for r in rows] == [("lenet", "unchanged"), ("mlp", "unchanged")], screen
    assert all(len(x) <= report.SCREEN_WIDTH for x in screen if x.startswith(("cell ", "score ", "---")))
    # the full report and pytest-benchmark's tables are files of the report, and the screen says where
    assert screen[-1].startswith("mxperf: full report (2 figures shown, not judged; every figure's row; machine, "
                                 "software, environment): rep/report.txt; pytest-benchmark's tables: "
                                 "rep/benchmark.txt; -v shows them here"), screen[-1]
    text = (pytester.path / "rep" / "report.txt").read_text().splitlines()
    assert text[0] == screen[0]  # the screen first, then the full report
    full = text[text.index("full report:") + 1:]
    assert full[0].startswith("machine: ") and any(x.startswith("machine id: box; baseline: ") for x in full)
    assert sum(x.startswith("shown, not judged [hardware limit score/") for x in full) == 2
    assert sum(x.startswith("  peak host memory (worker RSS less mapped files)") for x in full) == 2
    tables = (pytester.path / "rep" / "benchmark.txt").read_text()
    assert "benchmark 'mxperf-score': 2 tests" in tables and "test_cells[cpu0-lenet-b8]" in tables
    assert not _benchmark_table_shown(out) and "shown, not judged [" not in out


def test_a_regression_session_says_it_first_then_what_failed_then_the_table(pytester, make_stub_python):
    r = _session(pytester, make_stub_python, "base", FIVE, "--perf-update-baselines")
    assert r.ret == 0, r.stdout.str()
    r = _session(pytester, make_stub_python, "now", FIVE, "--perf-report", "rep", factors={"resnet50_v2": 0.8})
    out = r.stdout.str()
    assert r.ret == pytest.ExitCode.TESTS_FAILED, out
    screen = _screen(out)
    _show("a regression session", screen)
    assert re.fullmatch(rf"mxperf: FAILED: 1 regressed, 0 improved, 0 unclear, 4 unchanged of 5 cells against "
                        rf"baseline box \(recorded {DATE}\)", screen[0]), screen[0]
    head = screen[:FIRST]
    key = "score/resnet50_v2/b8/cpu:0/float32/threads=auto"
    # settled in a duet against the setup the baseline recorded
    regression = next(i for i, x in enumerate(head) if x.startswith(f"mxperf: REGRESSION {key}: against the recorded "
                                                                    "setup"))
    failing = next(i for i, x in enumerate(head) if x.startswith("mxperf: failing the session: 1 confirmed regression"))
    table = next(i for i, x in enumerate(head) if x.startswith("cell "))
    assert 0 < regression < failing < table, head
    assert head[table].split() == ["cell", "unit", "median", "spread", "baseline", "change", "result"]
    rows = {x.split()[1]: x for x in head[table + 2:table + 7]}
    assert sorted(rows) == sorted(FIVE) and rows["resnet50_v2"].endswith("regression")
    assert "-19." in rows["resnet50_v2"] or "-20." in rows["resnet50_v2"], rows["resnet50_v2"]
    assert all(rows[m].endswith("unchanged") for m in FIVE if m != "resnet50_v2")
    assert "peak host memory" not in out  # memory unchanged: no row of its own on the screen
    # the failing cell's profile follows the table
    profile = next(i for i, x in enumerate(screen) if x.startswith(f"mxperf: profile of {key} (regression)"))
    assert profile > table + 6


def test_a_changed_memory_figure_is_counted_apart_and_gets_its_row(pytester, make_stub_python):
    """The cell is counted once, by its throughput (unchanged); its peak memory, which grew, is
    said as another figure, and its row is on the screen."""
    r = _session(pytester, make_stub_python, "base", ("lenet",), "--perf-update-baselines", rss_mib=800)
    assert r.ret == 0, r.stdout.str()
    r = _session(pytester, make_stub_python, "now", ("lenet",), rss_mib=1100)
    out = r.stdout.str()
    assert r.ret == pytest.ExitCode.TESTS_FAILED, out
    screen = _screen(out)
    assert re.fullmatch(rf"mxperf: FAILED: 0 regressed, 0 improved, 0 unclear, 1 unchanged of 1 cell against "
                        rf"baseline box \(recorded {DATE}\); other figures: 1 regressed", screen[0]), screen[0]
    assert any(x.startswith("mxperf: REGRESSION score/lenet/b8/cpu:0/float32/threads=auto#peak_rss_mib: ")
               for x in screen[1:4]), screen
    (row,) = [x for x in screen if x.startswith("  peak host memory (worker RSS less mapped files)")]
    assert row.split()[-3:] == ["800.00", "+37.5%", "regression"], row


def test_cells_that_did_not_measure_are_said_after_the_first_line(pytester, make_stub_python):
    r = _session(pytester, make_stub_python, "now", ("lenet", "mlp"),
                 error="MXNetError: Check failed: shape mismatch in fc1")
    out = r.stdout.str()
    assert r.ret == pytest.ExitCode.TESTS_FAILED, out
    screen = _screen(out)
    assert screen[0] == "mxperf: FAILED: 0 of 2 cells measured, 2 not measured", screen
    assert screen[1] == ("mxperf: NOT MEASURED score/lenet/b8/cpu:0/float32/threads=auto, "
                         "score/mlp/b8/cpu:0/float32/threads=auto: error: MXNetError: Check failed: shape mismatch "
                         "in fc1"), screen
    rows = [x for x in screen if x.startswith("score ")]
    assert len(rows) == 2 and all(x.endswith("error: MXNetError: Check failed: shape mismatch in fc1") for x in rows)


# ----------------------------------------------------------------------------- the pieces

W = Workload("lenet", batch_size=8)


def _run(rate, status="ok", message="", rss=800.0):
    return RunResult(W, status, message=message, batches_per_round=1, round_seconds=[8 / rate] * 5 if rate else [],
                     figures={"peak_rss_mib": rss} if status == "ok" else {})


def test_a_failed_cells_reason_is_cut_so_that_its_row_fits_the_screen():
    long = "MXNetError: " + "a very long reason " * 12
    recs = [CellRecord("t", CellMeasurement(W, [_run(100.0)])),
            CellRecord("t", CellMeasurement(Workload("mlp", batch_size=8), [_run(0, "crash", long)]))]
    lines = report.compact_table(recs, {})
    assert max(len(x) for x in lines) <= report.SCREEN_WIDTH, lines
    assert lines[-1].startswith("score mlp b8 cpu:0") and lines[-1].endswith("…") and "crash: MXNetError: a" in lines[-1]
    assert lines[0].split() == ["cell", "unit", "median", "spread", "result"]


def test_a_measured_cell_with_no_floor_here_is_measured_not_skipped():
    """A training cell on a CPU: no published table has a floor for it, so its test skips the
    floor; the cell itself was measured, as the first line counts it."""
    from pytest_mxperf.judge.floors import Floor
    none = Floor(None, None, None, None, 0.1, False, "no CPU training table")
    slowed = Floor("legacy-sanity", "c4", 10.0, 9.0, 0.1, False, "")
    recs = [CellRecord("t", CellMeasurement(W, [_run(100.0)]), floor=none, outcome="skipped"),
            CellRecord("t", CellMeasurement(Workload("mlp", batch_size=8), [_run(100.0)]), floor=slowed,
                       outcome="skipped")]
    rows = report.compact_rows(recs, {})
    assert [r[-1] for r in rows] == ["measured", "skipped"]  # a floor not judged (slowed) stays said
    assert report.cell_counts(recs, {})["measured"] == 2
    # the full report's rows say the same
    full = [r for r in report.cell_rows(recs, {}) if r[0].startswith("score ")]  # each cell's first row
    assert [r[0] for r in full] == ["score lenet b8 cpu:0", "score mlp b8 cpu:0"], full
    assert [("measured" in r, "skipped" in r) for r in full] == [(True, False), (False, True)], full


def test_counts_are_one_a_cell_by_its_primary_figure():
    from pytest_mxperf.judge.verdict_record import Verdict
    key = W.key()
    recs = [CellRecord("t", CellMeasurement(W, [_run(100.0)]))]
    verdicts = {key: Verdict("unchanged", ""), key + "#peak_rss_mib": Verdict("regression", "")}
    counts = report.cell_counts(recs, verdicts)
    assert counts["unchanged"] == 1 and sum(counts.values()) == 1
    assert report.other_figures(verdicts) == {"regressed": 1}


def test_the_footer_says_where_the_full_report_is():
    s = SimpleNamespace(findings=[Finding("t", "x", {"a": 1.0})])
    assert report.footer_line(s, full_below=False) == (
        "mxperf: -v shows the full report (1 figure shown, not judged; every figure's row; machine, software, "
        "environment); --perf-report DIR writes it to DIR/report.txt")
    assert report.footer_line(s, full_below=False, report_file="rep/report.txt", benchmark="rep/benchmark.txt") == (
        "mxperf: full report (1 figure shown, not judged; every figure's row; machine, software, environment): "
        "rep/report.txt; pytest-benchmark's tables: rep/benchmark.txt; -v shows them here")
    assert report.footer_line(s, full_below=True, report_file="rep/report.txt") == (
        "mxperf: the full report follows (also in rep/report.txt)")
