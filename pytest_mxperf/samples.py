"""Samples: what one worker process measured, and a cell made of several processes.

Rounds inside one process are not independent (they share the process's memory layout,
thread placement and neighbours), so the *process* is the unit of replication: a cell's
figure is the median of its per-process medians, and its spread is taken between
processes when there are at least two.
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any, Dict, List, Optional

from .workload import Workload

OK = "ok"
# Outcomes a measurement can have; everything but "ok" carries a one-line message.
STATUSES = ("ok", "error", "crash", "timeout", "oom", "unavailable")


def quantile(values: List[float], q: float) -> float:
    """Linear-interpolated quantile (numpy's default), without numpy."""
    xs = sorted(values)
    if not xs:
        raise ValueError("quantile of no values")
    pos = (len(xs) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclasses.dataclass
class RunResult:
    """One worker process: per-round timings plus what it actually ran with."""

    workload: Workload
    status: str
    message: str = ""
    batches_per_round: int = 0
    round_seconds: List[float] = dataclasses.field(default_factory=list)
    meta: Dict[str, Any] = dataclasses.field(default_factory=dict)
    stderr_tail: List[str] = dataclasses.field(default_factory=list)
    returncode: Optional[int] = None
    wall_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == OK and bool(self.round_seconds)

    @property
    def seconds_per_batch(self) -> List[float]:
        k = max(1, self.batches_per_round)
        return [s / k for s in self.round_seconds]

    @property
    def samples(self) -> List[float]:
        """Per-round throughput, images (samples) per second."""
        n = self.workload.total_batch
        return [n / s for s in self.seconds_per_batch if s > 0]

    @property
    def median(self) -> Optional[float]:
        """Throughput from the median time per batch."""
        if not self.ok:
            return None
        return self.workload.total_batch / statistics.median(self.seconds_per_batch)

    def to_dict(self) -> Dict[str, Any]:
        return {
            "workload": self.workload.to_dict(),
            "status": self.status,
            "message": self.message,
            "batches_per_round": self.batches_per_round,
            "round_seconds": list(self.round_seconds),
            "samples": self.samples,
            "median": self.median,
            "meta": self.meta,
            "stderr_tail": list(self.stderr_tail),
            "returncode": self.returncode,
            "wall_seconds": self.wall_seconds,
        }

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "RunResult":
        return cls(
            workload=Workload.from_dict(d["workload"]),
            status=d["status"],
            message=d.get("message", ""),
            batches_per_round=int(d.get("batches_per_round", 0)),
            round_seconds=[float(x) for x in d.get("round_seconds", [])],
            meta=dict(d.get("meta", {})),
            stderr_tail=list(d.get("stderr_tail", [])),
            returncode=d.get("returncode"),
            wall_seconds=float(d.get("wall_seconds", 0.0)),
        )


@dataclasses.dataclass
class CellMeasurement:
    """All worker processes of one cell in one session."""

    workload: Workload
    runs: List[RunResult]

    @property
    def ok_runs(self) -> List[RunResult]:
        return [r for r in self.runs if r.ok]

    @property
    def status(self) -> str:
        """ok if any process measured; otherwise the first failure's status."""
        if self.ok_runs:
            return OK
        return self.runs[0].status if self.runs else "error"

    @property
    def message(self) -> str:
        for r in self.runs:
            if not r.ok:
                return r.message
        return ""

    @property
    def process_medians(self) -> List[float]:
        return [r.median for r in self.ok_runs]

    @property
    def median(self) -> Optional[float]:
        meds = self.process_medians
        return statistics.median(meds) if meds else None

    @property
    def spread(self) -> Optional[Dict[str, Any]]:
        """Between-process IQR when there are >= 2 processes, else the rounds' IQR.

        Returned as {"basis": "processes"|"rounds", "q1", "q3", "rel"} where rel is
        (q3 - q1) / median, the figure shown as +-%.
        """
        if not self.ok_runs:
            return None
        if len(self.ok_runs) >= 2:
            basis, values = "processes", self.process_medians
        else:
            basis, values = "rounds", self.ok_runs[0].samples
        q1, q3 = quantile(values, 0.25), quantile(values, 0.75)
        med = statistics.median(values)
        return {"basis": basis, "n": len(values), "q1": q1, "q3": q3,
                "rel": (q3 - q1) / med if med else None}

    def to_dict(self) -> Dict[str, Any]:
        return {
            "key": self.workload.key(),
            "workload": self.workload.to_dict(),
            "status": self.status,
            "message": self.message,
            "median": self.median,
            "process_medians": self.process_medians,
            "spread": self.spread,
            "runs": [r.to_dict() for r in self.runs],
        }

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "CellMeasurement":
        return cls(workload=Workload.from_dict(d["workload"]),
                   runs=[RunResult.from_dict(r) for r in d.get("runs", [])])
