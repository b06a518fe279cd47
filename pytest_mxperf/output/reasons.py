"""The reasons the end of a session gives, worded: what a verdict, a cell or a profile says
when ``outcome/`` decides it (a figure not compared, a change both setups agree on, a slowdown
not passed, why every cell went to the duet, why a profile is missing). ``outcome/`` decides
the kind and passes the facts; the sentences are here, so rewording one changes no status.
Pure."""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

from pytest_mxperf.judge import machine_states

# ----------------------------------------------------------------------------- against the baseline

#: why a cell has no machine shift to weigh (``judging.machine_shifts``)
NO_PROBES_NOW = "this session ran no machine probe (--perf-no-probe)"
NO_PROBES_THEN = "the baseline records no machine probe readings (recorded before probes were kept, or without them)"
PROBES_ON_OTHER_SETUPS = "the session's probes and the baseline's ran on other setups"
NO_PROBES_OF_CELL = "no machine probe readings of this cell"
#: a figure no pair against the recorded setup gave, while its cell's other figures had pairs
NO_PAIR_GAVE_IT = "no pair against the recorded setup gave this figure"
#: why a slowdown the recorded setup should have settled was not (``judging.unsettled``)
CUT_BEFORE_ITS_DUET = "cut by --perf-deadline before its duet against the recorded setup"
SETUP_NOT_REBUILT = "the recorded setup could not be rebuilt to settle it"
NO_INSTALL_FITS = "no install fits the setup the baseline recorded, to settle it"


def processes_had(shared: bool) -> str:
    return "among other cells in worker processes" if shared else "in processes of its own"


def unlike_sharing(prefix: str, then_shared: bool, now_shared: bool) -> str:
    """A cell whose processes were had another way than its baseline's (``judging.unlike_sharing``)."""
    return (f"{prefix} {processes_had(then_shared)}, this session {processes_had(now_shared)} "
            "(a figure measured one way is not judged against one measured the other; record the "
            "baseline again with --perf-update-baselines)")


def trend(medians: Sequence[float], now: float) -> str:
    return "trend over recorded sessions: " + " ".join(f"{x:.4g}" for x in medians) + f" -> {now:.4g} now"


def method_unrecorded(method: str) -> str:
    return ("the baseline does not say which measuring method recorded it (recorded by a release of "
            f"pytest-mxperf before it did; now method {method})")


def method_other(recorded_method, recorded_version, method: str, version: str) -> str:
    return (f"the baseline was recorded by measuring method {recorded_method} (pytest-mxperf "
            f"{recorded_version}; now method {method}, {version})")


def not_compared(why: str, change_said: str, slower: bool) -> str:
    """A figure measured another way than its baseline's (``judging.not_compared``)."""
    return (f"{why}: not compared figure for figure (it read {change_said})"
            + ("; a slowdown beyond the minimum effect is not passed unless a duet against the recorded setup "
               "settles it" if slower else ""))


def against_setup(unrecorded_build: Optional[str], change: Optional[float],
                  interval: Optional[Tuple[float, float]]) -> str:
    """The head of a verdict judged by its pairs against the recorded setup."""
    said = "against the recorded setup"
    if unrecorded_build:
        said += f" ({unrecorded_build} from the package index: the baseline did not record its build)"
    if change is not None and interval is not None:
        said += f": x{1 + change:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]"
    return said


def against_baseline(kind: str, reason: str) -> str:
    return f"against the baseline: {kind}, {reason}"


def both_agree(said: str, change_said: str, threshold: Optional[float], method: Optional[str],
               shift_said: Optional[str], no_shift: str, explains: Optional[str], change: float) -> str:
    """A figure both setups of the duet read alike while the baseline saw a change beyond its
    resolution (``judging._both_agree``): what moved, from the evidence. ``explains``: what the
    machine's probes say of it (``ProbeShift.explains``), None without probes or with another
    measuring method."""
    head = (f"{said}: both setups agree, so the change against the baseline ({change_said}"
            + (f", beyond its resolution of {100 * threshold:.1f}%" if threshold is not None else "")
            + ") is neither the MXNet install's nor the recorded variables'")
    if method:
        probes = f"; the machine's probes: {shift_said}" if shift_said is not None else f"; {no_shift}"
        return f"{head}; {method}, so its figures are not compared figure for figure{probes}"
    if shift_said is None:
        return f"{head}; {no_shift}: nothing tells the machine from the system"
    evidence = f"({shift_said}; the figure x{1 + change:.2f})"
    if explains == machine_states.MACHINE:
        return f"{head}: the machine differs {evidence}"
    if explains == machine_states.SYSTEM:
        return (f"{head}: the system differs (the kernel, libraries, preloads: what both sides share), not the "
                f"machine, whose probes did not move with it {evidence}")
    why = ("the machine's probes moved against the figure, so the machine changed too"
           if explains == machine_states.AGAINST else
           "the machine's probes spread too much to tell the machine from the system")
    return f"{head}; {why} {evidence}: nothing tells the machine from the system"


def not_passed(reason: str, why: str, effect: float) -> str:
    """A slowdown the recorded setup should have settled and did not (``judging.unsettled``)."""
    return f"{reason}; {why}: a slowdown beyond the minimum effect ({100 * effect:.0f}%) is not passed"


def setup_differs(changes: Sequence[str]) -> str:
    """Why every cell goes to the duet: the session's setup is not the recorded one."""
    return "the session's setup is not the recorded one (" + "; ".join(changes[:4]) + (
        f"; {len(changes) - 4} more" if len(changes) > 4 else "") + ")"


def measured_otherwise(first: str, cells: int) -> str:
    """Why every cell goes to the duet: the baseline's figures were measured another way."""
    return f"{first}{f' ({cells} cells)' if cells > 1 else ''}: its figures are not compared figure for figure"


def regression_against_setup(found: Sequence[str]) -> str:
    """Why every cell goes to the duet: a cell regressed against the recorded setup."""
    return f"a regression against the recorded setup ({found[0]}{' and more' if len(found) > 1 else ''})"


# ----------------------------------------------------------------------------- A/B mode

def busy_pairs(reason: str, slowed: int, pairs: int) -> str:
    """A duet figure not called while other processes took the CPUs in some of its pairs."""
    return reason + (f" ({slowed} of {pairs} pair(s) ran while other processes took the CPUs: "
                     "re-run on a quiet machine)")


# ----------------------------------------------------------------------------- answers

def answers_unavailable(version: Optional[str], why: str) -> str:
    return (f"not compared: mxnet {version or '(version unknown)'} could not compute this cell's "
            f"answers ({why}); its speed is judged all the same")


def answers_against(reason: str, version: Optional[str]) -> str:
    return f"{reason} (against {f'mxnet {version}' if version else 'the reference'})"


# ----------------------------------------------------------------------------- failing cells, their profiles

BELOW_FLOOR = "below its floor"
NO_BASELINE = "this machine has no baseline"
OTHER_VARIABLES = "its recordings ran with different variables"


def failing_figure(kind: str, figure: str) -> str:
    return f"{kind} of {figure}"


def setup_status(status: Optional[str]) -> str:
    return f"the recorded setup is {status or 'not rebuilt'}"


def no_profile(unready: str) -> str:
    return ("the baseline has no operator profile for this cell, and its recorded setup is not at hand "
            f"to profile ({unready})")
