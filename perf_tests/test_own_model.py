"""Your own networks, from the command line (``--perf-model-file``), measured like the zoo.

    pytest perf_tests -m cpu --perf-model-file models/net-symbol.json --perf-params models/net-0000.params \\
        --perf-input data:3x224x224 --perf-batch-sizes 1,8

Each file (or ``package.module:function``) is scored at each batch size on each context
list, in fresh worker processes, and judged against the machine's baseline (or the A/B
reference) under a cell named after it and the digest of its graph. ``--perf-loss`` adds
training cells; a graph that ends in its own loss (a ``Module.save_checkpoint`` of a
classifier ending in SoftmaxOutput, or of a regressor) is trained without it. Without
``--perf-model-file`` there is nothing to measure here.
"""

import pytest

OWN_BATCHES = (1, 8)


@pytest.mark.scoring
@pytest.mark.mxperf_grid(batch_sizes=OWN_BATCHES)
def test_own_model_scoring(mxperf, ctx, own_model, batch_size):
    o = mxperf.options
    mxperf.expect_ok(mxperf.measure(own_model, batch_size, contexts=ctx, params=o.model_params,
                                    input_spec=o.model_inputs))


@pytest.mark.training
@pytest.mark.mxperf_grid(batch_sizes=OWN_BATCHES)
def test_own_model_training(mxperf, ctx, own_model, batch_size):
    o = mxperf.options
    if not o.model_loss and not mxperf.trains_as_is(own_model, params=o.model_params, input_spec=o.model_inputs):
        pytest.skip("no --perf-loss and the graph does not end in a loss: your network is only scored")
    mxperf.expect_ok(mxperf.measure(own_model, batch_size, mode="train", contexts=ctx, params=o.model_params,
                                    input_spec=o.model_inputs, loss=o.model_loss))
