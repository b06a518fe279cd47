"""pytest-mxperf: a performance regression gate for Apache MXNet workloads.

The pytest process never imports mxnet: every measurement runs in a fresh worker
process (``pytest_mxperf.workers``). Modules here are plain Python that can be used
and tested without pytest; ``plugin.py`` only wires options, markers and fixtures.
"""

__version__ = "0.1.0"
