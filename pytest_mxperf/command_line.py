"""The --perf-* options: declared for pytest, read into a PerfOptions, and checked against
this machine (one-line usage errors, before anything is measured). The plugin calls these;
the values' parsing and defaults are ``model/options.py``'s."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Optional, Sequence, Tuple

import pytest

from pytest_mxperf.model import options as opts

if TYPE_CHECKING:  # pragma: no cover
    from pytest_mxperf.judge.thresholds import Threshold
    from pytest_mxperf.measure.session import PerfSession


def add_options(parser) -> None:
    """Declare the --perf-* options (their defaults come from model/options.py)."""
    g = parser.getgroup("mxperf", "MXNet performance gate (pytest-mxperf)")
    g.addoption("--perf-ctx", action="append", default=None, metavar="CTX",
                help="a context list to measure on: cpu, cpu:0,1, gpu:0, gpu:0,1 (repeatable; "
                     "default: cpu and gpu, selected with -m cpu / -m gpu)")
    g.addoption("--perf-models", default=None, metavar="A,B",
                help="narrow the model grid to these zoo models")
    g.addoption("--perf-model-file", action="append", default=None, metavar="PATH|MOD:FUNC",
                help="also measure your own network: a symbol JSON file (Symbol.save / HybridBlock.export / "
                     "Module.save_checkpoint) "
                     "or package.module:function returning a Symbol or HybridBlock (repeatable)")
    g.addoption("--perf-params", default=None, metavar="PATH",
                help="the params file of --perf-model-file (arg:/aux: names, as HybridBlock.export and "
                     "Module.save_checkpoint write)")
    g.addoption("--perf-input", default=None, metavar="SPEC",
                help="inputs of --perf-model-file, without the batch: data:3x224x224, or several "
                     "name:shape[:dtype[:high]] separated by commas, e.g. tokens:128:int64:30000")
    g.addoption("--perf-loss", default=None, metavar="NAME",
                help="loss for training --perf-model-file: softmax_ce, or the name of a loss output (a graph "
                     "ending in SoftmaxOutput or a *RegressionOutput trains without it)")
    g.addoption("--perf-batch-sizes", default=None, metavar="N,M",
                help="batch sizes per device (default: 1,2,4,8,16,32 as benchmark_score.py)")
    g.addoption("--perf-processes", default=None, metavar="N",
                help="fresh worker processes per cell; the process is the unit of replication "
                     f"(default {opts.PROCESSES}; {opts.RECORDING_PROCESSES} with --perf-update-baselines)")
    g.addoption("--perf-time-budget", default=f"{opts.TIME_BUDGET_S:g}", metavar="SEC",
                help=f"timed seconds per worker process; rounds are sized to fit (default {opts.TIME_BUDGET_S:g})")
    g.addoption("--perf-timeout", default=f"{opts.TIMEOUT_S:g}", metavar="SEC",
                help="a worker whose measurement runs longer is killed and its cell reports timeout "
                     f"(default {opts.TIMEOUT_S:g})")
    g.addoption("--perf-warmup-timeout", default=f"{opts.WARMUP_TIMEOUT_S:g}", metavar="SEC",
                help="bound on a worker's untimed warm-up (import, bind, first batch, cuDNN autotune, CUDA JIT), "
                     f"counted apart from --perf-timeout (default {opts.WARMUP_TIMEOUT_S:g})")
    g.addoption("--perf-memory-limit", default="default", metavar="SIZE",
                help="address-space cap per worker: e.g. 12G, none, default (75%% of RAM)")
    g.addoption("--perf-smoke", action="store_true", default=False,
                help="one short round per cell and one process: checks that the suite works, not speed")
    g.addoption("--perf-slow", action="store_true", default=False,
                help="also run cells marked slow")
    g.addoption("--perf-floor-tolerance", default=f"{opts.FLOOR_TOLERANCE:g}", metavar="FRAC",
                help=f"tolerance below a published figure before a floor fails (default {opts.FLOOR_TOLERANCE:g})")
    g.addoption("--perf-fail-on", default="", metavar="POLICY",
                help="change what fails the session (default: " + ",".join(sorted(opts.DEFAULT_FAIL_ON))
                     + "): +name adds, -name removes, none clears; names: " + ", ".join(opts.FAIL_ON_CHOICES))
    g.addoption("--perf-pass-env", action="append", default=[], metavar="NAME",
                help="pass environment variable NAME to every child process as it is (workers, probes, "
                     "cluster roles, pip); by default a child gets only what MXNet, OpenMP, the BLAS, CUDA, "
                     "Python and the suite read (never a store location, a token or a password)")
    g.addoption("--perf-python", default=None, metavar="PATH",
                help="python interpreter for the workers (another MXNet install): the candidate")
    g.addoption("--perf-reference", default=None, metavar="PYTHON|REQ",
                help="A/B mode: also run every cell under this reference interpreter, or a requirement "
                     "such as mxnet==1.8.0.post0 (a cached venv is built for it), in alternating pairs "
                     "with the candidate; no baseline needed. 'baseline': the install this machine's "
                     "baseline was recorded with")
    g.addoption("--perf-no-probe", action="store_true", default=False,
                help="do not run the machine-state probe around each worker (no busy-machine screen)")
    g.addoption("--perf-no-peak", action="store_true", default=False,
                help="do not measure the machine's peak GFLOP/s (a worker of its own, once a session): "
                     "the hardware-limit figures show a cell's GFLOP/s without its share of the peak")
    g.addoption("--perf-update-baselines", nargs="?", const="replace", default=None, metavar="replace|add",
                help="record every measured cell into this machine's baseline file: replace (default) "
                     "starts a new comparison set, add pools this session with the previous ones")
    g.addoption("--perf-baselines-dir", default=None, metavar="DIR",
                help="where machine baselines live (default: the repository's baselines/)")
    g.addoption("--perf-machine", default=None, metavar="NAME",
                help="use NAME as the machine id instead of the hardware fingerprint")
    g.addoption("--perf-min-effect", default=f"{opts.MIN_EFFECT:g}", metavar="FRAC",
                help=f"smallest change reported as a regression or improvement (default {opts.MIN_EFFECT:g})")
    g.addoption("--perf-thresholds", default=None, metavar="PYPROJECT",
                help="read the per-cell minimum effects ([tool.pytest-mxperf.thresholds]) from this file instead "
                     "of the rootdir's pyproject.toml (the upgrade gate reads the base branch's)")
    g.addoption("--perf-report", default=None, metavar="DIR",
                help="write results.json, summary.md and PNG plots to DIR (results.json and summary.md "
                     "after every cell, so a killed job keeps what it finished)")
    g.addoption("--perf-deadline", default=None, metavar="DURATION",
                help="stop starting measuring tests when the next one would end past this time from the "
                     "session's start (e.g. 25m); tests run by mxperf_priority(N), breadth first; the rest "
                     "are 'not reached' (fails unless --perf-fail-on=-not-reached)")
    g.addoption("--perf-store", default=None, metavar="PATH|URL|none",
                help="the history store every session is appended to: an SQLite file or a postgresql:// URL "
                     "(default $MXPERF_HISTORY, else ~/.local/share/pytest-mxperf/history.sqlite); none: keep no history")
    g.addoption("--perf-shard", default=None, metavar="K/N",
                help="run the K-th of N parts of the selection (each test in exactly one part, the same on every "
                     "runner); the runners' sessions are one fleet session in the store (--perf-fleet)")
    g.addoption("--perf-fleet", default=None, metavar="ID",
                help="the fleet session this runner's session belongs to (default: the CI run, when sharded)")
    g.addoption("--perf-profile", action="store_true", default=False,
                help="profile every measured cell under mx.profiler (one more, untimed worker each) and show its "
                     "top operators; failing cells are always profiled. Chrome traces go to DIR/profiles with "
                     "--perf-report DIR, else to ~/.cache/pytest-mxperf/profiles/<session start>")


def options_from(config) -> opts.PerfOptions:
    g = config.getoption
    smoke = bool(g("--perf-smoke"))
    update = g("--perf-update-baselines") is not None
    processes = opts.parse_positive_int("--perf-processes", g("--perf-processes")
                                         or str(opts.RECORDING_PROCESSES if update else opts.PROCESSES))
    reference = g("--perf-reference")
    return opts.PerfOptions(
        ctx_groups=opts.parse_ctx_groups(g("--perf-ctx")),
        ctx_explicit=g("--perf-ctx") is not None,
        models=opts.parse_models(g("--perf-models")),
        model_files=tuple(g("--perf-model-file") or ()),
        model_params=g("--perf-params"),
        model_inputs=g("--perf-input"),
        model_loss=g("--perf-loss"),
        batch_sizes=opts.parse_batch_sizes(g("--perf-batch-sizes")),
        processes=1 if smoke else processes,
        time_budget=opts.parse_positive_float("--perf-time-budget", g("--perf-time-budget")),
        timeout=opts.parse_positive_float("--perf-timeout", g("--perf-timeout")),
        warmup_timeout=opts.parse_positive_float("--perf-warmup-timeout", g("--perf-warmup-timeout")),
        memory_limit=opts.parse_memory(g("--perf-memory-limit")),
        smoke=smoke,
        include_slow=bool(g("--perf-slow")),
        floor_tolerance=opts.parse_fraction("--perf-floor-tolerance", g("--perf-floor-tolerance")),
        fail_on=opts.parse_fail_on(g("--perf-fail-on")),
        python=g("--perf-python"),
        reference=reference,
        ab_pairs=1 if smoke else processes if g("--perf-processes") else opts.AB_PAIRS,
        duet_pairs=1 if smoke else processes if g("--perf-processes") else opts.DUET_PAIRS,
        machine_probe=not (smoke or g("--perf-no-probe")),
        machine_peak=not g("--perf-no-peak"),
        update_baselines=update,
        baseline_pool=opts.parse_baseline_pool(g("--perf-update-baselines")),
        baselines_dir=g("--perf-baselines-dir"),
        machine=g("--perf-machine"),
        min_effect=opts.parse_fraction("--perf-min-effect", g("--perf-min-effect")),
        report_dir=g("--perf-report"),
        deadline=opts.parse_duration("--perf-deadline", g("--perf-deadline")),
        profile=bool(g("--perf-profile")),
        history=_history_location(g("--perf-store")),
        shard=_shard(g("--perf-shard")),
        fleet_id=g("--perf-fleet") or (_ci_run() if g("--perf-shard") else None),
    )


def _history_location(value):
    """The store location as the session may write it (credentials removed: the whole value
    stays in this process's memory for the driver, ``history.location``)."""
    from pytest_mxperf.history import location
    from pytest_mxperf.history.store import default_location
    if value is not None and value.strip().lower() == "none":
        return None
    try:
        return location.remember(value or default_location())
    except location.LocationError as exc:
        raise pytest.UsageError(f"--perf-store: {exc}") from None


def _shard(value):
    if value is None:
        return None
    from pytest_mxperf.history.fleet import ShardError, parse_shard
    try:
        return parse_shard(value)
    except ShardError as exc:
        raise pytest.UsageError(str(exc)) from None


def _ci_run():
    from pytest_mxperf.history.provenance import ci_run
    return ci_run()


# ----------------------------------------------------------------------------- the session starts

def start_session(config) -> "PerfSession":
    """The session as pytest starts: the options read and settled against this machine (its
    baseline loaded, a reference install built), how cells are compared, decided once. Every
    problem is one usage error, said before anything is measured."""
    from pytest_mxperf.machine import fingerprint
    from pytest_mxperf.measure.session import PerfSession
    from pytest_mxperf.measure import comparison
    from pytest_mxperf.proc import spawn
    from pytest_mxperf.store.baselines import BaselineError
    try:
        options = options_from(config)
        session_thresholds(config)  # a bad table is said before anything is measured
    except opts.OptionError as exc:
        raise pytest.UsageError(str(exc)) from None
    if getattr(config.option, "numprocesses", None) or getattr(config.option, "dist", "no") != "no":
        raise pytest.UsageError("pytest-mxperf refuses pytest-xdist: measurements must never run "
                                "concurrently on one machine (run without -n/--dist)")
    if options.baselines_dir is None:
        options = dataclasses.replace(options, baselines_dir=str(config.rootpath / "baselines"))
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


def command(config) -> str:
    """The command line the session ran with, to say again with one more option."""
    import shlex
    args = list(config.invocation_params.args)
    return "pytest" + (" " + shlex.join(args) if args else "")


# ----------------------------------------------------------------------------- the grid

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


def parametrize(metafunc, options: opts.PerfOptions) -> None:
    """A test's grid from the options and its ``mxperf_grid`` marker: its contexts, models and
    batch sizes (a test that parametrises model / batch_size / ctx itself keeps its own)."""
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
        metafunc.parametrize("ctx", [pytest.param(list(g), id=_ctx_id(g), marks=getattr(pytest.mark, g[0].split(":")[0]))
                                     for g in groups])
    batches = options.selected_batches(kw.get("batch_sizes") or opts.DEFAULT_BATCH_SIZES)
    if "model" in names:
        from pytest_mxperf import zoo
        models = options.selected_models(kw.get("models") or zoo.model_names())
        if "batch_size" not in names:
            metafunc.parametrize("model", list(models))
            return
        slow, everyday = kw.get("slow") or {}, kw.get("default_batches") or batches  # the others are slow on CPU
        metafunc.parametrize("model,batch_size", [
            pytest.param(m, b, id=f"{m}-b{b}",
                         marks=[pytest.mark.slow] if (m in slow and b >= slow[m]) or b not in everyday else [])
            for m in models for b in batches])
    elif "batch_size" in names:
        metafunc.parametrize("batch_size", list(batches), ids=[f"b{b}" for b in batches])


@dataclasses.dataclass(frozen=True)
class Selection:
    """What ``select`` deselected: slow tests nobody named, and the tests of other shards."""

    slow: int = 0
    shard: int = 0


def named_on_the_command_line(config) -> frozenset:
    """The tests the command line names one by one (``FILE::TEST[PARAMS]``, a parametrised
    test with its parameters): each as (its file, resolved; what follows the file in its id)."""
    base = config.invocation_params.dir
    out = set()
    for arg in config.args:
        path, sep, rest = str(arg).partition("::")
        if sep and rest:
            out.add((str((base / path).resolve()), rest))
    return frozenset(out)


def asked_for(item, named: frozenset, options: opts.PerfOptions) -> bool:
    """Whether the user asked for this test: named one by one on the command line (its node
    id, with its parameters if it has any), or a grid cell whose batch size is in
    --perf-batch-sizes and, when it has a model parameter, whose model is in --perf-models
    (both given). A slow test asked for is measured; tests with cells of their own (no
    ``batch_size`` parameter) are asked for by node id only."""
    if (str(item.path.resolve()), item.nodeid.partition("::")[2]) in named:
        return True
    params = getattr(getattr(item, "callspec", None), "params", {})
    if options.batch_sizes is None or params.get("batch_size") not in options.batch_sizes:
        return False
    return "model" not in params or (options.models is not None and params["model"] in options.models)


def select(config, items, options: opts.PerfOptions) -> Selection:
    """The selected tests in the order the session runs them (by priority under a deadline),
    slow CPU cells deselected unless asked for (--perf-slow, ``-m`` naming ``slow``, or the
    cell named: ``asked_for``), this shard's alone. Runs after ``-m``/``-k`` (the plugin's
    hook is ``trylast``), so the slow tests counted are the ones the selection would keep."""
    from pytest_mxperf.measure import planning
    if options.deadline is not None:
        items[:] = [items[i] for i in planning.by_priority([planning.planned(it) for it in items])]
    slow = sharded = 0
    if not (options.include_slow or "slow" in (config.getoption("markexpr", "") or "")):
        # "slow" is about 2-core CPUs: on a GPU the whole grid runs by default
        named = named_on_the_command_line(config)
        keep, drop = [], []
        for it in items:
            heavy = it.get_closest_marker("slow") and not it.get_closest_marker("gpu")
            (drop if heavy and not asked_for(it, named, options) else keep).append(it)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
            slow = len(drop)
    if options.shard:
        from pytest_mxperf.history.fleet import shard_of
        k, n = options.shard
        keep = [it for it in items if shard_of(it.nodeid, n) == k]
        drop = [it for it in items if shard_of(it.nodeid, n) != k]
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
            sharded = len(drop)
        say(config, f"mxperf: shard {k}/{n}: {len(keep)} of {len(keep) + len(drop)} test(s)"
                    + (f", fleet {options.fleet_id}" if options.fleet_id else ""))
    return Selection(slow=slow, shard=sharded)


def none_selected(pytest_session, selection: Selection, deselected) -> bool:
    """Measuring tests were collected and the selection left none (``deselected``: every test
    deselected, by whatever): say why in one line, now, and return True (the session then
    exits ``EXIT_NONE_SELECTED``). A session that never collected a measuring test: False,
    nothing said."""
    from pytest_mxperf.measure import planning
    from pytest_mxperf.output import report
    if any(planning.planned(it).measuring for it in pytest_session.items):
        return False
    if not any(planning.planned(it).measuring for it in deselected):
        return False
    config = pytest_session.config
    say(config, report.none_selected_line(selection.slow, len(deselected) - selection.slow - selection.shard,
                                          selection.shard, config.getoption("--perf-shard")))
    return True


# ----------------------------------------------------------------------------- the plan

def plan(pytest_session, session, deselected_slow: int):
    """What the session will measure and cost, said before it starts (``planning.plan_for``),
    with the slow tests deselected (``select``), after the GPU tests that no GPU here can run are
    skipped with one line: (the plan, the grids of the tests that measure their grid together,
    in baseline mode the recorded setup, rebuilt now, before any test measures:
    ``recorded_setup``, and why every cell is measured in pairs with it from the first process,
    ``first_path``, "" for the cheap path) or (None, {}, None, "")."""
    from pytest_mxperf.measure import planning
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
    path = first_path(ctx.options, ctx.machine, ctx.baseline) if setup is not None and setup.ready else None

    def made_for(kind: str, ab: bool):
        return planning.plan_for(planned, ctx.options, ab,
                                 explicit_pairs=bool(pytest_session.config.getoption("--perf-processes")),
                                 deselected_slow=deselected_slow,
                                 known=known_costs(ctx.options, ctx.machine, kind, planning.session_setup(probe)),
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
        thresholds = marker_thresholds(runnable) + session_thresholds(pytest_session.config)
    except opts.OptionError as exc:
        raise pytest.UsageError(str(exc)) from None
    spreads = known_spreads(ctx.options, ctx.machine)
    first = (first_pairs(ctx.options, spreads) if ab and not pytest_session.config.getoption("--perf-processes")
             else planning.FirstPairs(made.plan.duet_pairs))
    made = dataclasses.replace(made, plan=dataclasses.replace(made.plan, thresholds=thresholds, pair_spreads=spreads,
                                                              duet_pairs=first.pairs, one_pair_cells=first.cells))
    if made.plan.tests:
        settling = (report.settling_words(setup.ready, made.duet_tests, made.plan.tests, path) if setup is not None
                    else "")
        say(pytest_session.config, report.plan_line(made.plan.tests, ctx.options, made.plan.ab_pairs,
                                                    made.plan.duet_pairs, made.duet_tests, made.estimate,
                                                    deselected_slow, ab=ab, speed=made.plan.speed,
                                                    settling=settling, paired=kind == "paired", first_why=first.why))
    elif deselected_slow:  # the measuring tests left will skip: the slow ones are said all the same
        say(pytest_session.config, f"mxperf: {report.slow_note(deselected_slow)}")
    if setup is not None and made.plan.tests:
        say(pytest_session.config, setup.said(kind == "paired"))
    if not made.plan.tests:
        return made.plan, grids, None, ""
    return made.plan, grids, setup, path.why if path is not None and path.paired else ""


def first_path(options, machine, baseline) -> "planning.FirstPath":
    """How a session against ``baseline`` measures from its first process
    (``planning.first_path``): from what the baseline says of its resolution and from this
    machine's last sessions against it in the history store (none when the store does not
    exist or cannot be read: the baseline alone then decides)."""
    from pytest_mxperf.judge import thresholds
    from pytest_mxperf.measure import planning
    shares = _from_history(options, lambda store: store.duet_shares(str((machine or {}).get("id")), "baseline",
                                                                    KNOWN_SESSIONS)) or []
    return planning.first_path(baseline.resolution_summary(), shares, thresholds.PROVISIONAL_CLEARS)


def known_spreads(options, machine) -> Tuple[Tuple[str, float, int], ...]:
    """This machine's pooled spreads of duet pairs per kind of figure from its last sessions
    (``HistoryStore.pair_spreads``), for the pair-by-pair rule; none without a store."""
    if options.smoke:
        return ()
    rows = _from_history(options, lambda store: store.pair_spreads(str((machine or {}).get("id")), KNOWN_SESSIONS))
    return tuple(rows or ())


def first_pairs(options, spreads: Sequence[Tuple[str, float, int]]) -> "planning.FirstPairs":
    """The duet pairs a paired or A/B session's cells get before their first look
    (``planning.first_pairs``), from this machine's pair spreads (``known_spreads``) summed per
    kind of figure as the pair-by-pair rule sums them (``ab_judging.history_by_kind``), for each
    kind of cell the kinds of figure its rows have, and each cell's own (its figures' rows)."""
    from pytest_mxperf.judge.sequential import Spread
    from pytest_mxperf.measure import planning
    from pytest_mxperf.judge.thresholds import OWN_DF
    from pytest_mxperf.outcome.ab_judging import family_of_key, history_by_kind
    known = {key: Spread(ss, df) for key, ss, df in spreads}
    families = history_by_kind(known)
    kind_df: Dict[str, Dict[str, int]] = {}
    own_df: Dict[str, int] = {}
    for key, s in known.items():
        f = family_of_key(key)
        if f is not None:
            kind_df.setdefault(key.split("/", 1)[0], {})[f] = families[f].df
            cell = key.partition("#")[0]
            own_df[cell] = min(own_df.get(cell, s.df), s.df)
    return planning.first_pairs(options.duet_pairs, kind_df, own_df, OWN_DF)


def _from_history(options, read):
    """``read(store)`` of the history store the session writes to; None when there is none (no
    location, or a SQLite file not made yet) or it cannot be read: what the suite takes from
    its history is a courtesy, never a reason to stop."""
    from pytest_mxperf.history import location
    from pytest_mxperf.history.store import open_store, sqlite_path
    where = options.history
    if not where or (not location.is_postgres(where) and not sqlite_path(where).is_file()):
        return None
    try:
        with open_store(where) as store:
            return read(store)
    except Exception:  # noqa: BLE001 - any store error: as if there were none
        return None


#: sessions of the same kind on this machine whose test durations the estimate starts from
KNOWN_SESSIONS = 3


def known_costs(options, machine, kind: str, setup: Optional[dict] = None) -> Optional["planning.Known"]:
    """This machine's own costs: what its last sessions of ``kind`` (``SessionContext.kind``: a
    recording, a session against the baseline, one with nothing to compare) took, from the
    history store the session writes to; of those, the ones that ran ``setup``
    (``planning.session_setup``: a candidate with fusion off, one thread or another release
    takes other minutes), else, when none did, the others (``Known.of_setup`` says which).
    None (the constants) when the store does not exist yet, holds none, or cannot be read:
    the estimate is a courtesy, never a reason to stop."""
    from pytest_mxperf.measure import planning
    if options.smoke:
        return None
    machine_id = str((machine or {}).get("id"))

    def read(store):
        rows = (store.durations(machine_id, kind, KNOWN_SESSIONS, same=lambda s: planning.same_setup(s, setup))
                if setup else [])
        return rows or store.durations(machine_id, kind, KNOWN_SESSIONS), (bool(rows) if setup else None)
    rows, of_setup = _from_history(options, read) or ([], None)
    return dataclasses.replace(planning.known_from(rows), of_setup=of_setup) if rows else None


def pyproject_thresholds(path: Path) -> Tuple["Threshold", ...]:
    """The ``[tool.pytest-mxperf.thresholds]`` table of a pyproject.toml (glob pattern on the
    printed figure key -> minimum effect), in the file's order; none without the file or the
    table. A bad value or file is an OptionError (one line)."""
    from pytest_mxperf.judge.thresholds import Threshold, check_threshold
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        import tomli as tomllib
    if not path.is_file():
        return ()
    try:
        with open(path, "rb") as fh:
            doc = tomllib.load(fh)
    except (OSError, ValueError) as exc:
        raise opts.OptionError(f"{path}: cannot read its thresholds ({type(exc).__name__}: {exc})") from None
    table = ((doc.get("tool") or {}).get("pytest-mxperf") or {}).get("thresholds") or {}
    if not isinstance(table, dict):
        raise opts.OptionError(f"{path}: [tool.pytest-mxperf] thresholds must be a table of pattern = fraction")
    out = []
    for pattern, value in table.items():
        where = f"{path.name} [tool.pytest-mxperf.thresholds] '{pattern}'"
        out.append(Threshold(check_threshold(value, where), where, pattern=str(pattern)))
    return tuple(out)


def session_thresholds(config) -> Tuple["Threshold", ...]:
    """The pyproject thresholds this session reads: ``--perf-thresholds``, else the
    pyproject.toml of pytest's rootdir, else of the directory pytest was started in."""
    given = config.getoption("--perf-thresholds")
    if given:
        if not Path(given).is_file():
            raise opts.OptionError(f"--perf-thresholds: no such file {given}")
        return pyproject_thresholds(Path(given))
    # the project's: pytest's rootdir, else where pytest was started
    for where in (config.rootpath, Path(config.invocation_params.dir)):
        if (where / "pyproject.toml").is_file():
            return pyproject_thresholds(where / "pyproject.toml")
    return ()


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
