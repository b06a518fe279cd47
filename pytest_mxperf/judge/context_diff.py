"""What changed around a figure between two sides, as lines a person reads beside its verdict:
the environment (threads, MXNet variables), the software (MXNet version, build features)
and the start-up times (import, bind, first batch)."""

from __future__ import annotations

from typing import Any, List, Mapping, Optional

from pytest_mxperf.judge.thresholds import STARTUP_CHANGE_NOTE


def _fmt_val(v: Any) -> str:
    if v is None:
        return "unset"
    if isinstance(v, (list, tuple)):
        return ",".join(str(x) for x in v)
    return str(v)


def env_diff(current_env: Optional[Mapping[str, Any]], baseline_env: Optional[Mapping[str, Any]]) -> List[str]:
    """Lines ``NAME: baseline -> current`` for every variable that differs, e.g.
    ``MXNET_SUBGRAPH_BACKEND: unset -> NONE`` (sorted by name)."""
    cur, base = dict(current_env or {}), dict(baseline_env or {})
    lines = []
    for k in sorted(set(cur) | set(base)):
        a, b = base.get(k), cur.get(k)
        if a != b:
            lines.append(f"{k}: {_fmt_val(a)} -> {_fmt_val(b)}")
    return lines


def version_diff(current: Optional[Mapping[str, Any]], baseline: Optional[Mapping[str, Any]]) -> List[str]:
    """Same as env_diff for software facts, ``mxnet_version`` shown as ``mxnet``
    (``mxnet: 1.8.0 -> 1.9.1``); feature lists show only what was added/removed."""
    cur, base = dict(current or {}), dict(baseline or {})
    lines = []
    for k in sorted(set(cur) | set(base)):
        a, b = base.get(k), cur.get(k)
        if a == b:
            continue
        name = "mxnet" if k in ("mxnet_version", "mxnet") else k
        if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
            added = sorted(set(map(str, b)) - set(map(str, a)))
            removed = sorted(set(map(str, a)) - set(map(str, b)))
            parts = [f"+{x}" for x in added] + [f"-{x}" for x in removed]
            if parts:
                lines.append(f"{name}: {' '.join(parts)}")
            continue
        lines.append(f"{name}: {_fmt_val(a)} -> {_fmt_val(b)}")
    return lines


def startup_note(current: Mapping[str, Any], baseline: Mapping[str, Any]) -> Optional[str]:
    """A note when bind + first-batch time changed by more than ``STARTUP_CHANGE_NOTE``."""
    def startup(d):
        b, f = d.get("bind_seconds"), d.get("first_batch_seconds")
        return None if b is None or f is None else float(b) + float(f)

    cur, base = startup(current), startup(baseline)
    if cur is None or not base:
        return None
    change = cur / base - 1.0
    if abs(change) > STARTUP_CHANGE_NOTE:
        return f"bind + first batch time {100 * change:+.0f}% ({base:.2f} -> {cur:.2f} s)"
    return None
