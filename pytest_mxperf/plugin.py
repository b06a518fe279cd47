"""pytest wiring: markers, fixtures and hooks, each delegating in a few lines. The options
are ``command_line.py``'s; the session's start and its plan ``session_start.py``'s, the grid
and the selection ``collection.py``'s (the cost model ``measure/planning.py``'s); the end of a session
``outcome/finish.py``'s, what it shows ``output/``'s. State on pytest's config goes through
``config.stash``.

Data flow: options -> Workload -> measure/ (scheduler: fresh worker processes, machine-state
probes) -> CellMeasurement -> outcome/ (comparator, confirmation, policy) -> SessionOutcome ->
output/, results, history. This process never imports mxnet.
"""

from __future__ import annotations

import time

import pytest

from pytest_mxperf import collection, command_line, session_start
from pytest_mxperf.measure import planning
from pytest_mxperf.measure.fixture import Measurer
from pytest_mxperf.measure.ledger import NOT_REACHED, Event
from pytest_mxperf.measure.planning import Plan
from pytest_mxperf.measure.session import PerfSession
from pytest_mxperf.model import kinds
from pytest_mxperf.model.outcome import EXIT_NONE_SELECTED

#: the markers that are no kind's own (each kind's: ``model/kinds.py``, ``markers()``)
MARKERS = {
    "cpu": "measures on CPU contexts",
    "gpu": "measures on GPU contexts (with no usable GPU: one line naming the cause and the fix, the tests "
           "skip with it, and a session that asked for them fails unless --perf-fail-on=-no-gpu)",
    "multi_device": "data parallel over several contexts",
    "slow": "heavy CPU cells; deselected unless --perf-slow, a -m expression that names 'slow', or the cell is named: "
            "its node id with its parameters, or its model and batch size in --perf-models and --perf-batch-sizes "
            "(GPU cells run); a kind's tests run on request (serving) are deselected so unless -m names its marker",
    "mxperf_priority(n)": "with --perf-deadline, tests of lower n run first (default 100)",
    "mxperf_threshold(min_effect, figure=None)": "the minimum effect of the cells this test measures (or of one "
        "figure of them, e.g. figure='latency_p99_ms'), instead of --perf-min-effect and of pyproject.toml's "
        "[tool.pytest-mxperf.thresholds]; at least 0.03",
    "mxperf_grid(models=None, batch_sizes=None, slow=None, devices=None, default_batches=None)":
        "the model x batch grid of a test; slow maps a model to the smallest batch that is slow on CPU; "
        "default_batches: the batch sizes of the default session (the others are slow on CPU); "
        "devices (e.g. ('gpu',)) keeps only the --perf-ctx groups of those devices",
}

#: what the plugin keeps on pytest's config: the session, the grids of the collected tests,
#: what its selection deselected, the project's thresholds (read once with the options), every test deselected (by anything), whether the selection
#: left no measuring test, and the end of the session's outcome
SESSION = pytest.StashKey[PerfSession]()
GRIDS = pytest.StashKey[dict]()
SELECTION = pytest.StashKey[collection.Selection]()
THRESHOLDS = pytest.StashKey[tuple]()
DESELECTED = pytest.StashKey[list]()
NONE_SELECTED = pytest.StashKey[bool]()
OUTCOME = pytest.StashKey[object]()


def pytest_addhooks(pluginmanager):
    from pytest_mxperf import hookspecs
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser):
    command_line.add_options(parser)


def markers() -> dict:
    """Every marker the plugin declares: ``MARKERS`` and each kind's own (``model/kinds.py``),
    the first kind's description for a marker two kinds share."""
    out = dict(MARKERS)
    for k in kinds.kinds():
        if k.marker:
            out.setdefault(k.marker, k.description)
    return out


def pytest_configure(config):
    for name, doc in markers().items():
        config.addinivalue_line("markers", f"{name}: {doc}")
    options, config.stash[THRESHOLDS] = command_line.read(config)
    config.stash[SESSION] = session_start.start_session(config, options)


def _session(config) -> PerfSession:
    return config.stash[SESSION]


def pytest_generate_tests(metafunc):
    collection.parametrize(metafunc, _session(metafunc.config).context.options)


@pytest.hookimpl(trylast=True)  # after -m/-k and --deselect
def pytest_collection_modifyitems(session, config, items):
    config.stash[SELECTION] = collection.select(config, items, _session(config).context.options)


def pytest_deselected(items):
    if items:
        items[0].config.stash.setdefault(DESELECTED, []).extend(items)


def pytest_collection_finish(session):
    """Say what the session will cost before it starts (``session_start.plan``), or, when the
    selection left none of the measuring tests collected, why (``collection.none_selected``)."""
    config = session.config
    s = config.stash.get(SESSION, None)
    if s is not None:
        selection = config.stash.get(SELECTION, collection.Selection())
        plan, setup, from_start = None, None, ""
        config.stash[NONE_SELECTED] = collection.none_selected(session, selection, config.stash.get(DESELECTED, []))
        if not config.stash[NONE_SELECTED]:
            plan, config.stash[GRIDS], setup, from_start = session_start.plan(session, s, selection.slow,
                                                                            config.stash.get(THRESHOLDS, ()))
        s.planned(plan or Plan(deselected_slow=selection.slow), setup, from_start)


@pytest.fixture(scope="session")
def mxperf_session(request) -> PerfSession:
    return _session(request.config)


@pytest.fixture
def mxperf(request, record_property, mxperf_session):
    """Measure MXNet workloads in fresh worker processes; see fixture.Measurer."""
    node, s = request.node, mxperf_session
    params = planning.grid_params(node)
    grid = request.config.stash.get(GRIDS, {}).get(planning.grid_key(node), ()) if params else ()
    late = s.clock.past_deadline(node.nodeid, grid=planning.grid_shares_workers(node, grid))
    if late:
        s.ledger.event(Event(NOT_REACHED, late, node.nodeid))
        pytest.skip(late)
    started = time.monotonic()
    s.clock.test_started(node.nodeid, started)
    measurer = Measurer(s.scheduler, s.ledger, node.nodeid, record_property=record_property,
                        on_cell=_on_cell(request, s), skip=pytest.skip, fail=lambda msg: pytest.fail(msg, pytrace=False),
                        grid=grid, params=params)
    yield measurer
    # every measuring test's time is kept for the next estimate (a multi-device test measures
    # through its own calls and keeps no record); the deadline's "a test takes" counts the ones
    # that measured a cell
    s.clock.test_took(time.monotonic() - started, node.nodeid, measured=bool(measurer.records))


def _on_cell(request, s: PerfSession):
    """After each cell a test measures: its pytest-benchmark record (the first keeps the test's
    name, others are named apart by their cell key) and the interim report (a job killed later
    keeps this cell)."""
    from pytest_mxperf.outcome import session_files
    from pytest_mxperf.output import benchmark_records
    node, seen = request.node, []

    def on_cell(rec):
        seen.append(rec.cell.workload.key())
        suffix = "" if len(seen) == 1 else f"::{rec.cell.workload.key()}"
        benchmark_records.add_cell(benchmark_records.session_of(request.config), node.name + suffix,
                                   node.nodeid + suffix, getattr(node, "callspec", None), rec.cell)
        session_files.write_progress(s)
    return on_cell


@pytest.fixture
def zoo_model(model):
    """The ModelSpec of the parametrised ``model`` (name, input shape, classes, FLOPs)."""
    from pytest_mxperf import zoo
    return zoo.get_model(model)


def pytest_benchmark_update_machine_info(config, machine_info):
    from pytest_mxperf.machine import hardware
    machine_info["mxperf"] = {"hardware": hardware.summary()}


def pytest_benchmark_update_json(config, benchmarks, output_json):
    outcome = config.stash.get(OUTCOME, None)
    cells = outcome.cells if outcome is not None else _session(config).ledger.cells()
    output_json["mxperf"] = {"cells": [r.to_dict() for r in cells.values()]}


def pytest_sessionfinish(session, exitstatus):
    """The end of the session in one call; the exit status from its outcome's failures (or
    EXIT_NONE_SELECTED: measuring tests were collected and the selection left none)."""
    if session.config.stash.get(NONE_SELECTED, False) and session.exitstatus == 0:
        session.exitstatus = EXIT_NONE_SELECTED  # measuring tests collected, none selected: said in one line
    s = session.config.stash.get(SESSION, None)
    if s is not None and (s.ledger.records or s.ledger.findings or s.ledger.events() or s.ledger.skips):
        from pytest_mxperf.outcome import finish
        from pytest_mxperf.output import messages
        outcome = session.config.stash[OUTCOME] = finish.end_session(s, say=lambda what: s.say(messages.said(what)))
        if outcome.exit_status and session.exitstatus == 0:
            session.exitstatus = outcome.exit_status


@pytest.hookimpl(tryfirst=True)  # before pytest-benchmark's, whose tables it keeps off the screen unless asked
def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """One screen: the outcome in one line, what failed or changed, one compact table, and
    where the rest is; the full report with -v (output/report.py)."""
    outcome = config.stash.get(OUTCOME, None)
    if outcome is not None:
        from pytest_mxperf.output import benchmark_records, report
        verbose = config.option.verbose > 0
        benchmark = benchmark_records.tables(config, outcome.context.options.report_dir, verbose, report.write_text)
        report.show(terminalreporter, outcome, exitstatus=int(exitstatus), command=command_line.command(config),
                    reference=config.getoption("--perf-reference"), verbose=verbose, benchmark=benchmark)
