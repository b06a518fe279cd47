"""Replayed A/B sessions whose history comes from another state of the machine than the session:
a quiet history before a loaded session, a loaded history before a quiet one (the two Zen 4 A/A
corpora of ``tests/test_error_rates.py``, 64 cells), with the history pooled always (the rule
before ``thresholds.HISTORY_AGREES_P``; set to 0 here) and with a history the session's pairs
contradict left out (the rule now). The product's end of a session (``replay_lib.rates``), the
claims' session count and seed.

    .venv/bin/python benchmarks/history_mismatch_replay.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import replay_lib as L  # noqa: E402

from pytest_mxperf.judge import thresholds  # noqa: E402

SESSIONS, SEED = 59, 20261125  # tests/test_error_rates.py's CLAIM_SESSIONS and SEED


def main() -> None:
    quiet = L.load_aa_corpus(L.DATA_DIR / "aa-corpus-amd-epyc-2c-9e858421-quiet.json").with_pairs()
    loaded = L.load_aa_corpus(L.DATA_DIR / "aa-corpus-amd-epyc-2c-9e858421.json").with_pairs()
    rule_now = thresholds.HISTORY_AGREES_P
    for rule, p in (("always pooled", 0.0), ("left out when contradicted", rule_now)):
        thresholds.HISTORY_AGREES_P = p
        for session, history in ((quiet, loaded), (loaded, quiet), (quiet, quiet)):
            for effect in (1.0, 0.9):
                t0 = time.time()
                r = L.rates("ab-history", session, 64, effect, SESSIONS, SEED, history_from=history)
                print(f"{rule}: session {session.name}, history {history.name}: {L.format_row(r)}"
                      f"  ({time.time() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
