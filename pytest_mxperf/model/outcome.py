"""The end of a session as one immutable value: what was judged, what it means, and what
was written, as data (``outcome/finish.end_session`` makes it; ``output/`` renders every line
of the screen, report.txt and summary.md from it; the exit status comes from its failures).

It holds no rendered text: a failure is a ``Failure`` (its kind, how many, of what), a
recording is a ``Recorded``, a new step in the history a ``HistoryStep``, a failing cell's
profile a ``Profiled``. Rewording any line leaves every exit status as it is.

The exit statuses (``exit_status``), documented in docs/how-it-measures.md and read by
``cli/find_release.py``:

| status | meaning |
|---|---|
| 0 | passed: nothing the failure policy fails on, every writer wrote |
| 1 | a judged failure (``--perf-fail-on``: a regression, unresolved, a floor, wrong answers, ...), or a test failed |
| 4 | usage: a bad option, baseline or selection, said in one line before anything is measured (pytest's own code) |
| 5 | no measuring test selected: measuring tests were collected and the selection (slow, -m, -k, shard) left none, said in one line; also when other tests ran and passed (pytest's own code for no tests) |
| 6 | passed as judged, but a writer or store failed (results files, baseline, history): the rest was written |

A judged failure (1) outranks a writer's (6); both are in results.json's ``failures``.
Pytest's own codes keep their meaning (2 interrupted, 3 internal error, 5 no tests collected).
A session that never collected a measuring test (a project's ordinary tests with the plugin
loaded) keeps pytest's status.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Mapping, Optional, Tuple

EXIT_PASSED, EXIT_FAILED, EXIT_USAGE, EXIT_NONE_SELECTED, EXIT_WRITER = 0, 1, 4, 5, 6
EXIT_STATUSES = {
    EXIT_PASSED: "passed",
    EXIT_FAILED: "a judged failure (the failure policy, --perf-fail-on) or a failed test",
    EXIT_USAGE: "usage error (an option, a baseline or a selection refused before measuring)",
    EXIT_NONE_SELECTED: "no measuring test selected (slow, -m, -k or shard left none of those collected)",
    EXIT_WRITER: "a writer or store failed (results files, baseline, history); the rest was written",
}

#: the kind of a failure that is not a verdict: a writer or store that could not write
WRITER = "writer"


@dataclasses.dataclass(frozen=True)
class Failure:
    """One reason the session fails: ``kind`` is a ``--perf-fail-on`` name (regression,
    unresolved, floor, answers, not-reached, none-measured, no-baseline, no-gpu,
    below-resolution, unclear) or WRITER; ``count`` how many (cells, tests); ``subjects``
    what (cell keys, test ids, the writer's name); ``detail`` a fact beside it (the writer's
    error); ``busy`` how many of the unresolved ran on a busy machine."""

    kind: str
    count: int = 1
    subjects: Tuple[str, ...] = ()
    detail: str = ""
    busy: int = 0

    @property
    def judged(self) -> bool:
        return self.kind != WRITER

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": self.kind, "count": self.count, "subjects": list(self.subjects), "detail": self.detail,
                "busy": self.busy}


def exit_status(failures: Tuple[Failure, ...]) -> int:
    """The session's exit status from its failures alone (the table above)."""
    if any(f.judged for f in failures):
        return EXIT_FAILED
    if failures:
        return EXIT_WRITER
    return EXIT_PASSED


@dataclasses.dataclass(frozen=True)
class Advice:
    """One piece of the environment advisor's advice (machine/advisor.py): its code, its text,
    the cells it concerns and how many of them fail."""

    code: str
    text: str
    cells: Tuple[str, ...]
    failing: int = 0


@dataclasses.dataclass(frozen=True)
class Profiled:
    """A cell profiled at the end of the session: ``failing`` why it fails ("" when it passes:
    --perf-profile or a recording), ``current`` the profile worker's result, ``against`` the
    baseline's or the reference's profile (``side`` which), ``missing`` why there is none;
    ``unprofiled`` why the cell could not be profiled."""

    key: str
    failing: str = ""
    current: Optional[Mapping[str, Any]] = None
    against: Optional[Mapping[str, Any]] = None
    side: str = ""
    missing: str = ""
    unprofiled: str = ""


@dataclasses.dataclass(frozen=True)
class Recorded:
    """The cells recorded into this machine's baseline (``--perf-update-baselines``)."""

    path: str
    cells: Tuple[str, ...]
    pool: str
    first: bool                                 # this machine had no baseline before
    slowed: int = 0                             # recorded processes that ran on a slowed machine
    processes: int = 0
    few: Tuple[str, ...] = ()                   # cells with too few processes to gate
    resolution: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # Baseline.resolution_summary
    requirement: Optional[str] = None
    install: Optional[Mapping[str, Any]] = None  # which build (distributions.install_identity), None unknown


@dataclasses.dataclass(frozen=True)
class HistoryStep:
    """A new step in a cell's history that this session makes sure (history/changepoints.py)."""

    key: str
    ratio: float
    before: float
    after: float
    session: str
    ago: int
    changed: Tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Written:
    """What the writers wrote: the report files, the baseline, the history store entry."""

    report_files: Tuple[str, ...] = ()
    recorded: Optional[Recorded] = None
    history: str = ""                            # where the session was kept ("" when not)
    steps: Tuple[HistoryStep, ...] = ()


@dataclasses.dataclass(frozen=True)
class SessionOutcome:
    """The end of a session. ``context``: the session's frozen context (options, machine,
    baseline, comparison, plan); ``cells``: every cell once, as judged; ``verdicts`` by figure
    key; ``confirmed``: cells measured again; ``events``, ``findings``, ``skips``: the
    ledger's, as they ended; ``sides``: both installs of an A/B session; ``test_seconds``,
    ``wall_seconds``: what its tests and the session took."""

    context: Any
    cells: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    verdicts: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    failures: Tuple[Failure, ...] = ()
    confirmed: int = 0
    advice: Tuple[Advice, ...] = ()
    advice_notes: Mapping[str, Tuple[str, ...]] = dataclasses.field(default_factory=dict)
    profiles: Tuple[Profiled, ...] = ()
    events: Tuple[Any, ...] = ()
    findings: Tuple[Any, ...] = ()
    skips: Tuple[str, ...] = ()
    sides: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    written: Written = Written()
    #: what each measuring test took (node id -> seconds) and the session until it was judged:
    #: the history store keeps them for the next session's estimate on this machine
    test_seconds: Mapping[str, float] = dataclasses.field(default_factory=dict)
    wall_seconds: Optional[float] = None

    @property
    def exit_status(self) -> int:
        return exit_status(self.failures)

    @property
    def failed(self) -> bool:
        return self.exit_status == EXIT_FAILED

    def count(self, kind: str) -> int:
        return sum(getattr(v, "kind", None) == kind for v in self.verdicts.values())

    def failure(self, kind: str) -> Optional[Failure]:
        return next((f for f in self.failures if f.kind == kind), None)

    def with_written(self, written: Written, failures: Tuple[Failure, ...] = ()) -> "SessionOutcome":
        """This outcome with what the writers wrote and the failures of those that could not."""
        return dataclasses.replace(self, written=written, failures=self.failures + tuple(failures))
