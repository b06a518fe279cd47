"""Record a corpus of real A/A duet pairs and baseline re-runs on this machine, with the
product's own measuring code, for the error-rate replay (``benchmarks/replay_error_rates.py``).

For each cell, interleaved round by round (round r measures every cell once, in a rotated
order, before round r + 1 starts, so that the machine's slow spells hit all cells alike):

* one **A/A duet pair**: ``Scheduler.throughput_run(w).duet`` (that is
  ``measure.duet.run_pair`` with the session's default options from ``model/options.py``),
  the same interpreter (this one) on both sides; which side runs first alternates from
  round to round (and between cells of one round). The product does not probe the machine
  around a duet pair; this script does, around the whole pair, with the product's own
  probe and load meter (``machine/state.run_probe``, ``LoadMeter``), kept beside the pair
  (``bracket``), not in the runs' meta, so that the replay sees the runs as the judge
  would;
* one **fresh worker process** for baseline mode: ``Scheduler.measure(w, processes=1)``
  (``measure.runner.run_workload`` bracketed by the machine-state probe exactly as a
  session does it: ``meta["machine_state"]`` holds its probes and load).

Every pair and process also records the 1-minute load average before and after, and its
start time in seconds from the start of the run (``t``). The file is written atomically
after every pair and process: ``benchmarks/data/aa-corpus-<machine id>.json`` (``--tag T``:
``aa-corpus-<machine id>-T.json``, another recording of the same machine). It keeps what
the judge reads of each RunResult (status, batches_per_round, round_seconds, figures,
wall_seconds and the meta fields: duet, machine_state, peak_rss_bytes, mxnet_version); the
meta every process of a cell shares (env, env_defaults_applied, threads) is kept once per
cell (``meta_common``).

Other engineers' tests may run on this machine at the same time: the bracket and the load
averages show when (this is the machine the gate runs on, not a quiet lab).

    .venv/bin/python benchmarks/collect_aa_corpus.py --minutes 22 --rounds 20

The pytest process never runs this: it measures for minutes.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Dict, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from pytest_mxperf.machine import state as machine_state  # noqa: E402
from pytest_mxperf.machine.fingerprint import machine_fingerprint  # noqa: E402
from pytest_mxperf.measure.session import PerfSession  # noqa: E402
from pytest_mxperf.measure.comparison import comparison_for  # noqa: E402
from pytest_mxperf.model.jsonio import atomic_write_text  # noqa: E402
from pytest_mxperf.model.measurement import RunResult  # noqa: E402
from pytest_mxperf.model.options import PerfOptions  # noqa: E402
from pytest_mxperf.model.workload import Workload  # noqa: E402

SCHEMA = 1
DEFAULT_CELLS = (
    Workload("lenet", mode="score", batch_size=1),
    Workload("alexnet", mode="score", batch_size=2),
    Workload("inception-bn", mode="score", batch_size=2),
    Workload("resnet50_v2", mode="score", batch_size=2),
)
#: meta fields of a run the judge reads (per run); shared ones are kept once per cell
RUN_META = ("duet", "machine_state", "peak_rss_bytes", "mxnet_version")
COMMON_META = ("env", "env_defaults_applied", "threads")


def _loadavg() -> float:
    return round(os.getloadavg()[0], 2)


def _round_floats(xs, digits: int = 7):
    return [float(f"{x:.{digits}g}") for x in xs]


def run_doc(r: RunResult) -> Dict[str, Any]:
    """What the judge needs of one RunResult, as plain JSON."""
    meta = {k: r.meta[k] for k in RUN_META if k in r.meta}
    d: Dict[str, Any] = {"status": r.status, "batches_per_round": r.batches_per_round,
                         "round_seconds": _round_floats(r.round_seconds),
                         "figures": {k: float(f"{v:.7g}") for k, v in r.figures.items()},
                         "wall_seconds": round(r.wall_seconds, 2), "meta": meta}
    if r.status != "ok":
        d["message"] = r.message
    return d


def _bracket(before: Optional[Dict], after: Optional[Dict], load: Optional[Dict]) -> Dict[str, Any]:
    return {"probe_before": before, "probe_after": after, "load": load}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20, help="at most this many rounds (one pair + one process a cell)")
    ap.add_argument("--minutes", type=float, default=22.0, help="no round starts that would end past this")
    ap.add_argument("--out-dir", type=Path, default=HERE / "data")
    ap.add_argument("--machine", default=None, help="override the machine id")
    ap.add_argument("--tag", default=None, help="a second corpus of this machine: aa-corpus-<machine id>-<tag>.json")
    ap.add_argument("--cells", nargs="*", default=None,
                    help="model:batch pairs (score mode), e.g. alexnet:2 lenet:1 (default: the four of DEFAULT_CELLS)")
    args = ap.parse_args(argv)

    cells = ([Workload(m, mode="score", batch_size=int(b)) for m, b in (c.split(":") for c in args.cells)]
             if args.cells else list(DEFAULT_CELLS))
    fp = machine_fingerprint(args.machine)
    out = args.out_dir / f"aa-corpus-{fp['id']}{'-' + args.tag if args.tag else ''}.json"
    ab_options = PerfOptions(reference=sys.executable)          # the A/B session's options, defaults
    ab_session = PerfSession(ab_options)
    ab_session.begin({"id": fp["id"]}, None, ab_options, comparison_for(sys.executable))
    ab = ab_session.scheduler
    fresh = PerfSession(PerfOptions()).scheduler                # baseline mode's, defaults
    data: Dict[str, Any] = {
        "schema": SCHEMA,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"id": fp["id"], "cpu_model": fp["hardware"].get("cpu_model"),
                    "logical_cpus": fp["hardware"].get("logical_cpus"),
                    "hardware": fp["hardware"]},
        "command": "python " + " ".join([str(Path(sys.argv[0]).as_posix())] + list(argv if argv is not None
                                                                                   else sys.argv[1:])),
        "interpreter": sys.executable,
        "options": {"time_budget": ab.options.time_budget, "timeout": ab.options.timeout,
                    "warmup_timeout": ab.options.warmup_timeout, "memory_limit": ab.options.memory_limit},
        "note": ("A/A: the same interpreter on both sides of every duet pair (candidate and reference), "
                 "which side runs first alternating; fresh: one worker process each, bracketed by the "
                 "machine-state probe as the session's scheduler does. Other engineers' tests may have run on this "
                 "shared 2-vCPU VM at the same time: each pair's 'bracket' (the product's probe and load "
                 "meter around the whole pair) and each entry's 'loadavg' (1-minute load average before, "
                 "after) show it; t is seconds from the start of the run."),
        "features": None,
        "cells": {w.key(): {"workload": w.to_dict(), "meta_common": None, "pairs": [], "fresh": []} for w in cells},
        "finished_rounds": 0,
    }
    t_start = time.monotonic()
    round_seconds = []

    def save():
        data["minutes"] = round((time.monotonic() - t_start) / 60.0, 2)
        atomic_write_text(out, json.dumps(data, indent=None, separators=(",", ":"), sort_keys=True) + "\n")

    def common(entry, r: RunResult):
        if entry["meta_common"] is None and r.ok:
            entry["meta_common"] = {k: r.meta.get(k) for k in COMMON_META}
            if data["features"] is None:
                data["features"] = r.meta.get("features")
                data["mxnet_version"] = r.meta.get("mxnet_version")

    for rnd in range(args.rounds):
        elapsed = time.monotonic() - t_start
        expected = max(round_seconds, default=0.0)
        if rnd and elapsed + expected > 60.0 * args.minutes:
            print(f"stopping after {rnd} rounds: {elapsed / 60:.1f} min gone, a round takes {expected / 60:.1f} min",
                  flush=True)
            break
        r0 = time.monotonic()
        order = cells[rnd % len(cells):] + cells[:rnd % len(cells)]
        for i, w in enumerate(order):
            entry = data["cells"][w.key()]
            duet_pair = ab.throughput_run(w).duet
            candidate_first = (rnd + i) % 2 == 0
            la0, t = _loadavg(), round(time.monotonic() - t_start, 1)
            before = machine_state.run_probe()
            meter = machine_state.LoadMeter()
            meter.start()
            c, ref = duet_pair(None, sys.executable, rnd, candidate_first)
            load = meter.stop()
            after = machine_state.run_probe()
            common(entry, c)
            entry["pairs"].append({"round": rnd, "t": t, "candidate_first": candidate_first,
                                   "loadavg": [la0, _loadavg()], "bracket": _bracket(before, after, load),
                                   "candidate": run_doc(c), "reference": run_doc(ref)})
            ratio = (f"{c.median / ref.median:.3f}" if c.ok and ref.ok else f"{c.status}/{ref.status}")
            print(f"[round {rnd}] pair  {w.key()}: {ratio} (c/r medians), load {la0}", flush=True)
            save()
        for w in order:
            entry = data["cells"][w.key()]
            la0, t = _loadavg(), round(time.monotonic() - t_start, 1)
            cell = fresh.measure(w, processes=1)
            r = cell.runs[0]
            common(entry, r)
            entry["fresh"].append({"round": rnd, "t": t, "loadavg": [la0, _loadavg()], "run": run_doc(r)})
            print(f"[round {rnd}] fresh {w.key()}: {r.status} "
                  f"{'-' if r.median is None else round(r.median, 2)} img/s, load {la0}", flush=True)
            save()
        data["finished_rounds"] = rnd + 1
        save()
        round_seconds.append(time.monotonic() - r0)
    save()
    print(f"wrote {out} ({data['minutes']} min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
