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
