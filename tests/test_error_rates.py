"""The gate's error rates, measured on its own code: recorded processes replayed through the
real end of a session (``benchmarks/replay_lib.py``: ``Measurer.check_floor``, then
``outcome.finish.finish_session`` with its second stage / confirmation drawing more recorded
pairs or processes). The full table, with more sessions, corpora and effects:
``benchmarks/replay_error_rates.py`` (``benchmarks/results/error-rates-2026-11-25.txt``).

The requirement (issue 24, part 4), held here as written, not as today's rules meet it:

* a session of N unchanged cells fails (regression, unresolved, or a floor) in at most 5%
  of sessions, whatever N (6, 24, 64), in A/B mode and in baseline mode;
* a -10% change of one cell among them is caught (that cell fails) in at least 95% of
  sessions in A/B mode, and, in baseline mode, in at least 95% of the sessions in which it
  exceeds the resolution the baseline states for that cell.

The corpora:

* A/B: ``benchmarks/data/aa-corpus-amd-epyc-2c-9e858421.json``, 10 A/A duet pairs of each of
  four cells recorded on a 2-vCPU AMD EPYC VM while other engineers' tests loaded it (0.4-1.6
  other CPUs busy around every pair): pair spreads of 9-33% (log), where a quiet machine gave
  about 1%;
* baseline mode: the same corpus's 10 fresh processes a cell (one recording of 5 and a
  current session of 4-5 beside it: a provisional resolution), and
  ``benchmarks/data/replay-intel-*-quiet.json`` (12 quiet processes a cell on an Intel VM, one
  recording: a provisional resolution), the only corpus on which a 10% change ever exceeds
  the stated resolution (the pooled baselines of the busier re-runs state resolutions far
  wider: see the table).

Fixed seeds; a fixed number of sessions per N (fewer for the expensive 64-cell sessions).
Cases that today's rules do not meet are marked ``xfail(strict=True)`` with what was seen:
when a change of the rules meets one, its test passes, strict xfail fails it, and its mark
is to be removed.
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import replay_lib as L  # noqa: E402

SEED = 20261125
SESSIONS = {6: 100, 24: 50, 64: 40}
MAX_FAILED = 0.05     # unchanged sessions that fail, whatever N
MIN_CAUGHT = 0.95     # a -10% cell caught (A/B; baseline mode: when beyond the stated resolution)
CHANGE = 0.90

AA = L.DATA_DIR / "aa-corpus-amd-epyc-2c-9e858421.json"
QUIET = next(iter(sorted(L.DATA_DIR.glob("replay-intel-*-quiet.json"))), None)

pytestmark = pytest.mark.skipif(not AA.exists() or QUIET is None, reason="no recorded corpus in benchmarks/data")


def _xfail(seen: str):
    return pytest.mark.xfail(strict=True, reason=f"today's rules: {seen}")


@pytest.fixture(scope="module")
def duet_corpus():
    c = L.load_aa_corpus(AA).with_pairs()
    assert [len(p.pairs) for p in c.pools] == [10] * 4 and all(p.duet for p in c.pools)
    return c


@pytest.fixture(scope="module")
def vm_fresh():
    c = L.load_aa_corpus(AA).with_fresh(L.MIN_FRESH)
    assert [len(p.fresh) for p in c.pools] == [10] * 4
    return c


@pytest.fixture(scope="module")
def intel_quiet():
    c = L.load_replay_reruns(QUIET).with_fresh(L.MIN_FRESH)
    assert [len(p.fresh) for p in c.pools] == [12] * 4
    return c


def _rates(mode, corpus, n, effect):
    r = L.rates(mode, corpus, n, effect, SESSIONS[n], SEED)
    print(f"\n{corpus.name}: {L.format_row(r)}")
    return r


# ----------------------------------------------------------------------------- A/B (duet pairs)

@pytest.mark.parametrize("n", [
    pytest.param(6, marks=_xfail("A/A duet sessions of 6 cells failed in 44 of 100 (33 with an unresolved cell, 8 a "
                                 "floor, 6 a regression): pairs spread 9-33% here and a cell stops at 40 pairs, "
                                 "its estimate still beyond -5% by chance and not significant: unresolved")),
    pytest.param(24, marks=_xfail("A/A duet sessions of 24 cells failed in 49 of 50 (46 unresolved, 16 floor)")),
    pytest.param(64, marks=_xfail("A/A duet sessions of 64 cells failed in 40 of 40 (40 unresolved, 19 floor, "
                                  "2 regression)")),
])
def test_ab_unchanged_sessions_fail_in_at_most_5_percent(duet_corpus, n):
    r = _rates("ab", duet_corpus, n, 1.0)
    assert r.failed_rate <= MAX_FAILED, L.format_row(r)


@pytest.mark.parametrize("n", [
    pytest.param(6, marks=_xfail("the x0.90 duet cell was caught in 94 of 100 sessions of 6 cells (61 regression, "
                                 "31 unresolved, 2 floor; 6 unchanged)")),
    pytest.param(24, marks=_xfail("the x0.90 duet cell was caught in 46 of 50 sessions of 24 cells (21 regression, "
                                  "25 unresolved; 4 unchanged)")),
    64,   # caught in 39 of 40 (97.5%)
])
def test_ab_a_10_percent_slower_cell_is_caught_in_95_percent(duet_corpus, n):
    r = _rates("ab", duet_corpus, n, CHANGE)
    assert r.caught_rate >= MIN_CAUGHT, L.format_row(r)


# ----------------------------------------------------------------------------- baseline mode

@pytest.mark.parametrize("n", [
    pytest.param(6, marks=_xfail("100 of 100 sessions of 6 cells failed, every one on a floor: this VM's processes "
                                 "ran far below the C4.large legacy-sanity floors while other work loaded it, and "
                                 "a floor fails a cell whose processes all ran on a slowed machine")),
    pytest.param(24, marks=_xfail("50 of 50 sessions of 24 cells failed on a floor")),
    pytest.param(64, marks=_xfail("40 of 40 sessions of 64 cells failed on a floor")),
])
def test_baseline_unchanged_sessions_on_this_vm_fail_in_at_most_5_percent(vm_fresh, n):
    r = _rates("baseline", vm_fresh, n, 1.0)
    assert r.failed_rate <= MAX_FAILED, L.format_row(r)


@pytest.mark.parametrize("n", [6, 24, 64])
def test_baseline_unchanged_sessions_on_a_quiet_vm_fail_in_at_most_5_percent(intel_quiet, n):
    r = _rates("baseline", intel_quiet, n, 1.0)
    assert r.failed_rate <= MAX_FAILED, L.format_row(r)


@pytest.mark.parametrize("n", [
    pytest.param(6, marks=_xfail("a x0.90 cell beyond its stated resolution (every session: 2-8% here) was "
                                 "caught in 76 of 100 sessions of 6 cells; the other 24 were 'unclear' (beyond the "
                                 "resolution, not significant across the session: not failing by default)")),
    pytest.param(24, marks=_xfail("caught in 26 of 50 sessions of 24 cells (24 unclear)")),
    pytest.param(64, marks=_xfail("caught in 12 of 40 sessions of 64 cells (28 unclear): the resolution is what "
                                  "one figure alone can tell; across N figures BH asks for more")),
])
def test_baseline_a_10_percent_change_beyond_the_resolution_is_caught(intel_quiet, n):
    r = _rates("baseline", intel_quiet, n, CHANGE)
    assert r.beyond_resolution >= SESSIONS[n] // 2, "the requirement must apply to most sessions here"
    assert r.caught_beyond_rate >= MIN_CAUGHT, L.format_row(r)
