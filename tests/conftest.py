import sys

import pytest

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True, scope="session")
def _pytest_process_never_imports_mxnet():
    yield
    assert "mxnet" not in sys.modules, "the pytest process imported mxnet; measurements belong in workers"
