"""The session's plan, without pytest: the order a deadline cuts measuring tests in, and
what the selection will cost (the estimate said before anything is measured). The plugin
hands it plain facts about each collected test (``Planned``) and keeps the hooks.
"""

from __future__ import annotations

import dataclasses
from typing import List, Optional, Sequence, Tuple

from pytest_mxperf.judge import thresholds
from pytest_mxperf.model import stats

#: ``mxperf_priority(n)``: tests of lower n run first under --perf-deadline (unmarked: this)
DEFAULT_PRIORITY = 100
#: markers of cells that resident workers measure (duets in A/B mode: the throughput worker,
#: kvstore push+pull under multi_device, the input pipeline), and of those whose worker kind
#: cannot be resident (process pairs: a process is a whole ps-lite cluster launch), for the
#: plan's estimate. Time to accuracy (also process pairs) has no marker of its own: its tests
#: (``training``) are estimated as duets.
DUET_MARKERS = ("scoring", "training", "latency", "multi_device", "io")
PROCESS_PAIR_MARKERS = ("distributed",)


@dataclasses.dataclass(frozen=True)
class Planned:
    """What the plan needs of one collected test."""

    measuring: bool                    # it uses the ``mxperf`` fixture
    priority: Optional[int] = None     # its ``mxperf_priority`` mark, if any
    group: Tuple[str, str] = ("", "")  # (test function, model): breadth first within a priority
    markers: frozenset = frozenset()   # the names of its markers
    #: a grid test's cell (model, batch size, device) and its function: the cells a worker
    #: process measures together (``Measurer._grid_cells``)
    cell: Optional[Tuple[str, int, str]] = None
    function: str = ""


def by_priority(tests: Sequence[Planned]) -> List[int]:
    """The order (indices into ``tests``) a deadline should cut measuring tests in: by
    priority (lower first), then breadth first (the first cell of every test function and
    model before the second of any), then collection order; other tests keep their place
    at the front."""
    seen: dict = {}

    def key(i: int):
        t = tests[i]
        if not t.measuring:
            return (-1, 0, i)
        prio = DEFAULT_PRIORITY if t.priority is None else t.priority
        seen[t.group] = seen.get(t.group, -1) + 1
        return (prio, seen[t.group], i)
    ranked = [(key(i), i) for i in range(len(tests))]
    return [i for _, i in sorted(ranked)]


def duet_tests(tests: Sequence[Planned]) -> int:
    """Measuring tests whose cells run as duets in A/B mode."""
    return sum(1 for t in tests if t.measuring and t.markers & set(DUET_MARKERS)
               and not t.markers & set(PROCESS_PAIR_MARKERS))


def ab_pairs(measuring_tests: int) -> int:
    """Process pairs a cell gets in A/B mode: one cell among all of the session's can pass
    BH at its family's share of FDR_Q (outcome/ab_judging.family_q: q_family / n_family =
    FDR_Q / all cells)."""
    return stats.pairs_needed(measuring_tests, thresholds.FDR_Q)


#: What the estimate said before a session takes, in seconds (measured on 2-vCPU AMD EPYC
#: machines, mxnet 1.9.1, default options, 2026-11-25: ``pytest perf_tests -m cpu
#: --durations=0`` at 09ee631 and 47b41d3, the time of each test over its processes). A
#: worker process of several cells: its start, ``import mxnet`` and the probe around it,
#: then each cell's bind, first batch, warm-up (1 s) and timed part (1.5 s): 34 scoring cells
#: in 2 processes took 210 s, 5 cells 30 s.
SHARED_PROCESS_S = 2.5
SHARED_CELL_S = 2.6
#: a fresh worker process of a test that has processes of its own, by its marker (the first
#: that applies): a ps-lite cluster launch 8.0 s, a time-to-accuracy run (``training``
#: without a grid) 7.4 s, the input pipeline 3.6 s, a multi-device test 3.5 s (weak scaling
#: 6-9 s, a data-parallel check 0.7 s); other 6.0 s
FRESH_PROCESS_S = (("distributed", 8.0), ("io", 3.6), ("multi_device", 3.5), ("training", 7.4))
FRESH_OTHER_S = 6.0
#: the session's own start and end (the MXNet probe, judging, reports)
SESSION_S = 5.0
#: markers of tests whose processes are their own, as the estimate names them
FRESH_NAMES = {"distributed": "distributed launches", "io": "input pipeline", "multi_device": "multi-device",
               "training": "time to accuracy", "": "other"}


@dataclasses.dataclass(frozen=True)
class Estimate:
    """What the session will take, said before it starts (baseline mode)."""

    seconds: float
    shared_cells: int       # cells measured in worker processes of several cells
    shared_seconds: float
    fresh_tests: int        # tests whose processes are their own
    fresh_seconds: float
    fresh_kinds: Tuple[str, ...]  # what they are (distributed launches, input pipeline, ...)


def estimate(tests: Sequence[Planned], processes: int, can_share: bool = True) -> Estimate:
    """The session's duration from its measuring tests: grid tests of one function on CPU
    share ``processes`` worker processes (when ``can_share``: not A/B, no deadline), every
    other test has ``processes`` fresh processes of its own. Pure."""
    groups: dict = {}
    fresh: List[Planned] = []
    for t in tests:
        if not t.measuring:
            continue
        if can_share and t.cell is not None and t.cell[2] == "cpu":
            groups.setdefault(t.function, []).append(t)
        else:
            fresh.append(t)
    shared_s, shared_n = 0.0, 0
    for members in groups.values():
        if len(members) < 2:
            fresh += members
            continue
        shared_n += len(members)
        shared_s += processes * (SHARED_PROCESS_S + SHARED_CELL_S * len(members))
    fresh_s, kinds = 0.0, []
    for t in fresh:
        kind = next((m for m, _ in FRESH_PROCESS_S if m in t.markers and not (m == "training" and t.cell)), "")
        fresh_s += processes * dict(FRESH_PROCESS_S).get(kind, FRESH_OTHER_S)
        kinds.append(FRESH_NAMES[kind])
    return Estimate(SESSION_S + shared_s + fresh_s, shared_n, shared_s, len(fresh), fresh_s,
                    tuple(dict.fromkeys(kinds)))
