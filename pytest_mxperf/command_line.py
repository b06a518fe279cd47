"""The --perf-* options: declared for pytest (``add_options``) and read once (``read``) into a
PerfOptions and the project's minimum effects (``[tool.pytest-mxperf.thresholds]``), one-line
usage errors before anything is measured. The values' parsing and defaults are
``model/options.py``'s; what the session does with them is ``session_start.py``'s and
``collection.py``'s."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Tuple

import pytest

from pytest_mxperf.model import options as opts

if TYPE_CHECKING:  # pragma: no cover
    from pytest_mxperf.judge.thresholds import Threshold


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


def read(config) -> Tuple[opts.PerfOptions, Tuple["Threshold", ...]]:
    """The options and the project's thresholds, each read once, before anything is measured:
    a bad value or table, or pytest-xdist asked for, is one usage error. The baselines'
    folder defaults to the rootdir's ``baselines/``."""
    try:
        options, thresholds = options_from(config), session_thresholds(config)
    except opts.OptionError as exc:
        raise pytest.UsageError(str(exc)) from None
    if getattr(config.option, "numprocesses", None) or getattr(config.option, "dist", "no") != "no":
        raise pytest.UsageError("pytest-mxperf refuses pytest-xdist: measurements must never run "
                                "concurrently on one machine (run without -n/--dist)")
    if options.baselines_dir is None:
        options = dataclasses.replace(options, baselines_dir=str(config.rootpath / "baselines"))
    return options, thresholds


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


def command(config) -> str:
    """The command line the session ran with, to say again with one more option."""
    import shlex
    args = list(config.invocation_params.args)
    return "pytest" + (" " + shlex.join(args) if args else "")


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


