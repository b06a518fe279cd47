"""Command-line option values: parsing and validation, without pytest.

Every parser raises ``OptionError`` (a ValueError) with a one-line message naming the
option; the plugin turns it into a pytest usage error before any worker starts.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import FrozenSet, Optional, Sequence, Tuple

from pytest_mxperf import zoo
from pytest_mxperf.model.workload import WorkloadError, parse_contexts

DEFAULT_BATCH_SIZES = (1, 2, 4, 8, 16, 32)  # benchmark_score.py's grid
DEFAULT_CTX_GROUPS = ("cpu", "gpu")
# The failure policy: what makes a session fail. The default set is DEFAULT_FAIL_ON;
# ``--perf-fail-on`` adds names (``name`` or ``+name``), removes them (``-name``), or
# starts from nothing (``none``), e.g. ``--perf-fail-on=+no-baseline,-floor``.
#   regression     a confirmed regression against the baseline or the A/B reference
#   unresolved     a slowdown significant across the session that interference may explain
#                  (fast end unmoved, slow spell), or one a busy machine left untestable
#   floor          a cell below its published-table floor (else it is reported only)
#   no-baseline    this machine has no baseline to compare with (and no A/B reference)
#   none-measured  nothing was measured at all (e.g. -m gpu on a machine without GPUs)
#   not-reached    --perf-deadline left measuring tests unstarted
#   answers        a cell computed something else than the baseline or the A/B reference
#                  (outside its dtype's tolerance: judge/answers.py), whatever its speed
#   no-gpu         GPU tests asked for (-m gpu, --perf-ctx gpu:...) and no GPU can be used
#                  (machine/gpu_readiness.py: one line before any worker; they skip with it)
FAIL_ON_CHOICES = ("regression", "unresolved", "floor", "no-baseline", "none-measured", "not-reached", "no-gpu",
                   "answers")
DEFAULT_FAIL_ON = frozenset({"regression", "unresolved", "floor", "not-reached", "no-gpu", "answers"})
# Off by default, baseline mode (a slowdown the baseline cannot decide is named first in the
# summary, not failed, unless these ask):
#   below-resolution  a slowdown smaller than this machine's resolution (how far its figures
#                     drift between recorded sessions, baselines/README.md): use A/B for it
#   unclear           a slowdown beyond the resolution but not significant across the session
#   unexplained       a change beyond the resolution that a duet against the baseline's
#                     recorded setup does not show: not the MXNet install, not the recorded
#                     variables, so the machine, the system or the suite (a VM's speed
#                     regimes do this: off by default)
#   machine-differs   the same, where the machine's probes moved with the change against the
#                     baseline's recorded probes (another host, a slower spell): off by default
#   system-differs    the same, where they did not: the kernel, the libraries, a preload, what
#                     both sides of the duet share (docs/baselines.md says why it fails by default)
FAIL_ON_CHOICES += ("below-resolution", "unclear", "unexplained", "machine-differs", "system-differs")
DEFAULT_FAIL_ON = DEFAULT_FAIL_ON | {"system-differs"}
BASELINE_POOLS = ("replace", "add")
MAX_BATCH = 65536


class OptionError(ValueError):
    """A malformed option value (one-line message)."""


def parse_models(text: Optional[str]) -> Optional[Tuple[str, ...]]:
    if text is None:
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise OptionError("--perf-models: empty list")
    unknown = [n for n in names if n not in zoo.MODELS]
    if unknown:
        raise OptionError(f"--perf-models: unknown model {', '.join(map(repr, unknown))} "
                          f"(known: {', '.join(zoo.model_names())})")
    return tuple(dict.fromkeys(names))


def parse_batch_sizes(text: Optional[str]) -> Optional[Tuple[int, ...]]:
    if text is None:
        return None
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if not re.fullmatch(r"[+-]?\d+", part):
            raise OptionError(f"--perf-batch-sizes: {part!r} is not an integer")
        value = int(part)
        if value < 1:
            raise OptionError(f"--perf-batch-sizes: batch size must be at least 1, got {value}")
        if value > MAX_BATCH:
            raise OptionError(f"--perf-batch-sizes: batch size {value} is larger than {MAX_BATCH}")
        out.append(value)
    if not out:
        raise OptionError("--perf-batch-sizes: empty list")
    return tuple(dict.fromkeys(out))


def parse_ctx_groups(values: Optional[Sequence[str]]) -> Tuple[Tuple[str, ...], ...]:
    """Each --perf-ctx value is one context list (``cpu``, ``cpu:0,1``, ``gpu:0,1``)."""
    values = list(values or DEFAULT_CTX_GROUPS)
    groups = []
    for v in values:
        try:
            groups.append(parse_contexts(v))
        except WorkloadError as exc:
            raise OptionError(f"--perf-ctx: {exc}") from None
    return tuple(dict.fromkeys(groups))


def parse_positive_float(name: str, text, *, allow_zero: bool = False) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise OptionError(f"{name}: {text!r} is not a number") from None
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise OptionError(f"{name}: must be a {'non-negative' if allow_zero else 'positive'} number, got {text!r}")
    return value


_DURATION_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def duration_text(seconds: float) -> str:
    """A duration as the plan and the second stage say it: "45 s", "5 min"."""
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def parse_duration(name: str, text: Optional[str]) -> Optional[float]:
    """Seconds of a duration like ``90``, ``90s``, ``25m``, ``1.5h`` (None when not given)."""
    if text is None:
        return None
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*(s|m|min|h)?\s*", str(text))
    if not m or float(m.group(1)) <= 0:
        raise OptionError(f"{name}: {text!r} is not a positive duration (e.g. 900, 900s, 25m, 1.5h)")
    return float(m.group(1)) * _DURATION_UNITS[m.group(2) or ""]


def parse_positive_int(name: str, text) -> int:
    digits = re.fullmatch(r"\s*\+?(\d+)\s*", text) if isinstance(text, str) else None
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    elif digits:  # the digits alone: int() refuses some of what \s matches (U+001C-U+001F)
        value = int(digits.group(1))
    else:
        raise OptionError(f"{name}: {text!r} is not a positive integer")
    if value < 1:
        raise OptionError(f"{name}: must be at least 1, got {value}")
    return value


def parse_fraction(name: str, text) -> float:
    value = parse_positive_float(name, text, allow_zero=True)
    if value >= 1:
        raise OptionError(f"{name}: must be a fraction in [0, 1), got {text!r}")
    return value


_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)


def parse_memory(text) -> Optional[int]:
    """``none`` -> no cap; ``default`` -> -1 (75% of RAM); ``12G``, ``512M``, bytes."""
    if text is None:
        return -1
    t = str(text).strip().lower()
    if t in ("none", "off", "0"):
        return None
    if t == "default":
        return -1
    m = _SIZE_RE.match(t)
    if not m:
        raise OptionError(f"--perf-memory-limit: {text!r} is not a size (e.g. 12G, 512M, none)")
    number, unit = float(m.group(1)), m.group(2).lower()
    scale = {"": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3, "t": 1024 ** 4}[unit]
    value = int(number * scale)
    if value < 64 * 1024 ** 2:
        raise OptionError(f"--perf-memory-limit: {text!r} is below 64M, too small to import MXNet")
    return value


def parse_fail_on(text: Optional[str]) -> FrozenSet[str]:
    """The failure policy from DEFAULT_FAIL_ON and ``+name`` / ``name`` / ``-name`` / ``none``."""
    policy = set(DEFAULT_FAIL_ON)
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        if part == "none":
            policy.clear()
            continue
        sign, name = (part[0], part[1:]) if part[0] in "+-" else ("+", part)
        if name not in FAIL_ON_CHOICES:
            raise OptionError(f"--perf-fail-on: unknown policy {name!r} (known: {', '.join(FAIL_ON_CHOICES)}; "
                              "prefix - to remove one from the default, none to start from nothing)")
        (policy.add if sign == "+" else policy.discard)(name)
    return frozenset(policy)


def parse_baseline_pool(text: Optional[str]) -> str:
    if text in (None, "", True):
        return "replace"
    if text not in BASELINE_POOLS:
        raise OptionError(f"--perf-update-baselines: {text!r} is not one of {', '.join(BASELINE_POOLS)}")
    return text


#: The defaults of the --perf-* options, defined once: PerfOptions, the plugin's options and
#: their --help, the judging rules and the worker runner read them from here.
PROCESSES = 2                # worker processes per cell (--perf-processes)
RECORDING_PROCESSES = 5      # ... when recording a baseline (--perf-update-baselines)
TIME_BUDGET_S = 1.5          # timed seconds per worker process (--perf-time-budget)
TIMEOUT_S = 600.0            # a worker's measurement is killed after this (--perf-timeout)
WARMUP_TIMEOUT_S = 900.0     # a worker's untimed warm-up is bounded apart (--perf-warmup-timeout)
FLOOR_TOLERANCE = 0.10       # below a published figure before a floor fails (--perf-floor-tolerance)
MIN_EFFECT = 0.05            # smallest change ever called a regression or improvement (--perf-min-effect)
AB_PAIRS = 8                 # process pairs per cell in A/B mode, for kinds that cannot be resident
DUET_PAIRS = 3               # duet pairs per cell in A/B mode's first stage


@dataclasses.dataclass(frozen=True)
class PerfOptions:
    ctx_groups: Tuple[Tuple[str, ...], ...] = (("cpu:0",), ("gpu:0",))
    ctx_explicit: bool = False
    models: Optional[Tuple[str, ...]] = None
    # your own networks (--perf-model-file) and how to feed them
    model_files: Tuple[str, ...] = ()
    model_params: Optional[str] = None
    model_inputs: Optional[str] = None
    model_loss: Optional[str] = None
    batch_sizes: Optional[Tuple[int, ...]] = None
    processes: int = PROCESSES
    time_budget: float = TIME_BUDGET_S
    timeout: float = TIMEOUT_S
    warmup_timeout: float = WARMUP_TIMEOUT_S
    memory_limit: Optional[int] = -1
    smoke: bool = False
    include_slow: bool = False
    floor_tolerance: float = FLOOR_TOLERANCE
    fail_on: FrozenSet[str] = DEFAULT_FAIL_ON
    python: Optional[str] = None
    # A/B mode: the reference interpreter, and pairs per cell in the first stage
    reference: Optional[str] = None
    ab_pairs: int = AB_PAIRS
    duet_pairs: int = DUET_PAIRS  # duet pairs per cell in A/B mode's first stage
    machine_probe: bool = True
    # the machine's peak GFLOP/s (a worker of its own, once a session) that float32 and GPU
    # cells are shown against; off: their GFLOP/s are shown alone
    machine_peak: bool = True
    # baselines and verdicts
    update_baselines: bool = False
    baseline_pool: str = "replace"
    baselines_dir: Optional[str] = None
    machine: Optional[str] = None
    min_effect: float = MIN_EFFECT
    report_dir: Optional[str] = None
    deadline: Optional[float] = None  # --perf-deadline: seconds from the session's start
    profile: bool = False  # --perf-profile: profile every measured cell, not only failing ones
    # the history store (--perf-store: an SQLite path or a postgresql:// URL; None: not kept)
    history: Optional[str] = None
    shard: Optional[Tuple[int, int]] = None  # --perf-shard K/N: this runner's part of the selection
    fleet_id: Optional[str] = None  # --perf-fleet: the fleet session this runner's session is part of

    def selected_models(self, allowed: Sequence[str]) -> Tuple[str, ...]:
        if self.models is None:
            return tuple(allowed)
        return tuple(m for m in allowed if m in self.models)

    def selected_batches(self, allowed: Sequence[int]) -> Tuple[int, ...]:
        if self.batch_sizes is None:
            return tuple(allowed)
        return tuple(self.batch_sizes)
