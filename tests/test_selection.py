"""What a session selects (issue #35 part 4, "nothing asked for is dropped"): a slow cell the
user names is measured; a selection that leaves no measuring test says why in one line and
exits 5; the upgrade-gate workflow measures every cell it names; the reference costs the
first line starts from hold every measuring test of the selections they stand for (#37).
Sessions in subprocesses (pytester), collect-only or with stand-in workers: no MXNet worker
starts."""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import stand_ins

from pytest_mxperf import collection
from pytest_mxperf.history.fleet import shard_of
from pytest_mxperf.model.options import PerfOptions
from pytest_mxperf.model.outcome import EXIT_NONE_SELECTED

ROOT = Path(__file__).resolve().parent.parent

# a grid whose mlp-b64 cell is slow, a slow test with a cell of its own, and a slow test
# that "-m cpu" does not select (no cpu marker)
TESTS = """
import pytest

@pytest.mark.mxperf_grid(models=("lenet", "mlp"), batch_sizes=(1, 64), slow={"mlp": 64})
def test_grid(mxperf, ctx, model, batch_size):
    mxperf.expect_ok(mxperf.measure(model, batch_size, contexts=ctx))

@pytest.mark.cpu
@pytest.mark.slow
def test_fixed(mxperf):
    mxperf.expect_ok(mxperf.measure("lenet", 2))

@pytest.mark.io
@pytest.mark.slow
def test_io(mxperf):
    pass
"""

PLAIN = """
def test_ok():
    pass

def test_other():
    pass
"""

SLOW_NOTE = re.compile(r"(\d+) slow test\(s\) deselected \(--perf-slow runs them, or name the cells: "
                       r"--perf-models and --perf-batch-sizes, or a test's node id with its parameters\)")


def _collect(pytester, *args):
    r = stand_ins.session(pytester, "-p", "no:cacheprovider", "--collect-only", "-q", *args)
    ids = [ln.split("::", 1)[1] for ln in r.stdout.lines if "::" in ln and not ln.startswith("mxperf")]
    return r, ids


def _said(r, prefix="mxperf: "):
    return [ln for ln in r.stdout.lines if ln.startswith(prefix)]


# ----------------------------------------------------------------------------- rule 1, the functions

def _item(tmp_path, name, **params):
    return SimpleNamespace(path=tmp_path / "test_x.py", nodeid=f"test_x.py::{name}",
                           callspec=SimpleNamespace(params=params) if params else None)


def _config(directory, *args):
    return SimpleNamespace(invocation_params=SimpleNamespace(dir=directory), args=list(args))


def test_a_test_named_by_its_node_id_is_asked_for(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    named = collection.named_on_the_command_line(
        _config(sub, "../test_x.py::test_grid[cpu0-mlp-b64]", "../test_x.py::test_plain", "other.py::test_grid[b1]",
                "../test_x.py"))
    options = PerfOptions()
    cell = _item(tmp_path, "test_grid[cpu0-mlp-b64]", model="mlp", batch_size=64)
    assert collection.asked_for(cell, named, options)
    assert collection.asked_for(_item(tmp_path, "test_plain"), named, options)  # no parameters: its id names it
    assert not collection.asked_for(_item(tmp_path, "test_grid[cpu0-mlp-b1]", model="mlp", batch_size=1),
                                      named, options)
    # the function without its parameters names the grid, not a cell; another file's test is another test
    grid_only = collection.named_on_the_command_line(_config(tmp_path, "test_x.py::test_grid", "other.py::"
                                                                "test_grid[cpu0-mlp-b64]"))
    assert not collection.asked_for(cell, grid_only, options)


def test_a_grid_cell_is_asked_for_by_its_model_and_batch_size_both_given(tmp_path):
    none = frozenset()
    cell = _item(tmp_path, "test_grid[cpu0-mlp-b64]", model="mlp", batch_size=64, ctx=["cpu:0"])
    both = PerfOptions(models=("lenet", "mlp"), batch_sizes=(1, 64))
    assert collection.asked_for(cell, none, both)
    assert not collection.asked_for(_item(tmp_path, "t[alexnet-b64]", model="alexnet", batch_size=64), none, both)
    assert not collection.asked_for(_item(tmp_path, "t[mlp-b8]", model="mlp", batch_size=8), none, both)
    assert not collection.asked_for(cell, none, PerfOptions(batch_sizes=(64,)))    # the model not named
    assert not collection.asked_for(cell, none, PerfOptions(models=("mlp",)))      # the batch size not named
    assert not collection.asked_for(cell, none, PerfOptions())
    # a grid of batch sizes only (the test fixes its model): the batch size names the cell
    batch_only = _item(tmp_path, "t[b64]", batch_size=64)
    assert collection.asked_for(batch_only, none, PerfOptions(batch_sizes=(64,)))
    assert not collection.asked_for(batch_only, none, PerfOptions(batch_sizes=(1,)))
    # a test with cells of its own (no batch_size parameter): only its node id names it
    fixed = _item(tmp_path, "t[bfloat16]", dtype="bfloat16")
    assert not collection.asked_for(fixed, none, PerfOptions(models=("resnet50_v2",), batch_sizes=(8,)))


# ----------------------------------------------------------------------------- rule 1, end to end

def test_slow_cells_named_by_model_and_batch_size_are_selected(pytester):
    pytester.makepyfile(test_sel=TESTS)
    r, ids = _collect(pytester, "-m", "cpu")
    assert ids == ["test_grid[cpu0-lenet-b1]", "test_grid[cpu0-lenet-b64]", "test_grid[cpu0-mlp-b1]"], ids
    # the slow tests counted are those -m keeps (mlp-b64, test_fixed), not test_io, which -m deselects
    plan = _said(r)
    assert len(plan) == 1 and [int(n) for n in SLOW_NOTE.findall(plan[0])] == [2], plan
    r, ids = _collect(pytester, "-m", "cpu", "--perf-models", "mlp", "--perf-batch-sizes", "64")
    assert ids == ["test_grid[cpu0-mlp-b64]"], ids
    assert [int(n) for n in SLOW_NOTE.findall(_said(r)[0])] == [1]  # test_fixed: no batch size names it
    # the model alone does not name the cell
    r, ids = _collect(pytester, "-m", "cpu", "--perf-models", "mlp")
    assert ids == ["test_grid[cpu0-mlp-b1]"], ids
    assert [int(n) for n in SLOW_NOTE.findall(_said(r)[0])] == [2]
    assert r.ret == 0


def _counting_python(tmp_path, python):
    """(a worker interpreter that notes every start in a file, that file): ``python`` behind a
    wrapper script."""
    calls = tmp_path / "starts.txt"
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {calls}\nexec {python} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper, calls


def test_collecting_only_says_the_plan_and_starts_no_worker_interpreter(pytester, tmp_path, make_stub_python):
    """``--collect-only`` measures nothing, so it starts no MXNet probe of the worker
    interpreter (which would read the setup and speed the estimate uses: 1.4 of a 2.7-s
    collection here) and says so; asked to measure, the same session probes it first. The
    interpreter is a stand-in: this module starts no real MXNet (tests/conftest.py runs those
    one at a time)."""
    pytester.makepyfile(test_sel=TESTS)
    python, calls = _counting_python(tmp_path, make_stub_python())
    r, ids = _collect(pytester, "-m", "cpu", "--perf-python", str(python))
    assert ids == ["test_grid[cpu0-lenet-b1]", "test_grid[cpu0-lenet-b64]", "test_grid[cpu0-mlp-b1]"], ids
    plan = _said(r)
    assert len(plan) == 1 and "expected about" in plan[0], plan
    assert "not scaled: this machine's MXNet speed was not read" in plan[0] or "last" in plan[0], plan
    # the interpreter's distributions are listed (two MXNet installs are a usage error, said
    # at once), without MXNet; no MXNet probe
    started = calls.read_text().splitlines() if calls.exists() else []
    assert not any("--probe" in line for line in started), started
    # the other side: a session that measures starts the interpreter for its probe first (it
    # stops at the first cell: an unknown model)
    pytester.makepyfile(test_one="""
import pytest

@pytest.mark.cpu
def test_one(mxperf):
    mxperf.measure("no-such-model", 1)
""")
    stand_ins.session(pytester, "-p", "no:cacheprovider", "--perf-python", str(python), "--perf-no-probe",
                      "test_one.py")
    assert "--probe" in calls.read_text(), calls.read_text()


def test_slow_tests_named_by_node_id_are_selected(pytester):
    pytester.makepyfile(test_sel=TESTS)
    r, ids = _collect(pytester, "test_sel.py::test_grid[cpu0-mlp-b64]", "test_sel.py::test_fixed")
    assert ids == ["test_grid[cpu0-mlp-b64]", "test_fixed"], ids
    assert not SLOW_NOTE.search(r.stdout.str())
    # the test function without the cell's parameters: its slow cell is not named
    r, ids = _collect(pytester, "test_sel.py::test_grid", "-m", "cpu")
    assert "test_grid[cpu0-mlp-b64]" not in ids and "test_grid[cpu0-mlp-b1]" in ids, ids
    assert [int(n) for n in SLOW_NOTE.findall(_said(r)[0])] == [1]


def test_a_named_slow_cell_is_measured(pytester, make_stub_python):
    pytester.makepyfile(test_sel=TESTS)
    r = stand_ins.session(pytester, 
        "-p", "no:cacheprovider", "-m", "cpu", "--perf-models", "mlp", "--perf-batch-sizes", "64",
        "--perf-python", make_stub_python(), "--perf-machine", "box",
        "--perf-baselines-dir", str(pytester.path / "bl"), "--perf-no-probe", "--perf-no-peak",
        "--perf-processes", "1", "--perf-time-budget", "0.2")
    out = r.stdout.str()
    assert r.ret == 0, out
    r.assert_outcomes(passed=1, deselected=3)  # gpu0-mlp-b64, test_io (-m), test_fixed (slow)
    assert "score mlp b64 cpu:0" in out  # the session report's row of the measured cell
    # test_fixed, slow and not named: said with the plan, and again on the screen at the end
    said = [ln for ln in _said(r) if SLOW_NOTE.search(ln)]
    assert len(said) == 2 and said[0].startswith("mxperf: 1 measuring test(s)"), out
    assert said[1] == "mxperf: " + SLOW_NOTE.search(said[0]).group(0) and SLOW_NOTE.search(said[0]).group(1) == "1"


def test_a_grid_the_options_leave_empty_skips_and_the_slow_ones_are_said(pytester):
    # alexnet is no model of the grid: pytest's empty parameter set (NOTSET), which skips;
    # it was an INTERNALERROR when the plan read the cell of such a test
    pytester.makepyfile(test_sel=TESTS)
    r = stand_ins.session(pytester, "-p", "no:cacheprovider", "-m", "cpu", "--perf-models", "alexnet")
    out = r.stdout.str()
    assert "INTERNALERROR" not in out and r.ret == 0, out
    r.assert_outcomes(skipped=1, deselected=3)  # test_fixed as slow; the grid's gpu0 and test_io by -m
    assert [int(n) for ln in _said(r) for n in SLOW_NOTE.findall(ln)] == [1], out


# ----------------------------------------------------------------------------- rule 2

def test_a_selection_that_leaves_no_measuring_test_says_why_and_exits_5(pytester):
    pytester.makepyfile(test_sel=TESTS)
    r, ids = _collect(pytester, "test_sel.py", "-m", "cpu", "--perf-models", "mlp", "--perf-batch-sizes", "64",
                      "-k", "fixed")
    assert ids == [] and r.ret == EXIT_NONE_SELECTED == pytest.ExitCode.NO_TESTS_COLLECTED
    # test_fixed slow (not named); gpu0-mlp-b64 and test_io by -m, cpu0-mlp-b64 by -k
    assert _said(r) == [
        "mxperf: no measuring test selected: 1 deselected as slow (--perf-slow runs them, or name the cells: "
        "--perf-models and --perf-batch-sizes, or a test's node id with its parameters), 3 by -m/-k/--deselect"]
    other = 3 - shard_of("test_sel.py::test_grid[cpu0-mlp-b64]", 2)  # the shard the cell left is not in
    r, ids = _collect(pytester, "test_sel.py", "-m", "cpu", "--perf-models", "mlp", "--perf-batch-sizes", "64",
                      "--perf-shard", f"{other}/2", "--perf-fleet", "f", "-k", "grid")
    assert ids == [] and r.ret == EXIT_NONE_SELECTED
    assert _said(r, "mxperf: no measuring test selected") == [
        f"mxperf: no measuring test selected: 3 by -m/-k/--deselect, 1 in other shards than --perf-shard {other}/2"]


def test_other_tests_left_run_and_the_session_still_exits_5(pytester):
    pytester.makepyfile(test_sel=TESTS, test_plain=PLAIN)
    r = stand_ins.session(pytester, "-p", "no:cacheprovider", "test_sel.py", "test_plain.py", "-k",
                                      "fixed or ok")
    r.assert_outcomes(passed=1, deselected=11)
    assert r.ret == EXIT_NONE_SELECTED, r.stdout.str()
    said = _said(r, "mxperf: no measuring test selected")
    assert said == ["mxperf: no measuring test selected: 1 deselected as slow (--perf-slow runs them, or name the "
                    "cells: --perf-models and --perf-batch-sizes, or a test's node id with its parameters), "
                    "10 by -m/-k/--deselect"], r.stdout.str()
    # a failing test left keeps its status (1)
    pytester.makepyfile(test_plain=PLAIN.replace("def test_ok():\n    pass", "def test_ok():\n    assert False"))
    r = stand_ins.session(pytester, "-p", "no:cacheprovider", "test_sel.py", "test_plain.py", "-k",
                                      "fixed or ok")
    r.assert_outcomes(failed=1, deselected=11)
    assert r.ret == pytest.ExitCode.TESTS_FAILED


def test_a_session_that_never_collected_a_measuring_test_is_untouched(pytester):
    pytester.makepyfile(test_plain=PLAIN)
    r = stand_ins.session(pytester, "-p", "no:cacheprovider", "-k", "ok")
    r.assert_outcomes(passed=1, deselected=1)
    assert r.ret == 0 and not _said(r), r.stdout.str()
    r = stand_ins.session(pytester, "-p", "no:cacheprovider", "-k", "nothing")
    assert r.ret == pytest.ExitCode.NO_TESTS_COLLECTED and not _said(r), r.stdout.str()


# ----------------------------------------------------------------------------- the upgrade gate

GATE = ROOT / ".github" / "workflows" / "mxnet-upgrade-gate.yml"


def _gate_command():
    """The pytest arguments of the upgrade gate's A/B step (its folded ``run: >-`` block)."""
    lines = GATE.read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.strip() == "run: >-"
                 and any("name: A/B gate" in prev for prev in lines[max(0, i - 8):i]))
    block = []
    for ln in lines[start + 1:]:
        if not ln.strip():
            break
        block.append(ln.strip())
    args = shlex.split(" ".join(block))
    assert args[0] == "pytest", args
    return args[1:]


def _without(args, *options):
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a in options:
            skip = True
        else:
            out.append(a)
    return out


def _gate_selection():
    """The gate's arguments that select (the reference install, the report and the base
    branch's thresholds file are the job's, not the selection's)."""
    return _without(_gate_command(), "--perf-reference", "--perf-report", "--perf-thresholds")


def _collect_in_subprocess(*args, env=None):
    """``pytest ARGS --collect-only`` of this checkout in a subprocess, with no history store."""
    return subprocess.run([sys.executable, "-m", "pytest", *args, "--collect-only", "-q", "-p", "no:cacheprovider",
                           "--perf-store", "none"], cwd=ROOT, capture_output=True, text=True, env=env)


def _gate_collect(*extra):
    r = _collect_in_subprocess(*_gate_selection(), *extra)
    return r, [ln for ln in r.stdout.splitlines() if ln.startswith("perf_tests/")]


def test_the_upgrade_gate_measures_every_cell_it_names():
    args = _gate_command()
    models = args[args.index("--perf-models") + 1].split(",")
    batches = args[args.index("--perf-batch-sizes") + 1].split(",")
    assert "--perf-slow" not in args
    r, ids = _gate_collect()
    assert r.returncode == 0, r.stdout + r.stderr
    named = {"perf_tests/test_scoring.py::test_scoring_throughput": ("alexnet", "resnet50_v2"),
             "perf_tests/test_training.py::test_training_throughput": ("alexnet", "resnet50_v2"),
             "perf_tests/test_latency.py::test_batch_latency": ("lenet", "resnet50_v2")}
    expected = {f"{test}[cpu0-{m}-b{b}" for test, grid in named.items() for m in grid if m in models for b in batches}
    grid_ids = {re.sub(r"-sgd$", "", i.split("]")[0]) for i in ids if i.split("[")[0] in named}
    assert grid_ids == expected and len(expected) == 12, sorted(grid_ids ^ expected)
    # --perf-slow adds no cell of those named, only tests with cells of their own
    r_slow, ids_slow = _gate_collect("--perf-slow")
    added = set(ids_slow) - set(ids)
    assert not {i for i in added if i.split("[")[0] in named}, added
    assert sorted(added) == [
        "perf_tests/test_cpu_precision.py::test_reduced_precision_beside_float32[bfloat16]",
        "perf_tests/test_digits_precision.py::test_reduced_precision_keeps_the_digits_answers",
        "perf_tests/test_training.py::test_training_throughput_adam[cpu0-alexnet-row1-b8]",
        "perf_tests/test_training.py::test_training_throughput_adam[cpu0-resnet50_v2-b2]"]
    # and the session says so, in its plan line
    plan = [ln for ln in r.stdout.splitlines() if ln.startswith("mxperf: ")]
    assert len(plan) == 1 and [int(n) for n in SLOW_NOTE.findall(plan[0])] == [4], plan


# ----------------------------------------------------------------------------- the reference costs are current

#: a plugin for a collecting subprocess: the measuring tests the session's plan holds (its
#: count and their node ids, ``Plan.test_estimates``), read after the plugin under test has
#: planned, written to the file MEASURING_IDS names
_MEASURING_PLUGIN = """
import json, os
import pytest
from pytest_mxperf import plugin

@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    plan = session.config.stash[plugin.SESSION].context.plan
    with open(os.environ["MEASURING_IDS"], "w") as fh:
        json.dump({"tests": plan.tests, "ids": [n for n, _ in plan.test_estimates]}, fh)
"""


def _measuring_ids(tmp_path, name, args):
    (tmp_path / "measuring_ids_plugin.py").write_text(_MEASURING_PLUGIN)
    out = tmp_path / f"{name}.json"
    env = dict(os.environ, MEASURING_IDS=str(out),
               PYTHONPATH=os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p))
    r = _collect_in_subprocess(*args, "-p", "measuring_ids_plugin", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    planned = json.loads(out.read_text())
    assert len(planned["ids"]) == planned["tests"], planned  # every measuring test the plan counts, once
    return set(planned["ids"])


def test_the_reference_costs_hold_every_measuring_test_of_the_selections_they_stand_for(tmp_path):
    """``data/reference-costs.json`` is current: each kind of session it holds has a figure for
    every measuring test the selection of that kind collects, and none for a test that is
    gone, measured with the options those sessions run by default. A test added, renamed or
    re-parametrized without measuring the reference again fails here: the first line of a
    machine without history would otherwise start that test from the constants."""
    from pytest_mxperf.measure import planning
    from pytest_mxperf.model import options as opts
    ref = planning.load_reference()
    assert ref is not None
    sessions = ref["sessions"]
    default = _measuring_ids(tmp_path, "default", ["perf_tests", "-m", "cpu"])
    assert len(default) >= 20, sorted(default)
    # the default command, a recording of a baseline, an unchanged session against one: one selection
    for kind, processes in (("suite", opts.PROCESSES), ("baseline", opts.PROCESSES),
                            ("recording", opts.RECORDING_PROCESSES)):
        s = sessions[kind]
        assert set(s["tests"]) == default, (kind, sorted(set(s["tests"]) ^ default))
        assert (s["processes"], s["time_budget"]) == (processes, opts.TIME_BUDGET_S), kind
        assert planning.reference_known(ref, kind, SimpleNamespace(processes=processes,
                                                                   time_budget=opts.TIME_BUDGET_S)) is not None
    # the A/B session: the upgrade gate's selection, with its deadline
    args = _gate_command()
    gate = _measuring_ids(tmp_path, "gate", _gate_selection())
    ab = sessions["ab"]
    assert gate <= set(ab["tests"]), sorted(gate - set(ab["tests"]))
    # the reference's A/B session measured one test more (time to accuracy, which the gate's -k
    # leaves out): a test function that is still there, never one that is gone
    functions = {i.split("[")[0] for i in _measuring_ids(tmp_path, "all", ["perf_tests", "--perf-slow"])}
    assert {i.split("[")[0] for i in ab["tests"]} <= functions, sorted(set(ab["tests"]) - gate)
    assert ab["deadline"] == opts.parse_duration("--perf-deadline", args[args.index("--perf-deadline") + 1])
    assert (ab["duet_pairs"], ab["time_budget"]) == (opts.DUET_PAIRS, opts.TIME_BUDGET_S)
    # the MXNet the cpu extra installs
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert f'"mxnet=={ref["mxnet_version"]}"' in pyproject, ref["mxnet_version"]


# ----------------------------------------------------------------------------- a kind run on request

ON_REQUEST = """
import pytest

@pytest.mark.cpu
def test_score(mxperf):
    pass

@pytest.mark.cpu
@pytest.mark.serving
def test_target(mxperf):
    pass

@pytest.mark.cpu
@pytest.mark.serving
@pytest.mark.serving_peak
@pytest.mark.slow
def test_peak(mxperf):
    pass
"""


@pytest.mark.parametrize("args, selected", [
    (["-m", "cpu"], ["test_score"]),                                   # the default: serving is asked for, never assumed
    (["-m", "cpu and serving"], ["test_target"]),                       # the peak search: --perf-slow or named
    (["-m", "cpu and serving", "--perf-slow"], ["test_target", "test_peak"]),
    (["-m", "cpu", "--perf-slow"], ["test_score", "test_target", "test_peak"]),
    (["-m", "cpu", "test_on_request.py::test_peak"], ["test_peak"]),
    # -m naming one of its markers asks for it: the peak's own, or serving, with what makes it slow
    (["-m", "serving_peak", "--perf-slow"], ["test_peak"]),
    (["-m", "serving_peak and slow"], ["test_peak"]),
    (["-m", "serving and slow"], ["test_peak"]),
    (["-m", "serving_peak"], []),                                       # slow, and not asked for as slow
])
def test_a_kind_run_on_request_runs_when_its_marker_is_named(pytester, args, selected):
    """Serving cells (``Kind.on_request``) are deselected from a selection that does not name
    their marker, and counted with the slow ones; ``-m serving`` runs the target-rate cells,
    the peak search (also slow) only with --perf-slow or when named."""
    pytester.makepyfile(test_on_request=ON_REQUEST)
    r, ids = _collect(pytester, *args)
    assert ids == selected, (args, ids)
