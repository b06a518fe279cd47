"""pytest-mxperf's own hooks, for conftest.py files and other plugins (as pytest-benchmark's).

Implement them in a ``conftest.py``::

    def pytest_mxperf_update_machine_info(config, machine_info):
        machine_info["rack"] = "b12"

    def pytest_mxperf_update_results(config, results):
        results["session"]["ci_job"] = os.environ.get("CI_JOB_ID")
"""

import pytest


def pytest_mxperf_update_machine_info(config, machine_info):
    """Add facts to the machine description recorded beside every figure (results.json,
    baselines). ``machine_info["id"]`` names the baseline file: change it only on purpose."""


def pytest_mxperf_update_results(config, results):
    """Change the results document ({"machine", "session", "records"}) in place before
    ``--perf-report`` writes it as results.json."""


@pytest.hookspec(firstresult=True)
def pytest_mxperf_machine_state(config, part):
    """The machine's state around each worker, given instead of measured: ``part`` is
    "probe" (the calibration probe's figures: ``gemm_gflops``, ``stream_gbps``, ``seconds``;
    optionally its ``setup``, ``machine_state.probe_setup``: without one it is compared with
    every probe) or "load" (other processes' load while the worker ran: ``other_cpus``, ``steal_frac``,
    ``wall_s``). Return a dict to use it, None to measure (the default). For a machine whose
    state is known from elsewhere, and for tests that must decide on a known state."""
