"""What a session measured and met, append-only (the ledger of ``measure/session.py``): each
cell's record (``CellRecord``: a test's measurement, with how to measure it again), what the
tests decided of their cells (``FloorCheck``), figures shown, not judged (``Finding``), skips
and the session's events (``Event``: not reached, no GPU, a duet's fallback). Nothing in it is
changed or removed; ``merge_records`` makes the session's cells from it, each once, as new
values.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from pytest_mxperf.judge import floors
from pytest_mxperf.model.measurement import CellMeasurement, RunResult


@dataclasses.dataclass(frozen=True)
class CellRecord:
    """One measured cell with what the test decided about it (floor, outcome). Immutable:
    what a test decides after measuring (``FloorCheck``) is a value of its own, laid onto the
    records when they are merged (``merge_records``)."""

    nodeid: str
    cell: CellMeasurement
    floor: Optional[floors.Floor] = None
    outcome: str = "measured"  # passed / failed / skipped / measured
    note: str = ""
    #: how to measure the cell again: ``remeasure(more)`` (``scheduler.MoreToMeasure``)
    remeasure: Optional[Callable[[Any], CellMeasurement]] = dataclasses.field(default=None, repr=False)
    #: every test whose processes this record holds (a merged cell: ``merge_records``)
    nodeids: Tuple[str, ...] = ()
    #: whether its worker can be resident, so that pairs of it run as a duet (``duet.resident``)
    duets: bool = False

    @property
    def key(self) -> str:
        return self.cell.workload.key()

    @property
    def below_floor(self) -> bool:
        """A measured cell whose test found it below its published-table floor."""
        return self.outcome == "failed" and self.floor is not None and self.cell.status == "ok"

    def to_dict(self, verdicts: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        d = self.cell.to_dict()
        d["nodeid"] = self.nodeid
        d["nodeids"] = list(self.nodeids or (self.nodeid,))
        d["floor"] = dataclasses.asdict(self.floor) if self.floor else None
        d["outcome"] = self.outcome
        d["note"] = self.note
        if verdicts:
            key = self.cell.workload.key()
            d["verdicts"] = {k: (v.to_dict() if hasattr(v, "to_dict") else v) for k, v in verdicts.items()
                             if k == key or k.startswith(key + "#")}
            d["verdict"] = d["verdicts"].get(key)
        return d


@dataclasses.dataclass(frozen=True)
class FloorCheck:
    """What a test decided about one of its cells against the published tables
    (``Measurer.check_floor``): the floor, the test's outcome and why."""

    nodeid: str
    key: str
    floor: floors.Floor
    outcome: str
    note: str = ""


#: what a merged cell's test outcome is when its tests disagree: the first of these found
_OUTCOME_ORDER = ("failed", "passed", "skipped", "measured")


def _once(runs) -> List[RunResult]:
    """Each process once (by its ``process`` id), in the order first seen."""
    return list({run.process: run for run in runs}.values())


def merge_records(records: Sequence[CellRecord], checks: Sequence[FloorCheck] = ()) -> Dict[str, CellRecord]:
    """The session's cells by key, each once: a cell that several tests measured (and the
    confirmation processes the end of the session added) is one new record holding every
    process of those records once, in the order they ran, with what its tests decided of it
    (``checks``). Pure. A cell that several tests share (``PerfSession.measure_cells``) is held
    by each of their records; its processes are counted once."""
    decided = {(c.nodeid, c.key): c for c in checks}
    records = [dataclasses.replace(r, floor=c.floor, outcome=c.outcome, note=c.note)
               if (c := decided.get((r.nodeid, r.key))) is not None else r for r in records]
    groups: Dict[str, List[CellRecord]] = {}
    for r in records:
        groups.setdefault(r.key, []).append(r)
    out: Dict[str, CellRecord] = {}
    for key, recs in groups.items():
        first = recs[0]
        # a cell two tests share is one measurement: its processes are counted once
        runs = _once(run for r in recs for run in r.cell.runs)
        paired = [r for r in recs if r.cell.reference is not None]
        reference = _once(run for r in paired for run in r.cell.reference) if paired else None
        outcomes = [r.outcome for r in recs]
        outcome = next((o for o in _OUTCOME_ORDER if o in outcomes), first.outcome)
        notes = list(dict.fromkeys(r.note for r in recs if r.note))
        out[key] = CellRecord(
            nodeid=first.nodeid, cell=CellMeasurement(first.cell.workload, runs, reference),
            floor=next((r.floor for r in recs if r.floor is not None), None), outcome=outcome,
            note="; ".join(notes), remeasure=next((r.remeasure for r in recs if r.remeasure), None),
            nodeids=tuple(dict.fromkeys(n for r in recs for n in (r.nodeids or (r.nodeid,)))),
            duets=any(r.duets for r in recs))
    return out


@dataclasses.dataclass(frozen=True)
class Finding:
    """A figure that is shown, not judged (a derived figure, a study's table)."""

    nodeid: str
    name: str
    figures: Dict[str, Any]
    note: str = ""


@dataclasses.dataclass(frozen=True)
class Event:
    """Something the session met that is not a cell: ``kind`` one of EVENTS, ``text`` what to
    say (one line, without a prefix), ``subject`` what it is about (a test, a cell key)."""

    kind: str
    text: str = ""
    subject: str = ""
    fails: bool = False


#: the kinds of Event: a measuring test the deadline left unstarted; no usable GPU (its GPU
#: tests skip); a cell whose duet pairs could not share a GPU (process pairs instead)
NOT_REACHED, NO_GPU, DUET_FALLBACK = "not-reached", "no-gpu", "duet-fallback"


def unmeasured(cells: Mapping[str, CellRecord], skips: Sequence[str], events: Sequence[Event]
               ) -> Optional[List[str]]:
    """Why nothing was measured (the skips' reasons other than no GPU, said once on their own;
    else that every cell failed to measure), or None when a cell measured or nothing ran."""
    if any(r.cell.status == "ok" for r in cells.values()):
        return None
    skipped = sorted(set(skips) - {e.text for e in events if e.kind == NO_GPU})
    if not (cells or skipped):
        return None
    return skipped or ["every cell failed to measure"]


class Ledger:
    """What the session measured and met, append-only: nothing in it is changed or removed."""

    def __init__(self):
        self._records: List[CellRecord] = []
        self._checks: List[FloorCheck] = []
        self._findings: List[Finding] = []
        self._skips: List[str] = []
        self._events: List[Event] = []
        self._probes: List[Dict[str, Any]] = []
        #: merge_records of the records and checks so far (its values are immutable), made
        #: again after an add or a settle: the end of a session asks for it at every confirmation
        self._merged: Optional[Dict[str, CellRecord]] = None

    def add(self, record: CellRecord) -> None:
        self._records.append(record)
        self._merged = None

    def settle(self, check: FloorCheck) -> None:
        """What a test decided of one of its cells against the published tables."""
        self._checks.append(check)
        self._merged = None

    def show(self, finding: Finding) -> None:
        """A figure shown, not judged."""
        self._findings.append(finding)

    def skipped(self, reason: str) -> None:
        """Why a measuring test could not run here (no GPU, a build without a feature)."""
        self._skips.append(reason)

    def event(self, event: Event) -> None:
        self._events.append(event)

    def probed(self, probes: Sequence[Dict[str, Any]]) -> None:
        """Machine probes taken around a process (``Scheduler``)."""
        self._probes.extend(p for p in probes if p)

    @property
    def records(self) -> Tuple[CellRecord, ...]:
        return tuple(self._records)

    @property
    def findings(self) -> Tuple[Finding, ...]:
        return tuple(self._findings)

    @property
    def skips(self) -> Tuple[str, ...]:
        return tuple(self._skips)

    @property
    def probes(self) -> Tuple[Dict[str, Any], ...]:
        return tuple(self._probes)

    def events(self, kind: Optional[str] = None) -> Tuple[Event, ...]:
        return tuple(e for e in self._events if kind is None or e.kind == kind)

    def cells(self) -> Dict[str, CellRecord]:
        """Every cell measured so far, once (``merge_records``): a new dict on every call (of
        immutable records)."""
        if self._merged is None:
            self._merged = merge_records(self._records, self._checks)
        return dict(self._merged)

    def cell(self, key: str) -> Optional[CellRecord]:
        """One cell as ``cells()`` has it, merged from its own records alone (confirming a
        suspect asks for one cell after every record it adds)."""
        if self._merged is not None:
            return self._merged.get(key)
        recs = [r for r in self._records if r.key == key]
        return merge_records(recs, self._checks).get(key) if recs else None

    def measured_cells(self) -> Dict[str, CellRecord]:
        """The cells with at least one process that measured: what the end of a session judges."""
        return {k: r for k, r in self.cells().items() if r.cell.ok_runs}
