"""pytest-mxperf's own hooks, for conftest.py files and other plugins (as pytest-benchmark's).

Implement them in a ``conftest.py``::

    def pytest_mxperf_update_machine_info(config, machine_info):
        machine_info["rack"] = "b12"

    def pytest_mxperf_update_results(config, results):
        results["session"]["ci_job"] = os.environ.get("CI_JOB_ID")
"""


def pytest_mxperf_update_machine_info(config, machine_info):
    """Add facts to the machine description recorded beside every figure (results.json,
    baselines). ``machine_info["id"]`` names the baseline file: change it only on purpose."""


def pytest_mxperf_update_results(config, results):
    """Change the results document ({"machine", "session", "records"}) in place before
    ``--perf-report`` writes it as results.json."""
