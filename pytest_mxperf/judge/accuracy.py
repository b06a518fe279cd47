"""Reduced precision's accuracy against float32's, judged like MLPerf (issue #27): the same
network scored on the same images in float32 and in a reduced precision (bfloat16, int8)
passes when the reduced precision's top-1 accuracy is at most ``ACCURACY_TOLERANCE``
below float32's. Pure: accuracies in, one ``AccuracyVerdict`` per reduced dtype out.

A dtype that this machine cannot run (its accuracy None: unsupported, or it failed before
it scored) is neither passed nor failed: ``passed`` is None, and the verdict says so. The
rule is one-sided, as MLPerf's is a floor: a reduced precision that scores above float32
passes, whatever the margin.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Mapping, Optional

#: How far (absolute, as a fraction: 0.01 = 1 percentage point) a reduced precision's
#: accuracy may fall below float32's. Why 1%: MLPerf Inference's closed division lets a
#: submission quantize or cast the reference network if it keeps ">= 99% of FP32" accuracy
#: (ResNet-50 v1.5: 99% of 76.46%); reduced precision may cost 1% and no more. MLPerf's 1%
#: is relative; issue #27 asks for 1 point absolute, which for a LeNet trained to the
#: digits' 0.95 target (docs/how-it-measures.md, "What is measured, and how each figure is
#: judged", *Reduced precision on CPU*) is within 0.05 points of the relative rule. On the
#: digits' 288 evaluation images one image is 0.35 points: up to 2 more misclassified images
#: pass, 3 fail.
ACCURACY_TOLERANCE = 0.01

#: accuracies are ratios of image counts; a gap is rounded to this many decimals before the
#: comparison, so that e.g. 0.95 - 0.94 (0.010000000000000009 in binary) is exactly 1 point
_GAP_DECIMALS = 12

REFERENCE = "float32"


@dataclasses.dataclass(frozen=True)
class AccuracyVerdict:
    dtype: str
    accuracy: Optional[float]   # None: not measured here (unsupported, or failed before scoring)
    reference: float            # float32's accuracy
    gap: Optional[float]        # accuracy - reference (negative: the reduced precision lost)
    passed: Optional[bool]      # None: neither pass nor fail (not measured)
    tolerance: float
    reason: str                 # one line

    def to_dict(self) -> Dict[str, object]:
        return dataclasses.asdict(self)


def judge_accuracies(accuracies: Mapping[str, Optional[float]], *, reference: str = REFERENCE,
                     tolerance: float = ACCURACY_TOLERANCE,
                     unmeasured: Optional[Mapping[str, str]] = None) -> Dict[str, AccuracyVerdict]:
    """Each reduced dtype of ``accuracies`` ({dtype: top-1 accuracy in [0, 1], or None when
    this machine did not measure it}) against ``reference``'s: passed when
    ``accuracy >= reference - tolerance``. ``unmeasured``: why a dtype has no accuracy (a
    reason shown in its verdict). Raises ValueError without the reference's accuracy or for
    an accuracy outside [0, 1]."""
    ref = accuracies.get(reference)
    if ref is None:
        raise ValueError(f"no {reference} accuracy: nothing to judge the reduced precisions against")
    for d, a in accuracies.items():
        if a is not None and not 0.0 <= a <= 1.0:
            raise ValueError(f"{d} accuracy {a!r} is not in [0, 1]")
    out: Dict[str, AccuracyVerdict] = {}
    for d, a in accuracies.items():
        if d == reference:
            continue
        if a is None:
            why = (unmeasured or {}).get(d) or "not measured here"
            out[d] = AccuracyVerdict(d, None, ref, None, None, tolerance, f"{d}: neither passed nor failed: {why}")
            continue
        gap = round(a - ref, _GAP_DECIMALS)
        passed = gap >= -tolerance
        said = (f"{d} {100 * a:.2f}% vs {reference} {100 * ref:.2f}%: {100 * gap:+.2f} points "
                f"({'within' if passed else 'beyond'} the {100 * tolerance:g}-point tolerance)")
        out[d] = AccuracyVerdict(d, a, ref, gap, passed, tolerance, said)
    return out
