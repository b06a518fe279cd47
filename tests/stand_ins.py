"""Stand-ins the tests put in place of a worker process."""

import contextlib
from unittest import mock

from pytest_mxperf.measure import profiling


@contextlib.contextmanager
def no_profile_worker():
    """Sessions replayed from recorded figures have no MXNet worker to profile their failing
    cells: the profile worker answers "unavailable", as it does where MXNet cannot run one."""
    def unavailable(*args, **kwargs):
        return {"status": "unavailable", "message": "replayed session: no worker to profile", "operators": []}
    with mock.patch.object(profiling, "run_profile", unavailable):
        yield
