"""Which published table applies to a measurement here, and the floor it gives (the tables
themselves are ``published_tables.py``'s).

``select_floor`` turns them into a floor (images/s) for one measurement:

1. matching hardware (a C4 CPU of the same size, or a K80 / M40 / P100) -> the
   documented figure less a tolerance ("documented");
2. other hardware of the same class -> a loose "legacy-sanity" floor (a CPU must not be
   slower than the C4 with as many vCPUs; a GPU on ``GPUS_FASTER_THAN_P100`` must not be
   slower than a P100);
3. otherwise no floor, with a one-line reason.

``batch`` is always the batch size the workload really runs with. The training tables'
AlexNet column is special: its rows are labelled with a base batch and the real batch
was 8x it according to the page header but 16x according to the benchmark script that
produced the figures; a floor is given only where both readings have a row, holding to
the lower figure.

Pure Python: no mxnet, no pytest.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from pytest_mxperf.judge.published_tables import (
    C4_CPU_MARKER,
    COLUMN_FOR_MODEL,
    DEVICES,
    DOCUMENTED_GPUS,
    MODES,
    TRAIN_ALEXNET_COLUMN,
    Cell,
    Table,
    default_tables,
)
from pytest_mxperf.judge.thresholds import MIN_EFFECT
from pytest_mxperf.machine.hardware import HardwareInfo
from pytest_mxperf.model.measurement import CellMeasurement

#: the two recorded readings of that multiplier: page header x8, benchmark script x16
TRAIN_ALEXNET_BATCH_MULTIPLIERS: Tuple[int, ...] = (8, 16)


#: GPUs known to be faster than a P100 for these workloads; they get the P100 table as
#: a legacy sanity floor. Anything else (T4, K40, L4, an unknown name, a MIG slice)
#: gets no floor.
GPUS_FASTER_THAN_P100: Tuple[str, ...] = (
    "V100",
    "A100",
    "A800",
    "H100",
    "H800",
    "H200",
    "GH200",
    "B100",
    "B200",
)


@dataclass(frozen=True)
class Floor:
    kind: Optional[str]  # "documented" | "legacy-sanity" | None
    table_id: Optional[str]
    documented: Optional[float]
    value: Optional[float]
    tolerance: float
    oom_documented: bool
    reason: str
    #: which rule chose the floor, without figures (the same for every cell on this
    #: hardware), e.g. "matching hardware: 'Tesla K80' is a K80"
    rule: str = ""



# --------------------------------------------------------------------------- selection


def _fmt(x: float) -> str:
    return f"{x:g}"


def _pct(tol: float) -> str:
    return f"{tol * 100:g}%"


def _token_re(token: str) -> "re.Pattern[str]":
    return re.compile(r"(?<![A-Za-z0-9])" + re.escape(token) + r"(?![0-9])", re.IGNORECASE)


_MIG_RE = re.compile(r"(?<![A-Za-z])MIG(?![A-Za-z])", re.IGNORECASE)


def _classify_gpu(name: str) -> Tuple[Optional[str], Optional[str], str]:
    """(kind, documented GPU token whose table applies, note) for one GPU name."""
    if _MIG_RE.search(name):
        return None, None, f"{name!r} is a MIG slice (a fraction of a GPU), no published figure applies"
    for token in DOCUMENTED_GPUS:
        if _token_re(token).search(name):
            return "documented", token, f"{name!r} is a {token}"
    for token in GPUS_FASTER_THAN_P100:
        if _token_re(token).search(name):
            return "legacy-sanity", "P100", f"{name!r} ({token}) is on the list of GPUs known faster than a P100"
    return None, None, f"{name!r} is not a documented GPU nor on the list of GPUs known faster than a P100"


def _none(reason: str, tolerance: float, table_id: Optional[str] = None) -> Floor:
    return Floor(None, table_id, None, None, tolerance, False, reason)


def _lookup(
    candidates: Sequence[Table], model: str, batch: int, mode: str
) -> Tuple[List[Tuple[Table, Cell, str]], Optional[str]]:
    """Cells of ``candidates`` for model/batch: (list of (table, cell, note), why-empty)."""
    found: List[Tuple[Table, Cell, str]] = []
    why = None
    for t in candidates:
        col = t.column_for_model(model)
        if col is None:
            why = f"{t.id} has no column for {model}"
            continue
        if mode == "train" and col == TRAIN_ALEXNET_COLUMN:
            rows = []
            for mult in TRAIN_ALEXNET_BATCH_MULTIPLIERS:
                label = batch // mult if batch % mult == 0 else None
                rows.append((mult, label, t.cell(col, label) if label else None))
            if any(c is None for _, _, c in rows):
                why = (
                    f"{t.id}: AlexNet training rows are base batches multiplied x8 (page header) "
                    f"or x16 (benchmark script); batch {batch} has a documented row under "
                    f"{'only one' if any(c is not None for _, _, c in rows) else 'neither'} reading"
                )
                continue
            for mult, label, c in rows:
                found.append((t, c, f"row {label} x{mult}"))
            continue
        c = t.cell(col, batch)
        if c is None:
            why = f"{t.id} has no row for batch {batch} (rows: {', '.join(map(str, t.batches))})"
            continue
        found.append((t, c, ""))
    return found, why


def _floor_from(
    found: List[Tuple[Table, Cell, str]],
    kind: str,
    tolerance: float,
    basis: str,
    model: str,
    batch: int,
) -> Floor:
    oom = [(t, n) for t, c, n in found if c.oom]
    if oom:
        t, note = oom[0]
        where = f" ({note})" if note else ""
        return Floor(
            kind, t.id, None, None, tolerance, True,
            f"the {t.hardware.short_name} table {t.id} records OOM for {model} batch {batch}{where}: "
            f"no throughput floor ({basis})", basis,
        )
    t, c, note = min(found, key=lambda tcn: (tcn[1].value, tcn[0].alternate, tcn[0].id))
    value = c.value * (1.0 - tolerance)
    tables = sorted({x[0].id for x in found})
    name = t.hardware.short_name
    extra = []
    if len(tables) > 1:
        extra.append(f"lower of {' / '.join(tables)}")
    if note:
        extra.append(f"AlexNet training {note}, the lower of the x8 and x16 readings")
    extra_s = f"; {'; '.join(extra)}" if extra else ""
    if kind == "documented":
        reason = (
            f"documented {name} figure {_fmt(c.value)} img/s less {_pct(tolerance)} tolerance "
            f"(matching hardware{extra_s})"
        )
    else:
        reason = (
            f"legacy sanity floor: {basis}; {name} figure {_fmt(c.value)} img/s less "
            f"{_pct(tolerance)}{extra_s}; loose on modern hardware, catches catastrophes only"
        )
    return Floor(kind, t.id, c.value, value, tolerance, False, reason, basis)


def select_floor(
    hw: HardwareInfo,
    mode: str,
    model: str,
    batch: int,
    device: str,
    tolerance: float = 0.10,
    tables: Optional[Sequence[Table]] = None,
) -> Floor:
    """The floor (images/s) that applies to one measurement; see the module doc."""
    if mode not in MODES:
        raise ValueError(f"mode must be 'score' or 'train', not {mode!r}")
    if device not in DEVICES:
        raise ValueError(f"device must be 'cpu' or 'gpu', not {device!r}")
    if not (0.0 <= tolerance < 1.0):
        raise ValueError(f"tolerance must be in [0, 1), not {tolerance!r}")
    if tables is None:
        tables = default_tables()
    if model not in COLUMN_FOR_MODEL:
        return _none(f"no published figure for model {model!r} (not one of the documented networks)", tolerance)
    try:
        batch = int(batch)
    except (TypeError, ValueError):
        return _none(f"batch {batch!r} is not a batch size", tolerance)
    if batch < 1:
        return _none(f"batch {batch} is not a batch size", tolerance)
    mode_tables = [t for t in tables if t.mode == mode and t.hardware.kind == device]

    if device == "cpu":
        if not mode_tables:
            what = "training" if mode == "train" else "scoring"
            return _none(f"no published table for CPU {what}", tolerance)
        vcpus = int(hw.vcpus)
        sizes = sorted(
            {t.hardware.vcpus: t.hardware.instance for t in mode_tables if t.hardware.vcpus}.items()
        )
        by_vcpus = dict(sizes)
        if C4_CPU_MARKER in (hw.cpu_model or "") and vcpus in by_vcpus:
            kind = "documented"
            inst = by_vcpus[vcpus]
            basis = "matching hardware"
        else:
            fitting = [(n, inst) for n, inst in sizes if n <= vcpus]
            if not fitting:
                return _none(
                    f"no floor: {vcpus} vCPU(s) is fewer than the smallest documented CPU "
                    f"({sizes[0][1].replace('c4.', 'C4.')}, {sizes[0][0]} vCPUs)" if sizes else "no published CPU table",
                    tolerance,
                )
            n, inst = fitting[-1]
            kind = "legacy-sanity"
            disp = next(t.hardware.short_name for t in mode_tables if t.hardware.instance == inst)
            if n == vcpus:
                basis = f"a {vcpus}-vCPU CPU must not be slower than {disp} (2016)"
            else:
                basis = (
                    f"a {vcpus}-vCPU CPU must not be slower than {disp} (2016), "
                    f"the largest C4 with at most {vcpus} vCPUs ({n})"
                )
        candidates = [t for t in mode_tables if t.hardware.instance == inst]
        found, why = _lookup(candidates, model, batch, mode)
        if not found:
            return _none(f"no floor: {why}", tolerance)
        return _floor_from(found, kind, tolerance, basis, model, batch)

    # gpu
    names = tuple(dict.fromkeys(n.strip() for n in hw.gpu_names if n and n.strip()))
    if not names:
        return _none("no floor: no GPU visible", tolerance)
    classified = {n: _classify_gpu(n) for n in names}
    keys = {(k, key) for k, key, _ in classified.values()}
    if len(keys) > 1:
        return _none(
            "no floor: mixed GPUs (" + ", ".join(names) + "), cannot tell which one runs the workload",
            tolerance,
        )
    kind, token, note = classified[names[0]]
    if kind is None:
        return _none(f"no floor: {note}", tolerance)
    tok_re = _token_re(token)
    candidates = [t for t in mode_tables if tok_re.search(t.hardware.gpu_name or t.hardware.name)]
    if not candidates:
        what = "training" if mode == "train" else "scoring"
        return _none(f"no floor: no published {token} {what} table", tolerance)
    found, why = _lookup(candidates, model, batch, mode)
    if not found:
        return _none(f"no floor: {why}", tolerance)
    if kind == "documented":
        basis = f"matching hardware: {note}"
    else:
        basis = f"{note}, so it must not be slower than a P100 (DGX-1, 2016)"
    return _floor_from(found, kind, tolerance, basis, model, batch)


def documented_curves(
    model: str, mode: str, tables: Optional[Sequence[Table]] = None
) -> Dict[str, Dict[int, Optional[float]]]:
    """For plotting: table id -> {row batch: images/s, None for OOM} for every table
    (alternates included) with a column for ``model``. AlexNet training rows are the
    page's base batch labels (real batch x8 or x16, see module doc)."""
    if mode not in MODES:
        raise ValueError(f"mode must be 'score' or 'train', not {mode!r}")
    if tables is None:
        tables = default_tables()
    out: Dict[str, Dict[int, Optional[float]]] = {}
    for t in tables:
        if t.mode != mode:
            continue
        col = t.column_for_model(model)
        if col is None:
            continue
        curve: Dict[int, Optional[float]] = {}
        for b in t.batches:
            c = t.cell(col, b)
            if c is not None:
                curve[b] = None if c.oom else c.value
        out[t.id] = curve
    return out


def judge_floor(cell: CellMeasurement, floor: Floor, states: Optional[Sequence[Optional[str]]] = None,
                min_effect: float = MIN_EFFECT) -> Tuple[str, str]:
    """(outcome, one-line message) of a cell against its floor: passed, failed or skipped.

    ``states``: the machine-state label of each successful process; the floor is held to
    the processes that ran on a quiet machine when there are any (a neighbour must not fail
    a floor); when every process ran slowed, the floor is not judged (skipped, saying so).
    In A/B mode a candidate under the floor fails only when it is also worse than its
    reference by more than ``min_effect`` and the reference is above the floor."""
    median = cell.median_or_none
    busy = ""
    slow = ("slowed", "slow-spell")
    if states and len(states) == len(cell.ok_runs) and any(st in slow for st in states):
        quiet = [r.median for r, st in zip(cell.ok_runs, states) if st not in slow and r.median]
        if quiet:
            median = statistics.median(quiet)
        else:
            busy = f" (all {len(states)} processes ran on a slowed machine: re-run on a quiet one)"
    if cell.status in ("unavailable", "unsupported"):
        return "skipped", cell.message
    if cell.status == "oom":
        if floor.oom_documented:
            return "passed", f"OOM, as the published table records for this cell ({floor.table_id})"
        return "failed", f"out of memory: {cell.message}"
    if cell.status != "ok":
        return "failed", f"{cell.status}: {cell.message}"
    if floor.oom_documented:
        return "passed", f"measured {median:.2f} img/s where the published table records OOM ({floor.table_id})"
    if floor.kind is None:
        return "skipped", f"measured {median:.2f} img/s; no floor: {floor.reason}"
    if median < floor.value:
        ref = cell.reference_figure(cell.primary.name) if cell.reference else None
        if ref is not None and ref < floor.value:
            # A/B: the reference, taking turns with it on this machine, is as far under the
            # floor: the machine ran slow (seen here: a spell at a tenth of its speed), not
            # the candidate; the A/B verdict decides the candidate
            return "skipped", (f"{median:.2f} img/s and the reference's {ref:.2f} img/s are both below the "
                               f"{floor.kind} floor {floor.value:.2f} img/s: the machine ran slow, not the "
                               "candidate; not judged against the floor (the A/B verdict judges the candidate)")
        if ref is not None and median >= ref * (1.0 - min_effect):
            # A/B: the candidate is under the floor, but no further under its reference than the
            # minimum effect: the noise of the machine around the floor, which the A/B verdict
            # (on every pair) judges; a floor must not fail an unchanged candidate by chance
            return "skipped", (f"{median:.2f} img/s is below the {floor.kind} floor {floor.value:.2f} img/s but "
                               f"within {100 * min_effect:.0f}% of the reference's {ref:.2f} img/s: not judged "
                               "against the floor (the A/B verdict judges the candidate)")
        if busy:
            # every process ran on a slowed machine: the floor cannot tell MXNet from the machine
            return "skipped", (f"{median:.2f} img/s is below the {floor.kind} floor {floor.value:.2f} img/s"
                               f"{busy}; not judged against the floor")
        return "failed", (f"{median:.2f} img/s is below the {floor.kind} floor {floor.value:.2f} img/s "
                          f"({floor.reason})")
    return "passed", f"{median:.2f} img/s >= {floor.kind} floor {floor.value:.2f} img/s ({floor.table_id})"
