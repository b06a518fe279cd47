"""A figure's resolution on this machine: the smallest change its baseline can tell from the
machine's own drift between sessions (see judge/verdict.py's module doc, 'resolution')."""

from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Any, Dict, Mapping, Optional, Sequence

from pytest_mxperf.judge.thresholds import RESOLUTION_LEVEL
from pytest_mxperf.model import stats


def _log_sd(values: Sequence[float]) -> Optional[float]:
    """Sample SD (n - 1) of ``values`` (already logs); None with fewer than 2. math.fsum
    keeps it independent of the order of the values."""
    if len(values) < 2:
        return None
    mean = math.fsum(values) / len(values)
    return math.sqrt(math.fsum((x - mean) ** 2 for x in values) / (len(values) - 1))


#: a resolution beyond this fraction (a figure that would have to grow more than elevenfold)
#: is said as "more than" it: the baseline's spread resolves no change of the figure, and
#: digits beyond that (1237237522.5% for a one-session time to accuracy) say nothing more
RESOLUTION_SHOWN_UP_TO = 10.0


def percent_text(fraction: float) -> str:
    """A resolution (a fraction) as the screen says it: "30.5%", or "more than 1000%"."""
    if fraction > RESOLUTION_SHOWN_UP_TO:
        return f"more than {100 * RESOLUTION_SHOWN_UP_TO:.0f}%"
    return f"{100 * fraction:.1f}%"


@dataclasses.dataclass(frozen=True)
class Resolution:
    """The smallest change of one figure this machine can resolve against its baseline.

    ``scale`` is the standard deviation (natural log of the figure) of a new session's median
    about the baseline's when nothing changed: ``session_sd x sqrt(1 + 1/sessions)``, where
    ``session_sd`` is the sample SD of the recorded sessions' log medians (``basis``
    "sessions", ``df`` = sessions - 1) or, with one session, the sample SD of the log
    per-process figures standing in for it (``basis`` "processes", provisional, ``df`` =
    processes - 1). ``process_sd`` is the pooled within-session SD of the log per-process
    figures; ``processes`` the fewest processes of a recorded session (a current session of
    fewer processes has a noisier median: ``scale_for``). ``center`` is the log of the
    baseline's figure the drift test measures from: the mean of the sessions' log medians
    (their median would be a noisier centre than the t distribution allows for). The
    resolution itself is the change the drift test (``p_worse``) calls at ``level`` for one
    figure on its own: ``t(df, 1 - level) x scale`` in logs, as a fraction by ``fraction``."""

    scale: float
    df: int
    sessions: int
    processes: int
    process_sd: Optional[float]
    basis: str
    level: float = RESOLUTION_LEVEL
    center: Optional[float] = None

    @property
    def provisional(self) -> bool:
        return self.basis != "sessions"

    @property
    def log_value(self) -> float:
        from scipy.special import stdtrit  # the Student t quantile
        return float(stdtrit(self.df, 1.0 - self.level)) * self.scale

    def fraction(self, higher_is_better: bool = True) -> float:
        """The resolution as a fraction of the baseline in the worse direction: a drop of
        this much (higher is better) or a growth of this much (lower is better)."""
        lv = self.log_value
        return -math.expm1(-lv) if higher_is_better else math.expm1(lv)

    def scale_for(self, n_current: int) -> float:
        extra = 0.0
        if self.process_sd and n_current and self.processes and n_current < self.processes:
            extra = (stats.MEDIAN_SE * self.process_sd) ** 2 * (1.0 / n_current - 1.0 / self.processes)
        return math.sqrt(self.scale ** 2 + extra)

    def p_worse(self, log_change_worse: float, n_current: int) -> float:
        """One-sided p that drift alone moves a session's median of ``n_current`` processes
        this far: ``log_change_worse`` is log(current / baseline), signed so that negative
        is worse. Student t with ``df`` degrees of freedom."""
        s = self.scale_for(n_current)
        if not s > 0:
            return 0.0 if log_change_worse < 0 else (0.5 if log_change_worse == 0 else 1.0)
        from scipy.special import stdtr  # the Student t CDF
        return float(stdtr(self.df, log_change_worse / s))

    def describe(self, higher_is_better: bool = True) -> str:
        pct = percent_text(self.fraction(higher_is_better))
        if self.provisional:
            return (f"{pct}, provisional: from the spread of {self.processes} processes of one recorded session; "
                    "the drift between sessions is unknown")
        return f"{pct} from the spread of {self.sessions} recorded sessions"

    def to_dict(self, higher_is_better: bool = True) -> Dict[str, Any]:
        return {"value": round(self.fraction(higher_is_better), 6), "basis": self.basis,
                "provisional": self.provisional, "sessions": self.sessions, "processes": self.processes,
                "df": self.df, "scale": self.scale, "level": self.level, "process_sd": self.process_sd,
                "center": self.center}

    @classmethod
    def from_dict(cls, d: Any) -> Optional["Resolution"]:
        """The resolution a baseline file stored, or None when it is missing or malformed."""
        if not isinstance(d, Mapping):
            return None

        def num(k, lo=0.0):
            v = d.get(k)
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= lo
            return float(v) if ok else None

        scale, df, k, n = num("scale"), num("df", 1), num("sessions", 1), num("processes", 1)
        level = num("level") or RESOLUTION_LEVEL
        psd = num("process_sd")
        center = num("center", -math.inf)
        basis = d.get("basis")
        if None in (scale, df, k, n) or basis not in ("sessions", "processes") or not 0 < level < 0.5:
            return None
        return cls(scale, int(df), int(k), int(n), psd, basis, level, center)


def resolution_of(sessions: Sequence[Sequence[float]], level: float = RESOLUTION_LEVEL) -> Optional[Resolution]:
    """The resolution from the per-process figures of each recorded session (the quiet
    ones, in the figure's unit; sessions oldest first); None without two processes."""
    groups = [[math.log(v) for v in stats.finite_positive(s)] for s in sessions]
    groups = [g for g in groups if g]
    if not groups:
        return None
    within_df = sum(len(g) - 1 for g in groups)
    ss = math.fsum((x - math.fsum(g) / len(g)) ** 2 for g in groups for x in g)
    process_sd = math.sqrt(ss / within_df) if within_df > 0 else None
    n_min = min(len(g) for g in groups)
    return _resolution([statistics.median(g) for g in groups], process_sd, n_min, within_df, level)


def _resolution(log_medians: Sequence[float], process_sd: Optional[float], n_min: int, within_df: int,
                level: float = RESOLUTION_LEVEL) -> Optional[Resolution]:
    k = len(log_medians)
    center = math.fsum(log_medians) / k if k else None
    if k >= 2:
        sd = _log_sd(log_medians) or 0.0
        # a session's median cannot be steadier than its processes let it be
        floor = stats.MEDIAN_SE * process_sd / math.sqrt(max(1, n_min)) if process_sd else 0.0
        return Resolution(max(sd, floor) * math.sqrt(1.0 + 1.0 / k), k - 1, k, n_min, process_sd, "sessions",
                          level, center)
    if process_sd is None or within_df < 1:
        return None
    return Resolution(process_sd * math.sqrt(2.0), within_df, 1, n_min, process_sd, "processes", level, center)


def resolution_for(c: Any, base: Sequence[float]) -> Optional[Resolution]:
    """The comparison's own resolution when the caller gave none: from ``session_medians``
    (two or more recorded sessions) and the baseline's process spread, else provisional
    from the baseline's processes as one session."""
    logs = [math.log(v) for v in base]
    medians = stats.finite_positive(c.session_medians)
    if len(medians) >= 2:
        return _resolution([math.log(v) for v in medians], _log_sd(logs), len(base), len(base) - 1)
    return resolution_of([base])
