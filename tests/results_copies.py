"""Copies of a real results.json whose figures are scaled by a known factor, so that a
compare step of an end-to-end test has an outcome fixed by the rules, whatever this machine
measured (tests/test_wheel.py, tests/test_usermodel.py).

A session re-run moments after its baseline was recorded is *not* such a step: on a shared
machine an unchanged re-run can be judged a regression (seen in test_usermodel: a small MLP's
re-run at x0.10 of its recording, 10 processes against 5, p=0.0003). Comparing a recording
with itself, or with a copy of itself slowed down, through the real compare code is:

* **itself** (x1): every judged figure is "unchanged" and nothing fails. Rule ``processes``:
  the change is exactly 0, neither worse than ``-min_effect`` nor better than the threshold
  (>= ``min_effect``); rule ``growth``: no process is beyond the other side's worst. (The
  only other outcome the rules allow, "not-gated", needs fewer than
  ``MIN_BASELINE_PROCESSES`` processes: ``check_comparable`` refuses such a recording.)
* **slowed by** ``slowdown_beyond_spread(doc)`` (every process of every cell took k times
  as long per batch; memory untouched): every judged ``processes`` figure is a
  "regression", memory "unchanged". With R the widest log range (ln max/min) of any such
  figure over a cell's n >= 5 processes and ln k = 10 R + ln 2 (k >= 2):

  - every slowed process is worse than every recorded one (ln k > R): the one-sided
    Mann-Whitney p is its least, 1/C(2n, n) (0.004 for n = 5), and so is its BH q;
  - the provisional resolution (one recorded session: the SD of the log per-process figures,
    sd <= R/sqrt(2) for any n >= 2, times sqrt(2)) is at most t(n-1, 0.975) x R <= 2.8 R
    in logs, below ln k: the change is beyond the threshold; the drift test's t is below
    -(ln k - R/2) / R < -9.5, p < 0.0004 (df 4), far below DRIFT_SHARE x FDR_Q;
  - the fast end moved by x1/k like every process; both sides carry the same machine-state
    labels, so no slow spell or busy machine can excuse it (``check_comparable`` also
    refuses processes labelled "slowed", which both sides would leave out).
"""

from __future__ import annotations

import copy
import math
from typing import Any, Dict, List

from pytest_mxperf.judge import thresholds
from pytest_mxperf.model.measurement import METRICS, CellMeasurement, metric_key

#: rules whose figures are time-based and scale with the time per batch
_TIMED_RULES = ("processes", "derived")


def _judged_process_figures(rec: Dict[str, Any]) -> Dict[str, List[float]]:
    """metric name -> per-process values, for the record's judged figures of rule ``processes``."""
    cell = CellMeasurement.from_dict(rec)
    return {m.name: cell.values(m.name) for m in cell.metrics() if m.judged and m.rule == "processes"}


def check_comparable(doc: Dict[str, Any]) -> None:
    """The preconditions of the module doc: every cell measured, every judged ``processes``
    figure with at least ``MIN_BASELINE_PROCESSES`` processes, no process labelled slowed."""
    assert doc["records"], "no records"
    for rec in doc["records"]:
        figures = _judged_process_figures(rec)
        assert figures, (rec.get("key"), "no judged figure")
        for name, values in figures.items():
            assert len(values) >= thresholds.MIN_BASELINE_PROCESSES, (rec.get("key"), name, values)
        labels = [(r.get("meta") or {}).get("machine_state", {}).get("state") for r in rec.get("runs", [])]
        assert "slowed" not in labels, (rec.get("key"), labels)


def slowdown_beyond_spread(doc: Dict[str, Any]) -> float:
    """k with ln k = 10 R + ln 2, R the widest log range of a judged ``processes`` figure
    over one cell's processes (module doc): a slowdown the rules must call a regression."""
    check_comparable(doc)
    widest = max(math.log(max(v) / min(v)) for rec in doc["records"]
                 for v in _judged_process_figures(rec).values())
    return math.exp(10.0 * widest + math.log(2.0))


def slowed_copy(doc: Dict[str, Any], k: float) -> Dict[str, Any]:
    """A deep copy of the results document in which every process of every cell took ``k``
    times as long per batch: its batch times and time-based figures scaled (rates / k,
    times x k), memory and epochs as they were; each record's summary recomputed."""
    out = copy.deepcopy(doc)
    for rec in out["records"]:
        for run in rec.get("runs", []):
            run["round_seconds"] = [s * k for s in run.get("round_seconds", [])]
            figures = run.get("figures") or {}
            for name, v in list(figures.items()):
                m = METRICS.get(name)
                if m is not None and m.rule in _TIMED_RULES and isinstance(v, (int, float)):
                    figures[name] = v / k if m.higher_is_better else v * k
        summary = CellMeasurement.from_dict(rec).to_dict()
        for field in ("median", "process_medians", "figures", "spread"):
            rec[field] = summary[field]
    return out


def expected_kinds(doc: Dict[str, Any], slowed: bool) -> Dict[str, str]:
    """Figure id (the cell key, ``key#metric`` for the others) -> the kind the compare of
    ``doc`` with itself (``slowed`` False) or with ``slowed_copy`` must give."""
    out = {}
    for rec in doc["records"]:
        cell = CellMeasurement.from_dict(rec)
        for m in cell.metrics():
            if not m.judged:
                continue
            out[metric_key(rec["key"], m.name, cell.workload.mode)] = "regression" if slowed and m.rule == "processes" else "unchanged"
    return out
