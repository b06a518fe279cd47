"""Per-operator profiles on the parent side: run the profile worker, keep its profile in
the baseline, and put two profiles side by side in a failure message.

Pure except :func:`run_profile` (which starts the worker through ``runner``); no mxnet
import. The profile worker (``pytest_mxperf.workers.profile``, child side) reads MXNet's
aggregate statistics into operator records (:func:`operators_from_aggregate`, defined
there and re-exported here)::

    {"name": "Convolution", "calls": 106, "total_ms": 169.5, "avg_ms": 1.599,
     "ms_per_batch": 84.75, "share": 0.83}

sorted by time, the top N kept and the rest folded into one ``"other"`` record that lists
the folded names (``"names"``), so an operator folded into "other" is not mistaken for one
that is absent.

Operator names tell how the graph was built: with MKLDNN's subgraph fusion (the default of
the PyPI wheels) convolutions run as ``_sg_mkldnn_conv`` and fully connected layers as
``_sg_mkldnn_fully_connected``; with ``MXNET_SUBGRAPH_BACKEND=NONE`` they are
``Convolution`` and ``FullyConnected`` (and the residual additions ``elemwise_add`` and
most BatchNorms reappear instead of being fused into the convolutions).

When a cell fails (regression, unresolved slowdown, below its floor) the gate profiles it
once more, untimed, and shows :func:`failure_lines`: its top operators beside the
baseline's profile (recorded with ``--perf-update-baselines``, see :func:`summary`) or, in
A/B mode, beside the reference interpreter's profile of the same cell.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

from pytest_mxperf.model.options import TIMEOUT_S
from pytest_mxperf.store.kept_profiles import ms_per_batch
from pytest_mxperf.workers.profile import (  # noqa: F401
    OTHER,
    PROFILED_DTYPES,
    PROFILED_MODES,
    ProfileFormatError,
    operators_from_aggregate,
)

PROFILE_MODULE = "pytest_mxperf.workers.profile"
#: operators kept in a baseline's profile (the rest folded into "other")
#: rows of each side in a failure message's table
MESSAGE_TOP = 10


def operator_names(ops: Iterable[Dict]) -> List[str]:
    """Every operator name a profile saw, the ones folded into "other" included."""
    names = []
    for op in ops:
        if op.get("name") == OTHER:
            names.extend(op.get("names") or [])
        else:
            names.append(op["name"])
    return names


def _fmt(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.3f}"


def compare_profiles(current_ops: Sequence[Dict], reference_ops: Sequence[Dict], top: int = MESSAGE_TOP,
                     labels: Sequence[str] = ("current", "reference")) -> List[str]:
    """Lines for a failure message: the top operators by time of either profile side by side
    (current vs reference, ms per batch, and the change), operators seen on only one side
    marked, then the folded rest and the total. ``labels`` names the two sides.

    The rows are the union of each side's ``top`` heaviest operators, heaviest first.
    """
    a, b = labels
    cur = {op["name"]: ms_per_batch(op) for op in current_ops if op.get("name") != OTHER}
    ref = {op["name"]: ms_per_batch(op) for op in reference_ops if op.get("name") != OTHER}
    cur_all, ref_all = set(operator_names(current_ops)), set(operator_names(reference_ops))

    def heaviest(side):
        return [n for n, _ in sorted(side.items(), key=lambda kv: (-kv[1], kv[0]))[:top]]

    rows = list(dict.fromkeys(heaviest(cur) + heaviest(ref)))
    rows.sort(key=lambda n: (-max(cur.get(n, 0.0), ref.get(n, 0.0)), n))
    only_cur = sorted(cur_all - ref_all)
    only_ref = sorted(ref_all - cur_all)

    width = max([len("operator")] + [len(n) for n in rows]) + 2
    ca, cb = max(18, len(a) + 11), max(20, len(b) + 11)
    lines = []
    if only_cur or only_ref:
        lines.append(f"operators only in {a}: " + (", ".join(only_cur) or "none")
                     + f"; only in {b}: " + (", ".join(only_ref) or "none"))
    lines.append(f"{'operator':<{width}}{a + ' ms/batch':>{ca}}{b + ' ms/batch':>{cb}}  change")
    for name in rows:
        c, r = cur.get(name), ref.get(name)
        if name in only_cur:
            note = f"only in {a}"
        elif name in only_ref:
            note = f"only in {b}"
        elif c is None or r is None:
            note = "in the other side's 'other'"
        elif r > 0:
            note = f"{100.0 * (c - r) / r:+.0f}%"
        else:
            note = ""
        lines.append(f"{name:<{width}}{_fmt(c):>{ca}}{_fmt(r):>{cb}}  {note}".rstrip())
    rest_c = sum(v for n, v in cur.items() if n not in rows) + sum(ms_per_batch(o) for o in current_ops if o.get("name") == OTHER)
    rest_r = sum(v for n, v in ref.items() if n not in rows) + sum(ms_per_batch(o) for o in reference_ops if o.get("name") == OTHER)
    if rest_c or rest_r:
        lines.append(f"{'(rest)':<{width}}{_fmt(rest_c):>{ca}}{_fmt(rest_r):>{cb}}")
    tot_c, tot_r = sum(ms_per_batch(o) for o in current_ops), sum(ms_per_batch(o) for o in reference_ops)
    change = f"{100.0 * (tot_c - tot_r) / tot_r:+.0f}%" if tot_r > 0 else ""
    lines.append(f"{'(total)':<{width}}{_fmt(tot_c):>{ca}}{_fmt(tot_r):>{cb}}  {change}".rstrip())
    return lines


def single_profile(ops: Sequence[Dict], top: int = MESSAGE_TOP) -> List[str]:
    """Lines for one profile alone: the top operators, ms per batch, calls and share."""
    named = [op for op in ops if op.get("name") != OTHER]
    shown = sorted(named, key=lambda o: (-ms_per_batch(o), o["name"]))[:top]
    width = max([len("operator")] + [len(o["name"]) for o in shown]) + 2
    lines = [f"{'operator':<{width}}{'ms/batch':>10}{'calls':>8}{'share':>8}"]
    for o in shown:
        share = o.get("share")
        lines.append(f"{o['name']:<{width}}{_fmt(ms_per_batch(o)):>10}{o.get('calls', ''):>8}"
                     f"{'' if share is None else f'{100 * share:.0f}%':>8}")
    rest = sum(ms_per_batch(o) for o in ops if o not in shown)
    if rest:
        lines.append(f"{'(rest)':<{width}}{_fmt(rest):>10}")
    lines.append(f"{'(total)':<{width}}{_fmt(sum(ms_per_batch(o) for o in ops)):>10}")
    return lines


# ----------------------------------------------------------------------------- which cells

def unprofiled_reason(workload) -> Optional[str]:
    """Why the profile worker cannot profile this cell (a Workload), or None when it can:
    it builds the throughput worker's cells (zoo models and the user's own networks) in
    float32 / float16; other kinds of measurement run their own workers."""
    from pytest_mxperf import zoo
    if workload.mode not in PROFILED_MODES:
        return f"no operator profile for {workload.mode} cells (only {', '.join(PROFILED_MODES)})"
    if workload.dtype not in PROFILED_DTYPES:
        return f"no operator profile for {workload.dtype} cells (only {', '.join(PROFILED_DTYPES)})"
    if not workload.source and workload.model not in zoo.MODELS:
        return f"no operator profile: {workload.model} is neither a zoo model nor a recorded network"
    return None


# ----------------------------------------------------------------------------- where traces go

def trace_dir(report_dir: Optional[str], started: float) -> Path:
    """Where a session writes its chrome traces: ``<--perf-report DIR>/profiles``, else
    ``<cache>/profiles/<session start>`` (``$MXPERF_CACHE_DIR`` or
    ``~/.cache/pytest-mxperf``, see ``spawn.cache_dir``)."""
    if report_dir:
        return Path(report_dir) / "profiles"
    import time

    from pytest_mxperf.proc import spawn
    return spawn.cache_dir("profiles", time.strftime("%Y%m%d-%H%M%S", time.localtime(started)))


def trace_path(directory, key: str, side: str = "") -> Path:
    """The chrome-trace file of one cell (``side``: "" or "reference")."""
    name = re.sub(r"[^A-Za-z0-9._=-]+", "_", key).strip("_")
    return Path(directory) / (name + (f".{side}" if side else "") + ".trace.json")


# ----------------------------------------------------------------------------- baselines

# ----------------------------------------------------------------------------- the message

def _how(p: Mapping[str, Any]) -> str:
    meta = p.get("meta") or p
    bits = [f"mxnet {meta.get('mxnet_version') or '?'}"]
    bits.append(f"MXNET_SUBGRAPH_BACKEND={meta.get('subgraph_backend') or 'unset'}")
    if p.get("batches"):
        bits.append(f"{p['batches']} batches")
    return ", ".join(bits)


def failure_lines(key: str, why: str, current: Mapping[str, Any], reference: Optional[Mapping[str, Any]],
                  side: str = "baseline", missing: str = "", top: int = MESSAGE_TOP) -> List[str]:
    """The profile part of a failing cell's message.

    ``current``: the profile worker's result for this session (``status``, ``operators``,
    ``trace_path``, ...); ``reference``: the baseline's kept profile (``side`` "baseline"),
    its recorded setup's profiled now (``side`` "recorded setup") or the reference
    interpreter's result (``side`` "reference"), None when there is none
    (``missing`` says why). Operators present on one side only are named on the first line.
    """
    head = f"mxperf: profile of {key} ({why}): "
    if current.get("status") != "ok":
        return [head + f"the profile worker failed: {current.get('status')}: {current.get('message')}"]
    lines = []
    cur_ops = current.get("operators") or []
    if reference is not None and reference.get("status", "ok") == "ok" and reference.get("operators"):
        lines.append(head + f"top operators by time, now ({_how(current)}) beside the {side} ({_how(reference)}"
                     + (f", recorded {reference['date']}" if reference.get("date") else "") + "):")
        lines += ["  " + ln for ln in compare_profiles(cur_ops, reference["operators"], top, ("now", side))]
    else:
        if reference is not None and reference.get("status", "ok") != "ok":
            missing = f"the {side} profile worker failed: {reference.get('status')}: {reference.get('message')}"
        lines.append(head + f"{missing or f'the {side} has no operator profile'}; top operators by time now "
                     f"({_how(current)}):")
        lines += ["  " + ln for ln in single_profile(cur_ops, top)]
    lines.append(f"  chrome trace: {current.get('trace_path')}"
                 + (f"; {side}: {reference['trace_path']}" if reference and reference.get("trace_path") else ""))
    return lines


def brief_line(key: str, current: Mapping[str, Any], top: int = 3) -> str:
    """One line for a profiled cell that did not fail (``--perf-profile``)."""
    if current.get("status") != "ok":
        return f"mxperf: profile of {key}: the profile worker failed: {current.get('status')}: {current.get('message')}"
    ops = [o for o in current.get("operators") or [] if o.get("name") != OTHER][:top]
    heavy = ", ".join(f"{o['name']} {ms_per_batch(o):.3f} ms/batch ({100 * (o.get('share') or 0):.0f}%)" for o in ops)
    return f"mxperf: profile of {key}: {heavy or 'no operators'}; chrome trace: {current.get('trace_path')}"


# ----------------------------------------------------------------------------- running it

def run_profile(workload, trace: Path, *, python: Optional[str] = None, environ: Optional[Mapping[str, str]] = None,
                recorded_env: Optional[Mapping[str, str]] = None, timeout: float = TIMEOUT_S,
                memory_limit: Optional[int] = -1, seed: int = 0, **spec) -> Dict[str, Any]:
    """One profile worker on ``workload`` (a Workload) under ``python``; its result, or a
    ``status``/``message`` dict when it failed. ``recorded_env``: the variables the cell's
    measured processes ran with (``RunResult.meta["env"]``), laid over ``environ`` so that
    the profile sees the same MXNet and OpenMP settings."""
    from pytest_mxperf.measure import runner
    from pytest_mxperf.proc import spawn
    as_cap, rss_cap = runner.memory_caps(workload, runner.resolve_memory_limit(memory_limit))
    env, _ = runner.build_env(workload, environ, recorded_env)
    full = {"workload": workload.to_dict(), "trace_path": str(trace), "memory_limit": as_cap, "seed": seed}
    full.update(spec)
    out = runner.run_process(spawn.python_command(python, PROFILE_MODULE), full, timeout=timeout, env=env,
                             rss_limit=rss_cap)
    payload = dict(out.payload) if isinstance(out.payload, dict) else {}
    if out.status != "ok" or payload.get("status") != "ok":
        return {"status": out.status, "message": out.message or payload.get("message") or ""}
    return payload
