"""Error rates of the gate measured on its own code: recorded processes replayed through the
real end of a session (``benchmarks/replay_lib.py``), in A/B and in baseline mode.

For each corpus, mode, number of cells N (6, 24, 64) and effect on one cell (x1.00 = none,
x0.95, x0.90, x0.80 throughput), ``--sessions`` simulated sessions: the share that failed
(any failing kind: regression, unresolved, a floor) and the share in which the changed cell
was caught (it failed). Baseline mode also counts the sessions in which the change is
beyond the resolution the baseline states for that cell, and how often it was caught there.

The requirement these numbers check (issue 24, part 4): a session of N unchanged cells
fails in at most 5% of sessions whatever N; a -10% change of one cell among them is caught
in at least 95% of sessions in A/B mode, and whenever it exceeds the stated resolution in
baseline mode. Mode ``setup`` (issue 35): baseline mode settling its suspects against the
recorded setup (the corpus's A/A duet pairs as its pairs): unchanged sessions fail in at most
5%, a -10% change is caught in at least 95%, whatever the resolution; its rows also say how
many cells an unchanged session sends to the duet and what that costs (the cost model's duet
pair). Mode ``setup-visible``: the same, for a session whose setup changed in a way the suite
sees (every process ran with a recorded variable the baseline's did not, so every cell goes
to the duet), one cell of it x effect: x1.00 is a change of the setup that slows nothing.
``tests/test_error_rates.py`` holds them on fewer sessions.

    .venv/bin/python benchmarks/replay_error_rates.py --out benchmarks/results/error-rates-2026-11-25.txt
    .venv/bin/python benchmarks/replay_error_rates.py --sessions 40 --sizes 6 --effects 1 0.9 --modes ab-duet
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
import time
from pathlib import Path
from typing import List, Tuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import replay_lib as L  # noqa: E402

SEED = 20261125
MODES = ("ab-duet", "ab-pairs", "baseline", "setup", "setup-visible")


def corpora(mode: str) -> List[Tuple[str, L.Corpus]]:
    """(judge mode, corpus) of one table mode: A/B on duet pairs (the A/A corpora), A/B on
    process pairs (the regime file's 12 A/A pairs), baseline mode on every corpus with
    enough fresh processes in time order for a pooled baseline and a current session."""
    if mode == "ab-duet":
        return [("ab", c.with_pairs()) for c in L.aa_corpora() if c.with_pairs().pools]
    if mode == "ab-pairs":
        return [("ab", L.load_regime_pairs())]
    if mode in ("setup", "setup-visible"):  # baseline mode settling its suspects against the recorded setup
        return [(mode, c) for c in (a.with_fresh(L.MIN_FRESH).with_pairs() for a in L.aa_corpora()) if c.pools]
    return [("baseline", c) for c in L.baseline_corpora()]


def skipped_baseline() -> List[str]:
    return [f"{c.name}: cell(s) with fewer than {L.MIN_FRESH} fresh processes "
            f"({', '.join(str(len(p.fresh)) for p in c.pools)}): too few for a recording of "
            f"{L.RECORDING_PROCESSES} and a current session apart from it"
            for c in L.aa_corpora() if len(c.with_fresh(L.MIN_FRESH).pools) < len(c.pools)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=200, help="sessions a row at N <= 6")
    ap.add_argument("--sessions-24", type=int, default=100, help="sessions a row at 6 < N <= 24")
    ap.add_argument("--sessions-64", type=int, default=50, help="sessions a row at N > 24")
    ap.add_argument("--pair-sessions-24", type=int, default=40,
                    help="A/B process pairs at 6 < N <= 24 (the fast-end bounds take about a second a session)")
    ap.add_argument("--pair-sessions-64", type=int, default=10,
                    help="A/B process pairs at N > 24 (several seconds a session)")
    ap.add_argument("--sizes", type=int, nargs="+", default=list(L.SIZES))
    ap.add_argument("--effects", type=float, nargs="+", default=list(L.EFFECTS))
    ap.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--corpus", default=None, help="only the corpora whose name contains this")
    ap.add_argument("--out", type=Path, default=None, help="write the table here too")
    a = ap.parse_args(argv)
    t0 = time.time()
    command = "python " + " ".join([os.path.relpath(Path(sys.argv[0]).resolve(), HERE.parent)] + list(
        argv if argv is not None else sys.argv[1:]))
    lines = [f"Error rates of the gate on recorded processes, replayed through outcome.finish.end_session "
             f"(seed {a.seed})", f"command: {command}",
             "failed: sessions that would exit 1 (regression, unresolved, floor); caught: the changed cell (cell 0 "
             "of N, throughput x effect) failed. Requirement: failed <= 5% at x1.00 for every N; caught >= 95% at "
             "x0.90 (A/B, and baseline mode against the recorded setup), and whenever the change exceeds the stated "
             "resolution (baseline alone).", ""]
    for mode in a.modes:
        for judge_mode, corpus in corpora(mode):
            if a.corpus and a.corpus not in corpus.name:
                continue
            lines += [f"== {mode}: {corpus.describe()}", f"   data: {corpus.source}"]
            if corpus.note:
                lines += textwrap.wrap(corpus.note, 116, initial_indent="   note: ", subsequent_indent="         ")
            for n in a.sizes:
                for e in a.effects:
                    pairs = mode == "ab-pairs"
                    sessions = (a.sessions if n <= 6 else (a.pair_sessions_24 if pairs else a.sessions_24) if n <= 24
                                else (a.pair_sessions_64 if pairs else a.sessions_64))
                    r = L.rates(judge_mode, corpus, n, e, sessions, a.seed)
                    lines.append("  " + L.format_row(r) + f"  ({r.seconds / sessions:.2f} s CPU a session)")
                    print(lines[-1], flush=True)
            lines.append("")
        if mode == "baseline":
            lines += [f"   not replayed in baseline mode: {s}" for s in skipped_baseline()] + [""]
    lines.append(f"took {time.time() - t0:.0f} s")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        a.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
