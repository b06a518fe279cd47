"""Whether a cell computed the same answers as its reference (the baseline's, or the A/B
reference install's): the answer records of ``workers/answers.py`` compared, with a
tolerance that depends on the cell's dtype. Pure: no processes, no files.

The distance of two sketches estimates ||a - b|| / ||b|| (``workers/answers.distance``).
Each tolerance below is written with its reason and what it was measured against
(2026-11-25, AMD EPYC, mxnet 1.9.1 / 1.6.0 wheels; the gate on real candidates:
docs/how-it-measures.md, "What is measured, and how each figure is judged", *Answers beside
speed*):

* float32, an operator's output: **1e-4**. A different kernel or summation order moves a
  float32 result by a few units in the last place, compounded over the layers: MXNet 1.6.0
  against 1.9.1 (other oneDNN, other GEMM blocking) differ by at most 4.5e-6 at any operator
  of AlexNet, Inception-BN or ResNet-50 v2; oneDNN's fusion off changes none. One ReLU made
  leaky with a slope of 0.001 (a wrong result smaller than any real bug we know) moves the
  first ReLU's output by 7e-4 or more (the distance is the slope times a fixed ratio of the
  input's negative to positive parts: 7.1e-3 measured at a slope of 0.01).
* float32, an output: **1e-3**, or 8 times what float32 can resolve when the output is a
  softmax. Outputs of the zoo networks are probabilities, sketched as centred
  log-probabilities; with random weights the logits are small and float32 keeps a
  probability to 2**-24 of itself, so two equal computations differ by up to
  2**-24 * sqrt(n) / ||centred log p|| (2.5e-4 for Inception-BN at b8, seen: 2.3e-4 between
  1.6.0 and 1.9.1). A ReLU with slope 0.01 moves the outputs by 1.7e-2 to 3.3e-2.
* float16 (GPU): **1e-2** for both: a half keeps 11 bits (4.9e-4 a rounding), and a
  network's operators round many times; kernels and cuDNN's algorithms differ between
  releases. Not run here (no GPU).
* bfloat16: **5e-2**: 8 bits (3.9e-3 a rounding); which operators run in bfloat16 is AMP's
  list, which releases change.
* int8: outputs **0.1**, operators not compared: the quantized graph's nodes and their
  calibrated ranges are the release's own; the outputs of the same quantized graph agree.
* training (float32): the loss and the weights after one step, **1e-4**, the outputs as
  above. A graph with operators that draw from MXNet's RNG (Dropout) is compared between
  two releases only on its operators (inference), never on its training step: the draws
  are each release's own.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

#: a float32 rounding, relative
FLOAT32_ULP = 2.0 ** -24
#: how many times the float32 resolution of a softmax's outputs their tolerance allows
RESOLUTION_FACTOR = 8.0


@dataclasses.dataclass(frozen=True)
class Tolerance:
    outputs: float
    ops: Optional[float]   # None: operators are not compared
    train: float           # the loss and the weights after the training step
    reason: str


TOLERANCES: Dict[str, Tolerance] = {
    "float32": Tolerance(1e-3, 1e-4, 1e-4, "float32: kernels and summation orders differ by a few roundings "
                                           "(at most 4.5e-6 seen between MXNet releases)"),
    "float16": Tolerance(1e-2, 1e-2, 1e-2, "float16: 11 bits a rounding, many roundings a network"),
    "bfloat16": Tolerance(5e-2, 5e-2, 5e-2, "bfloat16: 8 bits a rounding; AMP's operator lists differ"),
    "int8": Tolerance(1e-1, None, 1e-1, "int8: quantized graphs and calibrated ranges are each release's own"),
}

SAME, DIFFERENT, NOT_COMPARED = "same", "different", "not-compared"
#: the verdict kind of each check's kind, and the suffix of an answers verdict's key
VERDICT_KINDS = {DIFFERENT: "wrong-answers", SAME: "same-answers", NOT_COMPARED: "answers-not-compared"}
KEY_SUFFIX = "#answers"


def summary(kinds: Iterable[Optional[str]]) -> Optional[str]:
    """The answers in one clause of the session's first line (``kinds``: the kinds of the
    session's answers verdicts), None when none were compared."""
    kinds = list(kinds)
    wrong, same = kinds.count(VERDICT_KINDS[DIFFERENT]), kinds.count(VERDICT_KINDS[SAME])
    if not (wrong or same):
        return None
    if wrong:
        return f"answers: {wrong} cell(s) computed something else, {same} the same"
    return f"answers: the same in {same} cell(s)"


@dataclasses.dataclass(frozen=True)
class AnswerCheck:
    """A cell's answers against its reference's."""

    kind: str                                  # SAME / DIFFERENT / NOT_COMPARED
    reason: str                                # one line
    distance: Optional[float] = None           # the largest distance, relative
    tolerance: Optional[float] = None          # the tolerance of what was largest over it
    first_op: Optional[Tuple[str, float]] = None  # the first operator (graph order) beyond its tolerance


def distance(a: Mapping[str, Any], b: Mapping[str, Any]) -> Optional[float]:
    """||a - b|| / ||b|| estimated from two sketches (b the reference); None when they are
    not sketches of arrays of one shape and kind; inf when one has non-finite values."""
    if (a.get("shape") != b.get("shape") or a.get("of") != b.get("of")
            or len(a.get("sums") or []) != len(b.get("sums") or [])):
        return None
    if bool(a.get("nonfinite")) != bool(b.get("nonfinite")):
        return math.inf
    d = math.sqrt(sum((x - y) ** 2 for x, y in zip(a["sums"], b["sums"])))
    ref = math.sqrt(sum(y * y for y in b["sums"]))
    if ref == 0.0:
        return 0.0 if d == 0.0 else math.inf
    return d / ref


def output_tolerance(sketch: Mapping[str, Any], tol: Tolerance) -> float:
    """An output's tolerance: the dtype's, or for a softmax's output sketched as centred
    log-probabilities at least ``RESOLUTION_FACTOR`` times what float32 resolves of it."""
    if sketch.get("of") != "centred-log" or not sketch.get("norm"):
        return tol.outputs
    n = math.prod(sketch.get("shape") or [1])
    return max(tol.outputs, RESOLUTION_FACTOR * FLOAT32_ULP * math.sqrt(n) / float(sketch["norm"]))


def by_seed(records: Iterable[Mapping[str, Any]]) -> Dict[int, Mapping[str, Any]]:
    """One answer record a seed (the one with the operators' outputs when there are two):
    what a comparison pairs, and what a baseline keeps."""
    out: Dict[int, Mapping[str, Any]] = {}
    for r in records:
        if isinstance(r, Mapping) and isinstance(r.get("seed"), int):
            # a record with the operators' outputs is the one kept for its seed
            if r["seed"] not in out or (r.get("ops") and not out[r["seed"]].get("ops")):
                out[r["seed"]] = r
    return out


def _walk_ops(ops: Sequence, ref_ops: Sequence, tolerance: float):
    """The operator outputs of ``ops`` (graph order) against those of the same name in
    ``ref_ops``: (the first beyond ``tolerance`` as (name, distance), or None; how many were
    compared; the largest distance among them). A shape that differs is at distance inf."""
    ref = {name: s for name, s in ref_ops}
    first, compared, largest = None, 0, 0.0
    for name, s in ops:
        if name not in ref:
            continue
        d = distance(s, ref[name])
        d = math.inf if d is None else d
        compared += 1
        largest = max(largest, d)
        if first is None and d > tolerance:
            first = (name, d)
    return first, compared, largest


def output_distance(records: Sequence[Mapping[str, Any]], reference: Sequence[Mapping[str, Any]]) -> Optional[float]:
    """The largest distance of ``records``' outputs from ``reference``'s over the seeds both
    have (e.g. an int8 cell's outputs from its float32 network's: same weights, same
    inputs); None when no seed pairs or no output is comparable."""
    cur, ref = by_seed(records), by_seed(reference)
    ds = [distance(x, y) for s in set(cur) & set(ref)
          for x, y in zip(cur[s].get("outputs") or [], ref[s].get("outputs") or [])]
    ds = [d for d in ds if d is not None]
    return max(ds) if ds else None


def compare(current: Sequence[Mapping[str, Any]], reference: Sequence[Mapping[str, Any]], dtype: str = "float32",
            *, same_release: bool = True) -> AnswerCheck:
    """The cell's answer records against its reference's, pairing the records of one seed.
    ``same_release``: whether both sides ran the same MXNet release (draws from MXNet's RNG
    are compared only then)."""
    tol = TOLERANCES.get(dtype, TOLERANCES["float32"])
    cur, ref = by_seed(current), by_seed(reference)
    seeds = sorted(set(cur) & set(ref))
    if not cur:
        return AnswerCheck(NOT_COMPARED, "no answers recorded by this session's processes")
    if not ref:
        return AnswerCheck(NOT_COMPARED, "no answers recorded by the reference")
    if not seeds:
        return AnswerCheck(NOT_COMPARED, f"no process of the same seed on both sides (this session "
                                         f"{sorted(cur)}, reference {sorted(ref)})")
    worst = (-1.0, 0.0, tol.outputs, "")  # the answers' worst: (distance / tolerance, distance, tolerance, what)
    largest_op = 0.0                       # operators: the largest distance, and how many were compared
    ops_compared = 0
    first_op = None
    notes: List[str] = []

    def seen(d: Optional[float], t: float, what: str) -> None:
        nonlocal worst
        d = math.inf if d is None else d
        ratio = d / t if t > 0 else math.inf
        if ratio > worst[0]:
            worst = (ratio, d, t, what)

    for seed in seeds:
        a, b = cur[seed], ref[seed]
        if a.get("kind") != b.get("kind"):
            return AnswerCheck(NOT_COMPARED, f"answers of another kind ({a.get('kind')} / {b.get('kind')})")
        draws = bool(a.get("random_ops") or b.get("random_ops")) and not same_release
        if a.get("kind") == "train" and draws:
            notes.append(f"its training step is not compared: {', '.join(a.get('random_ops') or b['random_ops'])} "
                         "draws from each release's own RNG")
        else:
            outs_a, outs_b = a.get("outputs") or [], b.get("outputs") or []
            if len(outs_a) != len(outs_b):
                seen(math.inf, tol.outputs, "the number of outputs")
            for i, (x, y) in enumerate(zip(outs_a, outs_b)):
                seen(distance(x, y), output_tolerance(y, tol), "the outputs" if len(outs_a) == 1 else f"output {i}")
            if a.get("kind") == "train":
                if a.get("weights") and b.get("weights"):
                    seen(distance(a["weights"], b["weights"]), tol.train, "the weights after the step")
                if a.get("loss") and b.get("loss"):
                    la, lb = a["loss"], b["loss"]
                    d = max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(la, lb)) if len(la) == len(lb) else None
                    seen(d, tol.train, "the loss")
        if tol.ops is not None and a.get("ops") and b.get("ops"):
            op, n_ops, largest = _walk_ops(a["ops"], b["ops"], tol.ops)
            first_op = first_op or op
            ops_compared += n_ops
            largest_op = max(largest_op, largest)
    ratio, d, t, what = worst
    note = ("; " + "; ".join(dict.fromkeys(notes))) if notes else ""
    if ratio < 0 and first_op is None:
        return AnswerCheck(NOT_COMPARED, "nothing comparable" + note)
    said = f"{what} off by {_e(d)} (tolerance {_e(t)}, {dtype})" if ratio >= 0 else "no outputs compared"
    if ratio > 1.0 or first_op is not None:
        if first_op is not None:
            where = f"; first operator whose output differs: {first_op[0]} (by {_e(first_op[1])}, tolerance {_e(tol.ops)})"
        elif tol.ops is not None:
            where = "; no operator's output differs without fusion: the difference is in a fused kernel or the step"
        else:
            where = ""
        if ratio <= 1.0:
            said = f"{what} within tolerance ({_e(d)} of {_e(t)}, {dtype})"
        return AnswerCheck(DIFFERENT, f"answers differ: {said}{where}{note}", d if ratio >= 0 else None,
                           t if ratio >= 0 else None, first_op)
    ops = (f"; {ops_compared} operator outputs within {_e(tol.ops)} (largest {_e(largest_op)})"
           if ops_compared else "")
    return AnswerCheck(SAME, f"same answers: {said}{ops}{note}", d, t)


def _e(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.1e}"
