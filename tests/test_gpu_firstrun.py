"""The first `pytest perf_tests -m gpu` on a box whose GPU cannot be used (#25 part 1): the
session fails with one line, said once, before any worker, naming the cause and the fix;
``--perf-fail-on=-no-gpu`` lets it pass with the same line. Each failure is reproduced with
stand-ins: the worker interpreter is tests/stub_worker.py (its probe speaks the real
protocol, or fails to import as a real one does), NVML is tests/fake_nvml.py's stand-in
``pynvml``. No GPU is involved, and none of these tests depends on whether the machine
running them has one: every session gets a stand-in NVML and a stand-in MXNet."""

import re
from pathlib import Path

import pytest

import fake_nvml as F
from stand_ins import run_box as _run
from pytest_mxperf.machine import gpu_readiness as R
from pytest_mxperf.machine import hardware, nvml
from pytest_mxperf.model import options as opts

SCORE = """
import pytest

@pytest.mark.mxperf_grid(models=("resnet50_v2", "alexnet"), batch_sizes=(16, 32))
def test_score(mxperf, ctx, model, batch_size):
    mxperf.expect_ok(mxperf.measure(model, batch_size, contexts=ctx))
"""

CUDA = ["CUDA", "CUDNN", "NCCL", "CUDA_RTC"]
PERF_TESTS = Path(__file__).resolve().parent.parent / "perf_tests"
#: a stand-in worker that got to run would fail its cell with this
RAN = "a stand-in worker ran"


def _the_line(r) -> str:
    """The session's one line about its GPUs: exactly one in its output, said before the
    first test ran; returns it."""
    out = r.stdout.str()
    lines = out.splitlines()
    said = [i for i, ln in enumerate(lines) if "no GPU can be used" in ln]
    assert len(said) == 1, out
    first_test = next(i for i, ln in enumerate(lines) if ln.startswith("test_"))
    assert said[0] < first_test, out
    assert RAN not in out and not re.search(r"\d+ (passed|failed|error)", out), out
    return lines[said[0]]


def _failing(r) -> str:
    line = _the_line(r)
    assert r.ret == pytest.ExitCode.TESTS_FAILED, r.stdout.str()
    assert line.endswith("(failing the session; --perf-fail-on=-no-gpu to let it pass)"), line
    return line[len("mxperf: "):line.rindex(" (failing the session")]


def _passing(r) -> str:
    line = _the_line(r)
    assert r.ret == pytest.ExitCode.OK, r.stdout.str()
    assert line.endswith("(GPU tests skipped; not failing: --perf-fail-on without no-gpu)"), line
    return line[len("mxperf: "):line.rindex(" (GPU tests skipped")]


def _both_ways(pytester, *args):
    """The finding of a session that fails on it, after checking that the same session
    with ``--perf-fail-on=-no-gpu`` says the same and passes, every test skipped."""
    pytester.makepyfile(test_score=SCORE)
    failing = _run(pytester, "-m", "gpu", *args)
    text = _failing(failing)
    failing.assert_outcomes(skipped=4)
    passing = _run(pytester, "-m", "gpu", "--perf-fail-on=-no-gpu", *args)
    assert _passing(passing) == text
    passing.assert_outcomes(skipped=4)
    assert text.startswith("no GPU can be used: ")
    return text


LIBCUDNN = "OSError: libcudnn.so.8: cannot open shared object file: No such file or directory"


def test_libcudnn_missing_at_import(pytester, make_stub_python, gpu_box):
    gpu_box(F.p100_pcie_box())
    python = make_stub_python("cu117", features=CUDA, dists=[["mxnet-cu117", "1.9.1"]], probe_error=LIBCUDNN,
                              error=RAN)
    text = _both_ways(pytester, "--perf-python", python)
    assert text == (f"no GPU can be used: import mxnet fails in {python} (mxnet-cu117 1.9.1): libcudnn.so.8 "
                    "(cuDNN 8) cannot be found (mxnet-cu117 1.9.1 loads it from this machine; the wheel does not "
                    "bundle it): pip install 'nvidia-cudnn-cu11<9' and add that environment's "
                    "site-packages/nvidia/cudnn/lib to LD_LIBRARY_PATH, or install cuDNN 8 for CUDA 11 (the CUDA "
                    "toolkit or NVIDIA's distro packages) and add its lib directory")


def test_libnccl_missing_at_import(pytester, make_stub_python, gpu_box):
    gpu_box(F.p100_pcie_box())
    python = make_stub_python("cu117", features=CUDA, dists=[["mxnet-cu117", "1.9.1"]], error=RAN,
                              probe_error="OSError: libnccl.so.2: cannot open shared object file: No such file or directory")
    text = _both_ways(pytester, "--perf-python", python)
    assert "libnccl.so.2 (NCCL) cannot be found" in text and "pip install 'nvidia-nccl-cu11'" in text
    assert "site-packages/nvidia/nccl/lib to LD_LIBRARY_PATH" in text


def test_an_sm90_gpu_with_a_cu112_build(pytester, make_stub_python, gpu_box):
    gpu_box(F.h100_box())
    python = make_stub_python("cu112", gpus=1, features=CUDA, dists=[["mxnet-cu112", "1.9.1"]], error=RAN)
    text = _both_ways(pytester, "--perf-python", python)
    assert text == ("no GPU can be used: NVIDIA H100 80GB HBM3 (compute capability 9.0) has no kernel image in "
                    "mxnet-cu112 1.9.1 (built for sm_50, 60, 70, 80, 86 without PTX): no MXNet 1.9.1 wheel supports "
                    "it; build MXNet from source with MXNET_CUDA_ARCH=9.0 (CUDA 11.8 or newer: the first nvcc that "
                    "knows sm_90)")


def test_a_driver_too_old_for_the_wheel(pytester, make_stub_python, gpu_box):
    """NVML sees the GPUs; the driver's CUDA is 10.2; the wheel is cu117, and MXNet, which
    counts no GPU on cudaErrorInsufficientDriver, says 0."""
    gpu_box(dict(F.p100_pcie_box(), driver_version="440.33.01", cuda_driver_version=10020))
    python = make_stub_python("cu117", gpus=0, features=CUDA, dists=[["mxnet-cu117", "1.9.1"]], error=RAN)
    text = _both_ways(pytester, "--perf-python", python)
    assert text == (f"no GPU can be used: NVML sees 2 x Tesla P100-PCIE-16GB, compute capability 6.0 but "
                    f"mx.context.num_gpus() is 0 in {python} (mxnet-cu117 1.9.1): the driver 440.33.01 supports CUDA "
                    "up to 10.2, older than the CUDA 11.7 this wheel needs (MXNet counts no GPU when the driver is "
                    "insufficient): upgrade the NVIDIA driver to R515 or newer (nvidia-smi's 'CUDA Version' 11.7 or "
                    "higher), or pip uninstall -y mxnet-cu117 && pip install -e '.[cu102]' (mxnet-cu102==1.9.1, "
                    "which this driver runs)")


def test_a_cpu_build_on_a_gpu_box(pytester, make_stub_python, gpu_box):
    gpu_box(F.p100_pcie_box())
    python = make_stub_python("cpu", gpus=0, features=["MKLDNN", "OPENMP"], error=RAN)
    text = _both_ways(pytester, "--perf-python", python)
    assert text.startswith(f"no GPU can be used: {python} has mxnet (a CPU build) while this machine has 2 GPU(s) "
                           "(2 x Tesla P100-PCIE-16GB, compute capability 6.0): pip uninstall -y mxnet && "
                           "pip install -e '.[cu117]' (mxnet-cu117==1.9.1, "), text


@pytest.mark.parametrize("spec,why", [
    ({"driver_version": "535.104.05", "cuda_driver_version": 12020, "devices": []}, "it lists no device"),
    ({"init_error": "DRIVER_NOT_LOADED", "devices": []}, "NVML: Driver Not Loaded"),
    ({"init_error": "LIBRARY_NOT_FOUND", "devices": []}, "NVML: NVML Shared Library Not Found"),
])
def test_no_gpu_at_all(pytester, make_stub_python, gpu_box, spec, why):
    gpu_box(spec)
    python = make_stub_python("cpu", gpus=0, features=["MKLDNN", "OPENMP"], error=RAN)
    text = _both_ways(pytester, "--perf-python", python)
    assert text == (f"no GPU can be used: NVML sees no GPU ({why}) and mx.context.num_gpus() is 0 in {python} "
                    "(mxnet 1.9.1, a CPU build): run on a machine with an NVIDIA GPU and its driver (nvidia-smi "
                    "lists it), or deselect the GPU tests (-m 'not gpu')")


def test_an_explicit_gpu_context_is_asked_for_too(pytester, make_stub_python, gpu_box):
    gpu_box({"driver_version": "535.104.05", "cuda_driver_version": 12020, "devices": []})
    pytester.makepyfile(test_score=SCORE)
    python = make_stub_python("cpu", gpus=0, error=RAN)
    r = _run(pytester, "--perf-ctx", "gpu:0", "--perf-python", python)
    assert "NVML sees no GPU (it lists no device)" in _failing(r)
    r.assert_outcomes(skipped=4)


def test_perf_tests_gpu_selection_on_a_machine_without_gpus_fails_in_one_line(pytester, make_stub_python, gpu_box):
    """`pytest perf_tests -m gpu`, the suite itself, where NVML lists no GPU and MXNet counts
    none: exit 1, one line, every GPU test skipped with it (the summary folds them), no
    worker; with the switch off, exit 0 and the same line."""
    gpu_box({"driver_version": "535.104.05", "cuda_driver_version": 12020, "devices": []})
    python = make_stub_python("cpu", gpus=0, error=RAN)
    r = _run(pytester, str(PERF_TESTS), "-m", "gpu", "--perf-python", python, "-rs")
    out = r.stdout.str()
    assert r.ret == pytest.ExitCode.TESTS_FAILED, out
    said = [ln for ln in out.splitlines() if ln.startswith("mxperf: ")]
    assert len(said) == 1 and said[0].startswith("mxperf: no GPU can be used: NVML sees no GPU"), out
    text = said[0][len("mxperf: "):said[0].rindex(" (failing the session")]
    skipped = int(re.search(r"(\d+) skipped", out).group(1))
    assert skipped >= 10 and not re.search(r"\d+ (passed|failed|error)", out), out
    # pytest's summary folds the skips per test function, each with the line; the rest are
    # the own-network tests, empty without --perf-model-file
    folded = [ln for ln in out.splitlines() if ln.startswith("SKIPPED [")]
    with_line = [ln for ln in folded if ln.endswith(": " + text)]
    empty = [ln for ln in folded if ln.endswith("got empty parameter set for (own_model)")]
    assert len(with_line) >= 5 and len(with_line) + len(empty) == len(folded), folded
    assert sum(int(re.match(r"SKIPPED \[(\d+)\]", ln).group(1)) for ln in folded) == skipped
    assert "nothing was measured" not in out and RAN not in out
    off = _run(pytester, str(PERF_TESTS), "-m", "gpu", "--perf-python", python, "--perf-fail-on=-no-gpu")
    assert off.ret == pytest.ExitCode.OK, off.stdout.str()
    assert f"mxperf: {text} (GPU tests skipped; not failing: --perf-fail-on without no-gpu)" in off.stdout.str()


def test_gpu_tests_not_asked_for_skip_with_the_line_and_cpu_cells_still_measure(pytester, make_stub_python, gpu_box):
    """`pytest` with the default contexts (cpu and gpu) on a machine without GPUs: the GPU
    cells skip with the line, said once; the CPU cells measure; the session passes."""
    gpu_box({"init_error": "DRIVER_NOT_LOADED", "devices": []})
    pytester.makepyfile(test_score=SCORE)
    python = make_stub_python("cpu", gpus=0, rate=500.0)
    r = _run(pytester, "--perf-python", python, "-rs")
    out = r.stdout.str()
    assert r.ret == pytest.ExitCode.OK, out
    r.assert_outcomes(passed=4, skipped=4)
    (line,) = [ln for ln in out.splitlines() if ln.startswith("mxperf: no GPU can be used")]
    assert line.endswith("(GPU tests skipped; not failing: no GPU was asked for by -m gpu or --perf-ctx gpu)")
    assert "NVML sees no GPU (NVML: Driver Not Loaded)" in line


def test_a_gpu_box_whose_gpus_are_not_asked_for_is_left_to_its_cells(pytester, make_stub_python, gpu_box):
    """Only a machine without any GPU skips GPU tests that were not asked for: on a GPU box a
    wheel without kernels for its GPU is not skipped past: its GPU cells run and fail, each
    with the line of the kernel image."""
    gpu_box(F.k80_box())
    pytester.makepyfile(test_score=SCORE)
    no_kernel = ("MXNetError: [10:00:00] src/operator/nn/./cudnn/cudnn_convolution-inl.h:140: Check failed: "
                 "e == cudaSuccess (209 vs. 0) : CUDA: no kernel image is available for execution on the device")
    python = make_stub_python("cu117", gpus=2, features=CUDA, error=no_kernel)
    r = _run(pytester, "-k", "gpu0 and alexnet and b16", "--perf-python", python)
    out = r.stdout.str()
    assert r.ret == pytest.ExitCode.TESTS_FAILED, out
    r.assert_outcomes(failed=1, deselected=7)
    assert "no GPU can be used" not in out
    assert "Tesla K80 (compute capability 3.7) has no kernel image in mxnet-cu117 1.9.1" in out


# ------------------------------------------------------------------------- the check, pure

def _facts(spec):
    return nvml.load(F.module(spec)).static_facts()


def _check(spec, probe, dist, **kw):
    gpus = _facts(spec) if spec else []
    return R.check(gpus, hardware.visible_gpus({}, gpus), probe, dist, python="/v/bin/python", **kw)


OK_CUDA = {"status": "ok", "num_gpus": 2, "features": CUDA, "mxnet_version": "1.9.1"}


@pytest.mark.parametrize("soname,what,package,directory", [
    ("libcudart.so.11.0", "the CUDA runtime", "nvidia-cuda-runtime-cu11", "cuda_runtime"),
    ("libcublas.so.11", "cuBLAS", "nvidia-cublas-cu11", "cublas"),
    ("libcublasLt.so.11", "cuBLAS", "nvidia-cublas-cu11", "cublas"),
    ("libcudnn.so.8", "cuDNN 8", "nvidia-cudnn-cu11<9", "cudnn"),
    ("libcudnn_cnn_infer.so.8", "cuDNN 8", "nvidia-cudnn-cu11<9", "cudnn"),
    ("libnccl.so.2", "NCCL", "nvidia-nccl-cu11", "nccl"),
    ("libcufft.so.10", "cuFFT", "nvidia-cufft-cu11", "cufft"),
    ("libcurand.so.10", "cuRAND", "nvidia-curand-cu11", "curand"),
    ("libcusolver.so.11", "cuSOLVER", "nvidia-cusolver-cu11", "cusolver"),
    ("libcusparse.so.11", "cuSPARSE", "nvidia-cusparse-cu11", "cusparse"),
    ("libnvrtc.so.11.2", "NVRTC (runtime compilation)", "nvidia-cuda-nvrtc-cu11", "cuda_nvrtc"),
    ("libnvToolsExt.so.1", "NVTX", "nvidia-nvtx-cu11", "nvtx"),
])
def test_each_missing_cuda_library_is_named_with_its_package(soname, what, package, directory):
    probe = {"status": "error", "num_gpus": 0,
             "message": f"cannot import mxnet in a worker: OSError: {soname}: cannot open shared object file: "
                        "No such file or directory"}
    f = _check(F.p100_pcie_box(), probe, "mxnet-cu117")
    assert f.cause == "library" and "\n" not in f.line
    assert f"{soname} ({what}) cannot be found" in f.line
    assert f"pip install '{package}' and add that environment's site-packages/nvidia/{directory}/lib" in f.line


def test_a_cuda_10_wheel_gets_no_cuda_11_package_and_the_driver_library_is_the_driver():
    probe = {"status": "error", "num_gpus": 0,
             "message": "cannot import mxnet in a worker: OSError: libcudnn.so.7: cannot open shared object file"}
    f = _check(F.k80_box(), probe, "mxnet-cu102")
    assert "install cuDNN 7 for CUDA 10.2" in f.line and "pip install" not in f.line
    probe["message"] = "cannot import mxnet in a worker: OSError: libcuda.so.1: cannot open shared object file"
    f = _check(None, probe, "mxnet-cu117")
    assert f.cause == "library" and "libcuda.so.1, the NVIDIA driver's CUDA library, cannot be found: install " \
                                    "the NVIDIA driver" in f.line
    probe["message"] = "cannot import mxnet in a worker: ImportError: numpy.core.multiarray failed to import"
    f = _check(F.p100_pcie_box(), probe, "mxnet-cu117")
    assert f.cause == "import" and f.line.endswith("failed: cannot import mxnet in a worker: ImportError: "
                                                   "numpy.core.multiarray failed to import")


def test_a_usable_gpu_is_no_finding():
    assert _check(F.p100_pcie_box(), OK_CUDA, "mxnet-cu117") is None
    assert _check(F.k80_box(), OK_CUDA, "mxnet-cu102") is None
    # a source build ("mxnet" with CUDA): its arch list is unknown here, so it is not judged
    assert _check(F.h100_box(), dict(OK_CUDA, num_gpus=1), "mxnet") is None
    # GPUs MXNet sees but NVML cannot read: nothing to hold them against
    assert R.check([], [], OK_CUDA, "mxnet-cu117") is None


def test_a_k80_with_a_cuda_11_wheel_is_pointed_at_cu102():
    f = _check(F.k80_box(), OK_CUDA, "mxnet-cu117")
    assert f.cause == "no-kernel"
    assert "Tesla K80 (compute capability 3.7) has no kernel image in mxnet-cu117 1.9.1" in f.line
    assert "use mxnet-cu102==1.9.1 (extra cu102)" in f.line


def test_gpus_hidden_by_cuda_visible_devices_and_gpus_mxnet_does_not_see():
    box = F.p100_pcie_box()
    probe = dict(OK_CUDA, num_gpus=0)
    f = R.check(_facts(box), [], probe, "mxnet-cu117", python="/v/bin/python", cuda_visible_devices="")
    assert f.cause == "hidden" and "CUDA_VISIBLE_DEVICES='' hides the 2 GPU(s) NVML sees" in f.line
    f = _check(box, probe, "mxnet-cu117")  # a driver new enough, nothing hidden
    assert f.cause == "unseen" and "(driver 535.104.05, CUDA 12.2) but mx.context.num_gpus() is 0" in f.line
    old = dict(box, cuda_driver_version=11040)  # CUDA 11.4 driver, cu117 wheel: names cu114 as this driver's
    f = _check(old, probe, "mxnet-cu117")
    assert f.cause == "driver" and "supports CUDA up to 11.4, older than the CUDA 11.7" in f.line
    assert "pip install -e '.[cu114]'" in f.line


def test_the_decision_and_the_policy_name():
    assert R.POLICY in opts.FAIL_ON_CHOICES and R.POLICY in opts.DEFAULT_FAIL_ON
    finding = R.Finding("no-gpu", "no GPU can be used: x")
    d = R.decide(finding, True, opts.DEFAULT_FAIL_ON)
    assert d.fails and d.line == "mxperf: no GPU can be used: x (failing the session; --perf-fail-on=-no-gpu to " \
                                 "let it pass)"
    d = R.decide(finding, True, opts.parse_fail_on("-no-gpu"))
    assert not d.fails and d.line.startswith("mxperf: no GPU can be used: x (")
    d = R.decide(finding, False, opts.DEFAULT_FAIL_ON)
    assert not d.fails and d.finding is finding
    # GPU tests that came with the default contexts on a box with GPUs: left to their cells
    assert R.decide(R.Finding("no-kernel", "no GPU can be used: y"), False, opts.DEFAULT_FAIL_ON) is None
    assert R.decide(None, True, opts.DEFAULT_FAIL_ON) is None
