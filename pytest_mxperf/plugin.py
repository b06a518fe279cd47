"""pytest wiring: markers, fixtures and hooks (the options are ``command_line.py``'s). The
logic lives in plain modules.

Data flow: options -> Workload -> measure/session + runner (fresh worker processes,
machine-state probes) -> CellMeasurement -> outcome/ (verdicts, confirmation, policy) ->
report, results, history. This process never imports mxnet.
"""

from __future__ import annotations

import time

import pytest

from pytest_mxperf import command_line
from pytest_mxperf.measure import planning
from pytest_mxperf.measure.fixture import Measurer
from pytest_mxperf.measure.session import PerfSession
from pytest_mxperf.model import options as opts

MARKERS = {
    "cpu": "measures on CPU contexts",
    "gpu": "measures on GPU contexts (with no usable GPU: one line naming the cause and the fix, the tests "
           "skip with it, and a session that asked for them fails unless --perf-fail-on=-no-gpu)",
    "scoring": "forward-only throughput, as MXNet's benchmark_score.py",
    "training": "forward, backward and optimizer update throughput",
    "multi_device": "data parallel over several contexts",
    "distributed": "distributed kvstore (ps-lite roles on 127.0.0.1)",
    "latency": "batch-by-batch latency percentiles (serving)",
    "io": "input pipeline: loader alone, trainer alone, and the two end to end (RecordIO, NDArrayIter)",
    "slow": "heavy CPU cells; deselected unless --perf-slow or a -m expression that names 'slow' (GPU cells run)",
    "mxperf_priority(n)": "with --perf-deadline, tests of lower n run first (default 100)",
    "mxperf_grid(models=None, batch_sizes=None, slow=None, devices=None, default_batches=None)":
        "the model x batch grid of a test; slow maps a model to the smallest batch that is slow on CPU; "
        "default_batches: the batch sizes of the default session (the others are slow on CPU); "
        "devices (e.g. ('gpu',)) keeps only the --perf-ctx groups of those devices",
}


def pytest_addhooks(pluginmanager):
    from pytest_mxperf import hookspecs
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser):
    command_line.add_options(parser)


def pytest_configure(config):
    import dataclasses

    from pytest_mxperf.machine import fingerprint
    from pytest_mxperf.proc import spawn
    from pytest_mxperf.store.baselines import BaselineError
    for name, doc in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {doc}")
    try:
        options = command_line.options_from(config)
    except opts.OptionError as exc:
        raise pytest.UsageError(str(exc)) from None
    if getattr(config.option, "numprocesses", None) or getattr(config.option, "dist", "no") != "no":
        raise pytest.UsageError("pytest-mxperf refuses pytest-xdist: measurements must never run "
                                "concurrently on one machine (run without -n/--dist)")
    if options.baselines_dir is None:
        options = dataclasses.replace(options, baselines_dir=str(config.rootpath / "baselines"))
    if options.reference and options.reference != command_line.REFERENCE_BASELINE:
        options = dataclasses.replace(options, reference=command_line.reference_python(options.reference, options.python))
    command_line.check_mxnet_distributions(options.python)
    spawn.sweep_stale_workdirs()  # a killed session's leftovers
    session = PerfSession(options, on_results=lambda doc: config.hook.pytest_mxperf_update_results(
        config=config, results=doc), say=lambda line: _say(config, line),
        given_machine_state=lambda part: config.hook.pytest_mxperf_machine_state(config=config, part=part))
    config._mxperf_session = session
    try:
        machine = fingerprint.machine_fingerprint(options.machine)
    except ValueError as exc:
        raise pytest.UsageError(f"--perf-machine: {exc}") from None
    config.hook.pytest_mxperf_update_machine_info(config=config, machine_info=machine)
    try:
        # A corrupt or newer-schema baseline is refused now, before anything is measured,
        # and never overwritten.
        baseline = session.store.load(machine["id"])
    except BaselineError as exc:
        raise pytest.UsageError(str(exc)) from None
    requirement = None
    if options.reference == command_line.REFERENCE_BASELINE:
        requirement = command_line.baseline_requirement(machine["id"], baseline, str(session.store.path(machine["id"])))
        options = dataclasses.replace(options, reference=command_line.reference_python(requirement, options.python))
    session.begin(machine, baseline, options, requirement)
    if options.ctx_explicit:
        # An explicit GPU list that this machine cannot satisfy is a usage error, said
        # before anything is measured; with no GPU at all, GPU tests skip instead.
        for group in options.ctx_groups:
            if any(c.startswith("gpu") for c in group):
                reason = session.gpu_unavailable_reason(group)
                if reason and session.num_gpus > 0:
                    raise pytest.UsageError(f"--perf-ctx {','.join(group)}: {reason}")


def _say(config, line: str) -> None:
    """A line on the terminal now, also while a test runs (pytest captures its output then:
    the line is written with capturing suspended, as ``capsys.disabled()`` does)."""
    import contextlib
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is None:
        return
    capman = config.pluginmanager.get_plugin("capturemanager")
    with capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext():
        tr.ensure_newline()  # after the progress dots
        tr.write_line(line)


def _session(config) -> PerfSession:
    return config._mxperf_session


def _ctx_id(group) -> str:
    kind = group[0].split(":")[0]
    return kind + "-".join(c.split(":")[1] for c in group)


def _explicitly_parametrized(metafunc) -> set:
    names = set()
    for mark in metafunc.definition.iter_markers("parametrize"):
        argnames = mark.args[0] if mark.args else mark.kwargs.get("argnames", ())
        if isinstance(argnames, str):
            argnames = [a.strip() for a in argnames.split(",")]
        names.update(argnames)
    return names


def pytest_generate_tests(metafunc):
    session = _session(metafunc.config)
    options = session.options
    # A test that parametrises model / batch_size / ctx itself keeps its own values.
    names = [n for n in metafunc.fixturenames if n not in _explicitly_parametrized(metafunc)]
    if "own_model" in names:
        metafunc.parametrize("own_model", list(options.model_files),
                             ids=[f.rsplit("/", 1)[-1] for f in options.model_files])
    grid = metafunc.definition.get_closest_marker("mxperf_grid")
    kw = grid.kwargs if grid else {}
    if "ctx" in names:
        # a grid limited to some devices (float16: GPUs) gets no cells of the others, so
        # that "-m cpu" does not select cells that can only skip
        devices = kw.get("devices")
        groups = [g for g in options.ctx_groups if not devices or g[0].split(":")[0] in devices]
        params = [pytest.param(list(g), id=_ctx_id(g), marks=getattr(pytest.mark, g[0].split(":")[0]))
                  for g in groups]
        metafunc.parametrize("ctx", params)
    if "model" in names:
        from pytest_mxperf import zoo
        allowed = kw.get("models") or zoo.model_names()
        models = options.selected_models(allowed)
        slow = kw.get("slow") or {}
        batches = options.selected_batches(kw.get("batch_sizes") or opts.DEFAULT_BATCH_SIZES)
        everyday = kw.get("default_batches") or batches  # the others are slow on CPU
        if "batch_size" in names:
            params = []
            for m in models:
                for b in batches:
                    marks = [pytest.mark.slow] if (m in slow and b >= slow[m]) or b not in everyday else []
                    params.append(pytest.param(m, b, id=f"{m}-b{b}", marks=marks))
            metafunc.parametrize("model,batch_size", params)
        else:
            metafunc.parametrize("model", list(models))
    elif "batch_size" in names:
        batches = options.selected_batches(kw.get("batch_sizes") or opts.DEFAULT_BATCH_SIZES)
        metafunc.parametrize("batch_size", list(batches), ids=[f"b{b}" for b in batches])


def _markexpr_names_slow(config) -> bool:
    expr = config.getoption("markexpr", "") or ""
    return "slow" in expr


def pytest_collection_modifyitems(session, config, items):
    options = _session(config).options
    if options.deadline is not None:
        items[:] = by_priority(items)
    if not (options.include_slow or _markexpr_names_slow(config)):
        keep, drop = [], []
        for it in items:
            # "slow" is about 2-core CPUs: on a GPU the whole grid runs by default
            slow = it.get_closest_marker("slow") and not it.get_closest_marker("gpu")
            (drop if slow else keep).append(it)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
            _session(config).deselected(len(drop))
    if options.shard:
        from pytest_mxperf.history.fleet import shard_of
        k, n = options.shard
        keep = [it for it in items if shard_of(it.nodeid, n) == k]
        drop = [it for it in items if shard_of(it.nodeid, n) != k]
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
        _say(config, f"mxperf: shard {k}/{n}: {len(keep)} of {len(keep) + len(drop)} test(s)"
                     + (f", fleet {options.fleet_id}" if options.fleet_id else ""))


def by_priority(items):
    """Measuring tests in the order a deadline should cut them (``planning.by_priority``)."""
    return [items[i] for i in planning.by_priority([_planned(it) for it in items])]


def _planned(item) -> planning.Planned:
    """What the plan needs of a collected test, read from pytest's item."""
    mark = item.get_closest_marker("mxperf_priority")
    params = getattr(getattr(item, "callspec", None), "params", {})
    return planning.Planned(
        measuring="mxperf" in getattr(item, "fixturenames", ()),
        priority=int(mark.args[0]) if mark and mark.args else None,
        group=(getattr(item, "originalname", item.name), str(params.get("model", ""))),
        markers=frozenset(m.name for m in item.iter_markers()),
        cell=((str(params["model"]), int(params.get("batch_size") or 0), str(list(params["ctx"])[0]).split(":")[0])
              if "model" in params and "ctx" in params else None),
        function="::".join(_grid_key(item)))


#: the parameters of the plugin's grid (``pytest_generate_tests``): a test's cell
GRID_PARAMS = ("model", "batch_size", "ctx")


def _grid_params(item) -> dict:
    params = getattr(getattr(item, "callspec", None), "params", {})
    return {k: params[k] for k in GRID_PARAMS if k in params}


def _grid_key(item):
    return (item.nodeid.split("::")[0], getattr(item, "originalname", item.name))


def grids(items) -> dict:
    """(module, test function) -> the grid parameters of each of its selected tests, in
    collection order: the cells a grid test measures together (``Measurer._grid_cells``).
    Tests that will skip (a mark added before they run) are left out."""
    out: dict = {}
    for it in items:
        p = _grid_params(it)
        if p and not it.get_closest_marker("skip"):
            out.setdefault(_grid_key(it), []).append(p)
    return out


@pytest.fixture(scope="session")
def mxperf_session(request) -> PerfSession:
    return _session(request.config)


@pytest.fixture
def mxperf(request, record_property, mxperf_session):
    """Measure MXNet workloads in fresh worker processes; see fixture.Measurer."""
    from pytest_mxperf.outcome import session_files
    from pytest_mxperf.output import benchmark_records
    node = request.node
    late = mxperf_session.past_deadline()
    if late:
        mxperf_session.test_not_reached(node.nodeid)
        pytest.skip(late)

    seen = []

    def on_cell(rec):
        # a test that measures several cells (e.g. float32 beside int8): the first keeps the
        # test's name, the others are named apart by their cell key, so that no two
        # pytest-benchmark entries share a name
        seen.append(rec.cell.workload.key())
        suffix = "" if len(seen) == 1 else f"::{rec.cell.workload.key()}"
        benchmark_records.add_cell(getattr(request.config, "_benchmarksession", None), node.name + suffix,
                                   node.nodeid + suffix, getattr(node, "callspec", None), rec.cell)
        session_files.write_progress(mxperf_session)  # a job killed later keeps this cell

    started = time.monotonic()
    params = _grid_params(node)
    grid = getattr(request.config, "_mxperf_grids", {}).get(_grid_key(node), ()) if params else ()
    yield Measurer(mxperf_session, node.nodeid, record_property=record_property, on_cell=on_cell,
                   skip=pytest.skip, fail=lambda msg: pytest.fail(msg, pytrace=False), grid=grid, params=params)
    if seen:
        mxperf_session.test_took(time.monotonic() - started)


@pytest.fixture
def zoo_model(model):
    """The ModelSpec of the parametrised ``model`` (name, input shape, classes, FLOPs)."""
    from pytest_mxperf import zoo
    return zoo.get_model(model)


def pytest_benchmark_update_machine_info(config, machine_info):
    from pytest_mxperf.machine import hardware
    machine_info["mxperf"] = {"hardware": hardware.summary()}


def pytest_benchmark_update_json(config, benchmarks, output_json):
    s = _session(config)
    output_json["mxperf"] = {"cells": [r.to_dict() for r in s.cells().values()]}


def pytest_collection_finish(session):
    """Say what the session will cost before it starts; in A/B mode, the pairs per cell
    follow from the number of cells (see stats.pairs_needed)."""
    s = getattr(session.config, "_mxperf_session", None)
    if s is None:
        return
    from pytest_mxperf.output import report
    if not any(_planned(it).measuring for it in session.items):
        return
    skipped = {id(it) for it in _skip_gpu_tests_without_a_usable_gpu(session, s)}
    session.config._mxperf_grids = grids([it for it in session.items if id(it) not in skipped])
    # a test that skips before it runs (an empty parametrization, no GPU) costs nothing
    planned = [_planned(it) for it in session.items if id(it) not in skipped and not it.get_closest_marker("skip")]
    tests = sum(p.measuring for p in planned)
    if not tests:
        return
    # in A/B mode, resident worker kinds run as duets; distributed cells as process pairs
    duet_tests = planning.duet_tests(planned)
    ab_pairs = s.ab_pairs
    if s.options.reference and not s.options.smoke and not session.config.getoption("--perf-processes"):
        ab_pairs = planning.ab_pairs(tests)
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    plan = None
    if not s.options.reference:
        plan = planning.estimate(planned, s.options.processes, can_share=s.options.deadline is None)
    if tr is not None:
        tr.write_line(report.plan_line(tests, s.options, ab_pairs, s.duet_pairs, duet_tests, plan,
                                       s.deselected_slow))
    s.plan(ab_pairs, report.planned_test_seconds(s.options, s.duet_pairs, ab_pairs, duet=duet_tests == tests))
    s.expect(tests, plan.seconds if plan else None)


def _skip_gpu_tests_without_a_usable_gpu(session, s: PerfSession) -> list:
    """Measuring GPU tests selected and no GPU usable here (``machine/gpu_readiness.py``):
    one line, said now, before any worker; the GPU tests skip with it (the list returned),
    and the session fails at its end when the policy says so (``outcome/finish.end_session``)."""
    import re
    import sys

    from pytest_mxperf.machine import gpu_readiness, hardware
    config = session.config
    items = [it for it in session.items if it.get_closest_marker("gpu") and _planned(it).measuring]
    if not items or config.option.collectonly:
        return []
    asked = "gpu" in re.findall(r"\w+", config.getoption("markexpr", "") or "") or (
        s.options.ctx_explicit and any(c.startswith("gpu") for g in s.options.ctx_groups for c in g))
    facts = hardware.gpu_facts()
    finding = gpu_readiness.check(
        facts.gpus, hardware.visible_gpus(s.environ, facts.gpus), s.probe,
        hardware.mxnet_distribution(s.options.python), python=s.options.python or sys.executable,
        nvml_note=facts.reason if facts.source == "absent" else None,
        cuda_visible_devices=s.environ.get("CUDA_VISIBLE_DEVICES"))
    decision = gpu_readiness.decide(finding, asked, s.options.fail_on)
    if decision is None:
        return []
    s.no_usable_gpu(decision.finding.line, decision.fails)
    for it in items:
        it.add_marker(pytest.mark.skip(reason=decision.finding.line))
    _say(config, decision.line)
    return items


def pytest_sessionfinish(session, exitstatus):
    s = getattr(session.config, "_mxperf_session", None)
    if s is not None:
        from pytest_mxperf.outcome import finish
        status = finish.end_session(s)
        if status == finish.EXIT_FAILED:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        elif status == finish.EXIT_INTERNAL_ERROR:
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR


@pytest.hookimpl(tryfirst=True)  # before pytest-benchmark's, whose tables it keeps off the screen unless asked
def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """One screen: the outcome in one line, what failed or changed, one compact table, and
    where the rest is (output/report.py). The full report (figures shown, not judged, every
    figure's row, the machine and software) goes to --perf-report DIR/report.txt and, with
    -v, after the screen; pytest-benchmark's tables to DIR/benchmark.txt, and to the
    terminal with -v or any of its display options."""
    s = getattr(config, "_mxperf_session", None)
    if s is None or not (s.records or s.findings or s.end_messages):
        return
    from pytest_mxperf.output import report
    verbose = config.option.verbose > 0
    benchmark = _benchmark_tables(config, s.options.report_dir, verbose) if s.records else None
    outcome = getattr(s, "outcome", None)
    screen = report.session_lines(s, outcome, exitstatus=int(exitstatus), command=_command(config),
                                  reference=config.getoption("--perf-reference"))
    full = report.full_lines(s, outcome)
    report_file, unwritten = _write_text(s.options.report_dir, "report", screen + ["", "full report:"] + full)
    terminalreporter.section("mxperf")
    for line in screen + unwritten + [report.footer_line(s, full_below=verbose, report_file=report_file,
                                                         benchmark=benchmark)]:
        terminalreporter.write_line(line)
    if verbose:
        terminalreporter.section("mxperf: full report", sep="-")
        for line in full:
            terminalreporter.write_line(line)


def _command(config) -> str:
    """The command line the session ran with, to say again with one more option."""
    import shlex
    args = list(config.invocation_params.args)
    return "pytest" + (" " + shlex.join(args) if args else "")


def _write_text(report_dir, what: str, lines) -> tuple:
    """The full report (``what`` "report") or pytest-benchmark's tables ("benchmark") into
    --perf-report DIR: (its path or None, the line saying it could not be written)."""
    from pytest_mxperf.outcome import session_files
    if not report_dir:
        return None, []
    name = session_files.TEXT_REPORT if what == "report" else session_files.BENCHMARK_TABLES
    try:
        return session_files.write_text(report_dir, name, list(lines)), []
    except OSError as exc:
        return None, [f"mxperf: {name} not written to {report_dir}: {exc}"]


def _benchmark_tables(config, report_dir, verbose: bool):
    """pytest-benchmark's terminal tables of the cells: written to DIR/benchmark.txt with
    --perf-report DIR, and kept off the terminal unless -v or one of its display options
    asks for them, through the attribute its --benchmark-quiet sets (``BenchmarkSession.quiet``,
    read by its ``display`` only: its --benchmark-json, --benchmark-save/-autosave and
    --benchmark-compare-fail work as before). Returns what the screen says of them: where
    they are ("" when in no file), or None when they follow on the terminal."""
    from pytest_mxperf.output import benchmark_records
    bs = getattr(config, "_benchmarksession", None)
    if bs is None or not getattr(bs, "groups", None):
        return None
    where = None
    if report_dir:
        try:
            text = benchmark_records.table_text(bs, config)
        except (ImportError, AttributeError, TypeError):  # a pytest-benchmark whose table is drawn otherwise
            text = ""
        if text:
            where, _ = _write_text(report_dir, "benchmark", text.splitlines())
    if verbose or getattr(bs, "verbose", False) or benchmark_records.display_asked(config.getoption):
        return None
    bs.quiet = True
    return where or ""
