"""FLOPs of a zoo network per sample, and how far a measured throughput is from the peak.

Pure arithmetic: no mxnet at module level (nor anywhere here). The peak to compare with is
the one ``pytest_mxperf.workers.peak`` measures on the machine (oneDNN's FullyConnected or
3x3 Convolution in float32, best round).

Approximations, stated once:

- Forward FLOPs per sample = 2 x ``ModelSpec.macs`` (multiply-accumulates of Convolution
  and FullyConnected layers only, counted by ``zoo.count``). BatchNorm, activations,
  pooling, LRN, element-wise adds and the softmax are left out: they are memory-bound and
  small in FLOPs next to the convolutions of these networks.
- Training FLOPs per sample = 3 x forward: the backward pass costs about twice the forward
  (one product for the gradient of the input, one for the gradient of the weights, each
  as large as the forward one); the optimizer update is left out. The first layer's input
  gradient, which frameworks skip, is counted, so this slightly overstates training work.
"""

from __future__ import annotations

from typing import Optional, Union

SCORE_MODES = ("score", "latency")
TRAIN_MODES = ("train",)
TRAIN_FACTOR = 3.0  # forward + backward (~2 x forward)


def _spec(model_spec):
    if isinstance(model_spec, str):
        from pytest_mxperf.zoo import get_model
        return get_model(model_spec)
    return model_spec


def forward_flops_per_sample(model_spec) -> float:
    """2 x forward MACs (conv + FC) per sample; ``model_spec`` is a ModelSpec or a zoo name."""
    return 2.0 * float(_spec(model_spec).macs)


def flops_per_sample(model_spec, mode: str = "score") -> float:
    """FLOPs per sample of ``mode``: forward (``score``, ``latency``) or forward + backward
    (``train``, 3 x forward). An approximation: see the module docstring."""
    return flops_from_macs(_spec(model_spec).macs, mode)


def flops_from_macs(forward_macs: float, mode: str = "score") -> float:
    """FLOPs per sample of ``mode`` from the forward multiply-accumulates per sample (for a
    network outside the zoo: the worker counts them from the user's graph)."""
    forward = 2.0 * float(forward_macs)
    if mode in SCORE_MODES:
        return forward
    if mode in TRAIN_MODES:
        return TRAIN_FACTOR * forward
    raise ValueError(f"no FLOP count for mode {mode!r} (known: {', '.join(SCORE_MODES + TRAIN_MODES)})")


def achieved_gflops(samples_per_s: float, flops_per_sample: float) -> float:
    """GFLOP/s achieved at ``samples_per_s`` (e.g. img/s) of ``flops_per_sample`` each."""
    if samples_per_s < 0 or flops_per_sample < 0:
        raise ValueError("throughput and FLOPs must be non-negative")
    return samples_per_s * flops_per_sample / 1e9


def fraction_of_peak(achieved: float, peak_gflops: Optional[float]) -> Optional[float]:
    """``achieved`` GFLOP/s as a fraction of ``peak_gflops`` (None when there is no peak)."""
    if peak_gflops is None or peak_gflops <= 0:
        return None
    return achieved / peak_gflops


def model_fraction_of_peak(model_spec: Union[str, object], mode: str, samples_per_s: float,
                           peak_gflops: Optional[float]) -> Optional[float]:
    """The fraction of the peak a model's measured throughput reaches (convenience)."""
    return fraction_of_peak(achieved_gflops(samples_per_s, flops_per_sample(model_spec, mode)), peak_gflops)
