"""A stand-in ``pynvml`` (nvidia-ml-py's module) for end-to-end tests: the FakeNVML of the
spec that ``$MXPERF_FAKE_NVML`` names (tests/fake_nvml.py). A test puts this directory first
on ``PYTHONPATH``; the product imports ``pynvml`` as it always does. No GPU is involved."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fake_nvml import FakeNVML  # noqa: E402

try:
    _FAKE = FakeNVML.from_json_file(os.environ["MXPERF_FAKE_NVML"])
except (OSError, ValueError, TypeError, KeyError) as exc:  # what a broken install says, in one line
    raise RuntimeError(f"MXPERF_FAKE_NVML={os.environ.get('MXPERF_FAKE_NVML')}: {type(exc).__name__}: {exc}") from None


def __getattr__(name):
    return getattr(_FAKE, name)
