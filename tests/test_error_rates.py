"""The gate's error rates, measured on its own code: recorded processes replayed through the
real end of a session (``benchmarks/replay_lib.py``: ``Measurer.check_floor``, then
``outcome.finish.end_session`` with its second stage / confirmation drawing more recorded
pairs or processes). The full table, with more sessions, corpora and effects:
``benchmarks/replay_error_rates.py`` (``benchmarks/results/error-rates-2026-11-25.txt``).

The requirement (issue 24, part 4), held here as written, not as today's rules meet it:

* a session of N unchanged cells fails (regression, unresolved, or a floor) in at most 5%
  of sessions, whatever N (6, 24, 64), in A/B mode and in baseline mode;
* a -10% change of one cell among them is caught (that cell fails) in at least 95% of
  sessions in A/B mode, and, in baseline mode, in at least 95% of the sessions in which it
  exceeds the resolution the baseline states for that cell;
* issue 35: in baseline mode with its suspects settled against the recorded setup (replayed
  with the corpus's A/A duet pairs), unchanged sessions fail in at most 5% and a -10% change
  is caught in at least 95% of sessions, whatever the resolution.

The corpora (``benchmarks/data/``):

* ``aa-corpus-amd-epyc-2c-9e858421-quiet.json``: 20 A/A duet pairs and 20 fresh processes
  of each of four cells (LeNet b1, AlexNet b2, Inception-BN b2, ResNet-50 v2 b2) recorded on a
  2-vCPU AMD EPYC VM with nothing else running: the requirement is held on it, in A/B mode
  (duet pairs) and in baseline mode (a recording of 5 processes, a current session beside
  it: a provisional resolution);
* ``replay-intel-*-quiet.json`` (12 quiet processes a cell on an Intel VM, one recording),
  baseline mode;
* ``aa-corpus-amd-epyc-2c-9e858421.json``: the same cells recorded while other engineers'
  tests loaded the machine (0.4-1.6 other CPUs busy around every pair; pair spreads of
  9-33%, where the quiet corpus has about 1%). A loaded machine is not what the gate
  promises its error rates on: what it misses there is the benchmark's table (what was seen
  is said below); the one requirement held there before (a x0.90 cell among 64 caught in
  95%, seen in 39 of 40 sessions) is not met on enough sessions (caught in 114 of 124): the
  benchmark's table too, not a test (a strict xfail of it took a minute of every run here).

How many sessions a claim rests on (``benchmarks/error_claims.py``): "at most 5%" (of
unchanged sessions failing; of changed cells missed) is held only on enough sessions to
support it at 95% one-sided confidence: 0 failures in at least 59 sessions, at most 1 in 93,
at most 2 in 124 (the one-sided Clopper-Pearson bound at most 5%). Each claim replays the
fewest sessions that support it with the failures measured there
(``benchmarks/false_failures.py``, ``benchmarks/results/false-failures-2026-11-26.txt``: the
same seeds, so these are the first sessions of its rows); a claim today's rules miss on a
corpus is a strict xfail (``raises=ClaimNotMet``: any other failed assertion fails) whose
reason is the measured count. A failing session is any failing kind: regression,
unresolved or floor (``replay_lib``'s ``failed``). No bound is loosened to pass.

Fixed seeds and the replayed session's own clock (``replay_lib.ReplayClock``: it moves by the
recorded processes' wall time, so the confirmation budget is a real session's of that size,
however fast this machine replays): the same sessions and verdicts on any machine. On the quiet corpora the requirement is held at N = 6 and 64 (``QUIET_N``); N = 24
runs the same code between them, in the benchmark's tables (0 failures in 200 sessions).
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import error_claims as E  # noqa: E402
import replay_lib as L  # noqa: E402

SEED = 20261125
#: sessions a claim rests on: the fewest that support it (error_claims) with what was measured.
#: Unchanged sessions on the quiet corpora: 0 failures in 200 at N = 6, 24 and 64, A/B and
#: baseline mode; a x0.90 cell in A/B mode: caught in 200 of 200 (so 59 of 59 here)
CLAIM_SESSIONS = 59
#: baseline mode, a change beyond the stated resolution: sessions until 59 of them are beyond it
#: (the x0.90 cell of the Intel quiet corpus in 3 of 4)
BEYOND_SESSIONS = {"intel_quiet": 77}
#: the sizes baseline mode's settling against the recorded setup is held at here (N = 64 is in
#: benchmarks/results/error-rates-setup-2026-11-26.txt: 0 of 59 unchanged sessions failed, 59 of 59 x0.90 cells caught;
#: about 20 of its 64 cells go to the duet)
SETUP_N = [6, 24]
#: what a row shows that is not a rate (a change below the resolution in every session; the
#: expensive 64-cell baseline rows of a xfail): as many sessions as before
SEEN_SESSIONS = {24: 50, 64: 40}
#: the sizes the quiet corpora's requirement is held at here: the smallest and the largest
#: session; the same code at N = 24 is in benchmarks/false_failures.py's table
QUIET_N = [6, 64]
CHANGE = 0.90

assert CLAIM_SESSIONS >= E.sessions_needed(0)

AA_QUIET = L.DATA_DIR / "aa-corpus-amd-epyc-2c-9e858421-quiet.json"
QUIET = next(iter(sorted(L.DATA_DIR.glob("replay-intel-*-quiet.json"))), None)

pytestmark = pytest.mark.skipif(not AA_QUIET.exists() or QUIET is None,
                                reason="no recorded corpus in benchmarks/data")



def _xfail(seen: str):
    return pytest.mark.xfail(strict=True, raises=E.ClaimNotMet, reason=f"today's rules: {seen}")


@pytest.fixture(scope="module")
def quiet_duets():
    c = L.load_aa_corpus(AA_QUIET).with_pairs()
    assert [len(p.pairs) for p in c.pools] == [20] * 4 and all(p.duet for p in c.pools)
    return c


@pytest.fixture(scope="module")
def quiet_fresh():
    c = L.load_aa_corpus(AA_QUIET).with_fresh(L.MIN_FRESH)
    assert [len(p.fresh) for p in c.pools] == [20] * 4
    return c


@pytest.mark.parametrize("n", QUIET_N)
def test_ab_unchanged_sessions_on_a_quiet_vm_fail_in_at_most_5_percent(quiet_duets, n):
    r = _rates("ab", quiet_duets, n, 1.0, CLAIM_SESSIONS)
    _unchanged(r)


@pytest.mark.parametrize("n", QUIET_N)
def test_ab_a_10_percent_slower_cell_on_a_quiet_vm_is_caught_in_95_percent(quiet_duets, n):
    r = _rates("ab", quiet_duets, n, CHANGE, CLAIM_SESSIONS)
    _caught(r)


@pytest.mark.parametrize("n", QUIET_N)
def test_baseline_unchanged_sessions_on_this_quiet_vm_fail_in_at_most_5_percent(quiet_fresh, n):
    r = _rates("baseline", quiet_fresh, n, 1.0, CLAIM_SESSIONS)
    _unchanged(r)


# Baseline mode settles what its baseline alone cannot (a suspect, a slowdown within the
# resolution, unclear, unresolved, or one worse than half the minimum effect) against the setup
# the baseline recorded, in pairs (issue 35): the replay draws the corpus's A/A duet pairs of
# the cell as those pairs. Before, a x0.90 cell was below a one-recording baseline's
# resolution in every session here and passed, named (what this test held then).

@pytest.mark.parametrize("n", SETUP_N)
def test_baseline_against_the_recorded_setup_unchanged_sessions_fail_in_at_most_5_percent(quiet_fresh, n):
    r = _rates("setup", quiet_fresh, n, 1.0, CLAIM_SESSIONS)
    assert r.to_setup > 0, L.format_row(r)  # the duet ran: a claim on the path it is about
    _unchanged(r)


@pytest.mark.parametrize("n", SETUP_N)
def test_baseline_against_the_recorded_setup_a_10_percent_slower_cell_is_caught_in_95_percent(quiet_fresh, n):
    r = _rates("setup", quiet_fresh, n, CHANGE, CLAIM_SESSIONS)
    assert r.beyond_resolution == 0, L.format_row(r)  # below the baseline's resolution in every session
    _caught(r)


@pytest.fixture(scope="module")
def intel_quiet():
    c = L.load_replay_reruns(QUIET).with_fresh(L.MIN_FRESH)
    assert [len(p.fresh) for p in c.pools] == [12] * 4
    return c


def _rates(mode, corpus, n, effect, sessions):
    r = L.rates(mode, corpus, n, effect, sessions, SEED)
    print(f"\n{corpus.name}: {L.format_row(r)}")
    return r


def _unchanged(r):
    """Unchanged sessions failed (any failing kind) in at most 5%, by the rule."""
    E.hold(r.failed, r.sessions, f"unchanged sessions failed ({L.format_row(r)})")


def _caught(r):
    """The changed cell missed (passed) in at most 5% of sessions, by the rule."""
    E.hold(r.sessions - r.caught, r.sessions, f"the changed cell passed ({L.format_row(r)})")


def _caught_beyond(r):
    """Of the sessions whose stated resolution the change exceeds, the changed cell missed in
    at most 5%, by the rule (on those sessions alone)."""
    E.hold(r.beyond_resolution - r.caught_beyond, r.beyond_resolution,
           f"beyond the stated resolution, the changed cell passed ({L.format_row(r)})")


# ----------------------------------------------------------------------------- A/B (duet pairs)

# The loaded corpus in A/B mode (benchmarks/results/false-failures-2026-11-26.txt): unchanged
# sessions fail far more often than 5% there (58 of 124 sessions of 6 cells, 113 of 124 of 24,
# 124 of 124 of 64, mostly unresolved, a floor in 14-66 of them: pairs spread 9-33% while other
# work ran, and a cell stops at 40 pairs, unresolved); a x0.90 cell among 64 is caught in 114 of
# 124 (91.9%: 58 regression, 55 unresolved, 1 floor, 10 unchanged). The gate does not promise its
# rates on a loaded machine; those rows are the benchmark's table (benchmarks/false_failures.py),
# not tests.


# A/B mode on a machine whose history holds the spread of pairs (issue 76, part 2): each cell gets
# one duet pair before its first look (``planning.first_pairs``), its history that of the last
# sessions replayed before it (``replay_lib.history_of``: three unchanged sessions of the same
# corpus, summed as the history store sums them). The same session count as every claim here.

def _with_history(r):
    assert r.first_pairs == 1, L.format_row(r)  # the claim is on the path it is about
    return r


@pytest.mark.parametrize("n", [64])
def test_ab_with_this_machines_history_unchanged_sessions_on_a_quiet_vm_fail_in_at_most_5_percent(quiet_duets, n):
    _unchanged(_with_history(_rates("ab-history", quiet_duets, n, 1.0, CLAIM_SESSIONS)))


@pytest.mark.parametrize("n", [64])
def test_ab_with_this_machines_history_a_10_percent_slower_cell_on_a_quiet_vm_is_caught_in_95_percent(quiet_duets, n):
    _caught(_with_history(_rates("ab-history", quiet_duets, n, CHANGE, CLAIM_SESSIONS)))


# ----------------------------------------------------------------------------- baseline mode

# The loaded corpus in baseline mode, its baseline recorded from the same loaded hour: no
# unchanged session failed (0 of 124 at N = 6, 24 and 64); the Intel VM's baseline re-runs
# pooled with its loaded re-runs fail on a floor in 18-31% (the benchmark's table).


@pytest.mark.parametrize("n", QUIET_N)
def test_baseline_unchanged_sessions_on_a_quiet_vm_fail_in_at_most_5_percent(intel_quiet, n):
    r = _rates("baseline", intel_quiet, n, 1.0, CLAIM_SESSIONS)
    _unchanged(r)


@pytest.mark.parametrize("n", [6, pytest.param(64, marks=_xfail(
    "beyond the session's resolution in 13 of 40 sessions of 64 cells, caught in 12 (92.3%): one below-resolution"))])
def test_baseline_a_10_percent_change_beyond_the_resolution_is_caught(intel_quiet, n):
    # the resolution is the session's (for one of its N figures): the requirement applies to
    # fewer sessions as N grows; at N = 6 to 3 of 4 (160 of 200), and 77 sessions hold 59 of
    # them; at N = 64 to about 1 in 3, and 40 sessions (13 of them) show a miss already
    r = _rates("baseline", intel_quiet, n, CHANGE, BEYOND_SESSIONS["intel_quiet"] if n == 6 else SEEN_SESSIONS[n])
    assert r.beyond_resolution >= 5, L.format_row(r)
    _caught_beyond(r)


# ----------------------------------------------------------------------------- the default selection

# The default selection's cells (pytest perf_tests -m cpu) recorded on a 2-vCPU Xeon
# (aa-corpus-intel-xeon-processor-2c-142615ad-default.json: unchanged baseline-mode sessions'
# fresh processes, A/A duet and process pairs), against the recorded setup (issue 35), 6 cells
# a session. Two kinds of change: one the suite cannot see (only suspects go to the duet, and
# a -10% cell whose fresh processes read as the baseline's is missed) and one it sees (every
# process ran with a recorded variable the baseline's did not: every cell goes to the duet;
# x1.00 is such a change that slows nothing). Full table with N = 24 and 25:
# benchmarks/results/error-rates-default-2026-11-27.txt.
DEFAULT = next(iter(sorted(L.DATA_DIR.glob("aa-corpus-intel-*-default.json"))), None)


@pytest.fixture(scope="module")
def default_selection():
    if DEFAULT is None:
        pytest.skip("no default-selection corpus in benchmarks/data")
    c = L.load_aa_corpus(DEFAULT).with_fresh(L.MIN_FRESH).with_pairs()
    assert len(c.pools) >= 20, c.describe()
    return c


def test_default_selection_unchanged_sessions_against_the_recorded_setup_fail_in_at_most_5_percent(
        default_selection):
    r = _rates("setup", default_selection, 6, 1.0, CLAIM_SESSIONS)
    assert r.to_setup > 0, L.format_row(r)
    _unchanged(r)


def test_default_selection_a_setup_change_the_suite_sees_that_slows_nothing_fails_in_at_most_5_percent(
        default_selection):
    # 1 of 124 sessions failed (2 before the io ndarray cell's worker kept the heap: the most 124
    # sessions allow, error_claims)
    r = _rates("setup-visible", default_selection, 6, 1.0, E.sessions_needed(2))
    assert abs(r.to_setup - 6) < 1e-9, L.format_row(r)  # every cell went to the duet
    _unchanged(r)


def test_default_selection_a_10_percent_slower_cell_of_a_setup_change_the_suite_sees_is_caught(default_selection):
    r = _rates("setup-visible", default_selection, 6, CHANGE, CLAIM_SESSIONS)
    _caught(r)


# The change the suite cannot see: of this seed's sessions the distributed cell is missed once
# (session 43 of 237: "unchanged", its process pairs against the recorded setup spread about 33%),
# so the claim rests on the fewest sessions that support it with one miss (error_claims: 93);
# benchmarks/replay_misses.py hidden 6 300 (another seed) missed 4 of 300, all the distributed
# cell: at most 3.0% at 95% confidence (benchmarks/results/error-rates-default-2026-11-29.txt)
def test_default_selection_a_10_percent_slower_cell_the_suite_cannot_see_is_caught(default_selection):
    r = _rates("setup", default_selection, 6, CHANGE, E.sessions_needed(1))
    _caught(r)


# The default selection in A/B mode with this machine's history: one pair before the first look
# for a cell whose own spread and whose kind's the three sessions before hold
# (``planning.first_pairs``), three for the others: 22.1 cells of 24 a session, 2.7 of 6. With its
# kind's alone (every cell of a known kind after one pair), 4 of these 59 unchanged sessions of 6
# cells failed: a noisy cell of a quiet kind judged at its kind's spread after one pair
# (benchmarks/results/first-pairs-per-cell-2026-12-03.txt).
ONE_PAIR_CELLS = {6: 1.0, 24: 20.0}  # the fewest cells a session on the one-pair path, for the claim to be on it


def _some_with_one_pair(r):
    assert r.one_pair_cells >= ONE_PAIR_CELLS[r.n_cells], L.format_row(r)
    return r


@pytest.mark.parametrize("n", [6, 24])
def test_default_selection_with_this_machines_history_unchanged_sessions_fail_in_at_most_5_percent(
        default_selection, n):
    _unchanged(_some_with_one_pair(_rates("ab-history", default_selection, n, 1.0, CLAIM_SESSIONS)))


@pytest.mark.parametrize("n", [6, 24])
def test_default_selection_with_this_machines_history_a_10_percent_slower_cell_is_caught_in_95_percent(
        default_selection, n):
    _caught(_some_with_one_pair(_rates("ab-history", default_selection, n, CHANGE, CLAIM_SESSIONS)))
