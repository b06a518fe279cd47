"""GPU facts wired into the machine's facts, its fingerprint, the floors and the worker
environment, on fake NVML boxes (tests/fake_nvml.py). These tests check the suite's
logic, not GPUs: no GPU is involved."""

import copy
import tempfile
from pathlib import Path

import pytest

import fake_nvml as F
from pytest_mxperf.machine import fingerprint, gpu_arch, hardware, nvml
from pytest_mxperf.measure import runner
from pytest_mxperf.judge import floors
from pytest_mxperf.model.workload import Workload


@pytest.fixture
def box(tmp_path, monkeypatch):
    """box(spec) -> path: this process sees ``spec`` as its NVML from now on."""
    def use(spec):
        path = F.write(spec, tmp_path / "nvml.json")
        F.use_in_process(monkeypatch, path)
        hardware.gpu_facts.cache_clear()
        return path
    yield use
    hardware.gpu_facts.cache_clear()


def test_gpu_facts_come_from_nvml(box):
    box(F.p100_pcie_box())
    facts = hardware.gpu_facts()
    assert facts.source == "pynvml"
    assert [g["name"] for g in facts.gpus] == ["Tesla P100-PCIE-16GB"] * 2
    assert facts.gpus[0]["compute_capability"] == "6.0" and facts.gpus[0]["driver_version"] == "535.104.05"
    assert hardware.summary()["gpus"] == ["Tesla P100-PCIE-16GB"] * 2


def test_nvml_that_fails_to_start_gives_no_gpus_and_says_why(box):
    box(dict(F.p100_pcie_box(), init_error="DRIVER_NOT_LOADED"))
    facts = hardware.gpu_facts()
    assert facts.gpus == () and facts.source == "absent"
    assert "Driver Not Loaded" in facts.describe()


def test_nvidia_smi_is_asked_only_when_nvidia_ml_py_is_missing(monkeypatch):
    calls = []
    monkeypatch.setattr(hardware, "_nvidia_smi_facts", lambda: calls.append(1) or [{"index": 0, "name": "Tesla T4"}])
    absent = type("Absent", (), {"nvmlInit": lambda self: (_ for _ in ()).throw(RuntimeError("no driver"))})()
    facts = hardware.read_gpu_facts(env={}, module=absent)
    assert facts.source == "absent" and not calls  # NVML is there but failed: nvidia-smi would not do better
    monkeypatch.setattr(nvml, "load", lambda module=None, env=None: nvml.NVML(None, nvml.NOT_INSTALLED, "absent"))
    facts = hardware.read_gpu_facts(env={})
    assert facts.source == "nvidia-smi" and facts.gpus[0]["name"] == "Tesla T4" and calls == [1]


def test_parse_nvidia_smi_csv():
    text = ("0, Tesla K80, GPU-aaa, 00000000:05:00.0, 11441, 470.199.02\n"
            "1, Tesla K80, GPU-bbb, 0000:06:00.0, 11441, 470.199.02\n\n")
    gpus = hardware.parse_nvidia_smi(text)
    assert [g["index"] for g in gpus] == [0, 1]
    assert gpus[1]["pci_bus_id"] == "00000000:06:00.0" and gpus[0]["memory_total_bytes"] == 11441 * 2 ** 20
    assert gpus[0]["compute_capability"] is None
    newer = hardware.parse_nvidia_smi("0, NVIDIA L4, GPU-ccc, 00000000:82:00.0, 23034, 535.104.05, 8.9\n")
    assert newer[0]["compute_capability"] == "8.9" and newer[0]["name"] == "NVIDIA L4"


def test_gpu_n_follows_pci_order_and_cuda_visible_devices(box):
    box(F.p100_pcie_box(reverse_nvml_order=True))  # NVML index 0 has the higher bus id
    vis = hardware.visible_gpus({})
    assert [v["pci_bus_id"] for v in vis] == ["00000000:04:00.0", "00000000:82:00.0"]
    assert [v["nvml_index"] for v in vis] == [1, 0] and vis[0]["compute_capability"] == "6.0"
    only = hardware.gpu_for_context("gpu:0", {"CUDA_VISIBLE_DEVICES": "1"})
    assert only["pci_bus_id"] == "00000000:82:00.0"
    assert hardware.gpu_for_context("gpu:1", {"CUDA_VISIBLE_DEVICES": "1"}) is None
    assert hardware.gpu_for_context("cpu:0", {}) is None


def test_fingerprint_has_the_gpu_kind_and_records_facts_but_never_volatile_state(box):
    box(F.p100_pcie_box())
    a = fingerprint.machine_fingerprint()
    assert a["hardware"]["gpus"] == [{"name": "Tesla P100-PCIE-16GB", "memory_gib": 16, "compute_capability": "6.0",
                                      "links": {"PHB": 1}, "count": 2}]
    assert "-2xtesla-p100-pcie-16gb-" in a["id"]
    assert [g["uuid"] for g in a["gpus"]] == [F.uuid(0, "p100"), F.uuid(1, "p100")]
    assert not any(nvml.VOLATILE_KEYS & set(g) for g in a["gpus"])
    assert a["volatile"]["gpus"][0]["sm_clock_mhz"] == 1328 // 4
    # memory in use, clocks, temperature, a driver upgrade, another card of the same model:
    # the same machine id
    busy = copy.deepcopy(F.p100_pcie_box())
    for d in busy["devices"]:
        d["volatile"].update(memory_used_bytes=9 * 2 ** 30, sm_clock_mhz=1328, temperature_c=80)
        d["uuid"] = d["uuid"][:-4] + "ffff"
    busy["driver_version"] = "545.23.08"
    box(busy)
    b = fingerprint.machine_fingerprint()
    assert b["id"] == a["id"] and b["volatile"]["gpus"][0]["sm_clock_mhz"] == 1328
    box(F.k80_box())
    assert fingerprint.machine_fingerprint()["id"] != a["id"]


@pytest.mark.parametrize("spec,ctx,kind,table", [
    (F.k80_box(), ("gpu:1",), "documented", "score/k80"),
    (F.p100_pcie_box(), ("gpu:0",), "documented", "score/p100"),
    (F.h100_box(), ("gpu:0",), "legacy-sanity", "score/p100"),
])
def test_floor_of_a_gpu_cell_from_the_nvml_name(box, spec, ctx, kind, table):
    box(spec)
    hw = hardware.for_contexts(hardware.hardware_info({}), ctx)
    f = floors.select_floor(hw, "score", "resnet50_v2", 32, "gpu")
    assert (f.kind, f.table_id) == (kind, table), f.reason


def test_a_cell_is_held_to_the_table_of_its_own_gpu():
    hw = hardware.HardwareInfo(cpu_model="x", vcpus=8, gpu_names=("Tesla P100-PCIE-16GB", "Tesla T4"))
    assert floors.select_floor(hw, "score", "alexnet", 8, "gpu").kind is None  # mixed: which one?
    assert floors.select_floor(hardware.for_contexts(hw, ("gpu:0",)), "score", "alexnet", 8, "gpu").kind == \
        "documented"
    t4 = floors.select_floor(hardware.for_contexts(hw, ("gpu:1",)), "score", "alexnet", 8, "gpu")
    assert t4.kind is None and "known faster than a P100" in t4.reason
    assert hardware.for_contexts(hw, ("cpu:0",)) == hw


def test_gpu_workers_get_pci_order_and_a_persistent_jit_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MXPERF_CACHE_DIR", str(tmp_path / "cache"))
    env, defaults = runner.build_env(Workload("resnet50_v2", contexts=("gpu:0",)), {"PATH": "/bin"})
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID" and defaults["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    cache = Path(env["CUDA_CACHE_PATH"])
    assert cache == tmp_path / "cache" / "cuda-jit" and cache.is_dir()
    assert not str(cache).startswith(tempfile.gettempdir() + "/mxperf")
    mine, defaults = runner.build_env(Workload("resnet50_v2", contexts=("gpu:0",)),
                                      {"CUDA_DEVICE_ORDER": "FASTEST_FIRST", "CUDA_CACHE_PATH": "/data/jit"})
    assert mine["CUDA_DEVICE_ORDER"] == "FASTEST_FIRST" and mine["CUDA_CACHE_PATH"] == "/data/jit"
    assert "CUDA_DEVICE_ORDER" not in defaults and "CUDA_CACHE_PATH" not in defaults
    cpu, _ = runner.build_env(Workload("resnet50_v2"), {"PATH": "/bin"})
    assert "CUDA_DEVICE_ORDER" not in cpu and "CUDA_CACHE_PATH" not in cpu


NO_KERNEL = ("MXNetError: Check failed: e == cudaSuccess (209 vs. 0) : "
             "CUDA: no kernel image is available for execution on the device")


def test_no_kernel_image_names_the_gpu_the_wheel_and_the_extra():
    facts = nvml.load(F.module(F.k80_box())).static_facts()
    msg = hardware.explain_gpu_failure([NO_KERNEL], ("gpu:0",), {}, "mxnet-cu117", facts)
    assert msg == gpu_arch.no_kernel_image_message("3.7", "Tesla K80", "mxnet-cu117")
    assert "\n" not in msg and "compute capability 3.7" in msg and "sm_50, 60, 70, 80, 86" in msg
    assert "mxnet-cu102==1.9.1 (extra cu102)" in msg
    h100 = nvml.load(F.module(F.h100_box())).static_facts()
    msg = hardware.explain_gpu_failure(["some line", NO_KERNEL], ("gpu:0",), {}, "mxnet-cu117", h100)
    assert "compute capability 9.0" in msg and "no MXNet 1.9.1 wheel supports it" in msg
    # the distribution unknown: still the GPU and the wheels that would run on it
    msg = hardware.explain_gpu_failure([NO_KERNEL], ("gpu:1",), {}, None, facts)
    assert msg.startswith("Tesla K80 (compute capability 3.7) has no kernel image") and "mxnet-cu102" in msg
    assert hardware.explain_gpu_failure(["CUDA: out of memory"], ("gpu:0",), {}, "mxnet-cu117", facts) is None


def test_run_result_of_a_gpu_worker_carries_the_explanation(box, monkeypatch):
    box(F.k80_box())
    monkeypatch.setattr(hardware, "mxnet_distribution", lambda python=None: "mxnet-cu117")
    out = runner.ProcessOutcome("error", "MXNetError: see stderr", None, ["...", NO_KERNEL], 0, 1.0)
    r = runner.run_result(out, Workload("resnet50_v2", contexts=("gpu:0",)), {}, python="/x/python")
    assert r.status == "error" and r.message.startswith("Tesla K80 (compute capability 3.7) has no kernel image")
    cpu = runner.run_result(out, Workload("resnet50_v2"), {})
    assert cpu.message == "MXNetError: see stderr"


def test_cpu_build_on_a_gpu_box_names_the_extra():
    p100 = nvml.load(F.module(F.p100_pcie_box())).static_facts()
    msg = gpu_arch.cpu_build_message("mxnet", ["MKLDNN", "OPENMP"], p100, "/venv/bin/python")
    assert "\n" not in msg and "/venv/bin/python has mxnet (a CPU build)" in msg
    assert "2 x Tesla P100-PCIE-16GB, compute capability 6.0" in msg
    assert "pip install -e '.[cu117]'" in msg and "pip uninstall -y mxnet" in msg
    k80 = nvml.load(F.module(F.k80_box())).static_facts()
    assert "pip install -e '.[cu102]'" in gpu_arch.cpu_build_message("mxnet", [], k80)
    h100 = nvml.load(F.module(F.h100_box())).static_facts()
    assert "build MXNet from source with MXNET_CUDA_ARCH=9.0" in gpu_arch.cpu_build_message("mxnet", [], h100)
    # nothing to say: a CUDA build, no GPUs, nothing known about the build
    assert gpu_arch.cpu_build_message("mxnet-cu117", ["CUDA", "CUDNN"], p100) is None
    assert gpu_arch.cpu_build_message("mxnet", ["MKLDNN"], []) is None
    assert gpu_arch.cpu_build_message(None, None, p100) is None
    assert gpu_arch.cpu_build_message("mxnet", None, p100) is not None


def test_recommended_wheel_respects_the_drivers_cuda():
    old = [{"compute_capability": "8.0", "cuda_driver_version": "11.2"}]
    wheel, why = gpu_arch.recommend_wheel(old)
    assert wheel.dist == "mxnet-cu112" and "CUDA 11.2" in why
    new = [{"compute_capability": "8.6", "cuda_driver_version": "12.2"}]
    assert gpu_arch.recommend_wheel(new)[0].dist == "mxnet-cu117"
    mixed = [{"compute_capability": "3.7", "cuda_driver_version": "11.4"},
             {"compute_capability": "8.0", "cuda_driver_version": "11.4"}]
    assert gpu_arch.recommend_wheel(mixed)[0] is None  # no 1.9.1 wheel has both sm_37 and sm_80
    assert gpu_arch.recommend_wheel([{"name": "Tesla T4"}])[0] is None

