"""What a worker process ran with: the facts recorded beside its figures, declared once.

A process's figures are ``RunResult.figures`` / ``round_seconds`` (each figure's unit and
direction is its ``Metric``). Everything else a process reports, or the parent records
around it, is a *fact* kept in ``RunResult.meta``: the MXNet it imported, its threads, the
environment it ran with, the machine's state around it. Every fact is declared here with
its type, its unit and who writes it (as pyperf declares its metadata in one place), and the
parent reads the facts it uses as typed attributes of ``Facts`` (``run.meta.import_seconds``:
the value when it has the declared type, else None), never by key. ``Facts`` is read-only:
a process's facts are made once with its result, and a fact known later (the machine's
state around the process, its label, TF32) makes a new result (``RunResult.with_facts``).
``undeclared`` names what a worker wrote that is not declared (the tests check the bundled
workers against it).
"""

from __future__ import annotations

import dataclasses
import copy
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

WORKER, PARENT = "worker", "parent"


@dataclasses.dataclass(frozen=True)
class Fact:
    name: str
    type: type
    unit: str        # "" for a name, a count or a structure
    written_by: str  # WORKER (in the child, after import mxnet) or PARENT (around the process)
    meaning: str


FACTS: Tuple[Fact, ...] = (
    # every worker: protocol.runtime_info
    Fact("mxnet_version", str, "", WORKER, "mx.__version__ of the install the worker imported"),
    Fact("python", str, "", WORKER, "the worker's Python version"),
    Fact("features", list, "", WORKER, "enabled mx.runtime.Features (None before MXNet had them)"),
    Fact("num_gpus", int, "", WORKER, "mx.context.num_gpus()"),
    Fact("numpy_version", str, "", WORKER, "the worker's numpy"),
    Fact("worker_env", dict, "", WORKER, "the threading and MXNet variables as the worker process got them "
         "(an interpreter wrapper's own included); the parent records them as ``env``"),
    Fact("cuda_runtime", str, "", WORKER, "CUDA runtime version, on a GPU build with GPUs"),
    Fact("cudnn", str, "", WORKER, "cuDNN version, on a GPU build with GPUs"),
    Fact("libcudart", str, "", WORKER, "the CUDA runtime library loaded"),
    Fact("libcudnn", str, "", WORKER, "the cuDNN library loaded"),
    Fact("threads", dict, "", WORKER, "thread pools loaded (threadpoolctl): openmp, pools, source"),
    # the throughput worker
    Fact("import_seconds", float, "s", WORKER, "time to import mxnet"),
    Fact("rss_before_mxnet_bytes", int, "B", WORKER, "resident memory before import mxnet"),
    Fact("rss_after_mxnet_bytes", int, "B", WORKER, "resident memory after import mxnet"),
    Fact("bind_seconds", float, "s", WORKER, "time to bind the executor"),
    Fact("macs_per_sample", float, "MAC", WORKER, "multiply-accumulates per sample of the bound graph"),
    Fact("macs_unknown", list, "", WORKER, "operators the MAC count could not count"),
    Fact("params", dict, "", WORKER, "what your own network's params file gave"),
    Fact("labels", list, "", WORKER, "your own network's loss outputs and their labels"),
    Fact("precision", dict, "", WORKER, "how a low-precision cell ran (dtype, casts, AMP)"),
    Fact("first_batch_seconds", float, "s", WORKER, "the untimed first batch"),
    Fact("warmup_batches", int, "", WORKER, "untimed warm-up batches"),
    Fact("cpu_utilization", float, "CPUs", WORKER, "CPU time over wall time of the timed rounds"),
    Fact("peak_rss_bytes", int, "B", WORKER, "the process's peak resident memory"),
    Fact("rss_file_bytes", int, "B", WORKER, "resident memory that maps files when the peak was read (libraries; "
                                             "the page cache decides how much): the memory figure leaves it out"),
    Fact("loaded_companions", list, "", WORKER, "native libraries loaded beside MXNet"),
    Fact("total_batch", int, "", WORKER, "samples a batch over all devices"),
    Fact("timed_seconds", float, "s", WORKER, "seconds of timed rounds"),
    Fact("answers", dict, "", WORKER, "what the cell computed on its batch, as sketches (workers/answers.py): "
                                      "its outputs, a training step's loss and weights, with seed 0 each "
                                      "operator's output; computed after the timed rounds"),
    Fact("answers_unavailable", str, "", WORKER, "why this MXNet could not compute the cell's answers (one line): "
                                                 "its speed is judged all the same"),
    Fact("carried_rss_bytes", int, "B", WORKER, "a process that measured several cells: the resident memory "
                                                "(less files) the cells before this one left when it started, "
                                                "beyond what the first cell started with; the memory figure "
                                                "leaves it out"),
    Fact("process_cells", dict, "", WORKER, "a process that measured several cells: this cell's place "
                                            "(index, of); import_seconds is then the process's, once"),
    Fact("timed_windows", list, "s", WORKER, "[start, end] of the timed rounds in time.monotonic() "
                                             "seconds (CLOCK_MONOTONIC: the parent's clock too)"),
    Fact("warmup_window", dict, "s", WORKER, "the untimed warm-up in time.monotonic() seconds (started, ended) "
                                             "and whether it ran alone (a GPU duet's turn)"),
    Fact("cudnn_choice", dict, "", WORKER, "GPU cells: the cuDNN autotune setting in effect, the cuDNN version, "
                                           "whether the warm-up that autotunes ran alone"),
    # the profile worker
    Fact("bulk_exec", dict, "", WORKER, "MXNET_EXEC_BULK_* values the profile ran with"),
    Fact("subgraph_backend", str, "", WORKER, "MXNET_SUBGRAPH_BACKEND the profile ran with"),
    # the parent, around the process
    Fact("result", dict, "", PARENT, "the scalar facts of a worker result without a meta of its own"),
    Fact("env", dict, "", PARENT, "the threading and MXNet variables the process ran with"),
    Fact("env_defaults_applied", dict, "", PARENT, "which of those the suite set (the user had not)"),
    Fact("utilisation", dict, "", PARENT, "CPU (and GPU) utilisation sampled while it ran"),
    Fact("machine_state", dict, "", PARENT, "calibration probes before / after and the load; "
                                            "its label (state, reason) once judged"),
    Fact("duet", dict, "", PARENT, "A/B duet: which side ran first, round size, CPU shares"),
    Fact("pair_of", str, "", PARENT, "a reference process of a pair: the process id of the candidate's process "
                                     "it was paired with (RunResult.process)"),
    Fact("duet_fallback", str, "", PARENT, "why a cell's A/B pairs ran as process pairs instead of a duet "
                                           "(two GPU memory pools did not fit)"),
    Fact("tf32", dict, "", PARENT, "float32 GPU cells: whether their GEMMs ran as TF32 (in_use, why; "
                                   "machine/tensor_math.py)"),
)
BY_NAME: Dict[str, Fact] = {f.name: f for f in FACTS}


def undeclared(meta: Mapping[str, Any]) -> List[str]:
    """The keys of a process's facts that are not declared above."""
    return sorted(k for k in meta if k not in BY_NAME)


#: the types a process's facts hold (they come from JSON): copied by value, or kept (immutable)
_KEPT = (str, int, float, bool, type(None))


def _copied(value: Any) -> Any:
    """A deep copy of JSON-like ``value`` (dicts, lists, tuples, scalars): what copy.deepcopy
    makes, without its memo and dispatch (a replayed error-rate study makes a quarter of a
    million results; deepcopy was half its time). Anything else goes to copy.deepcopy."""
    t = type(value)
    if t in _KEPT:
        return value
    if t is dict:
        return {k: v if type(v) in _KEPT else _copied(v) for k, v in value.items()}
    if t is list:
        return [v if type(v) in _KEPT else _copied(v) for v in value]
    if t is tuple:
        return tuple(v if type(v) in _KEPT else _copied(v) for v in value)
    return copy.deepcopy(value)


def _typed(value: Any, kind: type) -> bool:
    if isinstance(value, bool):
        return kind is bool
    if kind is float:
        return isinstance(value, (int, float))
    return isinstance(value, kind)


class Facts(Mapping[str, Any]):
    """A process's facts: a read-only mapping (``facts["env"]`` as the JSON has it; assigning
    raises) whose declared facts are typed attributes (``facts.import_seconds``: the value when
    it has the declared type, else None). Made from a copy of what it is given, so that nothing
    another holder changes reaches it."""

    __slots__ = ("_d",)

    def __init__(self, d: Optional[Mapping[str, Any]] = None):
        object.__setattr__(self, "_d", _copied(dict(d or {})))

    def __getitem__(self, key: str) -> Any:
        return self._d[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def __getattr__(self, name: str) -> Any:
        # reached only for a name that is not a declared fact: each declared one is a property
        # (_declared_attributes below), found without this failed lookup first
        raise AttributeError(f"{name!r} is not a declared fact (model/run_facts.py)")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a process's facts are read-only: RunResult.with_facts makes a new result")

    def __repr__(self) -> str:
        return f"Facts({self._d!r})"

    def __reduce__(self):
        return Facts, (self._d,)

    def __eq__(self, other: object) -> bool:
        return dict(self) == dict(other) if isinstance(other, Mapping) else NotImplemented

    def with_facts(self, **facts: Any) -> "Facts":
        """These facts with ``facts`` set (each one declared): a new value."""
        unknown = [k for k in facts if k not in BY_NAME]
        if unknown:
            raise KeyError(f"undeclared fact(s): {', '.join(unknown)} (model/run_facts.py)")
        # the facts held already are this value's own copies, never changed: only the new
        # ones are copied (a process's answer records are labelled again at every judgement)
        new = Facts.__new__(Facts)
        object.__setattr__(new, "_d", {**self._d, **_copied(facts)})
        return new

    def to_dict(self) -> Dict[str, Any]:
        """A plain copy, for JSON."""
        return _copied(self._d)


def _attribute(fact: Fact) -> property:
    """``facts.<name>``: the value when it has the declared type (``_typed``), else None."""
    name, kind = fact.name, fact.type

    def get(self: Facts) -> Any:
        v = self._d.get(name)
        # the exact declared type first: what a worker's JSON holds, without _typed's checks
        return v if v is not None and (type(v) is kind or _typed(v, kind)) else None
    get.__name__ = name
    return property(get, doc=fact.meaning)


def _declared_attributes() -> None:
    # a replayed error-rate study reads about five million facts: a property each is found at
    # once, where __getattr__ is called only after the instance's ordinary lookup failed
    for fact in FACTS:
        if hasattr(Facts, fact.name):
            raise TypeError(f"fact {fact.name!r} would hide Facts.{fact.name}")
        setattr(Facts, fact.name, _attribute(fact))


_declared_attributes()
