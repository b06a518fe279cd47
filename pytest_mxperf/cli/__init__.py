"""Command-line tools: ``python -m pytest_mxperf.cli.compare`` (offline, benchstat-like;
promote a results.json into a baseline) and ``python -m pytest_mxperf.cli.find_release``
(which MXNet release slowed a cell)."""
