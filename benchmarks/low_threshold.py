"""The lower bound of the per-cell thresholds (issue 38, part 3): unchanged A/B sessions with
every figure's minimum effect at X, replayed through the product's own end of a session
(``replay_lib``) on the quiet AMD duet corpus and the default selection's corpus (Intel Xeon),
59 sessions of 6 and of 24 cells each. The bound is the least X at which no row fails more
than 5% of sessions.

    .venv/bin/python benchmarks/low_threshold.py 0.01 0.02 0.03 0.05
"""

import functools
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import replay_lib as L  # noqa: E402
from pytest_mxperf.model.options import PerfOptions  # noqa: E402

SEED = 20261125


def main(argv) -> int:
    original = L.PerfOptions
    for low in map(float, argv or ["0.03"]):
        L.PerfOptions = functools.partial(original, min_effect=low)
        for c in L.aa_corpora():
            c = c.with_pairs()
            if not c.pools or not ("quiet" in c.name or "default" in c.name):
                continue
            for n in (6, 24):
                r = L.rates("ab", c, n, 1.0, 59, SEED)
                print(f"{c.name}  min_effect={low:g}  {L.format_row(r)}", flush=True)
    L.PerfOptions = original
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
