"""Write the reference costs the session's estimate starts from on a machine without history
(#37 part 1): ``pytest_mxperf/data/reference-costs.json``.

It reads, from a history store, the last complete session of each kind ("suite": the default
session; "recording": ``--perf-update-baselines``; "baseline": an unchanged session against a
baseline; "ab": an A/B session, the upgrade gate's) on this machine, with each test's seconds,
and measures this machine's MXNet speed figures (the MXNet probe's ``mxnet_speed``: the import's
CPU seconds and the convolution's GFLOP/s, the medians of ``--probes`` probe processes, run one
at a time on a quiet machine). A machine without
history then scales these seconds by its own figure against this one
(``measure/planning.speed_from``).

    MXPERF_HISTORY=/tmp/ref.sqlite .venv/bin/pytest perf_tests -m cpu
    MXPERF_HISTORY=/tmp/ref.sqlite .venv/bin/pytest perf_tests -m cpu --perf-update-baselines
    .venv/bin/python benchmarks/reference_costs.py /tmp/ref.sqlite [more stores] --commit $(git rev-parse --short HEAD)

An A/B session's kind is added to the file that is there (``--merge``: the speed figure and the
other kinds kept; the CPU must be the file's), with the deadline it ran under:

    MXPERF_HISTORY=/tmp/aa.sqlite .venv/bin/pytest perf_tests ... --perf-reference "mxnet==1.9.1" --perf-deadline 30m
    .venv/bin/python benchmarks/reference_costs.py /tmp/aa.sqlite --merge --kinds ab --ab-deadline 30m --commit ...

Each test's seconds are the median over the last ``--sessions`` sessions of its kind in every
store given, the session's wall their sum and the median time outside the tests (sessions of one code on one VM differ by its speed regimes: 329-375 s here).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

from pytest_mxperf.machine import fingerprint, hardware
from pytest_mxperf.history.store import open_store
from pytest_mxperf.model import options as opts
from pytest_mxperf.proc import worker

OUT = Path(__file__).resolve().parents[1] / "pytest_mxperf" / "data" / "reference-costs.json"
#: the kinds of session (``SessionContext.kind``) the estimate reads, and their processes a cell
KINDS = {"suite": opts.PROCESSES, "baseline": opts.PROCESSES, "recording": opts.RECORDING_PROCESSES, "ab": None}


def cpu_name() -> str:
    """The CPU as a closing note names it: vCPUs, model name, family, model, a few flags."""
    cpu = hardware.cpu_info()
    flags = set(cpu.get("flags") or ())
    shown = [f for f in ("avx2", "avx512f", "avx512_vnni", "amx_tile") if f in flags]
    return (f"a {os.cpu_count()}-vCPU {cpu['model_name']}, family {cpu.get('family', '?')} "
            f"model {cpu.get('model', '?')} ({', '.join(shown) or 'no AVX2'})")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store", nargs="+", help="the history stores the sessions wrote (SQLite paths)")
    ap.add_argument("--commit", required=True, help="the commit the sessions ran")
    ap.add_argument("--probes", type=int, default=7, help="MXNet probe processes for the speed figure")
    ap.add_argument("--sessions", type=int, default=3,
                    help="the last N complete sessions of a kind in each store: each test's seconds and the "
                         "session's wall are their medians (one session is one speed regime of a VM)")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--kinds", default=",".join(KINDS), help="the kinds of session to read (comma-separated)")
    ap.add_argument("--merge", action="store_true",
                    help="add the kinds read to the file at --out, keeping its speed figure and its other kinds")
    ap.add_argument("--ab-deadline", default=None, help="the --perf-deadline the A/B sessions ran under")
    a = ap.parse_args(argv)
    kinds = [k for k in a.kinds.split(",") if k]
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        print(f"unknown kind(s) {unknown}: {sorted(KINDS)}", file=sys.stderr)
        return 2
    try:
        ab_deadline = opts.parse_duration("--ab-deadline", a.ab_deadline)
    except opts.OptionError as exc:
        print(exc, file=sys.stderr)
        return 2
    machine = fingerprint.machine_fingerprint()["id"]
    old = json.loads(Path(a.out).read_text()) if a.merge else None
    if old is not None and old.get("cpu") != cpu_name():
        print(f"--merge: {a.out} was measured on {old.get('cpu')}, this is {cpu_name()}", file=sys.stderr)
        return 1
    sessions = {}
    for kind in kinds:
        processes = KINDS[kind]
        rows = []
        for path in a.store:
            with open_store(path) as store:
                rows += store.durations(machine, kind, a.sessions)
        if not rows:
            print(f"no complete {kind} session of machine {machine} in {', '.join(a.store)}", file=sys.stderr)
            continue
        names = sorted({n for r in rows for n in r["tests"]})
        tests = {n: round(statistics.median(r["tests"][n] for r in rows if n in r["tests"]), 2) for n in names}
        # the wall: the tests' medians and the median of the time outside them (collection, the plan,
        # the end), so that the tests never add up to more than the session
        outside = statistics.median(max(0.0, r["wall_seconds"] - sum(r["tests"].values())) for r in rows)
        # what reference_known holds a session to: its processes a cell, or an A/B session's duet pairs
        # and deadline
        held = ({"processes": processes} if kind != "ab" else
                {"duet_pairs": opts.DUET_PAIRS, "commit": a.commit, "deadline": ab_deadline})
        sessions[kind] = {**held, "time_budget": opts.TIME_BUDGET_S, "sessions": len(rows),
                          "wall_seconds": round(sum(tests.values()) + outside, 1), "tests": tests}
    if not sessions:
        return 1
    if old is not None:
        old["sessions"].update(sessions)
        Path(a.out).write_text(json.dumps(old, indent=1) + "\n")
        print(f"merged {', '.join(sessions)} into {a.out}")
        return 0
    figures, imports = [], []
    for _ in range(a.probes):
        p = worker.probe()
        g = (p.get("mxnet_speed") or {}).get("conv_gflops")
        i = (p.get("mxnet_speed") or {}).get("import_cpu_s")
        if not isinstance(g, (int, float)) or not isinstance(i, (int, float)):
            print(f"the MXNet probe gave no speed figure: {p.get('message') or p.get('mxnet_speed')}", file=sys.stderr)
            return 1
        figures.append(g)
        imports.append(i)
    doc = {"cpu": cpu_name(), "commit": a.commit, "mxnet_version": p.get("mxnet_version"),
           "conv_gflops": round(statistics.median(figures), 1),
           "conv_gflops_seen": [round(g, 1) for g in figures],
           "import_cpu_s": round(statistics.median(imports), 3),
           "import_cpu_s_from": f"the median of {len(imports)} MXNet probes' import_cpu_s, with the sessions",
           "sessions": sessions}
    Path(a.out).write_text(json.dumps(doc, indent=1) + "\n")
    said = ", ".join(f"{k} {v['wall_seconds']} s" for k, v in sessions.items())
    print(f"wrote {a.out}: {doc['cpu']}, {doc['conv_gflops']} GFLOP/s (of {doc['conv_gflops_seen']}), import {doc['import_cpu_s']} CPU-s, sessions: {said}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
