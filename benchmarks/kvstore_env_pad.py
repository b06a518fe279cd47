"""Issue 76, part 3: does the size of a worker's environment move the wide MLP's kvstore cell (an install's
path changes the size of what a process carries, and so the alignment of its stack)? Duet pairs of this
interpreter on both sides, the reference's environment padded by PAD bytes in one variable, the pads in
turn (reversed every other round), the candidate first in odd rounds; per pad, the candidate's speed over
the reference's (exp of the mean ``stats.duet_pair_log_ratio``) with a 95% normal half-width.

usage: .venv/bin/python benchmarks/kvstore_env_pad.py 0,40,2000,3000 ROUNDS
"""

import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from kvstore_sides_aa import MODULE, spec_of  # noqa: E402

from pytest_mxperf.measure import duet  # noqa: E402
from pytest_mxperf.model import stats  # noqa: E402
from pytest_mxperf.model.workload import Workload  # noqa: E402

CELL = Workload(model="wide_mlp_25000_20000", mode="kvstore", batch_size=1, contexts=("cpu:0", "cpu:1"),
                kvstore="device")


def main(pads, rounds):
    here = dict(os.environ)
    rows = []
    for i in range(rounds):
        for pad in (pads if i % 2 == 0 else pads[::-1]):
            ref_env = dict(here, MXPERF_PAD="x" * pad) if pad else dict(here)
            c, r = duet.run_pair(CELL, candidate=sys.executable, reference=sys.executable, seed=i,
                                 candidate_first=bool(i % 2), env=dict(here), reference_env=ref_env, timeout=600,
                                 module=MODULE, spec=spec_of(CELL))
            lr = stats.duet_pair_log_ratio(c.seconds_per_batch, r.seconds_per_batch) if c.ok and r.ok else None
            rows.append((pad, lr))
            print(i, pad, lr, flush=True)
    for pad in pads:
        v = [lr for p, lr in rows if p == pad and lr is not None]
        m, s = statistics.fmean(v), statistics.stdev(v)
        print(f"pad {pad:5d}: cand/ref {math.exp(m):.3f} +- {1.96 * s / math.sqrt(len(v)):.3f} (n={len(v)}, sd {100 * s:.1f}%)")


if __name__ == "__main__":
    main([int(x) for x in sys.argv[1].split(",")], int(sys.argv[2]))
