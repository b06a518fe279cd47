"""The --perf-* options: declared for pytest, read into a PerfOptions, and checked against
this machine (one-line usage errors, before anything is measured). The plugin calls these;
the values' parsing and defaults are ``model/options.py``'s."""

from __future__ import annotations

import os
from typing import Optional

import pytest

from pytest_mxperf.store.baselines import Baseline
from pytest_mxperf.model import options as opts

#: ``--perf-reference baseline``: the A/B reference is the install this machine's baseline
#: was recorded with (its stored MXNet requirement, built into a cached venv)
REFERENCE_BASELINE = "baseline"


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
    from pytest_mxperf.history.store import default_location
    if value is not None and value.strip().lower() == "none":
        return None
    return value or default_location()


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


def check_mxnet_distributions(python) -> None:
    """Two MXNet distributions installed side by side (e.g. mxnet and mxnet-cu117 share the
    mxnet/ package) are a usage error, said before anything is measured."""
    from pytest_mxperf.proc import distributions
    try:
        dists = distributions.installed_mxnet_distributions(python)
    except distributions.InstallError:
        return  # an interpreter we cannot list: its probe says what is wrong when a cell needs it
    if len(dists) > 1:
        try:
            distributions.check_single_mxnet(dists, python)
        except distributions.InstallError as exc:
            raise pytest.UsageError(str(exc)) from None


def baseline_requirement(machine_id: str, baseline: Optional[Baseline], where: str) -> str:
    """``--perf-reference baseline``: the MXNet requirement this machine's baseline (at
    ``where``) was recorded with (e.g. "mxnet==1.9.1"); a one-line usage error when there is
    no baseline, it predates stored requirements, or its cells were recorded with different
    installs."""
    from pytest_mxperf.store.baselines import BaselineError
    if baseline is None:
        raise pytest.UsageError(f"--perf-reference baseline: machine {machine_id} has no baseline ({where}): "
                                "record one with --perf-update-baselines, or give --perf-reference REQ")
    try:
        requirement = baseline.recorded_requirement()
    except BaselineError as exc:
        raise pytest.UsageError(f"--perf-reference baseline: {exc}") from None
    if not requirement:
        raise pytest.UsageError(f"--perf-reference baseline: {where} does not say which MXNet install it was "
                                "recorded with (recorded before requirements were stored): re-record it with "
                                "--perf-update-baselines, or give --perf-reference REQ")
    return requirement


def reference_python(spec: str, candidate: Optional[str] = None) -> str:
    """A reference interpreter path as given, or a cached venv built for a requirement with
    the candidate's versions of the packages a worker loads besides MXNet (like with like)."""
    if os.sep in spec and os.access(spec, os.X_OK):
        return spec
    from pytest_mxperf.proc import distributions, installs
    try:
        return installs.reference_python(spec, like=candidate)
    except distributions.InstallError as exc:
        raise pytest.UsageError(f"--perf-reference: {exc}") from None
