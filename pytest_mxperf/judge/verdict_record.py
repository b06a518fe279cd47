"""The Verdict every rule returns (baseline mode, growth, A/B with process pairs or duet
pairs): its kind, the reason in one line, the change and its interval, the counts; and the
words a change is said in."""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Mapping, Optional, Tuple

from pytest_mxperf.judge.thresholds import FAILING
from pytest_mxperf.model.measurement import Metric


@dataclasses.dataclass(frozen=True)
class Verdict:
    kind: str
    reason: str
    metric: str = "throughput"
    unit: str = "img/s"
    change: Optional[float] = None            # current / baseline - 1 (in the metric's unit)
    threshold: Optional[float] = None         # fraction
    p_value: Optional[float] = None           # raw one-sided p in the direction of the change
    q_value: Optional[float] = None           # BH-adjusted p
    n_current: int = 0
    n_baseline: int = 0
    current_median: Optional[float] = None
    baseline_median: Optional[float] = None
    noise_allowance: Optional[float] = None
    drift_allowance: Optional[float] = None
    interval: Optional[Tuple[float, float]] = None  # A/B: ratio interval candidate / reference
    resolution: Optional[Dict[str, Any]] = None  # baseline mode: the figure's Resolution.to_dict()
    busy: bool = False                        # a suspect / unresolved because the machine was slowed
    excluded: Tuple[int, int] = (0, 0)        # slowed processes left out (current, baseline)
    notes: List[str] = dataclasses.field(default_factory=list)
    env_diff: List[str] = dataclasses.field(default_factory=list)

    @property
    def change_pct(self) -> Optional[float]:
        return None if self.change is None else 100.0 * self.change

    @property
    def failed(self) -> bool:
        return self.kind in FAILING

    def to_dict(self) -> Dict[str, Any]:
        d = dataclasses.asdict(self)
        d["change_pct"] = self.change_pct
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Verdict":
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


def describe_change(change: float, metric: Metric) -> str:
    word = "worse" if metric.oriented(change) < 0 else "better"
    return f"{word} by {abs(100 * change):.1f}% ({metric.unit})"
