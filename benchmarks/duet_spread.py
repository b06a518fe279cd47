"""How far a session's duet pairs spread, figure by figure: the evidence behind
``ab_judging.spread_family`` and ``thresholds.TAIL_MIN_EFFECT``.

Reads the ``results.json`` of sessions run with ``--perf-report DIR`` (A/B mode, or baseline
mode's pairs against the recorded setup) and prints, per cell and judged figure, the pairs and
their log ratios' median and standard deviation, computed as the product judges them
(``ab_judging.duet_log_ratio``: a figure the rounds time from the rounds run back to back, a
latency percentile from the two sides' figures), beside the same cell's round-time ratios.

    python benchmarks/duet_spread.py /tmp/spread/results.json [...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_mxperf.model import stats  # noqa: E402
from pytest_mxperf.model.measurement import METRICS, PRIMARY, RunResult  # noqa: E402
from pytest_mxperf.model.workload import Workload  # noqa: E402
from pytest_mxperf.outcome.ab_judging import duet_log_ratio  # noqa: E402


def _run(w: Workload, d: dict) -> RunResult:
    return RunResult(w, d["status"], batches_per_round=d.get("batches_per_round", 0),
                     round_seconds=d.get("round_seconds") or (), figures=d.get("figures") or {},
                     meta=d.get("meta") or {}, process=d.get("process") or "")


def rows(path: str):
    doc = json.loads(Path(path).read_text())
    for rec in doc["records"]:
        if not rec.get("reference_runs"):
            continue
        w = Workload.from_dict(rec["workload"])
        by_id = {r["process"]: r for r in rec["runs"]}
        pairs = [(_run(w, by_id[r["meta"]["pair_of"]]), _run(w, r)) for r in rec["reference_runs"]
                 if r.get("meta", {}).get("pair_of") in by_id] or \
                [(_run(w, c), _run(w, r)) for c, r in zip(rec["runs"], rec["reference_runs"])]
        pairs = [(c, r) for c, r in pairs if c.ok and r.ok]
        rounds = [stats.duet_pair_log_ratio(c.seconds_per_batch, r.seconds_per_batch)
                  for c, r in pairs if c.round_seconds and len(c.round_seconds) == len(r.round_seconds)]
        figures = [PRIMARY[w.mode]] + [m for m in ("latency_p50_ms",) if w.mode == "latency"]
        for name in figures:
            got = [duet_log_ratio(c, r, METRICS[name]) for c, r in pairs
                   if c.value(name) is not None and r.value(name) is not None]
            yield {"cell": rec["key"], "figure": name, "pairs": len(got),
                   "median": statistics.median(got) if got else None,
                   "sd": statistics.stdev(got) if len(got) >= 2 else None,
                   "rounds_sd": statistics.stdev(rounds) if len(rounds) >= 2 else None,
                   "k": pairs[0][0].batches_per_round if pairs else None,
                   "rounds": len(pairs[0][0].round_seconds) if pairs else None}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", help="results.json of sessions run with --perf-report")
    a = ap.parse_args(argv)
    print("| session | cell | figure | pairs | batches a round x rounds | median log ratio | pair spread (sd) "
          "| rounds' pair spread (sd) |")
    print("|---|---|---|---|---|---|---|---|")
    for path in a.results:
        for r in rows(path):
            f = (lambda x: "-" if x is None else f"{100 * x:.1f}%")
            print(f"| {Path(path).parent.name} | {r['cell']} | {r['figure']} | {r['pairs']} | {r['k']} x {r['rounds']} "
                  f"| {f(r['median'])} | {f(r['sd'])} | {f(r['rounds_sd'])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
