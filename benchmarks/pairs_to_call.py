"""How many duet pairs an unchanged cell takes to be called, on the product's own rule, by the
spread of its pairs: the pair-by-pair rule (``judge/sequential.decide``) looked at as
``verdict_duet.next_look`` steps it, a cell's pairs drawn around no change at a known spread
(the kind's, at ``--df`` degrees of freedom), one or three pairs before the first look
(``planning.first_pairs``). A duet pair of a cell costs about what a first run's cell does (two
processes), so an unchanged paired session takes about this many times a first run.

    .venv/bin/python benchmarks/pairs_to_call.py --out benchmarks/results/pairs-to-call-2026-12-03.txt
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_mxperf.judge import sequential, verdict_duet as vd  # noqa: E402
from pytest_mxperf.model.measurement import METRICS  # noqa: E402
from pytest_mxperf.model.options import MIN_EFFECT  # noqa: E402


def pairs(sd: float, first: int, cells: int, df: int, paths: int, rng) -> np.ndarray:
    """The pairs each of ``paths`` unchanged cells had when called (or at the last look)."""
    eff = vd.log_effect(METRICS["throughput"], MIN_EFFECT)
    out = []
    for _ in range(paths):
        xs = list(rng.normal(0.0, sd, first))
        while True:
            call = sequential.decide(xs, sd, df, min_effect=eff, alpha_regression=0.05 / cells,
                                     alpha_pass=vd.ALPHA_PASS, max_pairs=vd.SEQUENTIAL_MAX_PAIRS)
            more = 0 if call.decided else vd.next_look(xs, sd, df, min_effect=eff, q=0.05, n_figures=cells)
            if more == 0:
                break
            xs += list(rng.normal(0.0, sd, more))
        out.append(len(xs))
    return np.asarray(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spreads", type=float, nargs="+", default=[0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05])
    ap.add_argument("--cells", type=int, default=25)
    ap.add_argument("--df", type=int, default=200)
    ap.add_argument("--paths", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=20261203)
    ap.add_argument("--out")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    lines = [f"# benchmarks/pairs_to_call.py --cells {a.cells} --df {a.df} --paths {a.paths} --seed {a.seed}: unchanged "
             f"cells, minimum effect {100 * MIN_EFFECT:g}%, the session's q shared by {a.cells} figures",
             "pair spread | one pair first: mean pairs (90th percentile) | three pairs first: mean (90th percentile)"]
    for sd in a.spreads:
        one, three = pairs(sd, 1, a.cells, a.df, a.paths, rng), pairs(sd, 3, a.cells, a.df, a.paths, rng)
        lines.append(f"{100 * sd:10.1f}% | {one.mean():5.2f} ({math.ceil(np.percentile(one, 90)):2d}) "
                     f"| {three.mean():5.2f} ({math.ceil(np.percentile(three, 90)):2d})")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if a.out:
        Path(a.out).write_text(text)


if __name__ == "__main__":
    main()
