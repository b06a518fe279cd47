"""Which GPUs the MXNet 1.9.1 CUDA wheels have kernels for (pytest_mxperf/machine/gpu_arch.py)."""

import pytest

from pytest_mxperf.machine import gpu_arch as A
from pytest_mxperf.proc import distributions


# --------------------------------------------------------------------------- the recorded configs

def test_arch_lists_as_in_the_191_cmake_configs():
    raw = {d: w.mxnet_cuda_arch for d, w in A.WHEELS.items()}
    assert raw == {
        "mxnet-cu100": "3.0;5.0;6.0;7.0;7.5",
        "mxnet-cu101": "3.0;5.0;6.0;7.0;7.5",
        "mxnet-cu102": "3.0;5.0;6.0;7.0;7.5",
        "mxnet-cu110": "5.0;6.0;7.0;8.0",
        "mxnet-cu111": "5.0;6.0;7.0;8.0;8.6",
        "mxnet-cu112": "5.0;6.0;7.0;8.0;8.6",
        "mxnet-cu113": "5.0;6.0;7.0;8.0;8.6",
        "mxnet-cu114": "5.0;6.0;7.0;8.0;8.6",
        "mxnet-cu115": "5.0;6.0;7.0;8.0;8.6",
        "mxnet-cu116": "5.0;6.0;7.0;8.0;8.6",
        "mxnet-cu117": "5.0;6.0;7.0;8.0;8.6",
    }
    assert all(w.ptx == () for w in A.WHEELS.values()), "no 1.9.1 config has a +PTX entry"
    assert A.WHEELS["mxnet-cu117"].sass == ((5, 0), (6, 0), (7, 0), (8, 0), (8, 6))
    assert A.WHEELS["mxnet-cu117"].describe() == "sm_50, 60, 70, 80, 86 without PTX"
    assert not A.WHEELS["mxnet-cu100"].published
    assert "mxnet-cu100" not in A.PUBLISHED_WHEELS


def test_every_cuda_extra_of_the_project_has_a_record():
    for extra in distributions.CUDA_EXTRAS_191:
        record = A.wheel_for(f"mxnet-{extra}")
        assert record is not None and record.published and record.extra == extra


def test_parse_mxnet_cuda_arch_like_cmake():
    assert A.parse_mxnet_cuda_arch("5.0;6.0;7.0;8.0;8.6") == (((5, 0), (6, 0), (7, 0), (8, 0), (8, 6)), ())
    assert A.parse_mxnet_cuda_arch("7.0;8.6+PTX") == (((7, 0), (8, 6)), ((8, 6),))
    assert A.parse_mxnet_cuda_arch("8.6(8.0)") == (((8, 6),), ())
    assert A.parse_mxnet_cuda_arch("Maxwell") == (((5, 0), (5, 2)), ())
    assert A.parse_mxnet_cuda_arch("Maxwell+PTX") == (((5, 0), (5, 2)), ((5, 2),))
    assert A.parse_mxnet_cuda_arch("Kepler+Tesla+PTX") == (((3, 7),), ((3, 7),))
    for bad in ("Auto", "Common", "All", "9"):
        with pytest.raises(ValueError):
            A.parse_mxnet_cuda_arch(bad)


def test_wheel_for_names():
    assert A.wheel_for("mxnet_cu117==1.9.1").dist == "mxnet-cu117"
    assert A.wheel_for("MXNet-CU102").dist == "mxnet-cu102"
    assert A.wheel_for("mxnet-cu102mkl").dist == "mxnet-cu102"
    assert A.wheel_for("mxnet") is None and A.wheel_for("mxnet-native") is None
    with pytest.raises(ValueError, match="no cu118 build"):
        A.wheel_for("mxnet-cu118")
    with pytest.raises(ValueError):
        A.wheel_for("numpy")


# --------------------------------------------------------------------------- compatibility rule

@pytest.mark.parametrize("sass, device, runs", [
    ("8.0", "8.0", True),
    ("8.0", "8.6", True),   # same major, higher minor
    ("8.0", "8.9", True),
    ("8.6", "8.9", True),
    ("8.6", "8.0", False),  # lower minor: no
    ("8.6", "9.0", False),  # another major: never
    ("8.0", "9.0", False),
    ("7.5", "8.0", False),
    ("7.0", "7.5", True),
    ("3.0", "3.7", True),
    ("5.0", "3.7", False),
    ("5.0", "5.2", True),
])
def test_sass_binary_compatibility(sass, device, runs):
    assert A.sass_runs_on(sass, device) is runs


@pytest.mark.parametrize("ptx, device, runs", [
    ("8.0", "9.0", True),   # PTX is JIT-compiled for any newer GPU
    ("8.0", "8.6", True),
    ("5.0", "9.0", True),
    ("8.6", "8.0", False),  # never for an older one
    ("9.0", "8.9", False),
])
def test_ptx_forward_compatibility(ptx, device, runs):
    assert A.ptx_runs_on(ptx, device) is runs


def test_covers_sass_ptx_none():
    cu117 = A.wheel_for("mxnet-cu117")
    assert A.covers("8.6", cu117) == (True, "sass")
    assert A.covers("8.9", cu117) == (True, "sass")
    assert A.covers("9.0", cu117) == (False, None)
    with_ptx = A.WheelArch("mxnet-cu999", "99.9", "7.0;8.0+PTX", "synthetic")
    assert A.covers("9.0", with_ptx) == (True, "ptx-jit")
    assert A.best_kernel("9.0", with_ptx) == "compute_80"
    assert A.covers("8.6", with_ptx) == (True, "sass")  # SASS is preferred to PTX
    assert A.best_kernel("8.6", with_ptx) == "sm_80"
    assert A.covers("6.1", with_ptx) == (False, None)
    assert A.covers("8.0", None) == (False, None)


def test_parse_cc_forms():
    assert A.parse_cc("8.6") == A.parse_cc("86") == A.parse_cc("sm_86") == A.parse_cc((8, 6)) == (8, 6)
    assert A.parse_cc("sm_100") == (10, 0)
    with pytest.raises(ValueError):
        A.parse_cc("ampere")


# --------------------------------------------------------------------------- generations

def test_k80_runs_only_on_the_cuda_10_wheels():
    assert A.covers("3.7", A.wheel_for("mxnet-cu102")) == (True, "sass")
    assert A.best_kernel("3.7", A.wheel_for("mxnet-cu102")) == "sm_30"
    for dist in ("mxnet-cu110", "mxnet-cu112", "mxnet-cu117"):
        assert A.covers("3.7", A.wheel_for(dist)) == (False, None)
    assert {w.dist for w, _ in A.covering_wheels("3.7")} == {"mxnet-cu101", "mxnet-cu102"}
    msg = A.no_kernel_image_message("3.7", "Tesla K80", "mxnet-cu117")
    assert "\n" not in msg
    assert msg.startswith("Tesla K80 (compute capability 3.7) has no kernel image in mxnet-cu117 1.9.1 "
                          "(built for sm_50, 60, 70, 80, 86 without PTX)")
    assert "mxnet-cu102==1.9.1 (extra cu102)" in msg and "sm_30" in msg


def test_h100_has_no_191_wheel():
    assert A.covering_wheels("9.0", published_only=False) == []
    msg = A.no_kernel_image_message("9.0", "NVIDIA H100 80GB HBM3", "mxnet-cu117")
    assert msg == ("NVIDIA H100 80GB HBM3 (compute capability 9.0) has no kernel image in mxnet-cu117 1.9.1 "
                   "(built for sm_50, 60, 70, 80, 86 without PTX): no MXNet 1.9.1 wheel supports it; "
                   "build MXNet from source with MXNET_CUDA_ARCH=9.0 (CUDA 11.8 or newer: the first nvcc that "
                   "knows sm_90)")


def test_a100_on_a_cuda_10_wheel_is_pointed_at_a_cuda_11_one():
    msg = A.no_kernel_image_message("8.0", "NVIDIA A100-SXM4-40GB", "mxnet-cu102")
    assert "use mxnet-cu117==1.9.1 (extra cu117), which runs on it natively" in msg
    assert "MXNET_CUDA_ARCH=8.0" in msg and "\n" not in msg


def test_message_when_the_wheel_does_cover_the_gpu():
    msg = A.no_kernel_image_message("8.9", "NVIDIA L4", "mxnet-cu117")
    assert "sm_86" in msg and "cuDNN" in msg and "\n" not in msg


@pytest.mark.parametrize("text", [
    "Check failed: e == cudaSuccess (209 vs. 0) : CUDA: no kernel image is available for execution on the device",
    "MXNetError: cudaErrorNoKernelImageForDevice",
    "CUDA error: invalid device function",
    "CUDA_ERROR_NO_BINARY_FOR_GPU",
])
def test_looks_like_no_kernel_image(text):
    assert A.looks_like_no_kernel_image(text)


@pytest.mark.parametrize("text", ["", "CUDA: out of memory", "cudaErrorInvalidValue", "kernel died"])
def test_not_a_missing_kernel_image(text):
    assert not A.looks_like_no_kernel_image(text)


def test_generations_table():
    rows = {r["compute_capability"]: r for r in A.GENERATIONS_TABLE}
    assert list(rows) == ["3.7", "5.2", "6.0", "7.0", "7.5", "8.0", "8.6", "8.9", "9.0"]
    assert set(rows["3.7"]["wheels"]) == set(A.PUBLISHED_WHEELS)
    w = {cc: r["wheels"] for cc, r in rows.items()}
    assert w["3.7"]["mxnet-cu102"] == "sm_30 SASS" and w["3.7"]["mxnet-cu117"] == "none"
    assert w["5.2"]["mxnet-cu117"] == "sm_50 SASS"
    assert w["6.0"]["mxnet-cu110"] == "native" and w["7.0"]["mxnet-cu102"] == "native"
    assert w["7.5"]["mxnet-cu102"] == "native" and w["7.5"]["mxnet-cu117"] == "sm_70 SASS"
    assert w["8.0"]["mxnet-cu102"] == "none" and w["8.0"]["mxnet-cu110"] == "native"
    assert w["8.6"]["mxnet-cu110"] == "sm_80 SASS" and w["8.6"]["mxnet-cu111"] == "native"
    assert w["8.9"]["mxnet-cu117"] == "sm_86 SASS" and w["8.9"]["mxnet-cu110"] == "sm_80 SASS"
    assert set(w["9.0"].values()) == {"none"}
    assert not any("PTX" in cell for r in w.values() for cell in r.values())


def test_generations_markdown_groups_identical_wheels():
    md = A.generations_markdown().splitlines()
    assert md[0].startswith("| GPU (compute capability) | cu101 / cu102 (sm_30, 50, 60, 70, 75 without PTX) "
                            "| cu110 (sm_50, 60, 70, 80 without PTX) | cu111 ... cu117 (")
    assert md[-1] == "| H100 (9.0) | none | none | none |"
    assert len(md) == 2 + len(A.GENERATIONS)
