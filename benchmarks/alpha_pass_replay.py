"""The replayed error rates and pairs a cell at another ``verdict_duet.ALPHA_PASS`` (the chance a
cell truly at the minimum effect is passed), on the corpora and with the session count and seed of
``tests/test_error_rates.py``: the product's end of a session (``replay_lib.rates``), the constant
set in this process only.

    .venv/bin/python benchmarks/alpha_pass_replay.py 0.05
    .venv/bin/python benchmarks/alpha_pass_replay.py 0.2
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import replay_lib as L  # noqa: E402

from pytest_mxperf.judge import verdict_duet  # noqa: E402

SESSIONS, SEED = 59, 20261125  # tests/test_error_rates.py's CLAIM_SESSIONS and SEED


def main(alpha_pass: float) -> None:
    verdict_duet.ALPHA_PASS = alpha_pass
    quiet = L.load_aa_corpus(L.DATA_DIR / "aa-corpus-amd-epyc-2c-9e858421-quiet.json").with_pairs()
    default = L.load_aa_corpus(next(iter(sorted(L.DATA_DIR.glob("aa-corpus-intel-*-default.json"))))).with_pairs()
    for name, corpus, n in (("quiet zen4", quiet, 64), ("default intel", default, 24)):
        for mode in ("ab-history", "ab"):
            for effect in (1.0, 0.9):
                t0 = time.time()
                r = L.rates(mode, corpus, n, effect, SESSIONS, SEED)
                print(f"ALPHA_PASS={alpha_pass} {name}: {L.format_row(r)}  ({time.time() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main(float(sys.argv[1]))
