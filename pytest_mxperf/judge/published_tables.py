"""The published MXNet performance tables, as data: loaded and checked from
pytest_mxperf/data/documented/*.json (inside the package so a wheel carries it; see the
README there): the scoring and training tables of the MXNet page "Some Tips for Improving
MXNet Performance" (commit 0a03417, cuDNN 5.1, AWS EC2 C4 CPUs, K80 / M40 / P100 GPUs),
plus an alternate C4.8xlarge scoring table from an earlier version of the page. Which of
them applies to a measurement, and the floor it gives, is floors.py's.

Pure Python: no mxnet, no pytest."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Dict, List, Mapping, Optional, Tuple

from pytest_mxperf import zoo as _zoo
from pytest_mxperf.model import kinds

SCHEMA_VERSION = 1


DEFAULT_DIRECTORY = Path(__file__).resolve().parent.parent / "data" / "documented"


#: model ids used by the rest of the suite -> column of the published tables; the zoo's
#: registry (which imports no mxnet) is the one place that names them.
COLUMN_FOR_MODEL: Dict[str, str] = {name: spec.table_column for name, spec in _zoo.MODELS.items()
                                    if spec.table_column}


#: the training tables' AlexNet column (its batch was multiplied, see module doc)
TRAIN_ALEXNET_COLUMN = "Alexnet(*8)"


#: vCPUs of each C4 size, smallest first
C4_VCPUS: Dict[str, int] = {
    "c4.large": 2,
    "c4.xlarge": 4,
    "c4.2xlarge": 8,
    "c4.4xlarge": 16,
    "c4.8xlarge": 36,
}


#: substring of the /proc/cpuinfo model name of the C4 family's CPU
C4_CPU_MARKER = "E5-2666 v3"


#: GPU name token -> table key of the GPUs the page measured
DOCUMENTED_GPUS: Dict[str, str] = {"K80": "k80", "M40": "m40", "P100": "p100"}


#: the kinds the tables publish: those the registry declares ``floors`` (model/kinds.py)
MODES = kinds.FLOOR_MODES


DEVICES = ("cpu", "gpu")


_OOM = "OOM"


class TableDataError(ValueError):
    """A table file is missing, unreadable or malformed (one-line message naming it)."""


@dataclass(frozen=True)
class TableHardware:
    kind: str  # "cpu" | "gpu"
    name: str  # display name, e.g. "AWS EC2 C4.large", "K80"
    cpu_model: Optional[str] = None
    vcpus: Optional[int] = None
    gpu_name: Optional[str] = None
    instance: Optional[str] = None

    @property
    def short_name(self) -> str:
        return self.name[len("AWS EC2 "):] if self.name.startswith("AWS EC2 ") else self.name


@dataclass(frozen=True)
class Cell:
    value: Optional[float]
    oom: bool = False


@dataclass(frozen=True)
class Table:
    id: str
    mode: str
    hardware: TableHardware
    columns: Tuple[str, ...]
    batches: Tuple[int, ...]
    alternate: bool
    conditions: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)
    _cells: Mapping[Tuple[str, int], Cell] = field(
        default_factory=dict, hash=False, compare=False, repr=False
    )
    source_file: Optional[str] = field(default=None, compare=False)

    def cell(self, column: str, batch: int) -> Optional[Cell]:
        """The cell at ``column`` / ``batch`` (row label), or None if there is none."""
        return self._cells.get((column, int(batch)))

    def column_for_model(self, model: str) -> Optional[str]:
        """This table's column for a suite model id, or None."""
        col = COLUMN_FOR_MODEL.get(model)
        if col is None:
            return None
        if col in self.columns:
            return col
        if model == "alexnet" and TRAIN_ALEXNET_COLUMN in self.columns:
            return TRAIN_ALEXNET_COLUMN
        return None

    def n_cells(self) -> int:
        return len(self._cells)


def _fail(path: Path, msg: str) -> TableDataError:
    return TableDataError(f"{path}: {msg}".replace("\n", " "))


def _parse_table(path: Path, idx: int, raw: Any) -> Table:
    where = f"table #{idx}"
    if not isinstance(raw, dict):
        raise _fail(path, f"{where} is not an object")
    try:
        tid = raw["id"]
        where = f"table {tid!r}"
        mode = raw["mode"]
        hw = raw["hardware"]
        columns = raw["columns"]
        rows = raw["rows"]
    except KeyError as exc:
        raise _fail(path, f"{where} lacks field {exc.args[0]!r}") from None
    if not isinstance(tid, str) or not tid:
        raise _fail(path, f"{where}: id must be a non-empty string")
    if mode not in MODES:
        raise _fail(path, f"{where}: mode must be 'score' or 'train', not {mode!r}")
    alternate = raw.get("alternate", False)
    if not isinstance(alternate, bool):
        raise _fail(path, f"{where}: alternate must be true or false")
    if not isinstance(hw, dict) or hw.get("kind") not in DEVICES or not isinstance(hw.get("name"), str):
        raise _fail(path, f"{where}: hardware needs kind 'cpu'/'gpu' and a name")
    vcpus = hw.get("vcpus")
    if vcpus is not None and (not isinstance(vcpus, int) or isinstance(vcpus, bool) or vcpus < 1):
        raise _fail(path, f"{where}: hardware.vcpus must be a positive integer")
    hardware = TableHardware(
        kind=hw["kind"],
        name=hw["name"],
        cpu_model=hw.get("cpu_model"),
        vcpus=vcpus,
        gpu_name=hw.get("gpu_name"),
        instance=hw.get("instance"),
    )
    if (
        not isinstance(columns, list)
        or not columns
        or not all(isinstance(c, str) and c for c in columns)
        or len(set(columns)) != len(columns)
    ):
        raise _fail(path, f"{where}: columns must be a list of distinct names")
    if not isinstance(rows, dict) or not rows:
        raise _fail(path, f"{where}: rows must be a non-empty object keyed by batch")
    cells: Dict[Tuple[str, int], Cell] = {}
    batches = []
    for key, row in rows.items():
        try:
            batch = int(key)
        except (TypeError, ValueError):
            raise _fail(path, f"{where}: row key {key!r} is not a batch size") from None
        if batch < 1 or str(batch) != str(key).strip():
            raise _fail(path, f"{where}: row key {key!r} is not a batch size")
        if not isinstance(row, dict) or set(row) != set(columns):
            raise _fail(path, f"{where}: row {key} must have exactly the table's columns")
        for col in columns:
            v = row[col]
            if v == _OOM:
                cells[(col, batch)] = Cell(None, True)
            elif isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0:
                cells[(col, batch)] = Cell(float(v), False)
            else:
                raise _fail(path, f"{where}: cell {col!r} batch {key} must be a positive number or 'OOM', not {v!r}")
        batches.append(batch)
    conditions = raw.get("conditions", {})
    if not isinstance(conditions, dict):
        raise _fail(path, f"{where}: conditions must be an object")
    return Table(
        id=tid,
        mode=mode,
        hardware=hardware,
        columns=tuple(columns),
        batches=tuple(sorted(batches)),
        alternate=alternate,
        conditions=MappingProxyType(dict(conditions)),
        _cells=MappingProxyType(cells),
        source_file=str(path),
    )


def _load_file(path: Path) -> List[Table]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _fail(path, f"cannot read: {exc}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _fail(path, f"not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise _fail(path, "top level must be an object")
    if doc.get("schema") != SCHEMA_VERSION:
        raise _fail(path, f"schema must be {SCHEMA_VERSION}, found {doc.get('schema')!r}")
    raw_tables = doc.get("tables")
    if not isinstance(raw_tables, list):
        raise _fail(path, "'tables' must be a list")
    return [_parse_table(path, i, t) for i, t in enumerate(raw_tables)]


def load_tables(directory: Optional[Path] = None) -> List[Table]:
    """All tables of every ``*.json`` file in ``directory`` (default: the package's
    ``data/documented``), in file order then file-internal order."""
    d = Path(directory) if directory is not None else DEFAULT_DIRECTORY
    if not d.is_dir():
        raise TableDataError(f"{d}: table directory not found")
    tables: List[Table] = []
    seen: Dict[str, str] = {}
    for path in sorted(d.glob("*.json")):
        for t in _load_file(path):
            if t.id in seen:
                raise _fail(path, f"table id {t.id!r} already defined in {seen[t.id]}")
            seen[t.id] = str(path)
            tables.append(t)
    return tables


_CACHE: Dict[str, List[Table]] = {}


def default_tables() -> List[Table]:
    """The package's tables, loaded once."""
    key = str(DEFAULT_DIRECTORY)
    if key not in _CACHE:
        _CACHE[key] = load_tables()
    return _CACHE[key]
