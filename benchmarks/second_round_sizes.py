"""How big a session's second round of duet pairs was, and why: recomputed from its results.

    python benchmarks/second_round_sizes.py RESULTS.json...

For each session (a ``--perf-report`` results.json of A/B mode, or of baseline mode whose
suspects went to a duet against the recorded setup), each duet cell's pairs are split into
its stages (a stage numbers its pairs from 0 again: ``meta.duet.pair``). The cells are cut
back to their first stage and handed to the product's own sizing,
``outcome.ab_judging.second_stage_pairs``, which must give the second stage each cell ran
("same as ran" below: else this reads the results wrongly, and says so). Then the same
sizing again with the spread that sizes a figure's second stage taken as the session's pooled
spread alone (``verdict_duet.session_spread``), instead of the larger of that and the cell's
own: an experiment, not the product's rule. Each line: the cells the second round measured,
its pairs as it ran, and as each rule gives them, with the session's pooled spread.
"""

from __future__ import annotations

import json
import statistics
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from pytest_mxperf.judge import verdict_duet as V
from pytest_mxperf.measure import planning
from pytest_mxperf.measure.ledger import CellRecord
from pytest_mxperf.model.measurement import CellMeasurement
from pytest_mxperf.outcome import ab_judging


def stages(cell: CellMeasurement) -> List[List[tuple]]:
    """The cell's duet pairs (candidate, reference), in the order they ran, one list a stage."""
    blocks: List[List[tuple]] = []
    for c, r in cell.pairs():
        duet = c.meta.duet
        if duet is None:
            continue
        if duet.get("pair") == 0 or not blocks:
            blocks.append([])
        blocks[-1].append((c, r))
    return blocks


def first_stage(cell: CellMeasurement, block: Sequence[tuple]) -> CellMeasurement:
    """``cell`` with its first stage's pairs alone (and its processes outside the duet)."""
    ids = {c.process for c, _ in block}
    return CellMeasurement(cell.workload, [r for r in cell.runs if r.meta.duet is None or r.process in ids],
                           [r for _, r in block])


#: the product's sizing, which ``pooled_only`` asks (``sizes`` puts that in its place for a while)
_PAIRS_NEEDED = V.pairs_needed


def pooled_only(n_cells: int, pair_log_ratios: Sequence[float] = (), *, spread: Optional[float] = None,
                **kwargs) -> int:
    """``verdict_duet.pairs_needed`` with the session's pooled spread alone (the cell's own
    only when there is none): the experiment. The cell's ratios go in as their mean, as many
    times, so that its own spread is none and its mean and count are what they were."""
    d = V._finite(pair_log_ratios)
    if spread and d:
        d = [statistics.fmean(d)] * len(d)
    return _PAIRS_NEEDED(n_cells, d, spread=spread, **kwargs)


def sizes(doc: dict, min_effect: float) -> Tuple[Dict[str, int], Dict[str, int], Dict[str, int], Optional[float]]:
    """(cell -> second-stage pairs as ran, as the product's sizing gives them, with the pooled
    spread alone; the session's pooled spread of its rounds' figures), over the cells that
    had a second stage."""
    cells = {rec["key"]: CellMeasurement.from_dict(rec) for rec in doc["records"]}
    first: Dict[str, CellRecord] = {}
    ran: Dict[str, int] = {}
    for key, cell in cells.items():
        blocks = stages(cell) if cell.reference else []
        if blocks:
            first[key] = CellRecord(key, first_stage(cell, blocks[0]), duets=True)
            if len(blocks) > 1:
                ran[key] = sum(len(b) for b in blocks[1:])
    pairs = planning.ab_pairs(len(doc["records"]))
    product = ab_judging.second_stage_pairs(first, min_effect, pairs)
    as_product = {k: product(k) for k in ran}  # asked now: the sizing reads V.pairs_needed when called
    V.pairs_needed = pooled_only
    try:
        experiment = ab_judging.second_stage_pairs(first, min_effect, pairs)
        pooled = {k: experiment(k) for k in ran}
    finally:
        V.pairs_needed = _PAIRS_NEEDED
    # the spread the sizing pooled for the rounds' figures, from the same first-stage pairings
    _, _, duets = ab_judging._ab_inputs(first, set())
    spread = V.session_spread(d.pair_log_ratios for d in duets.values()
                              if ab_judging.spread_family(d.metric) == "rounds")
    return ran, as_product, pooled, spread


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        print("usage: python benchmarks/second_round_sizes.py RESULTS.json...", file=sys.stderr)
        return 2
    status = 0
    for path in argv:
        with open(path) as f:
            doc = json.load(f)
        min_effect = (doc["session"].get("options") or {}).get("min_effect") or V.MIN_EFFECT
        ran, product, pooled, spread = sizes(doc, min_effect)
        same = ran == product
        status |= 0 if same else 1
        print(f"{path}: {len(ran)} cells in the second round; pairs as ran {sum(ran.values())}, "
              f"product's sizing {sum(product.values())} ({'same as ran' if same else 'NOT as ran'}), "
              f"pooled spread alone {sum(pooled.values())}; pooled spread of the first round "
              + (f"{100 * spread:.1f}%" if spread is not None else "none"))
        for k in sorted(ran):
            print(f"    {k[:70]:70} ran {ran[k]:3d}  product {product[k]:3d}  pooled alone {pooled[k]:3d}")
    return status


if __name__ == "__main__":
    sys.exit(main())
