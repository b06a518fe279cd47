"""A bare benchmark_score.py-style loop, for comparison with the suite's worker.

It is MXNet's example/image-classification/benchmark_score.py reduced to one cell, with
the one change that each batch is timed on its own so that the same estimator (batch size
over the median time per batch) can be applied. Prints one JSON line.

Usage: python bare_score.py MODEL BATCH [NUM_BATCHES]
"""
import json
import sys
import time
import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import mxnet as mx

from pytest_mxperf import zoo


def main():
    model, batch = sys.argv[1], int(sys.argv[2])
    num_batches = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    spec = zoo.get_model(model)
    sym = zoo.build_symbol(model)
    mod = mx.mod.Module(symbol=sym, context=mx.cpu())
    mod.bind(for_training=False, inputs_need_grad=False, data_shapes=[("data", (batch,) + spec.input_shape)])
    mod.init_params(initializer=mx.init.Xavier(magnitude=2.0))
    data = [mx.random.uniform(-1.0, 1.0, shape=shape, ctx=mx.cpu()) for _, shape in mod.data_shapes]
    b = mx.io.DataBatch(data, [])
    dry_run = 5
    times = []
    for i in range(dry_run + num_batches):
        t0 = time.perf_counter()
        mod.forward(b, is_train=False)
        for output in mod.get_outputs():
            output.wait_to_read()
        if i >= dry_run:
            times.append(time.perf_counter() - t0)
    times.sort()
    print(json.dumps({"median_ips": batch / times[len(times) // 2], "seconds_per_batch": times}))


if __name__ == "__main__":
    main()
