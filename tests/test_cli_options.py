"""The command-line tools take their options where people type them: before or after a
subcommand and its positionals, with the same effect (issue #26). In process, no mxnet."""

import json
from pathlib import Path

import pytest
from test_bisect import ARGS, FakeInstalls, FakeRunner
from test_bisect import run as run_find_release
from test_compare import BASE, cell, write
from test_history_store import doc

from pytest_mxperf.cli import compare
from pytest_mxperf.history.__main__ import main as history
from pytest_mxperf.history.store import open_store
from pytest_mxperf.model.workload import Workload
from pytest_mxperf.store.baseline_store import BaselineStore

RANGE = "1.8.0.post0..1.9.1"


def _usage_error(capsys, main, argv, says):
    """``main(argv)`` is refused with exit 2 and one line on stderr naming the problem."""
    with pytest.raises(SystemExit) as ei:
        main(argv)
    assert ei.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert says in line


# ---------------------------------------------------------------------------------------
# python -m pytest_mxperf.history


@pytest.fixture
def results_json(tmp_path):
    path = tmp_path / "r" / "results.json"
    path.parent.mkdir()
    path.write_text(json.dumps(doc("s1", 10.0, 40.0)))
    return path


@pytest.fixture
def default_store(tmp_path, monkeypatch):
    """$MXPERF_HISTORY, the store used without --store: a test that gives --store leaves it alone."""
    where = tmp_path / "default.sqlite"
    monkeypatch.setenv("MXPERF_HISTORY", str(where))
    return where


def _sessions(where):
    with open_store(str(where)) as store:
        return store.session_ids()


@pytest.mark.parametrize("order", ["before", "after"])
def test_history_import_takes_store_before_or_after_the_subcommand(tmp_path, results_json, default_store, order,
                                                                    capsys):
    where = tmp_path / "h.sqlite"
    argv = (["--store", str(where), "import", str(results_json)] if order == "before"
            else ["import", str(results_json), "--store", str(where)])
    assert history(argv) == 0
    assert "imported 1 session(s)" in capsys.readouterr().out
    assert where.exists() and _sessions(where) == ["s1"]
    assert not default_store.exists()


def test_history_without_store_uses_the_default_one(results_json, default_store):
    assert history(["import", str(results_json)]) == 0
    assert _sessions(default_store) == ["s1"]


def test_history_store_given_twice_the_later_one_wins(tmp_path, results_json, default_store):
    first, second = tmp_path / "first.sqlite", tmp_path / "second.sqlite"
    assert history(["--store", str(first), "import", str(results_json), "--store", str(second)]) == 0
    assert _sessions(second) == ["s1"] and not first.exists() and not default_store.exists()


@pytest.fixture
def filled_store(tmp_path):
    where = tmp_path / "h.sqlite"
    with open_store(str(where)) as store:
        for i in range(8):
            store.append(doc(f"s{i}", 10.0 * i, 40.0 if i < 4 else 30.0))
    return where


@pytest.mark.parametrize("argv", [
    ["--store", "{store}", "changes"],
    ["changes", "--store", "{store}"],
    ["--store", "{store}", "changes", "--cell", "{cell}"],
    ["changes", "--cell", "{cell}", "--store", "{store}"],
    ["changes", "--store", "{store}", "--cell", "{cell}"],
])
def test_history_changes_reads_the_store_given_before_or_after(filled_store, default_store, argv, capsys):
    with open_store(str(filled_store)) as store:
        (c,) = store.cells()
    assert history([a.format(store=filled_store, cell=c["key"]) for a in argv]) == 0
    out = capsys.readouterr().out
    assert "s4" in out and "x0.750" in out and out.rstrip().endswith("1 change point(s) in 1 cell(s)")
    assert not default_store.exists()


def _store_on(order, store, *command):
    """``--store STORE`` before or after ``command`` (a subcommand and its arguments)."""
    opt = ["--store", str(store)]
    return opt + list(command) if order == "before" else list(command) + opt


@pytest.mark.parametrize("order", ["before", "after"])
def test_history_publish_takes_store_before_or_after(tmp_path, filled_store, default_store, order, capsys):
    out = tmp_path / "pages"
    assert history(_store_on(order, filled_store, "publish", str(out))) == 0
    assert "wrote" in capsys.readouterr().out
    assert "s7" in "".join(p.read_text() for p in out.rglob("*.html"))  # the given store's sessions
    assert not default_store.exists()


@pytest.mark.parametrize("order", ["before", "after"])
def test_history_summary_accepts_store_either_side(tmp_path, results_json, default_store, order, capsys):
    where = tmp_path / "unused.sqlite"
    assert history(_store_on(order, where, "summary", str(results_json))) == 0
    assert "## pytest-mxperf" in capsys.readouterr().out
    assert not where.exists() and not default_store.exists()  # a summary opens no store


@pytest.mark.parametrize("argv, says", [
    (["publish", "pages", "--bogus"], "unrecognized arguments: --bogus"),
    (["--bogus", "publish", "pages"], "unrecognized arguments: --bogus"),
    (["publish", "pages", "--store"], "--store: expected one argument"),
    (["--store", "h.sqlite"], "required: cmd"),
])
def test_history_usage_errors_are_one_line_exit_2(capsys, default_store, argv, says):
    _usage_error(capsys, history, argv, says)


# ---------------------------------------------------------------------------------------
# python -m pytest_mxperf.cli.compare


@pytest.fixture
def old_new(tmp_path):
    """A 24 % slowdown: a regression at the default --min-effect, not at 0.5."""
    old = write(tmp_path / "old.json", [cell("resnet50_v2", BASE)])
    new = write(tmp_path / "new.json", [cell("resnet50_v2", [x * 0.76 for x in BASE])])
    return str(old), str(new)


def test_compare_default_flags_the_slowdown(old_new, capsys):
    assert compare.main(list(old_new)) == 1
    assert "regression" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [
    ["--min-effect", "0.5", "{old}", "{new}"],
    ["{old}", "--min-effect", "0.5", "{new}"],
    ["{old}", "{new}", "--min-effect", "0.5"],
    ["{old}", "{new}", "--min-effect=0.5", "--fdr", "0.01"],
    ["--fdr", "0.01", "{old}", "{new}", "--min-effect", "0.5"],
])
def test_compare_takes_its_options_anywhere(old_new, argv, capsys):
    old, new = old_new
    assert compare.main([a.format(old=old, new=new) for a in argv]) == 0
    out = capsys.readouterr().out
    assert "regression" not in out and "-24.0%" in out


@pytest.mark.parametrize("argv", [
    ["promote", "{res}", "--baselines-dir", "{dir}", "--machine", "m-1"],
    ["promote", "--machine", "m-1", "--baselines-dir", "{dir}", "{res}"],
    ["--baselines-dir", "{dir}", "promote", "{res}", "--machine", "m-1"],
    ["--machine", "m-1", "--baselines-dir={dir}", "promote", "{res}"],
    ["--machine", "m-1", "promote", "{res}", "--baselines-dir", "{dir}"],
])
def test_promote_takes_its_options_before_or_after_the_subcommand(tmp_path, argv, capsys):
    res = write(tmp_path / "results.json", [cell("resnet50_v2", BASE)], machine_id="ci-1")
    d = tmp_path / "bl"
    assert compare.main([a.format(res=res, dir=d) for a in argv]) == 0
    assert "promoted 1 cell" in capsys.readouterr().out
    assert BaselineStore(d).load("m-1").values(Workload("resnet50_v2", batch_size=8).key())
    assert BaselineStore(d).load("ci-1") is None


def test_a_file_named_promote_is_compared_after_a_double_dash(tmp_path, old_new, monkeypatch, capsys):
    old, new = old_new
    monkeypatch.chdir(tmp_path)
    (tmp_path / "promote").write_bytes(Path(old).read_bytes())
    assert compare.main(["--min-effect", "0.5", "--", "promote", new]) == 0
    assert "-24.0%" in capsys.readouterr().out


@pytest.mark.parametrize("argv, says", [
    (["{old}", "{new}", "--bogus"], "unrecognized arguments: --bogus"),
    (["--bogus", "{old}", "{new}"], "unrecognized arguments: --bogus"),
    (["promote", "{old}", "--bogus"], "unrecognized arguments: --bogus"),
    (["--bogus", "promote", "{old}"], "unrecognized arguments: --bogus"),
    (["promote", "{old}", "--min-effect", "0.5"], "unrecognized arguments: --min-effect"),
    (["{old}", "{new}", "--machine", "m"], "unrecognized arguments: --machine"),
    (["{old}", "{new}", "--min-effect"], "--min-effect: expected one argument"),
])
def test_compare_usage_errors_are_one_line_exit_2(old_new, capsys, argv, says):
    old, new = old_new
    _usage_error(capsys, compare.main, [a.format(old=old, new=new) for a in argv], says)


# ---------------------------------------------------------------------------------------
# python -m pytest_mxperf.cli.find_release


@pytest.mark.parametrize("argv, pytest_args", [
    (["--range", RANGE, "--report-dir", "{dir}", *ARGS], ARGS[1:]),
    (["perf_tests", "-m", "cpu", "--range", RANGE, "--report-dir", "{dir}"], ["perf_tests", "-m", "cpu"]),
    (["--report-dir", "{dir}", "perf_tests", "--range", RANGE, "-m", "cpu"], ["perf_tests", "-m", "cpu"]),
    (["perf_tests", "--range", RANGE, "--report-dir", "{dir}", "--", "-m", "cpu"], ["perf_tests", "-m", "cpu"]),
    (["--range", RANGE, "perf_tests", "--", "-m", "cpu", "--report-dir", "x"],
     ["perf_tests", "-m", "cpu", "--report-dir", "x"]),  # everything after -- goes to pytest
])
def test_find_release_takes_its_options_before_or_after_the_pytest_arguments(tmp_path, argv, pytest_args):
    d = tmp_path / "reports"
    runner = FakeRunner()
    rc, _, err = run_find_release([a.format(dir=d) for a in argv], runner, FakeInstalls())
    assert rc == 0, err
    (step,) = runner.steps
    assert step.pytest_args == pytest_args
    if "{dir}" in argv:
        assert step.report_dir == d / RANGE and (d / RANGE / "results.json").exists()


@pytest.mark.parametrize("argv, says", [
    (["perf_tests", "--range"], "--range: expected one argument"),
    (["--range", RANGE, "perf_tests", "--report-dir"], "--report-dir: expected one argument"),
    (["perf_tests", "--range", RANGE, "--", "--perf-python", "/x/python"], "--perf-python is set"),
    (["perf_tests", "--", "-m", "cpu", "--range", RANGE], "required: --range"),  # after --: pytest's
])
def test_find_release_usage_errors_are_one_line_exit_2(argv, says):
    runner = FakeRunner()
    rc, _, err = run_find_release(argv, runner, FakeInstalls())
    assert rc == 2 and runner.steps == []
    (line,) = err.splitlines()
    assert line.startswith("pytest_mxperf.cli.find_release: usage error: ") and says in line
