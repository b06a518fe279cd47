"""The child side of the process boundary: code that runs inside a fresh worker process.

``protocol`` is what every worker shares (spec in, one JSON result out, one-line errors,
memory cap, MXNet facts). Each other module is one kind of measurement, run as
``python -m pytest_mxperf.workers.<kind> SPEC.json RESULT.json``:

- ``throughput``: score / train / latency cells of a zoo model or a user's own network
- ``commbench``: kvstore push/pull cost per batch (``tools/bandwidth``-style)
- ``multidevice``: N contexts compute the same update as one
- ``convergence``: time to a target accuracy on the shipped digits
- ``dist_worker``: one ps-lite worker of a distributed kvstore cluster
"""
