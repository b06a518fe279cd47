"""A/B mode's judgement, pure: every judged figure of a cell against the reference
install's processes paired with the candidate's (duet pairs of resident workers, or process
pairs for worker kinds that cannot be resident; other rules, such as memory growth, on the
pairs' figures), and how many more pairs a cell not called yet gets before its next look,
cut to the deadline. ``comparators.ABComparator`` uses them; the rules are ``judge/ab_pairs.py``'s and
``judge/verdict_duet.py``'s; baseline mode is ``judging.py``'s.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Callable, Dict, Mapping, Optional, Sequence, Tuple

from pytest_mxperf.judge import ab_pairs, machine_states, verdict_duet
from pytest_mxperf.judge import thresholds
from pytest_mxperf.judge import verdict as vd
from pytest_mxperf.output import reasons
from pytest_mxperf.judge.sequential import Spread
from pytest_mxperf.judge.verdict_duet import history_by_kind, spread_family
from pytest_mxperf.judge.thresholds import FDR_Q, effect_for
from pytest_mxperf.measure import planning
from pytest_mxperf.measure.ledger import CellRecord
from pytest_mxperf.model import kinds, stats
from pytest_mxperf.model.measurement import SEEDED_MODES, cell_of, metric_key


#: figures that are a rate of a duet's timed rounds (higher is better: score / train
#: throughput, an io cell's samples/s) or their time per unit (lower is better: a kvstore
#: cell's seconds per push+pull round); each worker kind's rounds time its primary figure.
#: Declared with each figure (``Metric.paired``, model/kinds.py), as the two below
_ROUND_FIGURES = kinds.ROUND_FIGURES


#: figures a duet's worker measures after its rounds, each side alone, one side right after the
#: other (an input pipeline's loader alone and trainer alone, ``workers/pipeline.py``): not
#: round-paired, so a slow spell of the machine falls on one side only, as in a pair of fresh
#: processes; they are judged as process pairs are (``ab_pairs``, the fast-end rule). In an A/A
#: of LeNet b64's input pipeline (40 duet pairs, 2-vCPU Zen 4) the trainer alone read up to 28%
#: apart on the two sides of a pair (pair spread 8.6%) while its rounds spread 1.2%
AFTER_ROUNDS = kinds.AFTER_ROUNDS


#: figures that are the sum of a duet's rounds, each side run to its own end (time to
#: accuracy: ``duet.TO_THE_END``)
_RUN_FIGURES = kinds.RUN_FIGURES


def duet_log_ratio(c, r, metric) -> float:
    """One duet pair's log(candidate figure / reference figure): for a figure the rounds
    time (``_ROUND_FIGURES``), from the rounds the two sides ran back to back
    (``stats.duet_pair_log_ratio``: the even and odd rounds' median log speed ratios, averaged, negated for a time,
    which is lower when faster); for a run's total time (``_RUN_FIGURES``), from the sums of
    its rounds with a burst on one side bounded (``stats.duet_run_log_ratio``); for another
    figure of the pair (latency percentiles: a tail is not a median of round ratios), from the
    two sides' figures."""
    if (metric.name in _ROUND_FIGURES and c.round_seconds and r.round_seconds
            and len(c.round_seconds) == len(r.round_seconds)):
        speed = _duet_speed(tuple(c.seconds_per_batch), tuple(r.seconds_per_batch))
        return speed if metric.higher_is_better else -speed
    if metric.name in _RUN_FIGURES and c.round_seconds and r.round_seconds:
        return stats.duet_run_log_ratio(c.round_seconds, r.round_seconds)
    return math.log(c.value(metric.name) / r.value(metric.name))


@functools.lru_cache(maxsize=1 << 16)
def _duet_speed(candidate_seconds: tuple, reference_seconds: tuple) -> float:
    """``stats.duet_pair_log_ratio`` of two sides' rounds, kept by their values: every look
    judges a cell's pairs again, its earlier pairs the same rounds (a replayed study of 59
    sessions asked for a million of them)."""
    return stats.duet_pair_log_ratio(candidate_seconds, reference_seconds)


def is_duet(cell) -> bool:
    """Whether a cell's A/B pairs ran as duets (resident workers taking turns)."""
    pairs = cell.pairs()
    return bool(pairs) and all(c.meta.duet is not None for c, _ in pairs)


def _ab_inputs(cells: Dict[str, CellRecord], final: set, complete: frozenset = frozenset()):
    """The judged figures of every cell in A/B mode: duet pairings (figures of resident
    workers' rounds), process pairings (other worker kinds, and what a duet's workers measure
    after their rounds: ``AFTER_ROUNDS``) and comparisons (figures with another rule)."""
    pairings, comparisons, duets = {}, {}, {}
    # what the first stage's pairs of a cell whose kind has a pair budget took: its cap's cost
    capping = {key: planning.pair_seconds(rec.cell, verdict_duet.STAGE1_PAIRS) for key, rec in cells.items()
               if rec.cell.workload.mode in kinds.PAIR_BUDGETS}
    for key, rec in cells.items():
        cell = rec.cell
        screened = cell.workload.device != "gpu"
        for m in cell.metrics():
            if not m.judged:
                continue
            mk = metric_key(key, m.name, cell.workload.mode)
            pairs = cell.pairs_of(m.name)
            if m.rule == "processes" and is_duet(cell) and m.name not in AFTER_ROUNDS:
                duets[mk] = verdict_duet.DuetPairing(m, [duet_log_ratio(c, r, m) for c, r in pairs],
                                                     final=key in final, complete=key in complete,
                                                     # a run's rounds vary with its seed's epochs
                                                     rounds=len(pairs[0][0].round_seconds)
                                                     if pairs and m.name not in _RUN_FIGURES else None,
                                                     pair_seconds=capping.get(key))
            elif m.rule == "processes":
                states = ["slowed" if "slowed" in (a, b) else (a or b) for a, b in
                          zip(machine_states.states(c for c, _ in pairs), machine_states.states(r for _, r in pairs))]
                pairings[mk] = ab_pairs.Pairing(m, [c.value(m.name) for c, _ in pairs], [r.value(m.name) for _, r in pairs],
                                          states, screened=screened, final=key in final,
                                          exchangeable=cell.workload.mode not in SEEDED_MODES,
                                          complete=key in complete,
                                          after_rounds=m.name in AFTER_ROUNDS and is_duet(cell))
            else:
                comparisons[mk] = vd.Comparison(m, [c.value(m.name) for c, _ in pairs],
                                                [r.value(m.name) for _, r in pairs], screened=False)
    return pairings, comparisons, duets


def family_q(pairings, duets, q: float = FDR_Q) -> Tuple[float, float]:
    """The session's one false-failure budget ``q`` shared by the two families of A/B
    figures, process pairs and duet pairs, in proportion to their figures (each family runs
    BH at its share): a session fails falsely in at most about q whatever its mix and number
    of figures."""
    n_p, n_d = len(pairings), len(duets)
    if not (n_p and n_d):
        return q, q  # one family (or none) has the whole budget
    return q * n_p / (n_p + n_d), q * n_d / (n_p + n_d)


def pooled_spreads(duets: Mapping[str, verdict_duet.DuetPairing], known: Mapping[str, Spread]
                   ) -> Dict[str, Spread]:
    """The spread each duet figure is judged at: its kind's (``spread_family``: the kind of
    cell and of figure), pooled over every figure of that kind in this session and, added to
    it, this machine's history of the kind (the rows of ``known``, figure key -> Spread,
    ``HistoryStore.pair_spreads``, whose figures are of that kind: ``family_of_key``); or the
    figure's own (its pairs here and its history's) when that is larger, with at least
    ``thresholds.OWN_DF`` degrees of freedom, or whatever it is from ``thresholds.OWN_ALONE_DF``. Kinds of cell do
    not spread alike: in the Intel default-selection corpus an io cell's pairs spread 5.4% and
    a score cell's 1.0%, and judged at the pooled 2% the io cell failed 10% of 24-cell A/A
    sessions; on the Zen 4 a train cell's pairs spread 6.3% pooled and a score cell's 2.6%
    (docs/baselines.md). The history of a kind (its figures' rows too) is left out where this
    session holds enough of the kind to tell that its spread is not the history's
    (``Spread.agrees_with``, ``thresholds.SESSION_ALONE_DF``, ``thresholds.HISTORY_AGREES_P``)."""
    here = _spreads_of(duets)
    history = history_by_kind(known)
    out = {}
    for mk, d in duets.items():
        f = spread_family(d.metric, mk)
        # a history of the kind this session contradicts is left out, its figures' rows with it
        # (the machine's state is not the one they were measured in)
        before = history.get(f, Spread())
        agrees = here[f].agrees_with(before, thresholds.HISTORY_AGREES_P, thresholds.SESSION_ALONE_DF)
        kind = here[f] + before if agrees else here[f]
        own = here[mk] + known.get(mk, Spread()) if agrees else here[mk]
        out[mk] = own if own.df >= thresholds.OWN_ALONE_DF or (own.df >= thresholds.OWN_DF and (kind.sd is None or own.sd > kind.sd)) \
            else kind
    return out


def _spreads_of(duets: Mapping[str, verdict_duet.DuetPairing]) -> Dict[str, Spread]:
    """The duet figures' spreads in this session: pooled per kind (by family) and each
    figure's own (by its figure key)."""
    out = {mk: Spread.of([d.signed()]) for mk, d in duets.items()}
    for mk, d in duets.items():
        f = spread_family(d.metric, mk)
        out[f] = out.get(f, Spread()) + out[mk]
    return out


def session_spreads(cells: Dict[str, CellRecord]) -> Dict[str, Tuple[float, int]]:
    """This session's spreads of duet pair log ratios (sum of squares, degrees of freedom):
    pooled per kind of figure (by family), and each figure's own (by its figure key): what
    the history store keeps of it for the sessions after it (``pooled_spreads``)."""
    return {k: (s.ss, s.df) for k, s in sorted(_spreads_of(_ab_inputs(cells, set())[2]).items()) if s.df}


def judge_ab_once(cells: Dict[str, CellRecord], final: set, min_effect: float,
                  complete: frozenset = frozenset(), known: Mapping[str, Spread] = {}) -> Dict[str, vd.Verdict]:
    """Verdicts of every figure from the cells' pairs; ``final``: cells that get no more pairs,
    ``complete``: those of them that got every pair planned (a figure still not significant
    there is the machine's noise, not a cut). Duet figures are judged pair by pair
    (``verdict_duet.judge_duet_sequential``) at the spread pooled over their kind in this
    session and in ``known`` (this machine's history)."""
    pairings, comparisons, duets = _ab_inputs(cells, final, complete)
    q_pairs, q_duets = family_q(pairings, duets)
    v = ab_pairs.judge_ab(pairings, min_effect=min_effect, q=q_pairs)
    v.update(verdict_duet.judge_duet_sequential(duets, pooled_spreads(duets, known), min_effect=min_effect,
                                                q=q_duets))
    for mk, d in duets.items():  # each side's figure (median over its processes), shown beside the ratio
        cell = cells[cell_of(mk)].cell
        v[mk] = dataclasses.replace(v[mk], current_median=cell.figure(d.metric.name),
                                    baseline_median=cell.reference_figure(d.metric.name))
        slowed = sum(machine_states.SLOWED in (c.state, r.state) for c, r in cell.pairs())
        if slowed and v[mk].kind in ("suspect", "unresolved"):
            # rounds cancel a slow spell of the machine, not other work sharing its CPUs: say so
            v[mk] = dataclasses.replace(v[mk], busy=True, reason=reasons.busy_pairs(v[mk].reason, slowed,
                                                                                   len(cell.pairs())))
    v.update(vd.judge_session(comparisons, min_effect=min_effect))
    return v


def within_deadline(wanted: Dict[str, int], each: Dict[str, float], left: Optional[float]
                    ) -> Tuple[Dict[str, int], Optional[Tuple[int, int, float]]]:
    """Pairs wanted (cell -> count, ``each`` pair's expected seconds) cut, cell by cell in
    proportion, to what the rest of ``--perf-deadline`` holds (``left``: seconds left for
    measuring, None without a deadline); and what was cut (pairs kept, pairs wanted, seconds
    left) or None. A cell left with fewer pairs than it wanted is judged on what it has: a
    slowdown it cannot confirm is unresolved, never passed. Pure."""
    if left is None or not wanted:
        return wanted, None
    cost = {k: n * each[k] for k, n in wanted.items()}
    total = sum(cost.values())
    if total <= max(left, 0.0):
        return wanted, None
    share = max(left, 0.0) / total
    cut = {k: int(n * share) for k, n in wanted.items()}
    spare = max(left, 0.0) - sum(cut[k] * cost[k] / wanted[k] for k in wanted)
    for k in sorted(wanted, key=lambda k: cut[k] / wanted[k]):  # what flooring left, to the least served
        each = cost[k] / wanted[k]
        if cut[k] < wanted[k] and each <= spare:
            cut[k] += 1
            spare -= each
    return {k: n for k, n in cut.items() if n > 0}, (sum(cut.values()), sum(wanted.values()), max(left, 0.0))


def shrunk_means(signed: Mapping[str, Sequence[float]], sds: Mapping[str, Optional[float]]) -> Dict[str, float]:
    """Each figure's best guess of its true log ratio from its pairs so far (> 0 better): its
    mean shrunk towards no change by how far the session's figures spread beyond their own
    noise (empirical Bayes, the truths drawn around 0 with a variance ``tau2`` estimated from
    all figures: the mean of their squared means less the mean of their squared standard
    errors; each mean weighed by tau2 / (tau2 + its se^2)). A session where nothing changed
    has tau2 near 0: a mean that one noisy pair put beyond the minimum effect is not taken for a
    change, which ``expected_pairs`` would call in a pair where the cell needs several; where
    many figures moved, the means stand. Pure."""
    se2 = {k: (sds.get(k) or 0.0) ** 2 / len(v) for k, v in signed.items() if v and sds.get(k)}
    if not se2:
        return {}
    means = {k: sum(signed[k]) / len(signed[k]) for k in se2}
    tau2 = max(0.0, sum(m * m for m in means.values()) / len(means) - sum(se2.values()) / len(se2))
    return {k: means[k] * (tau2 / (tau2 + se2[k]) if tau2 + se2[k] > 0 else 0.0) for k in se2}


def next_looks(cells: Dict[str, CellRecord], verdicts: Mapping[str, vd.Verdict], min_effect,
               process_pairs: Optional[int] = None, known: Mapping[str, Spread] = {},
               max_pairs: int = verdict_duet.SEQUENTIAL_MAX_PAIRS) -> Callable[[str], Optional[Tuple[int, bool]]]:
    """How many more duet pairs a cell not called yet gets before its next look, and whether it
    is final after them: the most any of its figures still a suspect asks for
    (``verdict_duet.next_look``, at the spread ``pooled_spreads`` gives it: a cell's few pairs
    can show far less than the machine's by chance). A tail is never pooled with the rounds: a
    latency cell's p99 pairs spread several times wider than its rounds (docs/how-it-measures.md,
    "What is measured, and how each figure is judged"). A duet cell with figures judged as
    process pairs (``AFTER_ROUNDS``) gets at least ``process_pairs`` in all while one of them
    is a suspect, the count a cell of process pairs gets in a stage (``planning.ab_pairs``):
    with 3, the fast-end test cannot reject (its smallest p is 1/8). A cell is final once it
    reaches ``max_pairs``, or its kind's own cap where lower (``verdict_duet.max_pairs_for``: what
    its pair budget holds of its first pairs, its rule's last look), or when only those figures asked for pairs (their second stage); (0, True): nothing more to measure, final as it stands. None for a
    cell of process pairs (its second stage is the plan's ``ab_pairs`` again). Its ``after``:
    the pairs a cell is expected to get after that look (``pairs_after`` below)."""
    pairings, _, duets = _ab_inputs(cells, set())
    spreads = pooled_spreads(duets, known)
    _, q_duets = family_q(pairings, duets)

    def suspect(mk: str) -> bool:
        v = verdicts.get(mk)
        return v is not None and v.kind == "suspect"

    def rule(mk: str) -> Dict:
        """The pair-by-pair rule's arguments for figure ``mk``: its pairs, spread and effect."""
        d = duets[mk]
        return dict(signed=d.signed(), sd=spreads[mk].sd, df=spreads[mk].df,
                    min_effect=verdict_duet.log_effect(d.metric, effect_for(d.metric.name, min_effect, mk)),
                    q=q_duets, n_figures=len(duets),
                    max_pairs=verdict_duet.max_pairs_for(mk, max_pairs, d.pair_seconds))

    def looks(key: str) -> Optional[Tuple[int, bool]]:
        figures = [mk for mk in duets if cell_of(mk) == key]
        if not figures:
            return None
        have = max(len(duets[mk].signed()) for mk in figures)
        wanted = [verdict_duet.next_look(**rule(mk)) for mk in figures if suspect(mk)]
        after = [process_pairs - len(p.candidate) for mk, p in pairings.items()
                 if cell_of(mk) == key and p.metric.name in AFTER_ROUNDS and suspect(mk) and process_pairs]
        # after a first stage of fewer than STAGE1_PAIRS pairs (planning.first_pairs), a figure judged
        # as process pairs reaches those before its second stage: a fast-end test of one pair asks
        # for more whatever its pairs read
        reach = [verdict_duet.STAGE1_PAIRS - have] if after and have < verdict_duet.STAGE1_PAIRS else []
        n = max(wanted + (reach or after) + [0])
        most = verdict_duet.max_pairs_for(key, max_pairs, duets[figures[0]].pair_seconds)
        return n, have + n >= most or not (any(w > 0 for w in wanted) or reach)

    @functools.lru_cache(maxsize=None)
    def truths() -> Dict[str, float]:
        """The session's means shrunk towards no change: worked out at the first ``pairs_after``
        (a session that says nothing while settling never asks)."""
        return shrunk_means({mk: d.signed() for mk, d in duets.items()}, {mk: spreads[mk].sd for mk in duets})

    def pairs_after(key: str) -> float:
        """The duet pairs a cell not called yet is expected to get after its next look: what its
        figures still suspects are expected to have once called (``verdict_duet.expected_pairs``,
        around their means shrunk towards no change, ``shrunk_means``), less what they have and
        what its next look gives them; 0 for a cell final after it, or of process pairs. What the
        rest of a session's looks are expected to take (``comparators.Confirmation.after``)."""
        look = looks(key)
        figures = [mk for mk in duets if cell_of(mk) == key and suspect(mk)]
        if look is None or look[1] or not figures:
            return 0.0
        have = max(len(duets[mk].signed()) for mk in figures)
        return max(0.0, max(verdict_duet.expected_pairs(**rule(mk), truth=truths().get(mk, 0.0))
                            for mk in figures) - have - look[0])
    looks.after = pairs_after  # type: ignore[attr-defined]  # from the same pairs and spreads
    return looks
