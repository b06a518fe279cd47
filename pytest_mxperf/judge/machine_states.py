"""Which state was the machine in around each worker process? Labels from the probes and
the load that ``machine/state.py`` measured (see there for how and why).

``label`` turns these into one of four states, against the machine's quiet speed
(``reference_from`` the probes of the session and the baseline):

* "slowed": another process on this machine took CPU time while the worker ran, or the
  hypervisor stole it. Measured *during* the worker's run; the verdict leaves the process
  out (a neighbour's slowdown is no evidence about MXNet);
* "slow-spell": the probes before and after ran slow, with no process of ours to blame: the
  shared machine itself was in a slow spell. Kept in the statistics, because on the VMs
  here a spell often ends or starts *inside* a worker's run: in one A/B session (1.8.0.post0
  vs 1.9.1, 16 pairs of AlexNet b8) processes between two GEMM probes of 102-109 GFLOP/s
  ran at 86-157 img/s, as fast as the quiet ones (143-165), while quiet-labelled ones ran
  at 95. Leaving such processes out threw away 11 of 16 pairs there and decided nothing.
  Their use is narrower: a slowdown whose current processes ran mostly in a slow spell, when
  the baseline's did not, is not called a regression (``verdict``); in A/B mode both sides
  of a pair share the machine's time, so a spell needs no rule there;
* "quiet", or "unknown": no probe or no reference, or a probe that ran on another setup than
  the reference's (``Setup``: the CPUs it could use, capped by a cgroup quota, and the BLAS
  variables it kept; ``setup_change`` names it). A probe measures the machine's CPUs
  whatever ``taskset`` or the threading variables did to the session (``machine/state.py``),
  but a cgroup quota cannot be escaped: on 2 CPUs, a session under a 1-CPU quota probes at
  about half the machine's speed, and holding that to the machine's quiet speed filed a
  setup change as a slow spell (and excused its slowdown: ``verdict``). Such a process is
  neither a spell nor quiet, so its slowdown is judged as a plain one. Probes recorded
  before the setup was (old baselines) are compared with every probe, as then.

The probe is never used to divide or correct a throughput figure.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from pytest_mxperf.machine.state import FIGURES
from pytest_mxperf.model.stats import quantile

#: a probe figure (the lower of before / after) below this fraction of the machine's quiet
#: reference means a slow spell (the recorded slow regime is ~0.5 of the fast one)
SLOWED_RATIO = 0.80
#: the labels
QUIET, SLOWED, SPELL, UNKNOWN = "quiet", "slowed", "slow-spell", "unknown"
#: other processes keeping more than this many CPUs busy on average while the worker ran
#: slow it (on 2 vCPUs, half a CPU taken is a quarter of the machine)
OTHER_LOAD_CPUS = 0.5
#: more steal than this fraction of the CPU time while the worker ran: the hypervisor took
#: the CPUs
STEAL_FRAC = 0.05
#: the quiet reference is this quantile of the probes (see ``reference_from``)
REFERENCE_QUANTILE = 0.75


@dataclasses.dataclass(frozen=True)
class Setup:
    """What a probe ran on, as far as the session's setup moves its figures (its ``setup``
    record, ``machine_state.probe_setup``): the CPUs it could use (those it ran on, capped by
    the cgroup quota) and the BLAS variables it kept. Two probes are comparable when these
    are equal; ``quota`` (the quota set ``cpus``) only words the difference."""

    cpus: float
    env: Tuple[Tuple[str, str], ...] = ()
    quota: bool = dataclasses.field(default=False, compare=False)

    def __str__(self) -> str:
        return (f"{self.cpus:g} CPU{'' if self.cpus == 1 else 's'}" + (" (cgroup quota)" if self.quota else "")
                + "".join(f", {k}={v}" for k, v in self.env))


def setup_of(probe: Optional[Mapping[str, Any]]) -> Optional[Setup]:
    """The ``Setup`` a probe recorded, or None for one recorded without it (before the probe
    recorded its setup: compared with every probe, as then)."""
    rec = (probe or {}).get("setup")
    # a dict first: the probes come from JSON (a replayed study asks millions of times, and
    # isinstance against an abstract Mapping is the slow check)
    cpus = (_number(rec.get("cpus")) if rec is not None and (type(rec) is dict or isinstance(rec, Mapping))
            else None)
    if not cpus or cpus <= 0:
        return None
    quota = _number(rec.get("quota_cpus"))
    env = rec.get("env")
    env = env if env is not None and (type(env) is dict or isinstance(env, Mapping)) else {}
    limited = quota is not None and 0 < quota < cpus
    return Setup(round(quota if limited else cpus, 2), tuple(sorted((str(k), str(v)) for k, v in env.items())),
                 limited)


@dataclasses.dataclass
class MachineState:
    """The machine's state around one worker process, and the evidence for it."""

    state: str  # "quiet" | "slowed" | "slow-spell" | "unknown"
    reason: str = ""  # one line: the figures that made it slowed / unknown
    probe_before: Optional[Mapping[str, Any]] = None
    probe_after: Optional[Mapping[str, Any]] = None
    load: Optional[Mapping[str, Any]] = None


def _number(v: Any) -> Optional[float]:
    t = type(v)
    if t is float or t is int:  # the usual JSON number, without the isinstance checks
        return float(v) if v == v else None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v else None


def reference_from(probes: Sequence[Optional[Mapping[str, Any]]]) -> Optional[Dict[str, Any]]:
    """The machine's quiet speed from many probes: the REFERENCE_QUANTILE (75th percentile)
    of each figure; None when there are no probes. Over the probes of one ``Setup`` (the one
    most probes recorded; on a tie, the one with more CPUs), kept under "setup", and those
    recorded without one: a probe under a cgroup quota or other BLAS variables measured
    another allotment of the machine, not the machine's speed.

    Not the median: on the recorded 2-vCPU EPYC VM a third of the processes ran in the slow
    regime (AlexNet A/A pairs: 8 of 24 at ~95 img/s against ~155; ResNet-50: 4 of 12 at 24
    against ~36), and the GEMM probe moved with them (100 against 215 GFLOP/s). The 75th
    percentile stays inside the fast regime while up to ~70% of the probes are slow, where
    the median already falls between the regimes at 50%. Not the maximum: one lucky probe
    (turbo, an idle neighbour) would set a bar no ordinary quiet probe reaches."""
    setups = list(map(setup_of, probes))
    counts = collections.Counter(s for s in setups if s)
    setup = max(counts, key=lambda s: (counts[s], s.cpus)) if counts else None
    probes = [p for p, s in zip(probes, setups) if s in (None, setup)]
    out: Dict[str, Any] = {}
    for key, _, _ in FIGURES:
        vals = [v for v in (_number((p or {}).get(key)) for p in probes) if v and v > 0]
        if vals:
            out[key] = quantile(vals, REFERENCE_QUANTILE)
    if out and setup:
        out["setup"] = setup
    return out or None


def setup_change(probes: Sequence[Mapping[str, Any]], reference: Optional[Mapping[str, Any]]) -> Optional[str]:
    """Why ``probes`` cannot be held to ``reference``: one ran on another ``Setup`` than the
    reference's (a cgroup quota, a kept BLAS variable), which is a change of the session's
    setup, not of the machine's speed; None when they can (or either did not record it)."""
    ref = (reference or {}).get("setup")
    if not isinstance(ref, Setup):
        return None
    for p in probes:
        s = setup_of(p)
        if s and s != ref:
            return f"the probe ran on {s}, the reference on {ref}: a setup change, not a slow spell"
    return None


def label(probe_before: Optional[Mapping[str, Any]], probe_after: Optional[Mapping[str, Any]],
          load: Optional[Mapping[str, Any]], reference: Optional[Mapping[str, Any]]) -> MachineState:
    """Quiet, slowed, slow-spell or unknown for one process (see the module doc).

    Slowed when other processes kept more than OTHER_LOAD_CPUS busy or steal exceeded
    STEAL_FRAC while the worker ran; a slow spell when, short of that, the lower of the
    probes before and after is under SLOWED_RATIO of the reference (GEMM or memory); the
    reason lists every such figure. Unknown when a probe ran on another setup than the
    reference's (``setup_change``, the reason names it: never a slow spell), or when there
    is no probe (or no reference), and the load does not say slowed; quiet otherwise."""
    reasons: List[str] = []
    spell: List[str] = []
    probes = [p for p in (probe_before, probe_after) if p]
    changed = setup_change(probes, reference)
    for key, name, unit in FIGURES if not changed else ():
        vals = [v for v in (_number(p.get(key)) for p in probes) if v is not None]
        ref = _number((reference or {}).get(key))
        if vals and ref and min(vals) < SLOWED_RATIO * ref:
            spell.append(f"{name} {min(vals):.0f} {unit} < {100 * SLOWED_RATIO:.0f}% of the machine's {ref:.0f}")
    other = _number((load or {}).get("other_cpus"))
    if other is not None and other > OTHER_LOAD_CPUS:
        reasons.append(f"other processes kept {other:.1f} CPUs busy (> {OTHER_LOAD_CPUS:g})")
    steal = _number((load or {}).get("steal_frac"))
    if steal is not None and steal > STEAL_FRAC:
        reasons.append(f"steal time {100 * steal:.0f}% (> {100 * STEAL_FRAC:.0f}%)")

    def state(s: str, reason: str) -> MachineState:
        return MachineState(s, reason, probe_before, probe_after, load)

    if reasons:
        return state(SLOWED, "; ".join(reasons + spell))
    if changed:
        return state(UNKNOWN, changed)
    if spell:
        return state(SPELL, "; ".join(spell))
    if not probes:
        return state(UNKNOWN, "no machine probe")
    if not reference:
        return state(UNKNOWN, "no quiet reference for the machine probe")
    return state("quiet", "")


def spell_depth(runs, reference: Optional[Mapping[str, Any]]) -> Optional[float]:
    """How far a slow spell slowed the machine at its worst among ``runs``: the lowest
    ratio of a probe figure (the lower of before / after) to the quiet reference, over the
    processes labelled "slow-spell"; None when none was or nothing can be compared.

    On the recorded VM the GEMM probe moved further than MXNet with the regimes (x0.47
    against ResNet-50's x0.65), so a slowdown deeper than this ratio is more than the
    spell can explain (``verdict``: such a slowdown is judged, not excused)."""
    depth: Optional[float] = None
    for r in runs:
        st = r.machine_state
        if st.get("state") != SPELL:
            continue
        for key, _, _ in FIGURES:
            ref = _number((reference or {}).get(key))
            vals = [v for v in (_number((p or {}).get(key)) for p in (st.get("probe_before"), st.get("probe_after")))
                    if v is not None]
            if ref and vals:
                ratio = min(vals) / ref
                depth = ratio if depth is None else min(depth, ratio)
    return depth


def states(runs) -> list:
    """The machine-state labels of a list of RunResults (None where not labelled)."""
    return [r.state for r in runs]


# ----------------------------------------------------------------------------- the machine against the baseline's

#: the machine explains a change that both setups of a duet share when one of its probe
#: readings moved in the same direction by at least this share of the figure's change (in
#: logs): a host 20% slower in GEMM explains a cell 20-40% slower, one 2% slower does not.
#: Half, not all: a workload is a mix of compute and memory, each reading one of them
MACHINE_SHARE = 0.5
#: how sure each side of the call must be, one-sided (the normal quantile over the readings'
#: standard error): "the machine moved" needs the move significant; "the system" needs every
#: reading's move bounded below ``MACHINE_SHARE`` of the change. Between the two, the probes
#: cannot tell: on a shared 2-vCPU Xeon a GEMM probe read 25-63 GFLOP/s between the processes
#: of one cell, and a 20% change of a few readings' median was that noise as often as not
#: (docs/baselines.md, "When both setups agree")
PROBE_Z = 1.645

#: what ``ProbeShift.explains`` finds: the machine, the system, or the machine moved against the figure
MACHINE, SYSTEM, AGAINST = "machine", "system", "against"


@dataclasses.dataclass(frozen=True)
class ProbeShift:
    """How this session's machine probes read against the baseline's recorded ones, over the
    probes of one ``Setup`` on both sides (``setup``: None when neither recorded it): per probe
    figure (``FIGURES``), (name, this session's median, the baseline's median, their ratio, the
    mean of the log readings now less then, its standard error)."""

    readings: Tuple[Tuple[str, float, float, float, float, float], ...]
    setup: Optional[Setup] = None

    def explains(self, oriented_change: float) -> Optional[str]:
        """What a figure's change (oriented: negative is worse) is, by the probes: ``MACHINE``
        when one reading moved the same way by at least ``MACHINE_SHARE`` of it (in logs) and
        significantly (``PROBE_Z``); ``SYSTEM`` when every reading's move is bounded below that
        share (its upper bound, ``PROBE_Z``) and none moved against the figure by that share,
        significantly (the machine changed too, the other way: not the system alone, ``AGAINST``);
        None when the probes are too noisy to tell."""
        import math
        if oriented_change <= -1 or oriented_change == 0:
            return None
        r = math.log1p(oriented_change)
        sign, need = (1.0 if r > 0 else -1.0), MACHINE_SHARE * abs(r)
        moved = [(sign * d, se) for *_, d, se in self.readings]
        if any(m >= need and m - PROBE_Z * se > 0 for m, se in moved):
            return MACHINE
        if any(-m >= need and -m - PROBE_Z * se > 0 for m, se in moved):
            return AGAINST
        if all(m + PROBE_Z * se < need for m, se in moved):
            return SYSTEM
        return None

    def said(self) -> str:
        """"GEMM probe 160 GFLOP/s against the baseline's 200 (x0.80), memory probe ..."."""
        units = {key: (name, unit) for key, name, unit in FIGURES}
        return ", ".join(f"{units[k][0]} {cur:.3g} {units[k][1]} against the baseline's {base:.3g} (x{ratio:.2f})"
                         for k, cur, base, ratio, _, _ in self.readings)


def _readings(probes: Sequence[Mapping[str, Any]], setup: Optional[Setup]) -> Dict[str, List[float]]:
    out: Dict[str, List[float]] = {}
    for key, _, _ in FIGURES:
        vals = [v for v in (_number(p.get(key)) for p in probes if setup_of(p) in (None, setup)) if v and v > 0]
        if vals:
            out[key] = vals
    return out


def probe_shift(current: Sequence[Optional[Mapping[str, Any]]], baseline: Sequence[Optional[Mapping[str, Any]]]
                ) -> Optional[ProbeShift]:
    """This session's probes (``current``) against the ones the baseline recorded: each figure's
    medians and the mean of its log readings now less then with its (Welch) standard error, over
    the probes of the ``Setup`` most of this session's ran on, on both sides (another setup
    measured another allotment of the machine; a probe recorded before probes recorded their
    setup is taken on either side, as ``reference_from`` does). None when either side has no
    probe of that setup with a figure the other has too. Pure."""
    import math
    import statistics
    current = [p for p in current if p]
    baseline = [p for p in baseline if p]
    if not current or not baseline:
        return None
    counts = collections.Counter(setup_of(p) for p in current)
    setup = max(counts, key=lambda s: (counts[s], s.cpus if s else 0.0))
    now, then = _readings(current, setup), _readings(baseline, setup)

    def var(xs):
        return statistics.variance(xs) if len(xs) > 1 else 0.0
    out = []
    for k, _, _ in FIGURES:
        if k in now and k in then:
            a, b = [math.log(v) for v in now[k]], [math.log(v) for v in then[k]]
            m_now, m_then = statistics.median(now[k]), statistics.median(then[k])
            se = math.sqrt(var(a) / len(a) + var(b) / len(b))
            out.append((k, m_now, m_then, m_now / m_then, statistics.fmean(a) - statistics.fmean(b), se))
    return ProbeShift(tuple(out), setup) if out else None
