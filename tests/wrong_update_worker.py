"""The multidevice worker with a wrong data-parallel update: the negative control of
tests/test_multidevice.py.

Usage: python tests/wrong_update_worker.py SPEC.json RESULT.json (as the real worker,
``python -m pytest_mxperf.workers.multidevice``). It wraps the worker's ``train`` so that
the data-parallel side (more than one context) trains with a 1% larger learning rate, the
single-context reference unchanged, and then runs the worker as it is: a correct
comparison must report the two updates as different.
"""

from pytest_mxperf.workers import multidevice

LR_SCALE = 1.01
_train = multidevice.train


def wrong_train(mx, sym, init, xs, ys, ctxs, kvstore, lr):
    if len(ctxs) > 1:
        lr = lr * LR_SCALE
    return _train(mx, sym, init, xs, ys, ctxs, kvstore, lr)


multidevice.train = wrong_train

if __name__ == "__main__":
    multidevice.main()
