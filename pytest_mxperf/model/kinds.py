"""The kinds of cell and their figures, each declared once: the registry the rest reads.

A *figure* (``Metric``) is a named number a worker's process yields: its unit, its direction,
the rule that judges it (``RULES``), how a duet pair estimates it and whether it is a tail.
A *kind* (``Kind``) is what a cell's ``Workload.mode`` names and its key starts with: the
pytest marker of its tests, the worker module a process runs, its primary figure (what a
cell's ``median`` and a baseline's ``process_medians`` hold), the figures judged beside it
and those only shown, whether its worker serves duet rounds, whether its CPU cells may share
one worker process, and what else the suite does with it (published floors, FLOPs, reduced
precision). ``register`` adds one (a test's toy kind, a user's own); everything that used to
keep a table per kind reads it from here: ``PRIMARY``, ``SECONDARY``, ``MODES``, ... are live
views of the registry, not copies.

An unknown figure or kind is an error where it is declared or first seen (``UnknownFigure``,
``UnknownKind``: one line each), never a silent drop. Standard library only: the parent and
the workers both read it.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Set as AbstractSet
from typing import Callable, Dict, Iterator, Mapping, Optional, Tuple

RULES = ("processes", "growth", "discrete", "derived")
#: how a duet pair turns a figure's two sides into one log ratio (``outcome/ab_judging.
#: duet_log_ratio``): "rounds", from the rounds the two sides ran back to back (a rate of the
#: rounds or their time per unit); "run", from the sums of the rounds each side ran to its own
#: end (time to accuracy); "after", measured after the rounds, each side alone (judged as process
#: pairs are); "figure", from the two sides' figures (a latency percentile, memory)
PAIRED = ("rounds", "run", "after", "figure")


class UnknownFigure(ValueError):
    """A figure name the registry does not declare (one line)."""


class UnknownKind(ValueError):
    """A kind of cell the registry does not declare (one line)."""


@dataclasses.dataclass(frozen=True)
class Metric:
    """A figure: ``rule`` says how it is judged (``RULES``; "derived" ones are shown, never
    judged), ``paired`` how a duet pair estimates it (``PAIRED``), ``tail`` whether it is a
    tail of a distribution (a p99: judged beyond a wider minimum effect, ``judge/thresholds``)."""

    name: str
    unit: str
    higher_is_better: bool
    rule: str
    label: str
    paired: str = "figure"
    tail: bool = False

    def __post_init__(self):
        if self.rule not in RULES:
            raise ValueError(f"figure {self.name!r}: unknown rule {self.rule!r} (known: {', '.join(RULES)})")
        if self.paired not in PAIRED:
            raise ValueError(f"figure {self.name!r}: unknown pairing {self.paired!r} (known: {', '.join(PAIRED)})")

    def oriented(self, change: float) -> float:
        """``change`` signed so that negative means worse, whatever the metric's direction."""
        return change if self.higher_is_better else -change

    def as_speed(self, change: float) -> float:
        """``change`` (a fraction: x(1 + change)) as the change of speed it implies: a rate's
        own; a time's the inverse (a latency x1.69 is a speed x0.59, not one 69% slower)."""
        return change if self.higher_is_better else 1.0 / (1.0 + change) - 1.0

    @property
    def judged(self) -> bool:
        return self.rule != "derived"


#: the throughput worker: score, train, latency and your own network
THROUGHPUT_WORKER = "pytest_mxperf.workers.throughput"
SERVING_WORKER = "pytest_mxperf.workers.serving"
#: what a serving process takes (import, bind, one LoadGen run of at least 460 queries and 2 s)
#: and a peak search's (whole runs from its start until it closes), LeNet b4 by default and by
#: model where far longer (``Kind.model_seconds``), on the plan's reference Zen 3 (AMD EPYC
#: family 25 model 1, 2026-12-04, a baseline's five processes a cell: LeNet 3.8-4.0 s at 150
#: queries/s, ResNet-50 v2 55.3-55.7 s at 8.9; peak searches 19.0 s and 57.8 s)
SERVING_PROCESS_S = (3.9, (("resnet50_v2", 55.5),))
SERVING_PEAK_PROCESS_S = (19.0, (("resnet50_v2", 57.8),))
#: a serving duet's runs a side (A,B,B,A): each side's figures the median of its two runs
SERVING_DUET_RUNS = 2
#: what a serving cell's duet pairs may take in all on the machine at hand: its cap is that many
#: of its first stage's pairs (``PairBudget``), so a cell of short pairs gets the pairs its spread
#: needs and one of long pairs stops at its least. A ResNet-50 v2 pair at its target rate is four
#: LoadGen runs of about a minute on 2 vCPUs (6 pairs), a peak pair two searches (about 10); LeNet's
#: peak pairs take about 40 s (18 pairs): a fixed cap of six left an idle-slow candidate's peak,
#: lower in its first pair only, unresolved where 17 pairs read it unchanged (docs/how-it-measures.md,
#: "Serving under load")
SERVING_PAIRS_BUDGET_S = 12 * 60.0
#: ... and the pairs it gets at least: the first look's 3 and as many again
SERVING_LEAST_PAIRS = 6


@dataclasses.dataclass(frozen=True)
class PairBudget:
    """The duet pairs a cell of a kind whose pairs are long gets in all: as many as ``seconds``
    holds of its pairs, at least ``least``; the pairs' cost is what its first stage's pairs took
    (``planning.pair_seconds`` of its first three: fixed once they are in, so the rule's
    boundaries, spread over its looks, stay fixed from then on)."""

    seconds: float
    least: int

    def __post_init__(self):
        if not (self.seconds > 0 and self.least >= 1):
            raise ValueError(f"a pair budget of {self.seconds!r} s and at least {self.least!r} pairs: "
                             "seconds > 0 and at least 1 pair")

    def cap(self, pair_seconds: Optional[float], most: int) -> int:
        """The most pairs a cell whose pair takes ``pair_seconds`` gets, never above ``most``
        (the rule's general most); its least where the cost is not known yet."""
        least = min(self.least, most)
        if pair_seconds is None or not pair_seconds > 0:
            return least
        return max(least, min(most, int(self.seconds // pair_seconds)))

#: the workload's optional fields a kind's cell key may name (``Kind.key_fields``)
KEY_FIELDS = ("optimizer", "kvstore")

#: figures any kind's process may yield: its memory (host; GPU, read by the parent from NVML)
COMMON_FIGURES = ("peak_rss_mib", "gpu_memory_mib", "gpu_device_memory_used_mib")


@dataclasses.dataclass(frozen=True)
class Kind:
    """A kind of cell (the module doc). ``judged``: the figures judged beside the primary when
    a cell has them; ``shown``: figures its processes yield that are shown, never judged, or
    judged only where present (``COMMON_FIGURES`` are every kind's). ``resident``: its worker
    serves duet rounds (``workers/protocol.serve_duet``) when its spec has ``control``;
    ``to_the_end``: its rounds are the measured work itself (a training run to a target, a
    peak search's steps: no untimed round, no sizing; each side's until it says it is
    finished); ``whole_runs``: its rounds are whole runs of the measured work (a LoadGen run:
    ``StartTest`` runs a whole scenario), this many timed a side, no untimed round, no sizing;
    ``pair_budget``: the most duet pairs a cell of it gets in all, where its pairs are too long for
    the rule's general most (``judge/verdict_duet.MAX_PAIRS``): as many as the budget's seconds
    hold of the cell's first pairs (``PairBudget``); the rule's boundaries are then spread over
    its fewer looks, and a figure not called by its last is judged as it stands
    (unchanged with its bound said, or unresolved when worse than its minimum effect); ``shares_process``: its CPU cells from the zoo may be measured
    several to a worker process and share one duet pair; ``seeded``: process i runs with seed
    i, so only the two sides of a pair compare like with like; ``floors``: the published tables
    hold its floors; ``flops``: its throughput counts network passes (achieved GFLOP/s);
    ``inference``: reduced precision (bfloat16, int8) applies; ``marker``: its tests' pytest
    marker (None: the kind has none of its own); ``on_request``: its tests run only when asked
    for (a ``-m`` expression that names its marker, --perf-slow, or the test named: a kind too
    slow for the default session); ``cost``: how the plan's first line names its
    processes (its name by default); ``process_seconds``: what one process of a cell of it takes
    on the 2-vCPU Zen 3 the plan's constants were measured on, when its cells are not measured
    several to a process (``measure/planning`` scales it to this machine; required then: a kind
    the plan would have to guess is an error where declared); ``model_seconds``: (model, seconds)
    for the models whose processes take far other than that (a serving run's length follows the
    rate the model is served at); ``read``: a worker's result as
    the cell's figures (default ``read_figures``: the result's numbers named as the kind's
    figures); ``key_fields``: which of the
    workload's optional fields (``KEY_FIELDS``: its optimizer, its kvstore when set) its cell
    key names after the common ones."""

    name: str
    worker: str
    primary: str
    description: str
    judged: Tuple[str, ...] = ()
    shown: Tuple[str, ...] = ()
    marker: Optional[str] = None
    on_request: bool = False
    resident: bool = False
    to_the_end: bool = False
    whole_runs: int = 0
    pair_budget: Optional[PairBudget] = None
    shares_process: bool = False
    seeded: bool = False
    floors: bool = False
    flops: bool = False
    inference: bool = False
    cost: str = ""
    key_fields: Tuple[str, ...] = ()
    process_seconds: Optional[float] = None
    model_seconds: Tuple[Tuple[str, float], ...] = ()
    read: Optional[Callable[[Dict], Dict[str, float]]] = dataclasses.field(default=None, compare=False)

    def __post_init__(self):
        if not self.name or "/" in self.name or "#" in self.name:
            raise ValueError(f"kind {self.name!r}: a name of its own, without '/' or '#'")
        if not self.cost:
            object.__setattr__(self, "cost", self.name)
        for f in self.figures:
            if f not in _FIGURES:
                raise UnknownFigure(f"kind {self.name!r} declares the figure {f!r}, which no figure of the registry "
                                    f"is (known: {', '.join(sorted(_FIGURES))}); declare it first (kinds.add_figure)")
        if set(self.key_fields) - set(KEY_FIELDS):
            raise ValueError(f"kind {self.name!r}: key fields {self.key_fields} (known: {', '.join(KEY_FIELDS)})")
        if not self.shares_process and self.process_seconds is None:
            raise ValueError(f"kind {self.name!r}: declare process_seconds (what one of its processes takes on the "
                             "plan's reference Zen 3), or its cells' cost would be a guess")
        if (self.to_the_end or self.whole_runs) and not self.resident:
            raise ValueError(f"kind {self.name!r}: a run to the end, or rounds of whole runs, is a duet's (resident) way")
        if self.on_request and not self.marker:
            raise ValueError(f"kind {self.name!r}: a kind run on request needs a marker to be asked for by")
        if self.pair_budget is not None and not self.resident:
            raise ValueError(f"kind {self.name!r}: a pair budget is a duet's (resident) cap")
        if self.to_the_end and self.whole_runs:
            raise ValueError(f"kind {self.name!r}: its rounds run to the end or are whole runs, not both")

    def seconds_for(self, model: str) -> Optional[float]:
        """What one process of a cell of ``model`` takes on the plan's reference Zen 3: its
        ``model_seconds`` where declared, else ``process_seconds``."""
        return dict(self.model_seconds).get(model, self.process_seconds)

    def most_pairs(self, pair_seconds: Optional[float], most: int) -> int:
        """The most duet pairs a cell of this kind whose pair takes ``pair_seconds`` gets:
        ``most``, or its ``pair_budget``'s cap."""
        return most if self.pair_budget is None else self.pair_budget.cap(pair_seconds, most)

    def read_figures(self, payload: Dict) -> Dict[str, float]:
        """A worker's result as this kind's figures: ``read(payload)`` when declared, else the
        result's numbers named as the kind's figures (its primary required: KeyError)."""
        if self.read is not None:
            return self.read(payload)
        out = {self.primary: float(payload[self.primary])}
        for name in self.figures:
            v = payload.get(name)
            if name != self.primary and isinstance(v, (int, float)) and not isinstance(v, bool):
                out[name] = float(v)
        return out

    @functools.cached_property
    def figures(self) -> Tuple[str, ...]:
        """Every figure a process of this kind may yield, the primary first."""
        return tuple(dict.fromkeys((self.primary,) + self.judged + self.shown + COMMON_FIGURES))


_FIGURES: Dict[str, Metric] = {}
_KINDS: Dict[str, Kind] = {}
#: raised by every change of the registry: what the views below computed from it stands until then
_VERSION = [0]


def version() -> int:
    """How many times the registry changed: a view computed at one version holds until the next."""
    return _VERSION[0]


def add_figure(metric: Metric) -> Metric:
    """Declare a figure; a name declared again must be the same figure."""
    known = _FIGURES.get(metric.name)
    if known is not None and known != metric:
        raise ValueError(f"figure {metric.name!r} is declared already, otherwise ({known})")
    if known is None:
        _FIGURES[metric.name] = metric
        _VERSION[0] += 1
    return metric


def register(kind: Kind) -> Kind:
    """Declare a kind of cell (its figures must be declared: ``UnknownFigure``); a name
    declared again must be the same kind."""
    known = _KINDS.get(kind.name)
    if known is not None and known != kind:
        raise ValueError(f"kind {kind.name!r} is declared already, otherwise")
    if known is None:
        _KINDS[kind.name] = kind
        _VERSION[0] += 1
    return kind


def unregister(name: str) -> None:
    """Take a kind out of the registry (a test's toy kind, after the test)."""
    if _KINDS.pop(name, None) is not None:
        _VERSION[0] += 1


def kind(name: str) -> Kind:
    """The kind ``name``; ``UnknownKind`` (one line) for one the registry does not declare."""
    k = _KINDS.get(name)
    if k is None:
        raise UnknownKind(f"unknown kind of cell {name!r} (known: {', '.join(_KINDS)}); declare it with "
                          "pytest_mxperf.model.kinds.register")
    return k


def figure(name: str) -> Metric:
    """The figure ``name``; ``UnknownFigure`` (one line) for one the registry does not declare."""
    m = _FIGURES.get(name)
    if m is None:
        raise UnknownFigure(f"unknown figure {name!r} (known: {', '.join(sorted(_FIGURES))})")
    return m


def kinds() -> Tuple[Kind, ...]:
    return tuple(_KINDS.values())


def of_test(markers, has_cell: bool) -> Optional[Kind]:
    """The kind of cell a collected test measures, read from its markers (``Kind.marker``): of
    the kinds whose marker it carries, in the registry's order, the first whose cells share a
    worker (``shares_process``: a grid's kinds) when the test has a grid cell (``has_cell``:
    model, batch size and contexts), the first whose cells have processes of their own when it
    has none, else the first (two kinds declare ``training``: a grid's training throughput and
    a time-to-accuracy run). None for a test that carries no kind's marker."""
    marks = set(markers)
    own = [k for k in _KINDS.values() if k.marker and k.marker in marks]
    return next((k for k in own if k.shares_process == has_cell), own[0] if own else None)


def check_figures(mode: str, names) -> None:
    """``UnknownFigure`` (one line) when a process of kind ``mode`` yielded a figure that is
    not one of its kind's (``Kind.figures``)."""
    k = kind(mode)
    extra = [n for n in names if n not in k.figures]
    if extra:
        raise UnknownFigure(f"a {mode} process yielded the figure(s) {', '.join(map(repr, extra))}, which its kind "
                            f"does not declare (its figures: {', '.join(k.figures)})")


class _Views(Mapping):
    """A live, read-only mapping kind name -> ``get(kind)`` over the kinds ``keep`` takes."""

    def __init__(self, get: Callable[[Kind], object], keep: Callable[[Kind], bool] = lambda k: True):
        self._get, self._keep = get, keep

    def __getitem__(self, name: str):
        k = _KINDS.get(name)
        if k is None or not self._keep(k):
            raise KeyError(name)
        return self._get(k)

    def __iter__(self) -> Iterator[str]:
        return iter([k.name for k in _KINDS.values() if self._keep(k)])

    def __len__(self) -> int:
        return sum(1 for k in _KINDS.values() if self._keep(k))

    def __repr__(self) -> str:
        return repr(dict(self))


class _Names(AbstractSet):
    """A live, read-only set of names (kinds, figures or worker modules) the registry gives, in
    declaration order (``', '.join(...)``); equal to a set of the same names, or to a tuple of
    them in that order."""

    def __init__(self, names: Callable[[], Tuple[str, ...]]):
        self._make = names
        self._at: Tuple[int, Tuple[str, ...], frozenset] = (-1, (), frozenset())

    def _names(self) -> Tuple[str, ...]:
        return self._now()[1]

    def _now(self) -> Tuple[int, Tuple[str, ...], frozenset]:
        """The names at the registry's version, made again only after it changed (a workload
        checks its mode against ``MODES``: a replayed study makes millions)."""
        if self._at[0] != _VERSION[0]:
            names = self._make()
            self._at = (_VERSION[0], names, frozenset(names))
        return self._at

    def __contains__(self, name) -> bool:
        return name in self._now()[2]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def __eq__(self, other) -> bool:
        if isinstance(other, (tuple, list)):
            return self._names() == tuple(other)
        return super().__eq__(other)

    __hash__ = None

    def __repr__(self) -> str:
        return repr(self._names())


class _FiguresView(Mapping):
    """A live, read-only mapping figure name -> Metric over every declared figure."""

    def __getitem__(self, name: str) -> Metric:
        return _FIGURES[name]

    def __iter__(self) -> Iterator[str]:
        return iter(list(_FIGURES))

    def __len__(self) -> int:
        return len(_FIGURES)

    def __repr__(self) -> str:
        return repr(dict(_FIGURES))


def _kinds_where(keep: Callable[[Kind], bool], name: Callable[[Kind], str] = lambda k: k.name) -> _Names:
    """The live names (``name(kind)``, each once, in declaration order) of the kinds ``keep`` takes."""
    return _Names(lambda: tuple(dict.fromkeys(name(k) for k in _KINDS.values() if keep(k))))


def _figures_where(keep: Callable[[Metric], bool]) -> _Names:
    """The live names of the figures ``keep`` takes."""
    return _Names(lambda: tuple(n for n, m in _FIGURES.items() if keep(m)))


#: figure name -> Metric, every declared figure
METRICS: Mapping[str, Metric] = _FiguresView()
#: kind -> its primary figure's name
PRIMARY: Mapping[str, str] = _Views(lambda k: k.primary)
#: kind -> the figures judged beside its primary, when present (kinds with any)
SECONDARY: Mapping[str, Tuple[str, ...]] = _Views(lambda k: k.judged, lambda k: bool(k.judged))
#: every kind's name
MODES = _kinds_where(lambda k: True)
#: kinds whose process i runs with seed i
SEEDED_MODES = _kinds_where(lambda k: k.seeded)
#: kinds reduced precision applies to
INFERENCE_MODES = _kinds_where(lambda k: k.inference)
#: kinds whose throughput counts network passes
FLOP_MODES = _kinds_where(lambda k: k.flops)
#: kinds the published tables hold floors of
FLOOR_MODES = _kinds_where(lambda k: k.floors)
#: the kinds whose workers serve duet rounds
RESIDENT_KINDS = _kinds_where(lambda k: k.resident)
#: the markers of the kinds whose workers serve duet rounds, and of those whose do not
RESIDENT_MARKERS = _kinds_where(lambda k: k.resident and bool(k.marker), lambda k: k.marker)
#: the markers of the kinds whose tests run only when asked for (``Kind.on_request``)
ON_REQUEST_MARKERS = _kinds_where(lambda k: k.on_request, lambda k: k.marker)
PROCESS_PAIR_MARKERS = _kinds_where(lambda k: not k.resident and bool(k.marker) and k.marker not in RESIDENT_MARKERS,
                                    lambda k: k.marker)
#: kinds the throughput worker measures (score, train, latency: what the profile worker can profile)
THROUGHPUT_MODES = _kinds_where(lambda k: k.worker == THROUGHPUT_WORKER)
#: kinds the serving worker measures (LoadGen's Server scenario: a target rate, a peak rate)
SERVING_MODES = _kinds_where(lambda k: k.worker == SERVING_WORKER)
#: worker modules that serve duet rounds
RESIDENT_MODULES = _kinds_where(lambda k: k.resident, lambda k: k.worker)
#: kinds whose duet rounds are the measured work itself, each side's until it is finished
TO_THE_END = _kinds_where(lambda k: k.to_the_end)
#: kind -> its duet's timed rounds a side, each a whole run (kinds with ``whole_runs``)
WHOLE_RUNS: Mapping[str, int] = _Views(lambda k: k.whole_runs, lambda k: bool(k.whole_runs))
#: kind -> what its cells' duet pairs may take in all (kinds with a ``pair_budget``)
PAIR_BUDGETS: Mapping[str, PairBudget] = _Views(lambda k: k.pair_budget, lambda k: k.pair_budget is not None)
#: figures a duet estimates from its rounds run back to back / each side's run to its end /
#: measured after the rounds; tails
ROUND_FIGURES = _figures_where(lambda m: m.paired == "rounds")
RUN_FIGURES = _figures_where(lambda m: m.paired == "run")
AFTER_ROUNDS = _figures_where(lambda m: m.paired == "after")
TAILS = _figures_where(lambda m: m.tail)

for _m in (
    Metric("throughput", "img/s", True, "processes", "throughput", paired="rounds"),
    Metric("samples_per_s", "samples/s", True, "processes", "throughput", paired="rounds"),
    Metric("latency_p50_ms", "ms", False, "processes", "batch latency p50"),
    Metric("latency_p99_ms", "ms", False, "processes", "batch latency p99", tail=True),
    Metric("comm_seconds", "s/batch", False, "processes", "kvstore push+pull per batch", paired="rounds"),
    Metric("seconds_to_target", "s", False, "processes", "seconds to target accuracy", paired="run"),
    Metric("epochs_to_target", "epochs", False, "discrete", "epochs to target accuracy"),
    # the whole worker process's peak resident set (VmHWM / ru_maxrss): Python, numpy, MXNet and
    # every package its import loads (scipy when installed), plus the network; less the pages
    # that map files (measurement.MEMORY_METHOD)
    Metric("peak_rss_mib", "MiB", False, "growth", "peak host memory (worker RSS less mapped files)"),
    # the worker process's own GPU memory (NVML's figure for its PID: its CUDA context and
    # MXNet's pool), read by the parent; never the device's used memory, which counts every
    # other process on the GPU (a duet partner, another tenant)
    Metric("gpu_memory_mib", "MiB", False, "growth", "peak GPU memory (the worker process's own)"),
    Metric("gpu_device_memory_used_mib", "MiB", False, "derived",
           "GPU memory in use on the device (device-wide: every process on it)"),
    Metric("bandwidth_gbps", "GB/s", True, "derived", "kvstore bandwidth (tools/bandwidth formula)"),
    Metric("moved_gbps", "GB/s", True, "derived", "bytes moved per second"),
    Metric("ratio_to_local", "x", True, "derived", "throughput relative to one process"),
    # an input pipeline's parts, each side alone after the rounds (workers/pipeline.py)
    Metric("loader_samples_per_s", "samples/s", True, "processes", "loader alone (trainer mocked)", paired="after"),
    Metric("trainer_samples_per_s", "samples/s", True, "processes", "trainer alone (loader mocked)", paired="after"),
    Metric("load_seconds_per_batch", "s/batch", False, "derived", "input loading per batch"),
    Metric("compute_seconds_per_batch", "s/batch", False, "derived", "compute per batch"),
    Metric("gflops", "GFLOP/s", True, "derived", "achieved GFLOP/s"),
    Metric("pct_of_peak", "%", True, "derived",
           "achieved GFLOP/s as % of the measured peak (oneDNN on CPU, cuBLAS/cuDNN on GPUs)"),
    # a serving cell's latencies under LoadGen's Server scenario at its target rate, from each
    # query's scheduled arrival to its completion (workers/serving.py): the percentile the cell
    # names, and p50/p90/p99
    Metric("serving_latency_ms", "ms", False, "processes", "serving latency at the named percentile", tail=True),
    Metric("serving_p50_ms", "ms", False, "processes", "serving latency p50"),
    Metric("serving_p90_ms", "ms", False, "processes", "serving latency p90", tail=True),
    Metric("serving_p99_ms", "ms", False, "processes", "serving latency p99", tail=True),
    Metric("serving_qps", "queries/s", True, "derived", "queries completed per second"),
    # the rate a target-rate cell served (fixed before measuring: recorded in the baseline and
    # read back, so that every later session serves it)
    Metric("target_qps", "queries/s", True, "derived", "the target rate served"),
    # the highest rate whose named percentile stays within the bound (a bisection of LoadGen runs)
    Metric("peak_qps", "queries/s", True, "processes", "highest rate within the latency bound"),
):
    add_figure(_m)

_FLOP_FIGURES = ("gflops", "pct_of_peak")
_MEMORY = ("peak_rss_mib", "gpu_memory_mib")
_SERVING_BUDGET = PairBudget(SERVING_PAIRS_BUDGET_S, SERVING_LEAST_PAIRS)

for _k in (
    Kind("score", THROUGHPUT_WORKER, "throughput", "forward-only throughput, as MXNet's benchmark_score.py",
         marker="scoring", judged=_MEMORY, shown=_FLOP_FIGURES, resident=True, shares_process=True, floors=True, flops=True,
         inference=True),
    Kind("train", THROUGHPUT_WORKER, "throughput", "forward, backward and optimizer update throughput",
         marker="training", judged=_MEMORY, shown=_FLOP_FIGURES, resident=True, shares_process=True, floors=True, flops=True,
         key_fields=("optimizer", "kvstore")),
    Kind("latency", THROUGHPUT_WORKER, "latency_p99_ms", "batch-by-batch latency percentiles (serving)",
         judged=("latency_p50_ms",) + _MEMORY, shown=_FLOP_FIGURES, marker="latency", resident=True, shares_process=True,
         flops=True, inference=True),
    Kind("kvstore", "pytest_mxperf.workers.commbench", "comm_seconds",
         "kvstore push+pull per batch across devices", shown=("bandwidth_gbps", "moved_gbps",
                                                              "compute_seconds_per_batch"),
         marker="multi_device", resident=True, key_fields=("kvstore",), cost="multi-device", process_seconds=5.6),
    Kind("dist", "pytest_mxperf.measure.cluster", "samples_per_s", "distributed kvstore (ps-lite roles on 127.0.0.1)",
         shown=("ratio_to_local",), marker="distributed", resident=True, key_fields=("kvstore",),
         cost="distributed launches", process_seconds=13.7),
    Kind("convergence", "pytest_mxperf.workers.convergence", "seconds_to_target",
         "time to a target accuracy (a training run per process)", judged=("epochs_to_target",), marker="training",
         resident=True, to_the_end=True, seeded=True, key_fields=("kvstore",), cost="time to accuracy",
         process_seconds=14.6),
    Kind("io", "pytest_mxperf.workers.pipeline", "samples_per_s",
         "input pipeline: loader alone, trainer alone, and the two end to end (RecordIO, NDArrayIter)",
         shown=("loader_samples_per_s", "trainer_samples_per_s", "load_seconds_per_batch",
                "compute_seconds_per_batch"), marker="io", resident=True, cost="input pipeline",
         process_seconds=5.9),
    # before serving: a peak test carries both markers (``-m serving`` selects it too), and a test's
    # kind is the first whose marker it carries (``of_test``)
    Kind("serving_peak", SERVING_WORKER, "peak_qps",
         "serving under load: the highest rate whose named percentile stays within the latency bound",
         marker="serving_peak", on_request=True, resident=True, to_the_end=True,
         pair_budget=_SERVING_BUDGET, cost="serving peak searches",
         process_seconds=SERVING_PEAK_PROCESS_S[0], model_seconds=SERVING_PEAK_PROCESS_S[1]),
    Kind("serving", SERVING_WORKER, "serving_latency_ms",
         "serving under load: MLPerf LoadGen's Server scenario at a target rate, dynamic batching",
         judged=("serving_p50_ms", "serving_p90_ms", "serving_p99_ms"), shown=("serving_qps", "target_qps"),
         marker="serving", on_request=True, resident=True, whole_runs=SERVING_DUET_RUNS,
         pair_budget=_SERVING_BUDGET, cost="serving runs",
         process_seconds=SERVING_PROCESS_S[0], model_seconds=SERVING_PROCESS_S[1]),
):
    register(_k)
