"""The README's GPU generations table is the one gpu_arch generates, and its extras are
the project's (a documentation check; no GPU involved)."""

import re
from pathlib import Path

from pytest_mxperf.machine import gpu_arch
from pytest_mxperf.proc import distributions

README = Path(__file__).resolve().parent.parent / "README.md"
GPUS = README.parent / "docs" / "gpus.md"  # the README's GPU section lives there


def _section():
    text = GPUS.read_text()
    start = text.index("## GPUs\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else len(text)]


def test_the_readme_generations_table_is_the_generated_one():
    m = re.search(r"<!-- gpu-generations begin -->\n(.*?)\n<!-- gpu-generations end -->", _section(), re.S)
    assert m, "docs/gpus.md: the GPU generations table markers are missing"
    assert m.group(1) == gpu_arch.generations_markdown(), \
        "docs/gpus.md's GPU table differs from gpu_arch.generations_markdown(): paste the generated one"


def test_every_extra_the_gpu_section_names_exists():
    named = set(re.findall(r"`(cu\d+)`", _section()))
    assert named and named <= set(distributions.CUDA_EXTRAS_191), named - set(distributions.CUDA_EXTRAS_191)
    pyproject = (README.parent / "pyproject.toml").read_text()
    for extra in named:
        assert re.search(rf"^{extra} = \[\"mxnet-{extra}==1\.9\.1\"", pyproject, re.M), extra
