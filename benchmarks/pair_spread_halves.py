"""Where a duet pair's spread comes from: its rounds, or its two processes?

For every duet pair of the sessions' results.json files (A/A: the same MXNet on both sides, or
a baseline's recorded setup rebuilt), the product's estimate of the pair
(``stats.duet_pair_log_ratio``) is taken twice, once from the first half of its rounds and once
from the second. Across the pairs of one cell, the two halves share what belongs to the pair's
two processes (their heaps, their threads' placement, the libraries each loaded) and nothing of
their rounds' own noise, so per kind of cell (pooled over its cells):

* the covariance of the two halves estimates the variance of the processes' part;
* the variance of one half, that part plus the rounds' noise of half a pair.

A pair's rounds then explain ``1 - cov / var`` of a half's variance; if that is most of it, more
timed rounds a pair narrow a pair's spread (about as one over the square root of its rounds),
and more pairs are needed only for the processes' part.

    .venv/bin/python benchmarks/pair_spread_halves.py RESULTS.json [RESULTS.json ...]
"""

from __future__ import annotations

import collections
import json
import math
import statistics
import sys

from pytest_mxperf.model import stats

#: kinds whose pairs' figure is not a round ratio (a tail; a run to the end)
NOT_ROUNDS = ("latency", "convergence")


def halves(path: str, acc) -> None:
    with open(path) as fh:
        doc = json.load(fh)
    for rec in doc["records"]:
        kind = rec["key"].split("/", 1)[0]
        if kind in NOT_ROUNDS:
            continue
        pairs = []
        for c, r in zip(rec.get("runs") or [], rec.get("reference_runs") or []):
            a, b = c.get("round_seconds") or [], r.get("round_seconds") or []
            if len(a) < 8 or len(a) != len(b):
                continue
            h = len(a) // 2 - (len(a) // 2) % 2  # an even cut: each half keeps both parities
            pairs.append((stats.duet_pair_log_ratio(a[:h], b[:h]), stats.duet_pair_log_ratio(a[h:], b[h:])))
        if len(pairs) < 3:
            continue
        m1 = statistics.mean(p[0] for p in pairs)
        m2 = statistics.mean(p[1] for p in pairs)
        k = acc[kind]
        k[0] += sum((p[0] - m1) ** 2 + (p[1] - m2) ** 2 for p in pairs) / 2
        k[1] += sum((p[0] - m1) * (p[1] - m2) for p in pairs)
        k[2] += len(pairs) - 1
        k[3] += 1


def main(paths) -> None:
    acc = collections.defaultdict(lambda: [0.0, 0.0, 0, 0])
    for p in paths:
        halves(p, acc)
    print("| kind | cells | df | sd of a half pair's estimate | processes' part (sqrt cov) | share of the rounds |")
    print("|---|---|---|---|---|---|")
    for kind, (ss, cov, df, cells) in sorted(acc.items()):
        var, c = ss / df, cov / df
        print(f"| {kind} | {cells} | {df} | {100 * math.sqrt(var):.2f}% | {100 * math.sqrt(max(c, 0.0)):.2f}% "
              f"| {1 - max(c, 0.0) / var:.2f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
