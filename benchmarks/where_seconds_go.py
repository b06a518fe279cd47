"""Where a session's seconds go (#37 part 2): per measuring test, from a session's
``results.json`` (``--perf-report DIR``), the test's wall time split into what its worker
processes spent (MXNet's import, binding, the untimed first batch and warm-up, the timed
rounds, the rest of the process: its start, facts, answers, exit) and what the test spent
outside its processes (machine probes, launches of a cluster's roles, waiting, the parent's
own work).

Every figure is read from the session's own facts (``model/run_facts.py``): a process's
``wall_seconds`` (the parent's clock from spawn to its result), ``import_seconds``,
``bind_seconds``, ``first_batch_seconds``, ``warmup_window`` and ``timed_seconds`` (the
worker's clocks). In a process that measured several cells (``process_cells``, a grid's
cells: one test measures them all) each cell's wall is its own share and MXNet's import is
counted once, on the process's first cell. Kinds of cell whose workers do not report a
phase show "-" (their whole process is "process rest").

    .venv/bin/pytest perf_tests -m cpu --perf-report /tmp/rep
    .venv/bin/python benchmarks/where_seconds_go.py /tmp/rep/results.json
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Dict, List, Optional

PHASES = ("import", "bind", "warm-up", "timed", "process rest")
#: the row of the pairs that settle suspects at the session's end (duets, process pairs): not
#: a test's (more processes of one side, without pairs, cannot be told from the test's own)
SETTLING = "(end of session: pairs settling suspects)"


def _num(v: Any) -> Optional[float]:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def process_phases(run: Dict[str, Any]) -> Dict[str, Optional[float]]:
    """One process's phases in seconds ("process rest": its wall less the phases it reported)."""
    meta = run.get("meta") or {}
    wall = _num(run.get("wall_seconds")) or 0.0
    warm = meta.get("warmup_window") or {}
    warmup = None
    if _num(warm.get("started")) is not None and _num(warm.get("ended")) is not None:
        # the window opens before the bind (a duet side's turn to bind and warm up alone): the
        # warm-up column is the first batch and the untimed batches, the bind its own column
        warmup = warm["ended"] - warm["started"] - (_num(meta.get("bind_seconds")) or 0.0)
    elif _num(meta.get("first_batch_seconds")) is not None:
        warmup = meta["first_batch_seconds"]
    imported = _num(meta.get("import_seconds"))
    place = meta.get("process_cells") or {}
    if place and place.get("index") != 0:  # a process of several cells imports MXNet once, before its first
        imported = None
    out = {"wall": wall, "import": imported, "bind": _num(meta.get("bind_seconds")),
           "warm-up": warmup, "timed": _num(meta.get("timed_seconds"))}
    out["process rest"] = wall - sum(v for k, v in out.items() if k != "wall" and v is not None) if wall else None
    return out


def _row(test: str, wall: Optional[float] = None) -> Dict[str, Any]:
    return {"test": test, "wall": wall, "cells": 0, "processes": 0, "process wall": 0.0, **{p: None for p in PHASES}}


def by_test(doc: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Per measuring test of the session (``session.test_seconds``, in the order they ran): its
    wall, cells, processes and the sum of each phase over its processes."""
    tests = (doc.get("session") or {}).get("test_seconds") or {}
    rows: Dict[str, Dict[str, Any]] = {n: _row(n, s) for n, s in tests.items()}
    seen = set()
    for rec in doc.get("records") or []:
        nodeid = rec.get("nodeid") or ""
        rows.setdefault(nodeid, _row(nodeid))["cells"] += 1
        for run in (rec.get("runs") or []) + (rec.get("reference_runs") or []):
            pid = run.get("process")
            if pid in seen:
                continue
            seen.add(pid)
            ph = process_phases(run)
            meta = run.get("meta") or {}
            if meta.get("duet") or meta.get("pair_of") or run in (rec.get("reference_runs") or []):
                row = rows.setdefault(SETTLING, _row(SETTLING))
            else:
                row = rows[nodeid]
            row["processes"] += 0 if (meta.get("process_cells") or {}).get("index", 0) else 1
            row["process wall"] += ph["wall"]
            for p in PHASES:
                if ph[p] is not None:
                    row[p] = (row[p] or 0.0) + ph[p]
    for row in rows.values():
        if row["wall"] is not None and row["test"] != SETTLING:
            row["outside processes"] = row["wall"] - row["process wall"]
    return list(rows.values())


def by_function(rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """``by_test``'s rows summed over each test function's parameters: a grid's cells, which
    its first test measures in shared processes, are one row."""
    out: Dict[str, Dict[str, Any]] = {}
    for r in rows:
        name = r["test"].split("[")[0]
        o = out.setdefault(name, {"test": name})
        for k, v in r.items():
            if k != "test" and v is not None:
                o[k] = (o.get(k) or 0) + v
    return list(out.values())


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.1f}"
    return str(v)


def table(doc: Dict[str, Any], functions: bool = False) -> str:
    rows = by_function(by_test(doc)) if functions else by_test(doc)
    cols = ("wall", "cells", "processes", "process wall", *PHASES, "outside processes")
    lines = ["test".ljust(72) + "".join(c.rjust(12) for c in ("wall", "cells", "procs", "proc wall", "import",
                                                             "bind", "warm-up", "timed", "proc rest", "outside"))]
    for r in sorted(rows, key=lambda r: -(r.get("wall") or 0.0)):
        lines.append(r["test"][-72:].ljust(72) + "".join(_fmt(r.get(c)).rjust(12) for c in cols))
    total = {c: sum(r.get(c) or 0.0 for r in rows) for c in cols}
    lines.append("all tests".ljust(72) + "".join(_fmt(total[c] if c not in ("cells", "processes")
                                                      else int(total[c])).rjust(12) for c in cols))
    s = doc.get("session") or {}
    wall = _num(s.get("wall_seconds"))
    if wall is not None:
        lines.append(f"session wall {wall:.1f} s: {total['wall']:.1f} s in measuring tests, "
                     f"{wall - total['wall']:.1f} s outside them (collection, the plan, the end: judging, reports)")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", help="a session's results.json (--perf-report DIR)")
    ap.add_argument("--by-function", action="store_true", help="one row per test function (a grid's cells summed)")
    a = ap.parse_args(argv)
    with open(a.results) as fh:
        doc = json.load(fh)
    print(table(doc, a.by_function))
    return 0


if __name__ == "__main__":
    sys.exit(main())
