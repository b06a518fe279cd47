import sys

import pytest

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True, scope="session")
def _history_store_of_this_test_session(tmp_path_factory):
    """The sessions the plugin's own tests run (pytester, subprocesses) append to a store of
    this test session, not to the user's default one."""
    import os
    old = os.environ.get("MXPERF_HISTORY")
    os.environ["MXPERF_HISTORY"] = str(tmp_path_factory.mktemp("history") / "history.sqlite")
    yield
    if old is None:
        os.environ.pop("MXPERF_HISTORY", None)
    else:
        os.environ["MXPERF_HISTORY"] = old


@pytest.fixture(autouse=True, scope="session")
def _pytest_process_never_imports_mxnet():
    yield
    assert "mxnet" not in sys.modules, "the pytest process imported mxnet; measurements belong in workers"


STUB = __import__("pathlib").Path(__file__).resolve().parent / "stub_worker.py"


@pytest.fixture
def make_stub_python(tmp_path):
    """make_stub_python(name, **config) -> path of an executable that acts as a Python with
    a stand-in MXNet (tests/stub_worker.py) configured by ``config``."""
    import json
    import os

    def make(name="stub", **config):
        path = tmp_path / f"python-{name}"
        path.write_text("#!/bin/sh\n"
                        f"MXPERF_STUB='{json.dumps(config)}' exec {sys.executable} {STUB} \"$@\"\n")
        os.chmod(path, 0o755)
        return str(path)
    return make
