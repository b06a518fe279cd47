"""Scoring (forward-only) throughput, held to the published MXNet tables.

The method is MXNet's ``example/image-classification/benchmark_score.py``: forward only
(``for_training=False``), random input, batch grid 1, 2, 4, 8, 16, 32, the networks of
MXNet commit 0a03417. Which table applies (documented figure on matching hardware, a
legacy-sanity floor on other hardware of the same class, or none) is decided by
``pytest_mxperf.judge.floors.select_floor`` and shown in the report.
"""

import pytest

# Heavy on a small CPU (2 cores: about 3-5 s per batch at the largest sizes):
# model -> smallest batch size that is deselected unless --perf-slow.
# The default CPU session (a daily gate, minutes on 2 cores) scores AlexNet, Inception-BN and
# ResNet-50 v2 at batch 1 and 8; --perf-slow runs the whole grid (about 25 min on 2 cores).
SLOW_ON_CPU = {"vgg11": 1, "resnet152_v2": 1, "inception-v3": 1}
DEFAULT_BATCHES = (1, 8)

SCORING_MODELS = ("alexnet", "vgg11", "inception-bn", "inception-v3", "resnet50_v2", "resnet152_v2")


@pytest.mark.scoring
@pytest.mark.mxperf_grid(models=SCORING_MODELS, slow=SLOW_ON_CPU, default_batches=DEFAULT_BATCHES)
def test_scoring_throughput(mxperf, ctx, model, batch_size):
    cell = mxperf.measure(model, batch_size, mode="score", contexts=ctx)
    mxperf.check_floor(cell)
