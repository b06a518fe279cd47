"""Would fewer timed rounds make a cheaper duet pair (issue 35 part 5, issue 37: the cost of
settling suspects)? From the recorded A/A duet pairs of every corpus (``benchmarks/data/
aa-corpus-*.json``), each pair's estimate (``stats.duet_pair_log_ratio``, the product's) from
all its rounds, from its first half and from its first quarter (at least 3), and the spread of
those estimates across the cell's pairs (sd of the log ratio). A cell needs pairs in proportion
to that spread squared, so halving the rounds saves time only if the spread grows by less than
about 1.2x (a pair's rounds are about half of its wall time). Pure arithmetic on the files.

    .venv/bin/python benchmarks/duet_rounds.py
"""

from __future__ import annotations

import glob
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from pytest_mxperf.model import stats  # noqa: E402

MIN_PAIRS = 8


def main() -> int:
    growth = []
    for path in sorted(glob.glob(os.path.join(HERE, "data", "aa-corpus-*.json"))):
        with open(path) as fh:
            cells = json.load(fh)["cells"]
        print(os.path.basename(path))
        for key, cell in sorted(cells.items()):
            sides = [(p["candidate"].get("round_seconds") or [], p["reference"].get("round_seconds") or [])
                     for p in cell.get("pairs", []) if "duet" in p["candidate"].get("meta", {})]
            sides = [(c, r) for c, r in sides if len(c) == len(r) >= 8]
            if len(sides) < MIN_PAIRS:
                continue
            est = {name: [stats.duet_pair_log_ratio(c[:cut(len(c))], r[:cut(len(c))]) for c, r in sides]
                   for name, cut in (("all", lambda n: n), ("half", lambda n: n // 2),
                                     ("quarter", lambda n: max(3, n // 4)))}
            sd = {k: statistics.stdev(v) for k, v in est.items()}
            growth.append(sd["half"] / sd["all"])
            print(f"  {key[:64]:64s} pairs {len(sides):3d} rounds {statistics.median(len(c) for c, _ in sides):4.0f}"
                  f"  sd: all {100 * sd['all']:5.2f}%  half {100 * sd['half']:5.2f}%  quarter {100 * sd['quarter']:5.2f}%")
    print(f"half the rounds against all: the spread x{statistics.median(growth):.2f} (median of {len(growth)} cells), "
          f"x{min(growth):.2f} to x{max(growth):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
