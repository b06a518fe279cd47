"""The failure policy at the end of a session, in one place: every ``--perf-fail-on`` rule
(model/options.py names them) applied to what a session measured and judged, as typed
``Failure`` values. The exit status follows from them (``model/outcome.exit_status``), never
from a line's text; the screen says them (``output/``), results.json carries them.

Pure: the session's context, its ledger's events and skips, its cells and their verdicts in,
failures out. Two rules also act while the session runs, where they are decided: a test whose
cell is below its floor fails (``Measurer.check_floor``), and GPU tests with no usable GPU
skip with one line (``machine/gpu_readiness.decide``, whose ``fails`` this reads back from the
NO_GPU event).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence, Tuple

from pytest_mxperf.measure.ledger import NO_GPU, NOT_REACHED, unmeasured
from pytest_mxperf.measure.session import SessionContext
from pytest_mxperf.model.measurement import METRICS
from pytest_mxperf.model.outcome import Failure
from pytest_mxperf.outcome.answer_check import WRONG

#: the verdict kinds that fail by the policy of the same name (baseline mode's undecided
#: slowdowns fail only when asked: below-resolution, unclear, unexplained, machine-differs)
VERDICT_RULES = (("regression", "regression"), ("unresolved", "unresolved"), (WRONG, "answers"),
                 ("below-resolution", "below-resolution"), ("unclear", "unclear"),
                 ("unexplained", "unexplained"), ("machine-differs", "machine-differs"),
                 ("system-differs", "system-differs"))


#: kinds that fail only where the figure is worse: a system that made every setup faster is
#: news, not a failure
SLOWDOWNS_ONLY = ("machine-differs", "system-differs")


def _slower(v: Any) -> bool:
    m = METRICS.get(v.metric)
    return m is not None and v.change is not None and m.oriented(v.change) < 0


def failures(context: SessionContext, events: Sequence[Any], skips: Sequence[str],
             cells: Mapping[str, Any], verdicts: Mapping[str, Any]) -> Tuple[Failure, ...]:
    """Every failure of the session by its policy: ``events`` and ``skips`` the ledger's,
    ``cells`` every cell as judged, ``verdicts`` by figure key."""
    o = context.options
    fail_on = o.fail_on
    out = []
    not_reached = [e.subject for e in events if e.kind == NOT_REACHED]
    if not_reached and "not-reached" in fail_on:
        out.append(Failure("not-reached", len(not_reached), tuple(not_reached)))
    no_gpu = [e for e in events if e.kind == NO_GPU]
    if any(e.fails for e in no_gpu):
        out.append(Failure("no-gpu", 1, (), no_gpu[0].text))
    if unmeasured(cells, skips, events) is not None and "none-measured" in fail_on:
        out.append(Failure("none-measured", 0))
    measured = [k for k, r in cells.items() if r.cell.ok_runs]
    if (measured and not context.comparison.ab and context.baseline is None and not o.update_baselines
            and "no-baseline" in fail_on):
        out.append(Failure("no-baseline", len(measured)))
    below = [k for k, r in cells.items() if r.below_floor]
    if below and "floor" in fail_on:
        out.append(Failure("floor", len(below), tuple(below)))
    for kind, rule in VERDICT_RULES:
        keys = [k for k, v in verdicts.items() if v.kind == kind and (kind not in SLOWDOWNS_ONLY or _slower(v))]
        if keys and rule in fail_on:
            busy = sum(bool(verdicts[k].busy) for k in keys)
            out.append(Failure(rule, len(keys), tuple(keys), busy=busy))
    return tuple(out)
