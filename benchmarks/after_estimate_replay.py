"""How well a round of looks foretells the rounds after it: replayed A/B sessions (the product's
end of a session, ``replay_lib.ab_session`` with this machine's history, as ``rates`` replays
"ab-history"), each round's ``Confirmation`` as the session said it: its own pairs' cost and
``after``, what the looks after it are expected to take (``ab_judging.next_looks(...).after``).
Against what they took: the later rounds' cost, in the same pricing (each cell's pair cost).

A progress line while settling says the round's cells not done yet plus ``after``; at the start
of a round that is ``cost + after``, set here against the cost of that round and every later one.

    .venv/bin/python benchmarks/after_estimate_replay.py [SESSIONS]
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import replay_lib as L  # noqa: E402

from pytest_mxperf.outcome.comparators import Confirmation  # noqa: E402

SEED = 20261203
#: the sessions of each row, fixed before the replay ran
SESSIONS = 30


def rounds_of(corpus, n_cells: int, effect: float, sessions: int, seed: int):
    """Per session: the rounds said, each (its pairs' cost, after), in order."""
    rng = random.Random(f"{seed}-after-{corpus.name}-{n_cells}-{effect}")
    known = L.history_of(corpus, n_cells, rng)
    out = []
    for _ in range(sessions):
        said = []

        def say(what, said=said):
            if isinstance(what, Confirmation) and what.wanted:
                said.append((sum(m.cost for m in what.wanted), what.after or 0.0))
        L.ab_session(corpus, n_cells, effect, rng, known=known, say=say)
        out.append(said)
    return out


def errors(sessions):
    """(first round's errors, every round's): (cost + after) / what that round and the later ones took - 1."""
    first, every = [], []
    for said in sessions:
        for i, (cost, after) in enumerate(said):
            took = sum(c for c, _ in said[i:])
            if took <= 0:
                continue
            e = (cost + after) / took - 1.0
            every.append(e)
            if i == 0:
                first.append(e)
    return first, every


def row(name: str, errs) -> str:
    if not errs:
        return f"{name:<12} -"
    within = sum(abs(e) <= 0.20 for e in errs) / len(errs)
    q = statistics.quantiles(errs, n=10) if len(errs) > 1 else [errs[0]] * 9
    return (f"{name:<12} n {len(errs):4d}  median {100 * statistics.median(errs):+6.1f}%  "
            f"p10 {100 * q[0]:+6.1f}%  p90 {100 * q[-1]:+6.1f}%  within 20%: {100 * within:5.1f}%")


def main(argv=None) -> None:
    sessions = int((argv or sys.argv[1:] or [SESSIONS])[0])
    corpora = [(L.load_aa_corpus(L.DATA_DIR / f"aa-corpus-amd-epyc-2c-9e858421{tail}.json").with_pairs(), 64)
               for tail in ("-quiet", "")]
    default = next(iter(sorted(L.DATA_DIR.glob("aa-corpus-intel-*-default.json"))), None)
    if default is not None:
        corpora.append((L.load_aa_corpus(default).with_pairs(), 24))
    for corpus, n in corpora:
        for effect in (1.0, 0.9):
            t0 = time.time()
            first, every = errors(rounds_of(corpus, n, effect, sessions, SEED))
            print(f"{corpus.name}, {n} cells, x{effect:.2f}, {sessions} sessions ({time.time() - t0:.0f} s):")
            print("  " + row("first round", first))
            print("  " + row("every round", every), flush=True)


if __name__ == "__main__":
    main()
