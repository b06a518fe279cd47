"""pytest-mxperf: a performance regression gate for Apache MXNet workloads.

The pytest process never imports mxnet: every measurement runs in a fresh worker
process (``pytest_mxperf.workers``). Modules here are plain Python that can be used
and tested without pytest; ``plugin.py`` only wires options, markers and fixtures.
"""

__version__ = "0.1.0"

import os as _os

if "MXPERF_PARENT_PID" in _os.environ:  # started by ``proc.spawn.start`` to run a module of this
    # package: it dies with the process that started it, armed here, before anything else runs
    # (``proc/parent_death.py``)
    from pytest_mxperf.proc.parent_death import arm_from_environment as _arm
    _arm()


def __getattr__(name):
    # ``from pytest_mxperf import CellNotMeasured`` (what reading ``median`` of a cell that did
    # not measure raises), without importing the parent side into every worker that imports
    # this package
    if name == "CellNotMeasured":
        from pytest_mxperf.model.measurement import CellNotMeasured
        return CellNotMeasured
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
