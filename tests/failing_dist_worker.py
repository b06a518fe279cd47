"""A dist worker that fails on purpose, for tests/test_dist.py.

Run by the launcher as ``python -m failing_dist_worker SPEC.json RESULT.json`` (the
launch spec's ``worker_module``; the test puts tests/ on the launcher's PYTHONPATH, which
the workers inherit). It is ``pytest_mxperf.workers.dist_worker`` unchanged, except that
rank ``FAIL_RANK`` raises ``RuntimeError("injected failure at step 3 (rank 1)")`` right
after its ``FAIL_AT_STEP``-th parameter update: a worker that dies with an error in the
middle of a ``dist_sync`` run, while the other waits for it.

Not imported by the pytest process (it imports mxnet).
"""

import sys
import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import mxnet as mx

from pytest_mxperf.workers import dist_worker

FAIL_RANK = 1
FAIL_AT_STEP = 3

_create_kvstore = mx.kv.create
_update = mx.mod.Module.update
_state = {"rank": None, "steps": 0}


def create_kvstore(*args, **kwargs):
    """mx.kv.create, remembering this worker's rank."""
    kv = _create_kvstore(*args, **kwargs)
    _state["rank"] = kv.rank
    return kv


def update(self, *args, **kwargs):
    """Module.update, failing on rank FAIL_RANK once it has made FAIL_AT_STEP updates."""
    out = _update(self, *args, **kwargs)
    _state["steps"] += 1
    if _state["rank"] == FAIL_RANK and _state["steps"] == FAIL_AT_STEP:
        raise RuntimeError(f"injected failure at step {FAIL_AT_STEP} (rank {FAIL_RANK})")
    return out


mx.kv.create = create_kvstore
mx.mod.Module.update = update

if __name__ == "__main__":
    sys.exit(dist_worker.main())
