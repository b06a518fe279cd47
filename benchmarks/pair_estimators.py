"""One duet pair's estimate (issue 76, parts 2 and 3): the median of all its rounds' log ratios
against the product's (``stats.duet_pair_log_ratio``: the even and the odd rounds' medians,
averaged). The rounds alternate which side runs first (A,B | B,A | ...), so the side that runs
first in a round ran last before it; per cell, the mean log ratio of the even rounds minus the
odd rounds', by which side ran first in the pair, shows whether that side runs faster (it flips
sign with the pair's order when it does), and the spread of the pair estimates across the
cell's pairs (sd of the log ratio) each way shows what it costs the median. A cell needs pairs
in proportion to that spread squared. Pure arithmetic on the recorded A/A duet pairs of every
corpus (``benchmarks/data/aa-corpus-*.json``) and of any session's results.json given.

    .venv/bin/python benchmarks/pair_estimators.py [results.json ...]
"""

from __future__ import annotations

import glob
import json
import math
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from pytest_mxperf.model import stats  # noqa: E402

MIN_PAIRS = 8


def _corpus(path):
    """{cell: [(candidate rounds, reference rounds, candidate first)]} of a corpus's duet pairs."""
    with open(path) as fh:
        cells = json.load(fh)["cells"]
    return {k: [(p["candidate"].get("round_seconds") or [], p["reference"].get("round_seconds") or [],
                 str(p.get("candidate_first")) == "True")
                for p in c.get("pairs", []) if "duet" in p["candidate"].get("meta", {})]
            for k, c in cells.items()}


def _session(path):
    """The same of a session's results.json (its records' runs paired with their reference runs)."""
    with open(path) as fh:
        records = json.load(fh)["records"]
    out = {}
    for rec in records:
        pairs = []
        for c, r in zip(rec.get("runs") or [], rec.get("reference_runs") or []):
            duet = (c.get("meta") or {}).get("duet")
            if duet and c.get("status") == "ok" and r.get("status") == "ok":
                pairs.append((c.get("round_seconds") or [], r.get("round_seconds") or [], not duet.get("ran_first")
                              if duet.get("side") == "reference" else bool(duet.get("ran_first"))))
        out[rec["key"]] = pairs
    return out


def _median_of_all(c, r):
    return statistics.median(math.log(b / a) for a, b in zip(c, r) if a > 0 and b > 0)


def _even_minus_odd(c, r):
    logs = [math.log(b / a) for a, b in zip(c, r)]
    return statistics.fmean(logs[0::2]) - statistics.fmean(logs[1::2])


def main(paths) -> int:
    ratios = []
    sources = [(p, _corpus(p)) for p in sorted(glob.glob(os.path.join(HERE, "data", "aa-corpus-*.json")))]
    sources += [(p, _session(p)) for p in paths]
    for path, cells in sources:
        print(os.path.basename(os.path.dirname(path)) + "/" + os.path.basename(path))
        print(f"  {'cell':58s} pairs rounds  even-odd (cand first / second)   sd: median of all   product's")
        for key, pairs in sorted(cells.items()):
            pairs = [(c, r, f) for c, r, f in pairs if len(c) == len(r) >= 6]
            if len(pairs) < MIN_PAIRS:
                continue
            by_order = {f: [_even_minus_odd(c, r) for c, r, g in pairs if g == f] for f in (True, False)}
            old = statistics.stdev(_median_of_all(c, r) for c, r, _ in pairs)
            new = statistics.stdev(stats.duet_pair_log_ratio(c, r) for c, r, _ in pairs)
            ratios.append(new / old)
            eo = " / ".join(f"{100 * statistics.fmean(v):+5.1f}%" if v else "    -" for v in by_order.values())
            print(f"  {key[:58]:58s} {len(pairs):5d} {statistics.median(len(c) for c, _, _ in pairs):6.0f}"
                  f"  {eo:>30s}   {100 * old:16.2f}%   {100 * new:8.2f}%")
    if ratios:
        print(f"the product's spread against the median of all rounds: x{statistics.median(ratios):.2f} "
              f"(median of {len(ratios)} cells), x{min(ratios):.2f} to x{max(ratios):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
