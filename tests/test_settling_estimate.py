"""What a round of looks says of the rounds after it (issue 76, part 5), replayed: A/B sessions
of the Zen 4 A/A corpus recorded while other work ran (64 cells, this machine's history of the
same corpus before them), through the product's end of a session
(``benchmarks/after_estimate_replay.py``: each round's ``Confirmation``, its cost and ``after``).
The first round's cost + ``after`` is what the settling lines say is left when it starts; it is
set against what that round and every later one took, in the same pricing. The session count is
fixed here before its replay ran; the seed is the claims' (``tests/test_error_rates.py``), not
the benchmark's.

Before the expected pairs (``verdict_duet.expected_pairs`` around ``ab_judging.shrunk_means``),
``after`` took each figure's mean so far for its truth: the first round said 40-43% less than
the rest took (median) and was within 20% in 0 of 30 sessions of this corpus
(benchmarks/results/after-estimate-2026-12-03.txt)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import after_estimate_replay as A  # noqa: E402
import replay_lib as L  # noqa: E402

SEED = 20261125
#: the sessions a row replays (fixed before the replay ran)
SESSIONS = 8
CORPUS = L.DATA_DIR / "aa-corpus-amd-epyc-2c-9e858421.json"

pytestmark = pytest.mark.skipif(not CORPUS.exists(), reason="no recorded corpus in benchmarks/data")


@pytest.mark.parametrize("effect", [1.0, 0.90])
def test_the_first_round_of_looks_says_what_the_settling_takes_within_20_percent(effect):
    corpus = L.load_aa_corpus(CORPUS).with_pairs()
    first, _ = A.errors(A.rounds_of(corpus, 64, effect, SESSIONS, SEED))
    assert len(first) == SESSIONS  # every session settled something
    within = sum(abs(e) <= 0.20 for e in first)
    assert within >= SESSIONS - 1, [f"{100 * e:+.0f}%" for e in first]
