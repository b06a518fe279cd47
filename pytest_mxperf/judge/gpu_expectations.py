"""What a GPU box is held to beyond its baseline, each rule with its source: per kvstore in
multi-GPU weak scaling, float16 against float32, and the multi-device update check's
tolerance (the last two account for TF32, ``machine/tensor_math.py``). Pure: plain facts
in, ``(asserted, text)`` out; no GPU ran these rules here.

The kvstore expectations are MXNet 1.9.1's own words, and no more: its multi-device guide
(``docs/static_site/src/pages/api/faq/multi_devices.md``) says where ``local`` and
``device`` reduce and suggests ``device`` for 4 or more GPUs "for better performance"; it
gives no scaling figure for any kvstore and does not mention ``nccl``; ``perf.md`` ("Multiple
Devices") says only that the kvstore type matters and that "ideally" communication costs
less than computing a batch. So the one asserted kvstore rule is a direction: ``device``
at least as fast as ``local`` on the same 4+ GPUs (within the session's minimum effect, the
smallest change the suite ever calls one); every efficiency is shown. The suite's own 60%
floor for every kvstore on every box, which no source gave, is gone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple

from pytest_mxperf.machine import gpu_arch

MULTI_DEVICES_MD = "MXNet 1.9.1 docs/static_site/src/pages/api/faq/multi_devices.md"
KVSTORE_CREATE_DOC = "mx.kv.create's docstring (python/mxnet/kvstore/base.py, 1.9.1)"

SHOWN = "shown"                    # reported, never asserted
AT_LEAST_LOCAL = "at-least-local"  # not slower than local on the same GPUs (beyond the minimum effect)


@dataclass(frozen=True)
class KvstoreExpectation:
    kvstore: str
    reduces_on: str
    guide: str          # what the source says, quoted
    source: str
    rule: str           # SHOWN or AT_LEAST_LOCAL
    from_gpus: int = 0  # AT_LEAST_LOCAL applies from this many GPUs


KVSTORE_EXPECTATIONS = {e.kvstore: e for e in (
    KvstoreExpectation("local", "the CPU", '"all gradients are copied to CPU memory and weights are updated there"',
                       MULTI_DEVICES_MD, SHOWN),
    KvstoreExpectation("device", "the GPUs",
                       '"When using a large number of GPUs, e.g. >=4, we suggest using `device` for better performance"',
                       MULTI_DEVICES_MD, AT_LEAST_LOCAL, from_gpus=4),
    KvstoreExpectation("nccl", "the GPUs, through NCCL",
                       "nothing: the guide names local and device only, and mx.kv.create lists 'nccl' "
                       "without a word on its speed", f"{MULTI_DEVICES_MD}; {KVSTORE_CREATE_DOC}", SHOWN),
)}


@dataclass(frozen=True)
class KvstoreRule:
    kvstore: str
    gpus: int
    asserted: bool
    compare_with: Optional[str]   # the kvstore this one is held against ("local"), or None
    text: str                     # one line: the rule and its source


def kvstore_rule(kvstore: str, gpus: int, min_effect: float) -> KvstoreRule:
    """The rule a ``kvstore`` cell on ``gpus`` GPUs is held to in weak scaling."""
    e = KVSTORE_EXPECTATIONS.get(kvstore)
    if e is None:
        return KvstoreRule(kvstore, gpus, False, None,
                           f"{kvstore}: MXNet 1.9.1's multi-device guide states nothing of it: shown, not asserted")
    says = f"{e.source}: {e.guide}"
    if e.rule == AT_LEAST_LOCAL and gpus >= e.from_gpus:
        return KvstoreRule(kvstore, gpus, True, "local",
                           f"{kvstore} reduces on {e.reduces_on}: on {gpus} GPUs it must be at least as fast as "
                           f"local on the same GPUs, within the minimum effect {min_effect:.0%} ({says}; a "
                           "direction, no figure)")
    if e.rule == AT_LEAST_LOCAL:
        return KvstoreRule(kvstore, gpus, False, None,
                           f"{kvstore} reduces on {e.reduces_on}; on {gpus} GPUs the guide says nothing of it "
                           f"against local (its suggestion starts at {e.from_gpus}: {says}): shown, not asserted")
    return KvstoreRule(kvstore, gpus, False, None,
                       f"{kvstore} reduces on {e.reduces_on} ({says}); the guide gives no scaling figure for it: "
                       "shown, not asserted")


def judge_against(rule: KvstoreRule, median: float, other_median: float, min_effect: float) -> Tuple[bool, str]:
    """(holds, one line) for an asserted rule: ``median`` (samples/s of this kvstore's cell)
    against ``other_median`` (``rule.compare_with``'s cell on the same GPUs)."""
    ratio = median / other_median if other_median > 0 else float("inf")
    line = (f"{rule.gpus} GPUs: {rule.kvstore} {median:.1f} samples/s is {ratio:.2f}x {rule.compare_with} "
            f"{other_median:.1f}")
    if ratio >= 1.0 - min_effect:
        return True, f"{line}; {rule.text}"
    return False, f"{line}, slower by more than the minimum effect {min_effect:.0%}; {rule.text}"


# -- float16 against float32 ------------------------------------------------------------------

#: float16 / float32 throughput a tensor-core GPU must reach at batch >= FP16_MIN_BATCH when
#: float32 did not run on tensor cores too (the suite's stated margin, not a published figure)
FP16_MIN_SPEEDUP = 1.10
FP16_MIN_BATCH = 16


def float16_rule(gpu: Optional[Mapping[str, Any]], context: str, batch_size: int,
                 tf32: Optional[Mapping[str, Any]], unknown_why: str = "") -> Tuple[bool, str]:
    """(asserted?, why) for a float16 / float32 cell pair on ``context``: ``gpu`` its visible
    GPU (name, compute_capability), ``tf32`` the float32 cell's TF32 fact.

    The margin stands for "float16 reached the tensor cores": on a GPU with tensor cores
    (7.0+) float16 GEMMs and convolutions run there and float32 ones do not, unless float32
    ran as TF32 (8.0+, a CUDA 11 build) or was cast to float16 on them
    (MXNET_CUDA_TENSOR_OP_MATH_ALLOW_CONVERSION): then both use tensor cores, a float16 cell
    no faster than float32 no longer shows that float16 missed them, and no source gives a
    float16-over-TF32 figure for MXNet, so the ratio is shown, not asserted."""
    cc = (gpu or {}).get("compute_capability")
    if cc is None:
        return False, f"compute capability of {context} unknown ({unknown_why or 'no GPU facts'})"
    name = f"{gpu.get('name')} (compute capability {cc})"
    if gpu_arch.parse_cc(cc) < (7, 0):
        return False, f"{name} has no tensor cores: the float16/float32 ratio is shown, not asserted"
    if tf32 and tf32.get("in_use"):
        return False, (f"{name} ran float32 as TF32 on tensor cores too ({tf32.get('why')}): float16 no faster "
                       "than float32 would not show float16 missing the tensor cores; the ratio is shown, "
                       f"not asserted (without TF32 it must be at least {FP16_MIN_SPEEDUP:g}x)")
    if tf32 and tf32.get("fp16_conversion"):
        return False, (f"{name} ran float32 convolutions as float16 on tensor cores "
                       "(MXNET_CUDA_TENSOR_OP_MATH_ALLOW_CONVERSION=1): the ratio is shown, not asserted")
    if tf32 and tf32.get("in_use") is None and gpu_arch.parse_cc(cc) >= (8, 0):
        return False, f"{name}: {tf32.get('why')}: the ratio is shown, not asserted"
    if batch_size < FP16_MIN_BATCH:
        return False, f"batch {batch_size} < {FP16_MIN_BATCH}: the ratio is shown, not asserted"
    return True, f"{name} has tensor cores: float16 must be at least {FP16_MIN_SPEEDUP:g}x float32"


# -- the multi-device update check -------------------------------------------------------------

def update_tolerance(tf32: Optional[Mapping[str, Any]]) -> Tuple[float, str]:
    """(relative tolerance, why) of "N contexts compute the same update as one" for a check
    whose float32 GEMMs ran as ``tf32`` says (None: a CPU check)."""
    from pytest_mxperf.workers.multidevice import UPDATE_REL_TOL, UPDATE_REL_TOL_TF32
    in_use = tf32.get("in_use") if tf32 else False
    if in_use or (tf32 and tf32.get("fp16_conversion")):
        what = "TF32" if in_use else "float16 (MXNET_CUDA_TENSOR_OP_MATH_ALLOW_CONVERSION=1)"
        return UPDATE_REL_TOL_TF32, (
            f"{UPDATE_REL_TOL_TF32:.2e} = 2^-10, one unit in the last place of {what}'s 10-bit mantissa: the two "
            "runs multiply over different batch shapes (cuBLAS / cuDNN may pick other kernels and summation "
            "orders), so an input can round to a neighbouring 10-bit value in one of them; the wrong update of the "
            f"negative control (a 1% larger learning rate) is still 10x beyond it ({tf32.get('why')})")
    if in_use is None:
        return UPDATE_REL_TOL_TF32, (f"{UPDATE_REL_TOL_TF32:.2e} (TF32's, 2^-10), as whether float32 ran as TF32 "
                                     f"is unknown ({tf32.get('why')})")
    return UPDATE_REL_TOL, f"{UPDATE_REL_TOL:.0e}: float32 without TF32 (measured ~5e-7 on two CPU contexts)"
