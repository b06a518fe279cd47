"""advisor.py: every check fires on its bad input, stays quiet on the good one and on what
the suite filled in itself."""

import pytest

from pytest_mxperf.machine import advisor
from pytest_mxperf.machine.advisor import Advice, advise

FEATURES = ["BLAS_OPEN", "CPU_SSE", "MKLDNN", "OPENMP", "SIGNAL_HANDLER"]
GPU_FEATURES = FEATURES + ["CUDA", "CUDNN", "NCCL"]
TWO_CORES = {"affinity_cpus": [0, 1], "logical_cpus": 2, "physical_cores": 2, "cgroup_quota_cpus": None,
             "default_threads": 2, "sockets": 1}
TWO_SOCKETS = {"affinity_cpus": list(range(8)), "logical_cpus": 8, "physical_cores": 8,
               "cgroup_quota_cpus": None, "default_threads": 8, "sockets": 2}
CPU = ["cpu:0"]


def codes(user_env, suite_defaults=None, features=FEATURES, topo=TWO_CORES, contexts=CPU, num_gpus=0,
          runtime="libgomp"):
    out = advise(user_env, suite_defaults or {}, features, topo, contexts, num_gpus, openmp_runtime=runtime)
    for a in out:
        assert isinstance(a, Advice)
        assert "\n" not in a.message and a.message and a.setting_bad and a.setting_good
    return [a.code for a in out]


def test_a_clean_environment_gets_no_advice():
    assert codes({}) == []
    assert codes({"PATH": "/usr/bin", "HOME": "/root"}) == []


# --------------------------------------------------------------------------- OMP_NUM_THREADS

def test_threads_above_the_physical_cores_are_oversubscription():
    out = advise({"OMP_NUM_THREADS": "4"}, {}, FEATURES, TWO_CORES, CPU, 0)
    assert [a.code for a in out] == ["omp-threads-oversubscribed"]
    assert out[0].setting_bad == "OMP_NUM_THREADS=4"
    assert out[0].setting_good.startswith("OMP_NUM_THREADS=2")
    assert "2 physical cores" in out[0].message


def test_threads_below_the_physical_cores_leave_cores_idle():
    out = advise({"OMP_NUM_THREADS": "1"}, {}, FEATURES, TWO_CORES, CPU, 0)
    assert [a.code for a in out] == ["omp-threads-underused"]
    assert "uses 1 of the 2 physical cores" in out[0].message


def test_threads_equal_to_the_physical_cores_are_fine():
    assert codes({"OMP_NUM_THREADS": "2"}) == []


def test_threads_times_cpu_contexts_above_the_cores():
    out = advise({"OMP_NUM_THREADS": "2"}, {}, FEATURES, TWO_CORES, ["cpu:0", "cpu:1"], 0)
    assert [a.code for a in out] == ["omp-threads-per-context"]
    assert out[0].setting_good.startswith("OMP_NUM_THREADS=1")
    assert codes({"OMP_NUM_THREADS": "1"}, contexts=["cpu:0", "cpu:1"]) == []


def test_the_suites_own_thread_count_is_never_judged():
    # the suite filled OMP_NUM_THREADS (the user left it unset): whatever it is, no advice
    assert codes({"OMP_NUM_THREADS": "2"}, {"OMP_NUM_THREADS": "2"}) == []
    assert codes({"OMP_NUM_THREADS": "1"}, {"OMP_NUM_THREADS": "1"}, contexts=["cpu:0", "cpu:1"]) == []
    assert codes({"OMP_NUM_THREADS": "1"}, {"OMP_NUM_THREADS": "1"}) == []


def test_the_cgroup_quota_counts_not_the_vcpus():
    topo = dict(TWO_SOCKETS, default_threads=2, sockets=1)  # 8 cores in the mask, a quota of 2
    assert codes({"OMP_NUM_THREADS": "8"}, topo=topo) == ["omp-threads-oversubscribed"]
    assert codes({"OMP_NUM_THREADS": "2"}, topo=topo) == []


def test_a_thread_count_that_is_not_a_number():
    assert codes({"OMP_NUM_THREADS": "lots"}) == ["omp-threads-invalid"]
    assert codes({"OMP_NUM_THREADS": "2,1"}) == []  # nested teams: the outer one counts


def test_threads_are_not_judged_for_gpu_cells():
    assert codes({"OMP_NUM_THREADS": "1"}, features=GPU_FEATURES, contexts=["gpu:0"], num_gpus=1) == []


# --------------------------------------------------------------------------- pinning, KMP_*

def test_two_sockets_without_pinning_under_libgomp_advise_the_openmp_variables():
    out = advise({}, {}, FEATURES, TWO_SOCKETS, CPU, 0, openmp_runtime="libgomp")
    assert [a.code for a in out] == ["pinning-unset"]
    assert out[0].setting_good == "OMP_PROC_BIND=close OMP_PLACES=cores"
    assert "KMP_AFFINITY=granularity=fine,compact,1,0" in out[0].message
    assert "libgomp" in out[0].message


def test_two_sockets_without_pinning_under_intel_openmp_advise_kmp_affinity():
    out = advise({}, {}, FEATURES, TWO_SOCKETS, CPU, 0, openmp_runtime="libiomp")
    assert [a.setting_good for a in out] == ["KMP_AFFINITY=granularity=fine,compact,1,0"]


def test_unknown_runtime_gets_the_portable_variables():
    out = advise({}, {}, FEATURES, TWO_SOCKETS, CPU, 0, openmp_runtime=None)
    assert [a.setting_good for a in out] == ["OMP_PROC_BIND=close OMP_PLACES=cores"]


@pytest.mark.parametrize("pin", [{"OMP_PROC_BIND": "close", "OMP_PLACES": "cores"}, {"OMP_PROC_BIND": "spread"},
                                 {"GOMP_CPU_AFFINITY": "0-7"}])
def test_pinning_set_is_quiet(pin):
    assert codes(pin, topo=TWO_SOCKETS) == []


def test_one_socket_needs_no_pinning_advice():
    assert codes({}, topo=TWO_CORES) == []


def test_kmp_affinity_under_libgomp_has_no_effect():
    out = advise({"KMP_AFFINITY": "granularity=fine,compact,1,0"}, {}, FEATURES, TWO_SOCKETS, CPU, 0,
                 openmp_runtime="libgomp")
    # set, so not "unset"; but ignored by this runtime
    assert [a.code for a in out] == ["kmp-ignored-by-libgomp"]
    assert out[0].setting_good == "OMP_PROC_BIND=close OMP_PLACES=cores"
    assert out[0].setting_bad == "KMP_AFFINITY=granularity=fine,compact,1,0"


def test_kmp_variables_are_fine_under_intel_openmp_and_when_the_runtime_is_unknown():
    assert codes({"KMP_AFFINITY": "granularity=fine,compact,1,0"}, runtime="libiomp") == []
    assert codes({"KMP_AFFINITY": "granularity=fine,compact,1,0"}, runtime=None) == []
    assert codes({"KMP_BLOCKTIME": "1"}, runtime="libgomp") == ["kmp-ignored-by-libgomp"]


def test_the_runtime_is_read_from_the_workers_threadpoolctl_report():
    report = {"openmp": 2, "source": "threadpoolctl", "pools": [
        {"user_api": "blas", "internal_api": "openblas", "num_threads": 2, "prefix": "libopenblas",
         "version": "0.3.20"},
        {"user_api": "openmp", "internal_api": "openmp", "num_threads": 2, "prefix": "libgomp", "version": None}]}
    assert advisor.openmp_runtime(report) == "libgomp"
    assert advisor.openmp_runtime(report["pools"]) == "libgomp"
    assert advisor.openmp_runtime({"pools": [{"user_api": "openmp", "prefix": "libiomp"}]}) == "libiomp"
    assert advisor.openmp_runtime({"pools": [{"user_api": "openmp", "prefix": "libomp"}]}) == "libomp"
    assert advisor.openmp_runtime({"pools": [{"user_api": "blas", "prefix": "libopenblas"}]}) is None
    assert advisor.openmp_runtime({"openmp": None, "pools": [], "source": "threadpoolctl not installed"}) is None
    assert advisor.openmp_runtime(None) is None


def test_sockets_are_counted_from_sys(tmp_path):
    for cpu, pkg in enumerate([0, 0, 1, 1]):
        d = tmp_path / f"cpu{cpu}" / "topology"
        d.mkdir(parents=True)
        (d / "physical_package_id").write_text(f"{pkg}\n")
    assert advisor.socket_count([0, 1, 2, 3], sysfs=tmp_path) == 2
    assert advisor.socket_count([0, 1], sysfs=tmp_path) == 1
    assert advisor.socket_count([7], sysfs=tmp_path) == 1  # the kernel does not say: one
    topo = dict(TWO_CORES, affinity_cpus=[0, 1, 2, 3])
    del topo["sockets"]
    assert advisor.socket_count(topo["affinity_cpus"], sysfs=tmp_path) == 2


def test_sockets_of_this_machine_are_a_positive_number():
    assert advisor.socket_count() >= 1


# --------------------------------------------------------------------------- GPU, build, subgraph

def test_cudnn_autotune_off_on_a_gpu_cell():
    assert codes({"MXNET_CUDNN_AUTOTUNE_DEFAULT": "0"}, features=GPU_FEATURES, contexts=["gpu:0"],
                 num_gpus=1) == ["cudnn-autotune-off"]
    assert codes({"MXNET_CUDNN_AUTOTUNE_DEFAULT": "1"}, features=GPU_FEATURES, contexts=["gpu:0"], num_gpus=1) == []
    assert codes({}, features=GPU_FEATURES, contexts=["gpu:0"], num_gpus=1) == []
    # a CPU cell, or a machine without GPUs: nothing to autotune
    assert codes({"MXNET_CUDNN_AUTOTUNE_DEFAULT": "0"}) == []
    assert codes({"MXNET_CUDNN_AUTOTUNE_DEFAULT": "0"}, contexts=["gpu:0"], num_gpus=0,
                 features=GPU_FEATURES) == []


def test_a_build_without_mkldnn_for_cpu_cells():
    assert codes({}, features=["BLAS_OPEN", "OPENMP"]) == ["build-without-mkldnn"]
    assert codes({}, features=FEATURES) == []
    assert codes({}, features=["ONEDNN", "OPENMP"]) == []  # MXNet 2.x names it ONEDNN
    assert codes({}, features=None) == []  # unknown build: no claim
    # a GPU cell does not need MKLDNN
    assert codes({}, features=["CUDA", "CUDNN"], contexts=["gpu:0"], num_gpus=1) == []


def test_a_build_without_cudnn_for_gpu_cells():
    assert codes({}, features=FEATURES + ["CUDA"], contexts=["gpu:0"], num_gpus=1) == ["build-without-cudnn"]
    assert codes({}, features=GPU_FEATURES, contexts=["gpu:0"], num_gpus=1) == []
    assert codes({}, features=FEATURES + ["CUDA"]) == []  # a CPU cell


def test_subgraph_backend_none_disables_the_onednn_fusions():
    out = advise({"MXNET_SUBGRAPH_BACKEND": "NONE"}, {}, FEATURES, TWO_CORES, CPU, 0)
    assert [a.code for a in out] == ["subgraph-backend-off"]
    assert out[0].setting_bad == "MXNET_SUBGRAPH_BACKEND=NONE"
    assert codes({"MXNET_SUBGRAPH_BACKEND": "MKLDNN"}) == []
    assert codes({}) == []


def test_suite_defaults_of_any_kind_are_quiet():
    defaults = {"OMP_NUM_THREADS": "4", "MXNET_SUBGRAPH_BACKEND": "NONE", "KMP_AFFINITY": "compact",
                "MXNET_CUDNN_AUTOTUNE_DEFAULT": "0"}
    assert codes(dict(defaults), defaults, topo=TWO_CORES) == []
    assert codes(dict(defaults), defaults, features=GPU_FEATURES, contexts=["gpu:0"], num_gpus=1) == []
    # a user value that differs from the suite's is the user's
    assert codes({"OMP_NUM_THREADS": "4"}, {"OMP_NUM_THREADS": "2"}) == ["omp-threads-oversubscribed"]


def test_several_findings_at_once_and_their_report_lines():
    out = advise({"OMP_NUM_THREADS": "16", "KMP_AFFINITY": "compact", "MXNET_SUBGRAPH_BACKEND": "NONE"}, {},
                 ["OPENMP"], TWO_SOCKETS, CPU, 0, openmp_runtime="libgomp")
    assert [a.code for a in out] == ["omp-threads-oversubscribed", "kmp-ignored-by-libgomp",
                                     "build-without-mkldnn", "subgraph-backend-off"]
    lines = advisor.format_advice(out)
    assert len(lines) == 4 and all("\n" not in ln for ln in lines)
    assert lines[0].startswith("[omp-threads-oversubscribed] OMP_NUM_THREADS=16")
    assert out[0].to_dict()["code"] == "omp-threads-oversubscribed"
