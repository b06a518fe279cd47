"""Your own network as a cell: parse the reference and the inputs, name the cell by its graph.

Parent side, standard library only (the child side imports it too, for the digest):

* a **reference** is a zoo name, a symbol JSON file (``Symbol.save``, or the
  ``*-symbol.json`` of ``HybridBlock.export``, optionally with its ``*-0000.params`` given
  as ``params=``: names ``arg:...`` / ``aux:...``), or ``package.module:function`` returning a
  Symbol or a HybridBlock (importable by the worker: the current directory and PYTHONPATH);
* **inputs** are given without the batch dimension (the cell's batch is prepended):
  ``input_shape=(3, 224, 224)`` for one input named ``data``, or
  ``inputs=[{"name": "tokens", "shape": [128], "dtype": "int64", "high": 30000}, ...]``, or
  the command-line form ``data:3x224x224`` / ``tokens:128:int64:30000,mask:128`` (name,
  shape with ``x``, optional dtype, optional upper bound for integer inputs);
* the **cell name** is the file stem or function name plus 12 hex digits of a SHA-256 of
  the canonical graph: the graph JSON with MXNet's ``mxnet_version`` attribute removed and
  keys sorted, so a changed model is a new cell while an MXNet upgrade compares the same cell.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

DTYPES = ("float32", "float16", "float64", "int32", "int64", "uint8", "int8")
INTEGER_DTYPES = ("int32", "int64", "uint8", "int8")
_CALLABLE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


class UserModelError(ValueError):
    """A model reference or input description that cannot be used (one-line message)."""


@dataclasses.dataclass(frozen=True)
class InputSpec:
    name: str
    shape: Tuple[int, ...]
    dtype: str = "float32"
    high: Optional[int] = None

    def __post_init__(self):
        if not self.name or not re.match(r"^[A-Za-z_][\w.]*$", self.name):
            raise UserModelError(f"input name {self.name!r} is not a valid name")
        if not self.shape or any(not isinstance(d, int) or isinstance(d, bool) or d < 1 for d in self.shape):
            raise UserModelError(f"input {self.name}: shape {self.shape!r} must be positive integers "
                                 "(without the batch dimension)")
        if self.dtype not in DTYPES:
            raise UserModelError(f"input {self.name}: unknown dtype {self.dtype!r} (known: {', '.join(DTYPES)})")
        if self.high is not None and (self.dtype not in INTEGER_DTYPES or self.high < 1):
            raise UserModelError(f"input {self.name}: high={self.high!r} is only for integer inputs and must be >= 1")

    def to_dict(self) -> Dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype, "high": self.high}


def _spec_from_mapping(d: Mapping[str, Any]) -> InputSpec:
    unknown = set(d) - {"name", "shape", "dtype", "high"}
    if unknown:
        raise UserModelError(f"unknown input fields {sorted(unknown)} (known: name, shape, dtype, high)")
    for field in ("name", "shape"):
        if field not in d:
            raise UserModelError(f"an input needs a {field!r}")
    try:
        shape = tuple(int(x) for x in d["shape"])
        high = None if d.get("high") is None else int(d["high"])
    except (TypeError, ValueError):
        raise UserModelError(f"input {d.get('name')!r}: shape {d.get('shape')!r} or high {d.get('high')!r} "
                             "is not made of integers") from None
    return InputSpec(str(d["name"]), shape, str(d.get("dtype") or "float32"), high)


def parse_input_text(text: str) -> Tuple[InputSpec, ...]:
    """``data:3x224x224`` or ``tokens:128:int64:30000,mask:128`` (see the module doc)."""
    out = []
    for part in (p.strip() for p in (text or "").split(",")):
        if not part:
            continue
        fields = part.split(":")
        if len(fields) < 2 or len(fields) > 4:
            raise UserModelError(f"--perf-input {part!r}: expected name:shape[:dtype[:high]], e.g. data:3x224x224")
        name, shape = fields[0], fields[1]
        if not re.fullmatch(r"\d+(x\d+)*", shape):
            raise UserModelError(f"--perf-input {part!r}: shape {shape!r} is not like 3x224x224")
        dtype = fields[2] if len(fields) > 2 and fields[2] else "float32"
        high = fields[3] if len(fields) > 3 else None
        if high is not None and not high.isdigit():
            raise UserModelError(f"--perf-input {part!r}: high {high!r} is not a positive integer")
        out.append(InputSpec(name, tuple(int(x) for x in shape.split("x")), dtype, int(high) if high else None))
    if not out:
        raise UserModelError("--perf-input: no input given (e.g. data:3x224x224)")
    return tuple(out)


def parse_inputs(input_shape: Optional[Sequence[int]] = None, inputs: Optional[Sequence[Mapping[str, Any]]] = None,
                 text: Optional[str] = None) -> Tuple[InputSpec, ...]:
    """The inputs of a user's network from exactly one of the three forms."""
    given = [x is not None for x in (input_shape, inputs, text)]
    if sum(given) != 1:
        raise UserModelError("your own network needs its inputs: input_shape=(3, 224, 224), "
                             "inputs=[{name, shape, dtype, high}], or --perf-input data:3x224x224 (one of them)")
    if text is not None:
        specs = parse_input_text(text)
    elif input_shape is not None:
        try:
            shape = tuple(int(x) for x in input_shape)
        except (TypeError, ValueError):
            raise UserModelError(f"input_shape {input_shape!r} is not a tuple of integers") from None
        specs = (InputSpec("data", shape),)
    else:
        specs = tuple(_spec_from_mapping(d) for d in inputs)
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise UserModelError(f"duplicate input names in {names}")
    return specs


@dataclasses.dataclass(frozen=True)
class ModelRef:
    kind: str  # "zoo" | "symbol-file" | "callable"
    target: str
    params: Optional[str] = None

    @property
    def stem(self) -> str:
        if self.kind == "callable":
            return self.target.rpartition(":")[2]
        base = os.path.basename(self.target)
        for suffix in ("-symbol.json", ".json"):
            if base.endswith(suffix):
                return base[: -len(suffix)]
        return base

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)


def parse_model_ref(text: str, params: Optional[str] = None) -> ModelRef:
    from pytest_mxperf import zoo
    text = (text or "").strip()
    if text in zoo.MODELS:
        return ModelRef("zoo", text)
    if text.endswith(".json"):
        if not os.path.isfile(text):
            raise UserModelError(f"model file {text} does not exist")
        if params is not None and not os.path.isfile(params):
            raise UserModelError(f"params file {params} does not exist")
        return ModelRef("symbol-file", os.path.abspath(text), os.path.abspath(params) if params else None)
    if _CALLABLE.match(text):
        if params is not None:
            raise UserModelError("params= goes with a symbol JSON file, not with a package.module:function")
        return ModelRef("callable", text)
    raise UserModelError(f"unknown model {text!r}: give a zoo name ({', '.join(zoo.model_names())}), a symbol "
                         "JSON file (Symbol.save / HybridBlock.export), or package.module:function")


#: MXNet's output ops that are a loss of their data (first input) against a label (second
#: input): what ``Module.save_checkpoint`` writes for a classifier of MXNet's
#: example/image-classification (SoftmaxOutput) or a regressor. "Softmax" is SoftmaxOutput's
#: old name, found in older symbol files.
LABEL_OUTPUT_OPS = ("SoftmaxOutput", "Softmax", "SVMOutput", "LinearRegressionOutput", "LogisticRegressionOutput",
                    "MAERegressionOutput")
#: ... whose label holds class indices (the others' labels are real values of the output's shape)
CLASS_LABEL_OPS = ("SoftmaxOutput", "Softmax", "SVMOutput")


def label_outputs(symbol_json: str) -> List[Dict[str, str]]:
    """The graph's own loss outputs whose label is an input of the graph, in graph order:
    ``[{"op": "SoftmaxOutput", "name": "softmax", "label": "softmax_label"}, ...]``. Their
    labels are labels (fed, or declared and left unbound to score), never weights."""
    nodes = json.loads(symbol_json).get("nodes") or []
    out = []
    for node in nodes:
        inputs = node.get("inputs") or []
        if node.get("op") in LABEL_OUTPUT_OPS and len(inputs) >= 2 and nodes[inputs[1][0]].get("op") == "null":
            out.append({"op": node["op"], "name": node["name"], "label": nodes[inputs[1][0]]["name"]})
    return out


def ends_in_loss(symbol_json: str) -> bool:
    """Whether every output of the graph is one of its ``label_outputs``: then the graph
    trains as it is (its outputs already are losses) and needs no ``loss=``."""
    doc = json.loads(symbol_json)
    nodes, heads = doc.get("nodes") or [], doc.get("heads") or []
    losses = {o["name"] for o in label_outputs(symbol_json)}
    return bool(heads) and all(nodes[h[0]].get("name") in losses for h in heads)


def canonical_graph(symbol_json: str) -> str:
    """The graph JSON without MXNet's version attribute, keys sorted, compact."""
    try:
        doc = json.loads(symbol_json)
    except ValueError as exc:
        raise UserModelError(f"not a symbol JSON file ({str(exc).splitlines()[0][:80]})") from None
    if not isinstance(doc, dict) or "nodes" not in doc:
        raise UserModelError("not a symbol JSON file (no 'nodes')")
    attrs = doc.get("attrs")
    if isinstance(attrs, dict):
        attrs = {k: v for k, v in attrs.items() if k != "mxnet_version"}
        if attrs:
            doc["attrs"] = attrs
        else:
            doc.pop("attrs")
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def canonical_graph_digest(symbol_json: str) -> str:
    return hashlib.sha256(canonical_graph(symbol_json).encode()).hexdigest()[:12]


def cell_model_name(ref: ModelRef, digest: str) -> str:
    """e.g. ``user:my_net@3f2a9c1b0d4e``: stable across machines (no paths)."""
    return f"user:{ref.stem}@{digest}"
