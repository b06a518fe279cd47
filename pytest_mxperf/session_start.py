"""The session as pytest starts it and the plan said before anything is measured: the options
settled against this machine (its baseline loaded, a reference install built, how cells are
compared decided once: ``measure/comparison.py``), the GPU tests no GPU here can run skipped
with one line, and the plan's first line (``measure/planning.py``'s cost model, this
machine's history read once by ``measure/known.py``). Every problem is one usage error, said
before anything is measured."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Tuple

import pytest

from pytest_mxperf.model import options as opts

if TYPE_CHECKING:  # pragma: no cover
    from pytest_mxperf.judge.thresholds import Threshold
    from pytest_mxperf.measure.session import PerfSession


def start_session(config, options: opts.PerfOptions) -> "PerfSession":
    """The session as pytest starts, from the options ``command_line.read`` read: settled
    against this machine (its baseline loaded, a reference install built), how cells are
    compared, decided once. Every problem is one usage error, said before anything is
    measured."""
    from pytest_mxperf.machine import fingerprint
    from pytest_mxperf.measure.session import PerfSession
    from pytest_mxperf.measure import comparison
    from pytest_mxperf.proc import spawn
    from pytest_mxperf.store.baselines import BaselineError
    from pytest_mxperf.proc import child_env
    child_env.pass_through(config.getoption("--perf-pass-env") or ())
    try:
        comparison.check_mxnet_distributions(options.python)
    except comparison.ComparisonError as exc:
        raise pytest.UsageError(str(exc)) from None
    spawn.sweep_stale_workdirs()  # a killed session's leftovers
    session = PerfSession(options, on_results=lambda doc: config.hook.pytest_mxperf_update_results(
        config=config, results=doc), say=lambda line: say(config, line),
        given_machine_state=lambda part: config.hook.pytest_mxperf_machine_state(config=config, part=part))
    try:
        machine = fingerprint.machine_fingerprint(options.machine)
    except ValueError as exc:
        raise pytest.UsageError(f"--perf-machine: {exc}") from None
    config.hook.pytest_mxperf_update_machine_info(config=config, machine_info=machine)
    store = session.context.store
    try:
        # A corrupt or newer-schema baseline is refused now, before anything is measured,
        # and never overwritten.
        baseline = store.load(machine["id"])
    except BaselineError as exc:
        raise pytest.UsageError(str(exc)) from None
    try:
        how, said = comparison.settle(options, machine["id"], baseline, str(store.path(machine["id"])))
    except comparison.ComparisonError as exc:
        raise pytest.UsageError(str(exc)) from None
    for line in said:
        say(config, line)
    session.begin(machine, baseline, options, how)
    _check_explicit_gpus(session)
    return session


def _check_explicit_gpus(session) -> None:
    """An explicit GPU list that this machine cannot satisfy is a usage error, said before
    anything is measured; with no GPU at all, GPU tests skip instead."""
    options, scheduler = session.context.options, session.scheduler
    if not options.ctx_explicit:
        return
    for group in options.ctx_groups:
        if any(c.startswith("gpu") for c in group):
            reason = scheduler.gpu_unavailable_reason(group)
            if reason and scheduler.num_gpus > 0:
                raise pytest.UsageError(f"--perf-ctx {','.join(group)}: {reason}")


def say(config, line: str) -> None:
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


def plan(pytest_session, session, deselected_slow: int, project_thresholds: Tuple["Threshold", ...] = ()):
    """What the session will measure and cost, said before it starts (``planning.plan_for``),
    with the slow tests deselected (``select``), after the GPU tests that no GPU here can run are
    skipped with one line: (the plan, the grids of the tests that measure their grid together,
    in baseline mode the recorded setup, rebuilt now, before any test measures:
    ``recorded_setup``, and why every cell is measured in pairs with it from the first process,
    ``first_path``, "" for the cheap path) or (None, {}, None, ""). ``project_thresholds``: the
    pyproject's minimum effects (``command_line.read``), after the tests' own markers."""
    from pytest_mxperf.measure import known, planning
    from pytest_mxperf.output import report
    items = pytest_session.items
    if not any(planning.planned(it).measuring for it in items):
        return None, {}, None, ""
    skipped = {id(it) for it in _skip_gpu_tests_without_a_usable_gpu(pytest_session, session)}
    runnable = [it for it in items if id(it) not in skipped and not it.get_closest_marker("skip")]
    grids = planning.grids([it for it in items if id(it) not in skipped])
    ctx = session.context
    ab = ctx.comparison.ab
    reference = planning.load_reference()
    # collecting only: nothing will run, so no MXNet process is started to read the setup and
    # the speed (1.4 of a 2.7-s --collect-only here); the estimate is then the machine's last
    # sessions of the kind whatever their setup, else the reference's at its own speed
    probe = None if pytest_session.config.option.collectonly else session.scheduler.probe
    planned = [planning.planned(it) for it in runnable]
    # the recorded setup first (built, or found in the cache, before any test measures): a
    # baseline that cannot be settled against in a duet costs what a session with nothing to
    # settle costs, and the first line says which of its cells can go to a duet
    setup = None
    if any(t.measuring for t in planned) and settles_against_setup(pytest_session.config, session):
        from pytest_mxperf.measure.comparison import recorded_setup
        setup = recorded_setup(ctx, ctx.environ)
    kind = "suite" if ctx.kind == "baseline" and not (setup is not None and setup.ready) else ctx.kind
    path = known.first_path(ctx.options, ctx.machine, ctx.baseline) if setup is not None and setup.ready else None

    def made_for(kind: str, ab: bool):
        return planning.plan_for(planned, ctx.options, ab,
                                 explicit_pairs=bool(pytest_session.config.getoption("--perf-processes")),
                                 deselected_slow=deselected_slow,
                                 known=known.known_costs(ctx.options, ctx.machine, kind, planning.session_setup(probe)),
                                 reference=planning.reference_known(reference, "ab" if kind == "paired" else kind,
                                                                    ctx.options),
                                 speed=planning.speed_from(probe, reference))
    if path is not None and path.paired:  # priced as the A/B session it is, from this machine's own of its kind
        made = made_for("paired", True)
        late = planning.first_stage_late(made.plan, ctx.options.deadline)
        if late:  # under a deadline its first stage cannot end in: the cheap path measures something first
            path = planning.FirstPath(False, f"{path.why}, but {late}")
        else:
            kind, ab = "paired", True
    if kind != "paired":
        made = made_for(kind, ab)
    try:
        thresholds = marker_thresholds(runnable) + tuple(project_thresholds)
    except opts.OptionError as exc:
        raise pytest.UsageError(str(exc)) from None
    spreads = known.known_spreads(ctx.options, ctx.machine)
    first = (known.first_pairs(ctx.options, spreads) if ab and not pytest_session.config.getoption("--perf-processes")
             else planning.FirstPairs(made.plan.duet_pairs))
    made = dataclasses.replace(made, plan=dataclasses.replace(made.plan, thresholds=thresholds, pair_spreads=spreads,
                                                              duet_pairs=first.pairs, one_pair_cells=first.cells))
    if made.plan.tests:
        settling = (report.settling_words(setup.ready, made.duet_tests, made.plan.tests, path) if setup is not None
                    else "")
        say(pytest_session.config, report.plan_line(made.plan.tests, ctx.options, made.plan.ab_pairs,
                                                    made.plan.duet_pairs, made.duet_tests, made.estimate,
                                                    deselected_slow, ab=ab, speed=made.plan.speed,
                                                    settling=settling, paired=kind == "paired", first_why=first.why,
                                                    constants=made.constants))
    elif deselected_slow:  # the measuring tests left will skip: the slow ones are said all the same
        say(pytest_session.config, f"mxperf: {report.slow_note(deselected_slow)}")
    if setup is not None and made.plan.tests:
        say(pytest_session.config, setup.said(kind == "paired"))
    if not made.plan.tests:
        return made.plan, grids, None, ""
    return made.plan, grids, setup, path.why if path is not None and path.paired else ""


def marker_thresholds(items) -> Tuple["Threshold", ...]:
    """The ``mxperf_threshold`` markers of the collected tests (one per test: the closest); a
    bad value is an OptionError (one line)."""
    from pytest_mxperf.judge.thresholds import Threshold, check_threshold
    out = []
    for it in items:
        mark = it.get_closest_marker("mxperf_threshold")
        if mark is None:
            continue
        where = f"@pytest.mark.mxperf_threshold on {it.nodeid}"
        value = mark.args[0] if mark.args else mark.kwargs.get("min_effect")
        out.append(Threshold(check_threshold(value, where), where, nodeid=it.nodeid, figure=mark.kwargs.get("figure")))
    return tuple(out)


def settles_against_setup(config, session) -> bool:
    """Whether this session settles its suspects against the baseline's recorded setup: baseline
    mode with a baseline, measuring and judging (not recording, not a smoke run, not
    collecting only)."""
    ctx = session.context
    o = ctx.options
    return (not ctx.comparison.ab and ctx.baseline is not None and not o.update_baselines and not o.smoke
            and not config.option.collectonly)


def _skip_gpu_tests_without_a_usable_gpu(pytest_session, session) -> list:
    """Measuring GPU tests selected and no GPU usable here (``machine/gpu_readiness.py``):
    one line, said now, before any worker; the GPU tests skip with it (the list returned),
    and the session fails at its end when the policy says so (``outcome/policy.py``)."""
    import re
    import sys

    from pytest_mxperf.machine import gpu_readiness, hardware
    from pytest_mxperf.measure import planning
    from pytest_mxperf.measure.ledger import NO_GPU, Event
    config = pytest_session.config
    items = [it for it in pytest_session.items if it.get_closest_marker("gpu") and planning.planned(it).measuring]
    if not items or config.option.collectonly:
        return []
    ctx, scheduler = session.context, session.scheduler
    o = ctx.options
    asked = "gpu" in re.findall(r"\w+", config.getoption("markexpr", "") or "") or (
        o.ctx_explicit and any(c.startswith("gpu") for g in o.ctx_groups for c in g))
    facts = hardware.gpu_facts()
    finding = gpu_readiness.check(
        facts.gpus, hardware.visible_gpus(ctx.environ, facts.gpus), scheduler.probe,
        hardware.mxnet_distribution(o.python), python=o.python or sys.executable,
        nvml_note=facts.reason if facts.source == "absent" else None,
        cuda_visible_devices=ctx.environ.get("CUDA_VISIBLE_DEVICES"))
    decision = gpu_readiness.decide(finding, asked, o.fail_on)
    if decision is None:
        return []
    session.ledger.event(Event(NO_GPU, decision.finding.line, fails=decision.fails))
    for it in items:
        it.add_marker(pytest.mark.skip(reason=decision.finding.line))
    say(config, decision.line)
    return items
