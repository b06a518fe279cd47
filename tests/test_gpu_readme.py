"""The README's GPU generations table is the one gpu_arch generates, and its extras are
the project's (a documentation check; no GPU involved)."""

import re
from pathlib import Path

from pytest_mxperf.machine import gpu_arch
from pytest_mxperf.proc import distributions

README = Path(__file__).resolve().parent.parent / "README.md"


def _section():
    text = README.read_text()
    start, end = text.index("## GPUs\n"), text.index("\n## ", text.index("## GPUs\n") + 1)
    return text[start:end]


def test_the_readme_generations_table_is_the_generated_one():
    m = re.search(r"<!-- gpu-generations begin -->\n(.*?)\n<!-- gpu-generations end -->", _section(), re.S)
    assert m, "README.md: the GPU generations table markers are missing"
    assert m.group(1) == gpu_arch.generations_markdown(), \
        "README.md's GPU table differs from gpu_arch.generations_markdown(): paste the generated one"


def test_every_extra_the_gpu_section_names_exists():
    named = set(re.findall(r"`(cu\d+)`", _section()))
    assert named and named <= set(distributions.CUDA_EXTRAS_191), named - set(distributions.CUDA_EXTRAS_191)
    pyproject = (README.parent / "pyproject.toml").read_text()
    for extra in named:
        assert re.search(rf"^{extra} = \[\"mxnet-{extra}==1\.9\.1\"", pyproject, re.M), extra
