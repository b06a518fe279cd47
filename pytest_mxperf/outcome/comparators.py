"""How a session's cells are compared, chosen once, and the one loop that settles suspects.

A comparator implements one small interface:

* ``judge(cells, final, state)``: every judged figure of the measured ``cells`` (each process
  labelled with the machine's state, as new values), ``final`` the cells that get no more
  measuring: (verdicts, the cells as judged, the next state). The interim results after each
  cell use the same call (``final`` empty, a fresh state).
* ``suspects(verdicts, cells, state)``: the cells to measure again, and the next state.
* ``more(verdicts, cells, suspects, spent, state)``: what more to measure to settle
  ``suspects``, as ``MoreToMeasure`` values naming both sides (install and environment), the
  kind (more processes, duet pairs or process pairs), the count, the cost and the cell's
  minimum effect; with the cells that become final and what the confirmation said
  (``Confirmation``), and the next state.
* ``conclude(verdicts, cells, state)``: the verdicts with what the comparator adds last
  (baseline mode: what changed around each figure since the baseline).

The state (``Settling``) is a value each step returns and the next takes: a comparator keeps
nothing between calls. ``choose`` picks the comparator of the session's comparison, decided
once (``measure/comparison.py``: A/B when a reference install is named, else this machine's
baseline). ``settle`` is the loop both use: judge, measure what the comparator asks
for (saying its cost first and its progress as it goes), judge again, at most ``rounds``
times; a suspect left after that is final when the comparator says so (``late_final``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, FrozenSet, Mapping, Optional, Sequence, Tuple

from pytest_mxperf.judge import thresholds
from pytest_mxperf.judge import verdict as vd
from pytest_mxperf.output import reasons
from pytest_mxperf.judge.thresholds import MinEffects
from pytest_mxperf.measure import planning
from pytest_mxperf.measure.scheduler import MoreToMeasure, Side
from pytest_mxperf.measure.ledger import CellRecord
from pytest_mxperf.measure.session import SessionContext
from pytest_mxperf.model.measurement import cell_of
from pytest_mxperf.outcome import ab_judging, judging

@dataclasses.dataclass(frozen=True)
class Confirmation:
    """What a comparator asks to measure in one round, to be said before it runs: the cells
    and their ``MoreToMeasure``; ``kind`` "confirm" (baseline mode: more processes, within
    ``budget`` seconds, ``cut`` when they had to be cut to it), "recorded-setup" (baseline mode:
    pairs against the recorded ``setup``, the requirement it rebuilt) or "look" (A/B:
    more pairs before a cell's next look); ``deadline_cut``: (pairs kept, pairs wanted, seconds left) when --perf-deadline
    cut them; ``last``: no round is planned after this one (every cell in it is at its last
    look, after which it is final), so what its cells take is what is left of the session's
    settling."""

    kind: str
    wanted: Tuple[MoreToMeasure, ...]
    budget: float = 0.0
    cut: bool = False
    deadline_cut: Optional[Tuple[int, int, float]] = None
    setup: Optional[str] = None
    whole: str = ""   # "recorded-setup": why every cell is measured against it, not only suspects
    last: bool = False
    #: seconds the looks after this round are expected to take (``ab_judging.next_looks(...).after``
    #: at each cell's pair cost); None where the comparator cannot say (baseline mode's processes)
    after: Optional[float] = None


def history_spreads(context: SessionContext):
    """This machine's pooled spreads of duet pairs per kind of figure, from its history (the
    plan read them, ``Plan.pair_spreads``), as ``Spread`` values."""
    from pytest_mxperf.judge.sequential import Spread
    return {f: Spread(ss, df) for f, ss, df in context.plan.pair_spreads}


def min_effect(context: SessionContext, key: str) -> float:
    """The session's minimum effect (--perf-min-effect): what a stage of more measuring is
    sized for. A figure is judged at its own (``effects``)."""
    return context.options.min_effect


def effects(context: SessionContext, cells: Dict[str, CellRecord]) -> MinEffects:
    """Every figure's minimum effect: the thresholds the plan gathered (the tests' markers,
    pyproject.toml's patterns), else --perf-min-effect; ``cells`` name the tests that
    measured each cell."""
    return MinEffects(context.options.min_effect, tuple(t for t in context.plan.thresholds if t.nodeid),
                      tuple(t for t in context.plan.thresholds if t.pattern is not None),
                      {k: tuple(rec.nodeids or (rec.nodeid,)) for k, rec in cells.items()})


def with_effects_said(verdicts: Dict[str, vd.Verdict], effects_: MinEffects) -> Dict[str, vd.Verdict]:
    """Each verdict with the minimum effect it was judged at and where that was set, as a note."""
    return {k: dataclasses.replace(v, notes=list(v.notes) + [effects_.said(k, v.metric)]) if v.metric else v
            for k, v in verdicts.items()}


@dataclasses.dataclass(frozen=True)
class Settling:
    """What one step of ``settle`` hands the next, a new value each step (a comparator keeps
    none): ``reference``, the machine state the cells were labelled against (baseline mode: the
    last one found); ``budget``, what confirming may take in all (baseline mode without a
    recorded setup: set at its first round); ``cut``, the cells the duet should have settled
    and did not, and why; ``complete``, the cells final with every pair planned for them;
    ``whole``, why every cell is measured against the recorded setup ("": only suspects)."""

    reference: Any = None
    budget: Optional[float] = None
    cut: Tuple[Tuple[str, str], ...] = ()
    complete: FrozenSet[str] = frozenset()
    whole: str = ""


def _suspects(verdicts: Dict[str, vd.Verdict]) -> FrozenSet[str]:
    return frozenset(cell_of(k) for k, v in verdicts.items() if v.kind == "suspect")


class BaselineComparator:
    """Against this machine's baseline. When the baseline's recorded setup is ready
    (``RecordedSetup``), every figure the baseline alone cannot settle
    (``thresholds.SETTLED_BY_SETUP``: suspect, below its resolution, unclear, unresolved) is
    measured again as pairs against that setup (a duet where the cell's worker can be
    resident, else process pairs), taking turns so that the machine's spells fall on both
    sides, in two stages as in A/B mode (``DUET_PAIRS`` pairs, then as many as the pairs'
    spread asks for), cut to ``--perf-deadline``; the verdict is the pairs'
    (``judging.against_recorded_setup``). A figure it should settle and could not (cut by the
    deadline; the setup could not be built) is unresolved, never passed. Without a ready
    setup, suspects get more fresh processes (up to ``CONFIRM_PROCESSES`` in all, within as
    long again as the measuring so far or a minute), up to three rounds (judging again can
    make another cell a suspect: BH across cells).

    Against the recorded setup, **every** cell (not only suspects) is measured in pairs
    against it when the setup visibly changed (``judging.setup_changes``: a recorded variable
    as the worker processes saw it, the MXNet build, numpy) or when a duet has already found a
    regression against it (the setup differs in a way that matters, and a cell whose fresh
    processes happened to read faster than the baseline's may hide the same slowdown): a
    session whose setup is the recorded one and shows nothing suspect costs what it did."""

    mode = "baseline"

    def __init__(self, context: SessionContext, now: Callable[[], float],
                 left: Callable[[], Optional[float]] = lambda: None):
        self.context = context
        self.baseline = context.baseline
        self.now = now
        self.left = left
        self.setup = context.comparison.setup

    @property
    def rounds(self) -> int:
        # against the recorded setup: a first stage and the looks after it (``thresholds.LOOKS``: room too
        # for the cells a regression sends there); else up to three rounds of more processes
        return thresholds.LOOKS + 1 if self.against_setup else 3

    @property
    def against_setup(self) -> bool:
        return self.setup is not None and self.setup.ready and self.baseline is not None

    @property
    def late_final(self) -> bool:
        return self.against_setup  # a suspect left after the duet's stages is judged as it stands

    @property
    def confirms(self) -> bool:
        o = self.context.options
        return not o.smoke and not o.update_baselines

    def judge(self, cells: Dict[str, CellRecord], final: FrozenSet[str], state: Settling = Settling()
              ) -> Tuple[Dict[str, vd.Verdict], Dict[str, CellRecord], Settling]:
        labelled, reference = judging.label_machine_states(cells, self.baseline)
        state = dataclasses.replace(state, reference=reference or state.reference)
        if self.baseline is None:
            return {}, labelled, state
        e = effects(self.context, labelled)
        verdicts = judging.judge_baseline_once(labelled, self.baseline, state.reference, set(final), e)
        verdicts = judging.not_compared(verdicts, judging.other_methods(labelled, self.baseline), e)
        paired = {k: rec for k, rec in labelled.items() if rec.cell.reference is not None}
        if paired:
            duets = ab_judging.judge_ab_once(paired, set(final) & set(paired), e, complete=state.complete & final,
                                             known=history_spreads(self.context))
            unrecorded = (self.setup.requirement if self.setup is not None and not self.setup.build_recorded
                          else None)
            verdicts = judging.against_recorded_setup(verdicts, duets, self.baseline, e,
                                                      judging.machine_shifts(paired, self.baseline),
                                                      unrecorded_build=unrecorded)
        return verdicts, labelled, state

    def suspects(self, verdicts: Dict[str, vd.Verdict], cells: Dict[str, CellRecord], state: Settling = Settling()
                 ) -> Tuple[FrozenSet[str], Settling]:
        if not self.against_setup:
            return _suspects(verdicts), state
        paired = {k for k, rec in cells.items() if rec.cell.reference is not None}
        first = judging.setup_suspects(verdicts, effects(self.context, cells))
        if not state.whole:
            state = dataclasses.replace(state, whole=self._why_every_cell(verdicts, cells, paired))
        if state.whole:
            first = judging.judged_between_processes(verdicts)
        return _suspects({k: v for k, v in verdicts.items() if cell_of(k) in paired}) | (first - paired), state

    def _why_every_cell(self, verdicts: Dict[str, vd.Verdict], cells: Dict[str, CellRecord], paired) -> str:
        """Why every cell is measured against the recorded setup, or "" (only suspects)."""
        changes = judging.setup_changes(cells, self.baseline)
        if changes:
            return reasons.setup_differs(changes)
        methods = judging.other_methods(cells, self.baseline)
        if methods:
            key = sorted(methods)[0]
            return reasons.measured_otherwise(methods[key], len(methods))
        found = sorted(k for k, v in verdicts.items() if v.kind == "regression" and cell_of(k) in paired)
        if found:
            return reasons.regression_against_setup(found)
        return ""

    def more(self, verdicts, cells: Dict[str, CellRecord], suspects: FrozenSet[str], spent: float,
             state: Settling = Settling(), foretell: bool = True) -> Tuple[Confirmation, FrozenSet[str], Settling]:
        o = self.context.options
        if self.against_setup:
            return self._against_setup(verdicts, cells, suspects, state, foretell)
        if state.budget is None:  # confirming costs at most the first stage again, or a minute
            state = dataclasses.replace(state, budget=max(planning.CONFIRM_FLOOR_S, self.now() - self.context.started))
        left = state.budget - spent
        plan, cut = judging.confirmation_plan({k: cells[k] for k in suspects}, left, o)
        wanted = tuple(MoreToMeasure(k, n, "processes", Side(o.python), None, per, min_effect(self.context, k))
                       for k, (n, per) in sorted(plan.items()))
        return Confirmation("confirm", wanted, budget=left, cut=cut), frozenset(plan), state

    def _against_setup(self, verdicts, cells: Dict[str, CellRecord], suspects: FrozenSet[str], state: Settling,
                       foretell: bool = True) -> Tuple[Confirmation, FrozenSet[str], Settling]:
        """Pairs against the recorded setup for ``suspects``: a first stage for a cell without
        pairs yet; for a duet cell with pairs, as many more as its next look asks for
        (``ab_judging.next_looks``, final at its last); for a cell of process pairs, a second
        stage, then final; cut to the deadline."""
        o = self.context.options
        paired = {k: rec for k, rec in cells.items() if rec.cell.reference is not None}
        process_pairs = planning.ab_pairs(self.context.plan.tests)
        looks = ab_judging.next_looks(paired, verdicts, effects(self.context, cells), process_pairs,
                                      history_spreads(self.context)) if paired else (lambda k: None)
        wanted: Dict[str, int] = {}
        last: Dict[str, bool] = {}
        each: Dict[str, float] = {}
        sides: Dict[str, Side] = {}
        for k in sorted(suspects):
            rec = cells[k]
            env = self.baseline.recorded_env(k)
            if rec.remeasure is None or env is None:
                continue  # no one recorded setup of this cell (or no way to measure it again): as judged
            if k not in paired:  # a first stage: process pairs as many as A/B mode gives them
                n, last[k] = (process_pairs if not rec.duets else o.duet_pairs), False
            else:
                look = looks(k)
                n, last[k] = (process_pairs, True) if look is None else look
            if n > 0:
                wanted[k] = n
            each[k] = planning.pair_seconds(rec.cell) or planning.setup_pair_seconds(rec, o)
            sides[k] = Side(self.setup.python, tuple(sorted(env.items())))
        kept, deadline_cut = ab_judging.within_deadline(wanted, each, self.left())
        after = _after(looks, kept, each) if foretell else None
        cut = dict(state.cut)
        for k in wanted:
            if kept.get(k, 0) < wanted[k] and k not in paired:
                cut[k] = reasons.CUT_BEFORE_ITS_DUET
        state = dataclasses.replace(state, complete=state.complete | _completed(last, wanted, kept),
                                    cut=tuple(sorted(cut.items())))
        more = tuple(MoreToMeasure(k, n, "duet" if cells[k].duets else "process-pairs", Side(o.python), sides[k],
                                   each[k], min_effect(self.context, k))
                     for k, n in kept.items())
        # final: a paired cell at its last look or cut by the deadline (or with nothing more to
        # measure), and a cell the deadline left without its first stage
        settled = (frozenset(k for k in suspects if k in paired and (last.get(k, True) or kept.get(k, 0) < wanted.get(k, 0)))
                   | frozenset(k for k in wanted if k not in kept))
        # a round of last looks only is the last one planned (a regression it finds can still
        # send every cell there: that round is said with its own cost)
        # "every one" only for a round that brings cells not paired yet: on the paired path (or once
        # every cell has pairs) a look measures its suspects, whatever sent every cell there
        whole = state.whole if any(k not in paired for k in kept) else ""
        return Confirmation("recorded-setup", more, deadline_cut=deadline_cut, setup=self.setup.requirement,
                            whole=whole, last=bool(kept) and all(last.get(k, False) for k in kept),
                            after=after), settled, state

    def conclude(self, verdicts: Dict[str, vd.Verdict], cells: Dict[str, CellRecord], state: Settling = Settling()
                 ) -> Dict[str, vd.Verdict]:
        if self.baseline is None:
            return verdicts
        setup = self.setup
        e = effects(self.context, cells)
        if setup is not None and setup.status in ("unbuilt", "unfit"):
            why = reasons.SETUP_NOT_REBUILT if setup.status == "unbuilt" else reasons.NO_INSTALL_FITS
            verdicts = judging.unsettled(verdicts, {cell_of(k): why for k in judging.setup_suspects(verdicts, e)}, e)
        elif self.against_setup and state.cut:
            verdicts = judging.unsettled(verdicts, dict(state.cut), e)
        return with_effects_said(judging.with_context(verdicts, cells, self.baseline), e)


class ABComparator:
    """Against a reference install, pair by pair: a duet cell not called yet gets more pairs
    look by look (``ab_judging.next_looks``: the pair-by-pair rule) until it is called or
    reaches its last look; a cell of process pairs gets one second stage (as many process
    pairs again); every look cut to the deadline. A cell left a suspect when no more is
    measured is final (unresolved, never a silent suspect)."""

    mode = "ab"
    rounds = thresholds.LOOKS
    late_final = True

    def __init__(self, context: SessionContext, left: Callable[[], Optional[float]]):
        self.context = context
        self.left = left

    @property
    def confirms(self) -> bool:
        return not self.context.options.smoke

    def judge(self, cells: Dict[str, CellRecord], final: FrozenSet[str], state: Settling = Settling()
              ) -> Tuple[Dict[str, vd.Verdict], Dict[str, CellRecord], Settling]:
        labelled, _ = judging.label_machine_states(cells, None)
        return ab_judging.judge_ab_once(labelled, set(final), effects(self.context, labelled),
                                        complete=state.complete & final,
                                        known=history_spreads(self.context)), labelled, state

    def more(self, verdicts, cells: Dict[str, CellRecord], suspects: FrozenSet[str], spent: float,
             state: Settling = Settling(), foretell: bool = True) -> Tuple[Confirmation, FrozenSet[str], Settling]:
        ctx = self.context
        o = ctx.options
        looks = ab_judging.next_looks(cells, verdicts, effects(ctx, cells), ctx.plan.ab_pairs or o.ab_pairs,
                                      history_spreads(ctx))
        wanted: Dict[str, int] = {}
        last: Dict[str, bool] = {}
        for k in sorted(suspects):
            if cells[k].remeasure is None:
                continue
            look = looks(k)
            n, last[k] = (ctx.plan.ab_pairs or o.ab_pairs, True) if look is None else look
            if n > 0:
                wanted[k] = n
        each = {k: planning.pair_seconds(cells[k].cell) or 0.0 for k in wanted}
        kept, deadline_cut = ab_judging.within_deadline(wanted, each, self.left())
        after = _after(looks, kept, each) if foretell else None
        state = dataclasses.replace(state, complete=state.complete | _completed(last, wanted, kept))
        more = tuple(MoreToMeasure(k, n, "duet" if ab_judging.is_duet(cells[k].cell) else "process-pairs",
                                   Side(o.python), Side(ctx.comparison.reference), each[k], min_effect(ctx, k))
                     for k, n in kept.items())
        # final: a cell at its last look, one the deadline cut, one with nothing more to measure
        settled = frozenset(k for k in suspects if last.get(k, True) or kept.get(k, 0) < wanted.get(k, 0))
        return Confirmation("look", more, deadline_cut=deadline_cut,
                            last=all(last.get(k, True) for k in kept), after=after), settled, state

    def suspects(self, verdicts: Dict[str, vd.Verdict], cells: Dict[str, CellRecord], state: Settling = Settling()
                 ) -> Tuple[FrozenSet[str], Settling]:
        return _suspects(verdicts), state

    def conclude(self, verdicts: Dict[str, vd.Verdict], cells: Dict[str, CellRecord], state: Settling = Settling()
                 ) -> Dict[str, vd.Verdict]:
        return with_effects_said(verdicts, effects(self.context, cells))


def choose(context: SessionContext, clock) -> "BaselineComparator | ABComparator":
    """The session's comparator, from its context's comparison (decided once, ``comparison_for``)."""
    if context.comparison.ab:
        return ABComparator(context, clock.measuring_left)
    return BaselineComparator(context, clock.now, clock.measuring_left)


def _completed(last: Mapping[str, bool], wanted: Mapping[str, int], kept: Mapping[str, int]) -> FrozenSet[str]:
    """The cells at their last look (``last``) that got every pair they asked for (``wanted``,
    ``kept`` within the deadline): one that asked for none (0, final: nothing more to measure)
    has every pair it was planned."""
    return frozenset(k for k, final in last.items() if final and kept.get(k, 0) >= wanted.get(k, 0))


def _after(looks: Callable[[str], object], kept: Mapping[str, int], each: Mapping[str, float]) -> float:
    """Seconds the looks after this round are expected to take: each kept cell's pairs after
    its next look (``ab_judging.next_looks(...).after``) at its pair cost; 0 for cells without
    duet pairs yet."""
    after = getattr(looks, "after", None)
    return sum(after(k) * each.get(k, 0.0) for k in kept) if after is not None else 0.0


def settle(comparator, cells: Callable[[], Dict[str, CellRecord]],
           confirm: Callable[[Sequence[MoreToMeasure], Callable[[MoreToMeasure], None]], object],
           say: Callable[[object], None], now: Callable[[], float], foretell: bool = True) -> judging.Judged:
    """The one loop both modes use (each comparator step returns its result and a new ``Settling``,
    which the next step takes: the comparator keeps nothing between them): judge the measured
    ``cells()``; while the comparator finds
    suspects and may measure (``rounds``), say what it asks for (``say(Confirmation)``), measure
    it (``confirm(wanted, done)``: the round's cells, ``done(more)`` as each has what it will
    get; each cell's progress said as ``say((i, n, more, seconds gone, seconds left))``: the
    session's seconds since it started, ``now() - context.started``, and what the round's cells
    not done yet are expected to take, which ``finish`` weighs against the plan's rest of the
    session) and judge again, as the cells then are. ``foretell``: whether a round says what the
    looks after it are expected to take (``Confirmation.after``; False where nothing is said:
    the expectation follows each suspect's looks forward, the costliest part of a replayed
    session's judging). Returns the verdicts as concluded."""
    final: FrozenSet[str] = frozenset()
    verdicts, judged, state = comparator.judge(cells(), final, Settling())
    confirmed: FrozenSet[str] = frozenset()
    if comparator.confirms:
        spent = 0.0
        for _ in range(comparator.rounds):
            suspects, state = comparator.suspects(verdicts, judged, state)
            suspects -= final
            if not suspects:
                break
            asked, settled, state = comparator.more(verdicts, judged, suspects, spent, state, foretell)
            if asked.wanted or asked.deadline_cut:
                say(asked)
            t0 = now()
            left = {m.key: m.cost for m in asked.wanted}

            def one_done(more: MoreToMeasure) -> None:
                left.pop(more.key, None)
                say((len(asked.wanted) - len(left), len(asked.wanted), more, now() - comparator.context.started,
                     sum(left.values()) + (asked.after or 0.0)))
            confirm(asked.wanted, one_done)
            spent += now() - t0
            final |= settled
            confirmed |= frozenset(m.key for m in asked.wanted)  # the cells measured again
            verdicts, judged, state = comparator.judge(cells(), final, state)
        late, state = comparator.suspects(verdicts, judged, state)
        late -= final
        if late and comparator.late_final:
            final |= late
            verdicts, judged, state = comparator.judge(cells(), final, state)
    return judging.Judged(comparator.conclude(verdicts, judged, state), len(confirmed), judged)


def interim(comparator, cells: Dict[str, CellRecord]) -> Dict[str, vd.Verdict]:
    """The verdicts of the cells measured so far, as they stand (no more measuring): what the
    interim results file says after each cell. The same judging call as at the end."""
    if not cells:
        return {}
    return comparator.judge(cells, frozenset(), Settling())[0]
