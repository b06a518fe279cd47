"""The grid and the selection, as pytest collects: each test's cells from the options and its
``mxperf_grid`` marker (``parametrize``); the slow CPU cells deselected unless asked for by
name, after ``-m``/``-k``, this shard's tests alone, under a deadline by priority
(``select``); the one line when the selection leaves no measuring test (``none_selected``)."""

from __future__ import annotations

import dataclasses
import re

import pytest

from pytest_mxperf.model import kinds
from pytest_mxperf.model import options as opts
from pytest_mxperf.session_start import say


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
    cell named: ``asked_for``), and so the tests of a kind run on request (``Kind.on_request``)
    unless ``-m`` names its marker, this shard's alone. Runs after ``-m``/``-k`` (the plugin's
    hook is ``trylast``), so the slow tests counted are the ones the selection would keep."""
    from pytest_mxperf.measure import planning
    if options.deadline is not None:
        items[:] = [items[i] for i in planning.by_priority([planning.planned(it) for it in items])]
    slow = sharded = 0
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", config.getoption("markexpr", "") or ""))
    if not options.include_slow:
        # "slow" is about 2-core CPUs: on a GPU the whole grid runs by default; a kind run on
        # request (``Kind.on_request``: serving under load) runs when -m names its marker
        unasked = [m for m in kinds.ON_REQUEST_MARKERS if m not in words]
        named = named_on_the_command_line(config)
        keep, drop = [], []
        for it in items:
            heavy = "slow" not in words and it.get_closest_marker("slow") and not it.get_closest_marker("gpu")
            # on request: it carries such a marker and -m names none of those it carries
            own = [m for m in kinds.ON_REQUEST_MARKERS if it.get_closest_marker(m)]
            heavy = heavy or bool(own) and all(m in unasked for m in own)
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
