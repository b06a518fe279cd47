"""One untimed, profiled run of a cell under MXNet's profiler: where does the time go?

Run as ``python -m pytest_mxperf.workers.profile SPEC.json RESULT.json`` (through
``runner.run_process``), in a fresh process. A diagnosis, not a measurement: the profiler
costs time of its own, so nothing here is judged.

Spec::

    {"workload": Workload.to_dict(),   # model (zoo, or the user's own: "source"), mode
                                       # (score | latency | train), batch_size, contexts, dtype
     "warmup_batches": 3, "warmup_seconds": 0.5,
     "profile_seconds": 1.0, "min_batches": 5, "max_batches": 100,   # or "batches": n
     "trace_path": "/path/trace.json", "top": 15, "per_operator": true, "seed": 0}

Method: the cell is built as the throughput worker builds it (its ``_Cell``, or the user's
network through ``workers.usermodel``); at least ``warmup_batches`` and ``warmup_seconds``
of batches run first, unprofiled (an operator's first call is slow: MKLDNN primitive
creation, memory planning); the profiled batches are as many as fill ``profile_seconds``
at the warm-up's speed, within ``min_batches`` .. ``max_batches`` (``batches`` fixes the
number). Then ``mx.profiler.set_config(profile_symbolic=True, profile_imperative=True,
aggregate_stats=True, filename=trace_path)``, ``set_state('run')``, the batches and
``waitall``, ``set_state('stop')``; the per-operator aggregate comes from
``dumps(format='json', reset=True)`` and ``dump()`` writes the chrome trace (open it in
chrome://tracing or Perfetto) at ``trace_path``. Latency cells are profiled as their
forward pass.

``per_operator`` (default true) turns the engine's bulk execution off
(``MXNET_EXEC_BULK_EXEC_INFERENCE=0``, ``MXNET_EXEC_BULK_EXEC_TRAIN=0``, unless the
environment already sets them): with bulking on, the aggregate of a whole graph segment is
one entry like ``[Convolution,Activation,Pooling,...]``. Turning it off adds a little
engine overhead per operator; the result records the values used (``meta.bulk_exec``).

Result::

    {"status": "ok", "message": "", "operators": [{"name", "calls", "total_ms", "avg_ms",
     "ms_per_batch", "share"}, ..., {"name": "other", ..., "names": [...]}],
     "trace_path": ..., "batches": n, "warmup_batches": n, "seconds": wall seconds of the
     profiled batches, "meta": {mxnet version, features, bulk_exec, subgraph_backend, ...}}

An operator record's ``share`` is its part of the total time of all operators. The
records are sorted by ``total_ms`` (largest first) and cut after the top N; the rest is
folded into one record named ``"other"`` that lists the folded names (``"names"``), so an
operator folded into "other" is not mistaken for one that is absent.

The aggregate of MXNet 1.9.1 (``dumps(format='json')``) looks like::

    {"Time": {"operator": {"Convolution": {"Count": 4, "Total": 1.1, "Min": .., "Max": ..,
              "Avg": 0.28}, ...}, "MXNET_C_API": {...}},
     "Memory": {}, "Unit": {"Time": "ms", "Memory": "kB"}}

Only the ``operator`` domain is read (the C API calls are the Python side's overhead).
The PyPI wheel's ``mx.runtime.Features()`` does not list PROFILER, yet the profiler works.

Child side: the standard library, numpy, MXNet and ``pytest_mxperf.workers`` / ``zoo``
only (the parent reads these records with ``pytest_mxperf.measure.profiling``).
"""

from __future__ import annotations

import json
import os
from typing import Dict, List, Optional

from pytest_mxperf.workers.protocol import (
    import_mxnet,
    missing_gpus,
    mx_contexts,
    runtime_info,
    serve,
    warm_up,
)

BULK_VARS = ("MXNET_EXEC_BULK_EXEC_INFERENCE", "MXNET_EXEC_BULK_EXEC_TRAIN")
OTHER = "other"
OPERATOR_DOMAIN = "operator"
#: the throughput worker's kinds (the child side reads no registry: tests/test_kind_registry.py holds
#: this to ``model/kinds.THROUGHPUT_MODES``)
PROFILED_MODES = ("score", "latency", "train")
PROFILED_DTYPES = ("float32", "float16")


class ProfileFormatError(ValueError):
    """An aggregate that does not have MXNet's structure (one-line message)."""


def operators_from_aggregate(stats: Dict, batches: int, top: Optional[int] = 15) -> List[Dict]:
    """The operator records of one ``dumps(format='json')`` aggregate.

    ``batches``: how many batches the profiled run had (for ``ms_per_batch``); ``top``:
    keep that many records and fold the rest into ``"other"`` (None or 0: keep all).
    """
    if batches < 1:
        raise ProfileFormatError(f"batches must be at least 1, got {batches!r}")
    try:
        unit = (stats.get("Unit") or {}).get("Time", "ms")
        domain = stats["Time"].get(OPERATOR_DOMAIN, {})
    except (AttributeError, KeyError, TypeError):
        raise ProfileFormatError("profiler aggregate has no 'Time' section") from None
    if unit != "ms":
        raise ProfileFormatError(f"profiler aggregate times are in {unit!r}, expected 'ms'")
    records = []
    for name, st in domain.items():
        try:
            calls, total = int(st["Count"]), float(st["Total"])
        except (KeyError, TypeError, ValueError):
            raise ProfileFormatError(f"operator {name!r} has no Count/Total in the aggregate") from None
        records.append({"name": name, "calls": calls, "total_ms": total})
    grand = sum(r["total_ms"] for r in records)
    records.sort(key=lambda r: (-r["total_ms"], r["name"]))
    kept = records[:top] if top else records
    folded = records[len(kept):]
    if folded:
        kept = kept + [{"name": OTHER, "calls": sum(r["calls"] for r in folded),
                        "total_ms": sum(r["total_ms"] for r in folded),
                        "names": [r["name"] for r in folded]}]
    for r in kept:
        r["avg_ms"] = r["total_ms"] / r["calls"] if r["calls"] else 0.0
        r["ms_per_batch"] = r["total_ms"] / batches
        r["share"] = r["total_ms"] / grand if grand > 0 else 0.0
    return kept


def _check(spec: dict) -> dict:
    """The spec with defaults, or a ValueError with a one-line message."""
    w = spec.get("workload")
    if not isinstance(w, dict) or not w.get("model"):
        raise ValueError("profile spec needs a 'workload' (Workload.to_dict())")
    w = dict(w)
    w.setdefault("mode", "score")
    w.setdefault("batch_size", 1)
    w.setdefault("contexts", ["cpu:0"])
    w.setdefault("dtype", "float32")
    if w["mode"] not in PROFILED_MODES:
        raise ValueError(f"profile mode must be one of {', '.join(PROFILED_MODES)}, got {w['mode']!r}")
    if w["dtype"] not in PROFILED_DTYPES:
        raise ValueError(f"profile dtype must be one of {', '.join(PROFILED_DTYPES)}, got {w['dtype']!r}")
    if not spec.get("trace_path"):
        raise ValueError("profile spec needs a 'trace_path' for the chrome trace")
    s = {"workload": w, "warmup_batches": int(spec.get("warmup_batches", 3)),
         "warmup_seconds": float(spec.get("warmup_seconds", 0.5)),
         "batches": int(spec["batches"]) if spec.get("batches") is not None else None,
         "profile_seconds": float(spec.get("profile_seconds", 1.0)),
         "min_batches": int(spec.get("min_batches", 5)), "max_batches": int(spec.get("max_batches", 100)),
         "top": int(spec.get("top", 15)), "per_operator": bool(spec.get("per_operator", True)),
         "seed": int(spec.get("seed", 0)), "trace_path": os.path.abspath(spec["trace_path"])}
    if (s["batches"] is not None and s["batches"] < 1) or s["warmup_batches"] < 0:
        raise ValueError(f"batches must be >= 1 and warmup_batches >= 0, got {s['batches']} and "
                         f"{s['warmup_batches']}")
    if not 1 <= s["min_batches"] <= s["max_batches"]:
        raise ValueError(f"need 1 <= min_batches <= max_batches, got {s['min_batches']} and {s['max_batches']}")
    return s


def _cell(mx, w: dict, seed: int):
    from pytest_mxperf.workers.throughput import _Cell
    if w.get("source"):  # the user's own network, built as the throughput worker builds it
        from pytest_mxperf.workers import usermodel
        mode = "train" if w["mode"] == "train" else "score"
        return usermodel.load(mx, json.loads(w["source"]), mx_contexts(mx, w["contexts"]), w["batch_size"], mode, seed)
    return _Cell(mx, dict(w, mode="train" if w["mode"] == "train" else "score"), seed)


def run(spec: dict) -> dict:
    s = _check(spec)
    if s["per_operator"]:
        for var in BULK_VARS:  # read when the executor is bound: set before anything binds
            os.environ.setdefault(var, "0")
    mx = import_mxnet()
    meta = runtime_info(mx)
    meta["bulk_exec"] = {v: os.environ.get(v) for v in BULK_VARS}
    meta["subgraph_backend"] = os.environ.get("MXNET_SUBGRAPH_BACKEND")
    w = s["workload"]
    missing = missing_gpus(w["contexts"], lambda: meta["num_gpus"])
    if missing:
        return {"status": "unavailable", "meta": meta, "message": missing}
    cell = _cell(mx, w, s["seed"])
    warm = warm_up(cell, max(1, s["warmup_batches"]), s["warmup_seconds"], 50)
    per_batch = min(warm[-2:])
    batches = s["batches"] or max(s["min_batches"], min(s["max_batches"],
                                                        int(round(s["profile_seconds"] / max(per_batch, 1e-6)))))
    os.makedirs(os.path.dirname(s["trace_path"]), exist_ok=True)
    mx.profiler.set_config(profile_symbolic=True, profile_imperative=True, aggregate_stats=True,
                           filename=s["trace_path"])
    mx.nd.waitall()
    mx.profiler.set_state("run")
    seconds = cell.timed(batches)  # ends in waitall: every operator has run
    mx.profiler.set_state("stop")
    aggregate = json.loads(mx.profiler.dumps(format="json", reset=True))
    mx.profiler.dump()  # the chrome trace, at trace_path
    ops = operators_from_aggregate(aggregate, batches, s["top"])
    return {"status": "ok", "message": "", "operators": ops, "trace_path": s["trace_path"],
            "batches": batches, "warmup_batches": len(warm), "seconds": seconds,
            "total_batch": getattr(cell, "total_batch", None), "meta": meta}


def main(argv=None) -> int:
    return serve(run, argv, "pytest_mxperf.workers.profile")


if __name__ == "__main__":
    main()
