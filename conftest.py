# This repository's own suites need nothing beyond the pytest-mxperf plugin, which is
# registered through its pytest11 entry point. When the package is used from a source
# checkout without being installed, load it from here.
import importlib.util

if importlib.util.find_spec("pytest_mxperf") is not None:
    try:
        from importlib.metadata import entry_points
        _installed = any(ep.value == "pytest_mxperf.plugin" for ep in entry_points(group="pytest11"))
    except Exception:  # pragma: no cover
        _installed = False
    if not _installed:
        pytest_plugins = ["pytest_mxperf.plugin"]
