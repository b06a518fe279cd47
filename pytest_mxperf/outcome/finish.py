"""The end of a session, in one call: ``end_session`` returns the immutable outcome
(``model/outcome.SessionOutcome``). One pipeline, each stage taking the previous one's output:

1. measured -> judged: the session's comparator (``comparators.choose``: this machine's
   baseline, or A/B against a reference install) judges every figure of every measured cell,
   with the machine's state labelled around every process; suspects are measured again
   through the cell's own worker kind (``comparators.settle``, the one loop of both modes),
   then the answers each cell computed are compared (``answer_check``).
2. judged -> what it means: the environment advisor's advice, the failing cells' operator
   profiles (``--perf-profile``: every cell's; a recording keeps each cell's only where a later
   session could not profile the recorded setup itself: ``keeps_profiles``), and the failures
   by the policy (``policy.failures``: every ``--perf-fail-on`` rule).
3. -> written: the baseline (``--perf-update-baselines``), the history store entry, the
   report files (results.json, summary.md, plots). A writer that fails does not stop the
   others: its failure is a typed failure of the outcome (exit status 6).

Nothing here renders a line: ``output/`` says the outcome.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from pytest_mxperf.judge import thresholds
from pytest_mxperf.judge import verdict as vd
from pytest_mxperf.output import reasons
from pytest_mxperf.measure import profiling as profiles
from pytest_mxperf.measure.ledger import CellRecord
from pytest_mxperf.measure.scheduler import Side
from pytest_mxperf.measure.session import PerfSession
from pytest_mxperf.model.measurement import cell_of
from pytest_mxperf.model.outcome import WRITER, Advice, Failure, Profiled, Recorded, SessionOutcome, Written
from pytest_mxperf.outcome import comparators, policy
from pytest_mxperf.outcome.answer_check import answer_verdicts
from pytest_mxperf.outcome.judging import Judged, software_facts
from pytest_mxperf.outcome.session_files import ab_sides, record_history, results_document, with_failures, write_report
from pytest_mxperf.store import baseline_store, kept_profiles
from pytest_mxperf.store.baselines import BaselineError

#: the start of a failing verdict's advice note: said on the screen once for the session
#: (the advice's own line), on each failing figure in the full report and results.json
ADVICE = "advice: "


def _with_session_left(say: Callable[[object], None], session: PerfSession) -> Callable[[object], None]:
    """``say`` with each settling line's time left the session's, as on the progress lines
    before it: what the round's cells after this one take, or what the plan expects of the rest
    of the session (``planning.time_left``: its time outside the tests, where the suspects of
    this machine's last sessions of the kind were settled) when that is more; in the last round
    planned (``Confirmation.last``: second stages only), the round's alone. The plan's share
    outlived the settling it stood for: an unchanged session whose last sessions had settled
    more said minutes were left after its last suspect, then ended. A round of pairs, whose
    comparator says what the looks after it are expected to take (``Confirmation.after``: the
    pair-by-pair rule's pairs to a call), says that instead: the plan's rest of the session came
    from this machine's last sessions, under the rules they ran (docs/baselines.md, "When both
    setups agree")."""
    from pytest_mxperf.measure import planning
    rounds_own = [False]  # the round says its own rest: the plan's is not weighed

    def said(what: object) -> None:
        if isinstance(what, tuple):
            i, n, more, gone, left = what
            planned = (None if rounds_own[0] else
                       planning.time_left(session.context.plan, session.clock.tests_done, gone))
            what = (i, n, more, gone, max(left, planned or 0.0))
        else:
            # a round whose comparator says what the looks after it take (``Confirmation.after``)
            # knows the rest of the settling better than the plan, whose sessions ran other rules
            rounds_own[0] = bool(getattr(what, "last", False)) or getattr(what, "after", None) is not None
        say(what)
    return said


def end_session(session: PerfSession, say: Optional[Callable[[object], None]] = None) -> SessionOutcome:
    """The end of a session: its outcome, judged, decided and written. ``say``: what the
    session says while it settles suspects (a ``comparators.Confirmation`` before a round,
    each cell's progress after), rendered by the caller."""
    ctx, ledger = session.context, session.ledger
    foretell = say is not None  # what the looks after a round take is only said
    say = say or (lambda what: None)
    sides = ab_sides(session.scheduler, ctx) if ctx.comparison.ab else {}
    measured = ledger.measured_cells()
    judged = Judged({})
    advice: Tuple[Advice, ...] = ()
    notes: Dict[str, Tuple[str, ...]] = {}
    profiled: Tuple[Profiled, ...] = ()
    verdicts: Dict[str, vd.Verdict] = {}
    if measured:
        session.clock.settling = True  # settle says its own progress; the plan's cells are done
        comparator = comparators.choose(ctx, session.clock)
        judged = comparators.settle(comparator, ledger.measured_cells, session.scheduler.confirm_all,
                                    _with_session_left(say, session), session.clock.now, foretell)
        verdicts = {**judged.verdicts, **answer_verdicts(judged.cells, ctx.baseline, ctx.comparison.ab)}
        advice, notes = advise(judged.cells, verdicts)
        verdicts = {k: (dataclasses.replace(v, notes=list(v.notes) + [ADVICE + n for n in notes[k]])
                        if notes.get(k) else v) for k, v in verdicts.items()}
    cells = {**ledger.cells(), **judged.cells}
    recorded_as = None
    if measured:
        keep = False
        if ctx.options.update_baselines:
            try:
                recorded_as = _recorded_as(ctx.options.python)
            except Exception:  # noqa: BLE001 - the baseline's writer asks again and says why it could not
                recorded_as = None
            keep = recorded_as is None or keeps_profiles(*recorded_as)
        profiled = _profile(session, judged.cells, verdicts, keep)
    failures = policy.failures(ctx, ledger.events(), ledger.skips, cells, verdicts)
    outcome = SessionOutcome(ctx, cells, verdicts, failures, judged.confirmed, advice, notes, profiled,
                             ledger.events(), ledger.findings, ledger.skips, sides,
                             test_seconds=dict(session.clock.tests_done), wall_seconds=session.clock.gone())
    if not measured:
        return outcome
    return write(outcome, session.on_results, recorded_as)


# ----------------------------------------------------------------------------- the writers

def write(outcome: SessionOutcome, on_results: Callable[[Dict[str, Any]], None],
          recorded_as: Optional[Tuple[Optional[str], Optional[Dict[str, Any]]]] = None) -> SessionOutcome:
    """The writers, each on the outcome, none stopping the others: the baseline (when asked),
    the history store entry, the report files. Returns the outcome with what they wrote and,
    for each that could not, a WRITER failure naming it and why. ``recorded_as``: the
    install that measured (``_recorded_as``), read once for the session."""
    o = outcome.context.options
    failed: List[Failure] = []
    recorded = None
    if o.update_baselines:
        try:
            recorded = record_baseline(outcome, *(recorded_as or _recorded_as(o.python)))
        except Exception as exc:  # noqa: BLE001 - a baseline not written must not lose the session
            failed.append(Failure(WRITER, 1, ("baseline",), _why(exc)))
    written = Written(recorded=recorded)
    outcome = outcome.with_written(written, tuple(failed))
    doc = results_document(outcome, on_results) if (o.report_dir or o.history) else None
    if o.history and not o.smoke:
        kept, steps, error = record_history(o.history, doc)
        if error:
            outcome = outcome.with_written(outcome.written, (Failure(WRITER, 1, ("history",), error),))
        else:
            outcome = outcome.with_written(dataclasses.replace(outcome.written, history=kept, steps=steps))
    if o.report_dir:
        try:
            files = write_report(o.report_dir, with_failures(doc, outcome), outcome.context.baseline)
        except Exception as exc:  # noqa: BLE001 - the other writers' work stands
            outcome = outcome.with_written(outcome.written, (Failure(WRITER, 1, ("report",), _why(exc)),))
        else:
            outcome = outcome.with_written(dataclasses.replace(outcome.written, report_files=tuple(files)))
    return outcome


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _recorded_requirement(python: Optional[str]) -> Optional[str]:
    """``name==version`` of the MXNet distribution installed for the interpreter that
    measured (``--perf-python``, default this one), from its metadata; None when there is
    not exactly one or it cannot be listed."""
    from pytest_mxperf.proc import distributions
    try:
        return baseline_store.mxnet_requirement(distributions.installed_mxnet_distributions(python))
    except distributions.InstallError:
        return None


def _recorded_install(python: Optional[str]) -> Optional[Dict[str, Any]]:
    """Which build of MXNet measured (``distributions.install_identity`` of ``--perf-python``,
    default this interpreter); None when it cannot be read (the baseline then says nothing of
    its build)."""
    from pytest_mxperf.proc import distributions
    try:
        identity = distributions.install_identity(python)
    except distributions.InstallError:
        return None
    return identity


def _recorded_as(python: Optional[str]) -> Tuple[Optional[str], Optional[Dict[str, Any]]]:
    """(requirement, build) of the MXNet that measured (``--perf-python``, default this
    interpreter): ``_recorded_requirement``, ``_recorded_install``."""
    return _recorded_requirement(python), _recorded_install(python)


def keeps_profiles(requirement: Optional[str], install: Optional[Mapping[str, Any]]) -> bool:
    """Whether a recording keeps an operator profile of every cell it records: only for an
    install a later session cannot rebuild as the recorded setup (no ``NAME==VERSION``, no
    build read, or one installed from a path or URL: a custom build). For a release from a
    package index a later failing cell is profiled beside that setup itself, rebuilt and run
    with the cell's recorded variables on the same machine in the same hour (``_profile``),
    and the recording spends no process on it (a recording's time outside its measuring tests
    all but gone: docs/baselines.md, "When both setups agree"). ``--perf-profile`` keeps them
    anyway. Pure."""
    return not requirement or not install or bool(install.get("direct_url"))


def record_baseline(outcome: SessionOutcome, requirement: Optional[str] = None,
                    install: Optional[Dict[str, Any]] = None) -> Recorded:
    """Record the measured cells into this machine's baseline: what was recorded.
    ``requirement``, ``install``: the MXNet that measured (``_recorded_as``); the install is
    kept with the features its workers reported."""
    ctx = outcome.context
    cells = {k: r for k, r in outcome.cells.items() if r.cell.ok_runs}
    software = software_facts(r for rec in cells.values() for r in rec.cell.ok_runs)
    if install is not None:
        install = dict(install, features=list(software.get("features") or []) or None)
    kept = kept_profiles.kept_summaries({p.key: dict(p.current) for p in outcome.profiles if p.current is not None})
    store = ctx.store
    path = store.update(ctx.machine["id"], [rec.cell for rec in cells.values()], machine=dict(ctx.machine),
                        software=software, pool=ctx.options.baseline_pool, profiles=kept, requirement=requirement,
                        install=install)
    runs = [r for rec in cells.values() for r in rec.cell.ok_runs]
    few = tuple(k for k, rec in cells.items() if len(rec.cell.ok_runs) < thresholds.MIN_BASELINE_PROCESSES)
    try:
        baseline = store.load(ctx.machine["id"])
        resolution = baseline.resolution_summary(list(cells)) if baseline is not None else {"cells": 0}
    except BaselineError:
        resolution = {"cells": 0}
    return Recorded(str(path), tuple(cells), ctx.options.baseline_pool, ctx.baseline is None,
                    sum(r.state == "slowed" for r in runs), len(runs), few, resolution, requirement, install)


# ----------------------------------------------------------------------------- what it means

def advice_for(cell, topology_facts: Optional[Dict[str, Any]] = None) -> List:
    """The environment advisor on what the cell's first process ran with (see advisor.py);
    ``topology_facts``: ``topology.describe()`` when the caller has read it already."""
    from pytest_mxperf.machine import advisor, topology
    run = next(iter(cell.ok_runs), None)
    if run is None:
        return []
    m = run.meta
    return advisor.advise(m.env or {}, m.env_defaults_applied or {}, m.features,
                          topology_facts if topology_facts is not None else topology.describe(),
                          cell.workload.contexts, m.num_gpus or 0, advisor.openmp_runtime(m.threads))


def advise(cells: Mapping[str, CellRecord], verdicts: Mapping[str, vd.Verdict]
           ) -> Tuple[Tuple[Advice, ...], Dict[str, Tuple[str, ...]]]:
    """The advice of the session, each piece once (which cells it concerns, how many of them
    fail), and per failing figure the advice's texts (its verdict's notes)."""
    from pytest_mxperf.machine import advisor, topology
    seen: Dict[str, List[str]] = {}
    texts: Dict[str, str] = {}
    notes: Dict[str, Tuple[str, ...]] = {}
    topology_facts = topology.describe()  # the machine's, read once for the session's cells
    topology_facts["sockets"] = advisor.socket_count(topology_facts["affinity_cpus"])
    for key, rec in cells.items():
        adv = advice_for(rec.cell, topology_facts)
        for a in adv:
            seen.setdefault(a.code, []).append(key)
            texts[a.code] = advisor.format_advice([a])[0]
        for k, v in verdicts.items():
            if cell_of(k) == key and v.failed:
                notes[k] = tuple(advisor.format_advice(adv))
    failing = {cell_of(k) for k in notes}
    return (tuple(Advice(code, texts[code], tuple(keys), len(failing.intersection(keys)))
                  for code, keys in seen.items()), notes)


def failing_cells(cells: Mapping[str, CellRecord], verdicts: Mapping[str, vd.Verdict]) -> Dict[str, str]:
    """Cell key -> why it fails: a failing verdict of any of its figures, or its floor."""
    failing: Dict[str, str] = {}
    for k, v in verdicts.items():
        key = cell_of(k)
        if v.failed and key in cells:
            failing.setdefault(key, v.kind if key == k else reasons.failing_figure(v.kind, k.partition("#")[2]))
    for key, rec in cells.items():
        if rec.below_floor:
            failing.setdefault(key, reasons.BELOW_FLOOR)
    return failing


#: the side a failing cell's profile is set beside when its baseline kept none, and the
#: suffix of that profile's chrome trace
RECORDED_SETUP_SIDE = "recorded setup"
RECORDED_SETUP_TRACE = "recorded-setup"


def _setup_unready(setup, env: Optional[Mapping[str, str]]) -> str:
    """Why a failing cell's recorded setup cannot be profiled now (its baseline kept no profile)."""
    if setup is None or not setup.ready:
        return reasons.setup_status(getattr(setup, "status", None))
    return reasons.OTHER_VARIABLES


def _recorded_env(runs) -> Optional[Dict[str, str]]:
    return next((r.env for r in runs if r.env is not None), None)


def _profile(session: PerfSession, cells: Mapping[str, CellRecord], verdicts: Mapping[str, vd.Verdict],
             keep: bool = False) -> Tuple[Profiled, ...]:
    """Profile the failing cells (every cell with --perf-profile; every recorded cell when
    ``keep``: ``keeps_profiles``) in one more, untimed worker each. A failing cell in baseline
    mode is set beside the profile its baseline kept; without one, beside its recorded setup
    profiled now when that setup is ready (the duet's interpreter and the cell's recorded
    variables)."""
    ctx = session.context
    options = ctx.options
    failing = failing_cells(cells, verdicts)
    wanted = [k for k in cells if k in failing or options.profile or keep]
    if not wanted:
        return ()
    directory = profiles.trace_dir(options.report_dir, ctx.started)
    environ = dict(ctx.environ)
    setup = ctx.comparison.setup
    out: List[Profiled] = []

    def run(key: str, python, recorded_env, side="", base=environ):
        return profiles.run_profile(cells[key].cell.workload, profiles.trace_path(directory, key, side), python=python,
                                    environ=base, recorded_env=recorded_env,
                                    timeout=options.timeout, memory_limit=options.memory_limit)

    for key in wanted:
        rec = cells[key]
        why = profiles.unprofiled_reason(rec.cell.workload)
        if why:
            if key in failing:
                out.append(Profiled(key, failing[key], unprofiled=why))
            continue
        current = run(key, options.python, _recorded_env(rec.cell.ok_runs))
        if key not in failing:
            out.append(Profiled(key, "", current))
        elif ctx.comparison.ab:
            reference = run(key, ctx.comparison.reference, _recorded_env(rec.cell.reference or rec.cell.ok_runs),
                            "reference")
            out.append(Profiled(key, failing[key], current, reference, side="reference"))
        else:
            baseline = ctx.baseline
            base = baseline.profile(key) if baseline is not None else None
            env = baseline.recorded_env(key) if baseline is not None and base is None else None
            if env is not None and setup is not None and setup.ready:
                side = Side(setup.python, tuple(sorted(env.items())))
                then = run(key, setup.python, None, RECORDED_SETUP_TRACE, base=side.environ(environ))
                out.append(Profiled(key, failing[key], current, then, side=RECORDED_SETUP_SIDE))
                continue
            missing = reasons.NO_BASELINE if baseline is None else reasons.no_profile(_setup_unready(setup, env))
            out.append(Profiled(key, failing[key], current, base, side="baseline", missing=missing))
    return tuple(out)
