"""The small form of an operator profile that a baseline recording keeps beside a cell's
figures (the profile worker's full result is the measuring side's: ``measure/profiling.py``).
"""

from __future__ import annotations

from typing import Any, Dict, Mapping

from pytest_mxperf.workers.profile import OTHER

#: operators a baseline keeps of a profile (the rest folded into "other")
BASELINE_TOP = 12


def ms_per_batch(op: Mapping[str, Any]) -> float:
    """Milliseconds per batch of a record (``total_ms`` when it carries no batch count)."""
    return float(op.get("ms_per_batch", op.get("total_ms", 0.0)))


def kept_summaries(by_key: Mapping[str, Mapping[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """The :func:`summary` of each cell's profile that the profile worker completed, per
    cell key: what a baseline recording keeps (measured now, or promoted from results.json)."""
    return {k: summary(p) for k, p in by_key.items() if isinstance(p, Mapping) and p.get("status") == "ok"}


def summary(payload: Mapping[str, Any], top: int = BASELINE_TOP) -> Dict[str, Any]:
    """The small form of a profile kept in a baseline recording: the top operators (the rest
    folded into "other", names kept), the batches profiled and how MXNet ran."""
    ops = [dict(o) for o in payload.get("operators") or []]
    named = [o for o in ops if o.get("name") != OTHER]
    folded = [o for o in ops if o.get("name") == OTHER]
    kept, rest = named[:top], named[top:]
    if rest or folded:
        names = [o["name"] for o in rest] + [n for o in folded for n in o.get("names") or []]
        total = sum(o.get("total_ms", 0.0) for o in rest + folded)
        per_batch = sum(ms_per_batch(o) for o in rest + folded)
        kept.append({"name": OTHER, "calls": sum(int(o.get("calls") or 0) for o in rest + folded),
                     "total_ms": total, "ms_per_batch": per_batch,
                     "share": sum(o.get("share") or 0.0 for o in rest + folded), "names": names})
    out_ops = []
    for o in kept:
        rec = {k: (round(v, 6) if isinstance(v, float) else v) for k, v in o.items()
               if k in ("name", "calls", "total_ms", "avg_ms", "ms_per_batch", "share", "names")}
        out_ops.append(rec)
    meta = payload.get("meta") or {}
    return {"operators": out_ops, "batches": payload.get("batches"),
            "mxnet_version": meta.get("mxnet_version"), "subgraph_backend": meta.get("subgraph_backend"),
            "bulk_exec": meta.get("bulk_exec")}
