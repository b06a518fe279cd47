"""NVML facts read in the parent: a fake pynvml (tests/fake_nvml.py), never a GPU."""

import inspect
import json
import subprocess
import sys
import threading

import pytest

import fake_nvml as F
from pytest_mxperf.machine import cuda_devices, gpu_sampler
from pytest_mxperf.machine import nvml as N

GIB = 2 ** 30
MIB = 2 ** 20


def load(spec):
    nv = N.load(F.module(spec))
    assert nv.available, nv.reason
    return nv


# --------------------------------------------------------------------------- static facts

def test_two_p100_pcie_static_facts():
    facts = load(F.p100_pcie_box()).static_facts()
    assert [g["index"] for g in facts] == [0, 1]
    g0, g1 = facts
    assert g0["name"] == "Tesla P100-PCIE-16GB"
    assert g0["uuid"] == F.uuid(0, "p100") and g1["uuid"] == F.uuid(1, "p100")
    assert g0["pci_bus_id"] == "00000000:04:00.0" and g1["pci_bus_id"] == "00000000:82:00.0"
    assert g0["memory_total_bytes"] == 16280 * 2 ** 20
    assert g0["compute_capability"] == "6.0"
    assert g0["driver_version"] == "535.104.05"
    assert g0["cuda_driver_version"] == "12.2"
    assert (g0["max_sm_clock_mhz"], g0["max_mem_clock_mhz"]) == (1328, 715)
    assert g0["power_limit_w"] == 250.0
    # PCIe only: NVLink queries are NotSupported, which is no error
    assert g0["topology"] == [{"peer_index": 1, "peer_uuid": g1["uuid"], "pcie": "PHB", "link": "PHB",
                               "nvlinks": 0, "via": None}]
    assert g1["topology"][0]["peer_index"] == 0 and g1["topology"][0]["link"] == "PHB"
    assert "field_errors" not in g0
    assert not N.VOLATILE_KEYS & set(g0)


def test_eight_a100_nvswitch_box_links_every_pair_by_nvlink():
    facts = load(F.a100_nvswitch_box()).static_facts()
    assert len(facts) == 8
    assert {g["name"] for g in facts} == {"NVIDIA A100-SXM4-40GB"}
    assert {g["compute_capability"] for g in facts} == {"8.0"}
    for g in facts:
        peers = {t["peer_index"]: t for t in g["topology"]}
        assert sorted(peers) == [i for i in range(8) if i != g["index"]]
        assert {t["link"] for t in g["topology"]} == {"NVLINK"}
        assert {t["via"] for t in g["topology"]} == {"nvswitch"}
        assert {t["nvlinks"] for t in g["topology"]} == {12}
    pcie0 = {t["peer_index"]: t["pcie"] for t in facts[0]["topology"]}
    assert pcie0 == {1: "PXB", 2: "NODE", 3: "NODE", 4: "SYS", 5: "SYS", 6: "SYS", 7: "SYS"}


def test_direct_nvlink_bridge_without_remote_device_type():
    fake = F.Without(F.module(F.a100_pcie_bridged_pair()), "nvmlDeviceGetNvLinkRemoteDeviceType")
    facts = N.load(fake).static_facts()
    assert facts[0]["topology"][0] == {"peer_index": 1, "peer_uuid": facts[1]["uuid"], "pcie": "NODE",
                                       "link": "NVLINK", "nvlinks": 12, "via": "direct"}
    assert facts[0]["cuda_driver_version"] == "11.4"


def test_unsupported_fields_are_none_and_other_errors_are_named():
    facts = load(F.h100_box()).static_facts()
    (g,) = facts
    assert g["compute_capability"] == "9.0"
    assert g["max_sm_clock_mhz"] is None and g["max_mem_clock_mhz"] is None
    assert g["field_errors"] == {"max_sm_clock_mhz": "Insufficient Permissions",
                                 "max_mem_clock_mhz": "Insufficient Permissions"}
    vol = load(F.h100_box()).volatile_facts()[0]
    assert vol["power_draw_w"] is None  # NotSupported: silently None
    assert "field_errors" not in vol


def test_not_supported_everywhere_gives_none_not_an_exception():
    spec = F.h100_box()
    spec["devices"][0]["unsupported"] = ["uuid", "pci_bus_id", "memory_total_bytes", "power_limit_w",
                                         "compute_capability", "nvlinks", "temperature_c", "throttle_bitmask"]
    spec["devices"][0]["errors"] = {}
    spec["cuda_driver_version"] = None
    (g,) = load(spec).static_facts()
    assert g["name"] == "NVIDIA H100 80GB HBM3"
    for key in ("uuid", "pci_bus_id", "memory_total_bytes", "power_limit_w", "compute_capability",
                "cuda_driver_version"):
        assert g[key] is None, key
    assert "field_errors" not in g
    (v,) = load(spec).volatile_facts()
    assert v["temperature_c"] is None and v["throttle_reasons"] == [] and v["throttle_bitmask"] is None


def test_handles_are_read_by_nvml_index_and_no_device_is_an_empty_list():
    assert load({"driver_version": "535.104.05", "cuda_driver_version": 12020, "devices": []}).static_facts() == []


def test_cuda_driver_version_decoding():
    assert N.decode_cuda_version(12020) == "12.2"
    assert N.decode_cuda_version(11040) == "11.4"
    assert N.decode_cuda_version(10020) == "10.2"
    assert N.decode_cuda_version(12080) == "12.8"
    assert N.decode_cuda_version(None) is None


def test_bus_id_normalisation():
    assert N.normalize_bus_id("0000:04:00.0") == "00000000:04:00.0"
    assert N.normalize_bus_id(b"00000000:af:00.0") == "00000000:AF:00.0"
    assert N.normalize_bus_id("00000001:3b:00.1") == "00000001:3B:00.1"


def test_topology_level_names_follow_nvidia_smi():
    assert [N.topology_name(x) for x in (10, 20, 30, 40, 50)] == ["PIX", "PXB", "PHB", "NODE", "SYS"]
    assert N.topology_name("SINGLE") == "PIX" and N.topology_name("HOSTBRIDGE") == "PHB"
    assert N.topology_name("NVML_TOPOLOGY_SYSTEM") == "SYS"
    with pytest.raises(ValueError):
        N.topology_name("NEARBY")


# --------------------------------------------------------------------------- volatile facts

def test_volatile_facts_and_throttle_decoding():
    spec = F.scripted(F.p100_pcie_box(), 1, throttle_bitmask=[0x1 | 0x4 | 0x40], memory_used_bytes=[3 * GIB])
    vol = load(spec).volatile_facts()
    assert [v["index"] for v in vol] == [0, 1]
    v = vol[1]
    assert set(v) == {"index", "uuid"} | (N.VOLATILE_KEYS - {"field_errors"})
    assert v["uuid"] == F.uuid(1, "p100")
    assert v["memory_used_bytes"] == 3 * GIB
    assert v["memory_free_bytes"] == 16280 * 2 ** 20 - 3 * GIB
    assert v["throttle_reasons"] == ["gpu_idle", "sw_power_cap", "hw_thermal_slowdown"]
    assert v["sm_clock_mhz"] == 1328 // 4 and v["power_draw_w"] == 25.0 and v["temperature_c"] == 30
    assert load(spec).volatile_facts([1])[0]["index"] == 1


def test_throttle_bits_named():
    assert N.decode_throttle_reasons(0) == []
    assert N.decode_throttle_reasons(None) == []
    assert N.decode_throttle_reasons(0xFF) == [
        "gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "sync_boost",
        "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"]
    assert N.decode_throttle_reasons(0x8 | 0x1000) == ["hw_slowdown", "unknown_0x1000"]


def test_old_nvidia_ml_py_without_clocks_event_reasons_uses_throttle_reasons():
    fake = F.Without(F.module(F.scripted(F.p100_pcie_box(), 0, throttle_bitmask=[0x20])),
                     "nvmlDeviceGetCurrentClocksEventReasons")
    assert N.load(fake).volatile_facts([0])[0]["throttle_reasons"] == ["sw_thermal_slowdown"]


def test_old_driver_without_clocks_event_reasons_symbol_falls_back():
    fake = F.module(F.scripted(F.p100_pcie_box(), 0, throttle_bitmask=[0x4]))

    def missing_symbol(handle):
        fake._raise("FUNCTION_NOT_FOUND")
    fake.nvmlDeviceGetCurrentClocksEventReasons = missing_symbol
    v = N.load(fake).volatile_facts([0])[0]
    assert v["throttle_reasons"] == ["sw_power_cap"] and "field_errors" not in v


# --------------------------------------------------------------------------- loading

def test_absent_when_pynvml_is_not_importable(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    nv = N.load()
    assert not nv.available
    assert nv.reason == "nvidia-ml-py not installed"
    assert nv.static_facts() == [] and nv.volatile_facts() == [] and cuda_devices.visible_gpus(nv, {}) == []
    assert nv.device_count() == 0


def test_absent_when_nvml_init_fails():
    nv = N.load(F.module({"init_error": "DRIVER_NOT_LOADED", "devices": []}))
    assert not nv.available and nv.reason == "NVML: Driver Not Loaded"
    nv = N.load(F.module({"init_error": "LIBRARY_NOT_FOUND", "devices": []}))
    assert nv.reason == "NVML: NVML Shared Library Not Found"


def test_real_pynvml_here_is_absent_or_answers(monkeypatch):
    pynvml = pytest.importorskip("pynvml")
    nv = N.load(env={})
    if nv.available:  # a machine with an NVIDIA driver
        assert nv.source == "pynvml" and isinstance(nv.static_facts(), list)
        nv.close()
    else:
        assert nv.reason.startswith("NVML: ")
    assert pynvml is not None


def test_load_imports_pynvml_whatever_it_is(tmp_path, monkeypatch):
    """The product imports ``pynvml``: here the stand-in of a spec, as the tests put it there."""
    path = F.write(F.a100_nvswitch_box(), tmp_path / "box.json")
    F.use_in_process(monkeypatch, path)
    nv = N.load()
    assert nv.available and nv.source == "pynvml"
    assert [g["name"] for g in nv.static_facts()] == ["NVIDIA A100-SXM4-40GB"] * 8
    nv.close()
    assert not nv.available


def _load_in_a_subprocess(path):
    code = ("import json, sys; from pytest_mxperf.machine import nvml; nv = nvml.load(); "
            "print(json.dumps([nv.source, nv.reason, nvml.fingerprint_part(nv.static_facts())])); "
            "assert 'mxnet' not in sys.modules")
    env = {"PATH": "/usr/bin:/bin", F.FAKE_ENV: str(path), "PYTHONPATH": str(F.PYNVML_DIR)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_the_stand_in_pynvml_reaches_a_subprocess(tmp_path):
    source, reason, part = _load_in_a_subprocess(F.write(F.p100_pcie_box(), tmp_path / "box.json"))
    assert source == "pynvml" and reason is None
    assert part == [{"name": "Tesla P100-PCIE-16GB", "memory_gib": 16, "compute_capability": "6.0",
                     "links": {"PHB": 1}, "count": 2}]


def test_a_pynvml_that_breaks_at_import_is_absent_with_its_reason(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text("{not json")
    source, reason, part = _load_in_a_subprocess(path)
    assert source == "absent" and part == []
    assert reason.startswith("nvidia-ml-py could not be imported") and str(path) in reason and F.FAKE_ENV in reason
    assert "missing.json" in _load_in_a_subprocess(tmp_path / "missing.json")[1]


# --------------------------------------------------------------------------- the fake is pynvml-shaped

def test_every_function_used_exists_in_the_fake_and_in_nvidia_ml_py():
    fake = F.module(F.p100_pcie_box())
    for name in N.PYNVML_FUNCTIONS:
        assert callable(getattr(fake, name)), name
    pynvml = pytest.importorskip("pynvml")
    for name in N.PYNVML_FUNCTIONS:
        real = inspect.signature(getattr(pynvml, name))
        ours = inspect.signature(getattr(fake, name))
        assert list(real.parameters) == list(ours.parameters), name


def test_error_classes_and_constants_match_nvidia_ml_py():
    pynvml = pytest.importorskip("pynvml")
    fake = F.module(F.p100_pcie_box())
    for cls in ("NVMLError_NotSupported", "NVMLError_InvalidArgument", "NVMLError_DriverNotLoaded",
                "NVMLError_LibraryNotFound", "NVMLError_NoPermission", "NVMLError_GpuIsLost",
                "NVMLError_FunctionNotFound", "NVMLError_Uninitialized"):
        real, ours = getattr(pynvml, cls)(), getattr(fake, cls)()
        assert real.value == ours.value, cls
        assert isinstance(ours, fake.NVMLError)
    for const in ("NVML_CLOCK_SM", "NVML_CLOCK_MEM", "NVML_TEMPERATURE_GPU", "NVML_FEATURE_ENABLED",
                  "NVML_NVLINK_DEVICE_TYPE_SWITCH", "NVML_TOPOLOGY_SINGLE", "NVML_TOPOLOGY_MULTIPLE",
                  "NVML_TOPOLOGY_HOSTBRIDGE", "NVML_TOPOLOGY_NODE", "NVML_TOPOLOGY_SYSTEM"):
        assert getattr(pynvml, const) == getattr(fake, const), const
    for n, (bit, name) in enumerate(N.THROTTLE_REASONS):
        const = "nvmlClocksThrottleReason" + "".join(p.capitalize() for p in name.split("_"))
        real = getattr(pynvml, const, None)  # e.g. nvmlClocksThrottleReasonHwThermalSlowdown
        if n < 8:  # the reasons every nvidia-ml-py names; newer ones may be missing in old ones
            assert real is not None, const
        assert real is None or real == bit, name
    # a real pynvml NotSupported is recognised as such
    assert N._is_not_supported(pynvml.NVMLError_NotSupported())
    assert not N._is_not_supported(pynvml.NVMLError_GpuIsLost())


def test_real_pynvml_error_classes_raised_by_a_device_are_handled():
    pynvml = pytest.importorskip("pynvml")
    fake = F.module(F.p100_pcie_box())

    def power(handle):
        raise pynvml.NVMLError_NotSupported()

    def temp(handle, sensor):
        raise pynvml.NVMLError_GpuIsLost()
    fake.nvmlDeviceGetPowerUsage = power
    fake.nvmlDeviceGetTemperature = temp
    v = N.load(fake).volatile_facts([0])[0]
    assert v["power_draw_w"] is None and v["temperature_c"] is None
    assert v["field_errors"] == {"temperature_c": "GPU is lost"}


# --------------------------------------------------------------------------- gpu:N -> NVML device

def visible(spec, env):
    return cuda_devices.visible_gpus(N.load(F.module(spec)), env)


def test_all_visible_in_pci_bus_order_even_when_nvml_order_differs():
    gpus = visible(F.p100_pcie_box(reverse_nvml_order=True), {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    assert [(g["mxnet_ctx"], g["nvml_index"], g["pci_bus_id"]) for g in gpus] == [
        ("gpu:0", 1, "00000000:04:00.0"), ("gpu:1", 0, "00000000:82:00.0")]
    assert all(g["order_certain"] for g in gpus)


def test_visible_by_index():
    gpus = visible(F.a100_nvswitch_box(), {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "5,2"})
    assert [(g["mxnet_ctx"], g["cuda_index"], g["nvml_index"]) for g in gpus] == [("gpu:0", 0, 5), ("gpu:1", 1, 2)]
    assert gpus[0]["uuid"] == F.uuid(5, "a100")


def test_visible_by_uuid_and_uuid_prefix():
    spec = F.p100_pcie_box(reverse_nvml_order=True)
    full, other = F.uuid(1, "p100"), F.uuid(0, "p100")
    gpus = visible(spec, {"CUDA_VISIBLE_DEVICES": f"{full},{other[:14]}"})
    assert [g["uuid"] for g in gpus] == [full, other]
    assert all(g["order_certain"] for g in gpus)  # UUIDs: the order given, whatever CUDA_DEVICE_ORDER
    # an ambiguous prefix ends the list
    assert visible(spec, {"CUDA_VISIBLE_DEVICES": "GPU-"}) == []


def test_visible_empty_string_is_none_and_unset_is_all():
    spec = F.a100_nvswitch_box()
    assert visible(spec, {"CUDA_VISIBLE_DEVICES": ""}) == []
    assert len(visible(spec, {})) == 8


def test_invalid_or_repeated_entry_ends_the_list():
    spec = F.a100_nvswitch_box()
    env = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert [g["nvml_index"] for g in visible(spec, dict(env, CUDA_VISIBLE_DEVICES="0,7,-1,2"))] == [0, 7]
    assert [g["nvml_index"] for g in visible(spec, dict(env, CUDA_VISIBLE_DEVICES="3,8,1"))] == [3]
    assert [g["nvml_index"] for g in visible(spec, dict(env, CUDA_VISIBLE_DEVICES="1,1,2"))] == [1]
    assert visible(spec, dict(env, CUDA_VISIBLE_DEVICES="MIG-2f4e9c3a-aaaa-bbbb-cccc-000000000000")) == []


def test_without_pci_bus_id_order_indices_are_uncertain():
    gpus = visible(F.a100_nvswitch_box(), {"CUDA_VISIBLE_DEVICES": "0,1"})
    assert [g["nvml_index"] for g in gpus] == [0, 1]
    assert {g["order"] for g in gpus} == {"FASTEST_FIRST"}
    assert not any(g["order_certain"] for g in gpus)
    one = visible(F.a100_nvswitch_box(), {"CUDA_VISIBLE_DEVICES": "4"})
    assert one[0]["order_certain"]  # a single GPU is gpu:0 in any order


# --------------------------------------------------------------------------- worker environment

def test_worker_gpu_env_fills_order_and_jit_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MXPERF_CACHE_DIR", str(tmp_path))
    base = {"PATH": "/usr/bin", "OMP_NUM_THREADS": "2"}
    env = cuda_devices.worker_gpu_env(base)
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert env["CUDA_CACHE_PATH"] == str(tmp_path / "cuda-jit")
    assert (tmp_path / "cuda-jit").is_dir()
    assert int(env["CUDA_CACHE_MAXSIZE"]) == 2 * GIB
    assert env["OMP_NUM_THREADS"] == "2" and base == {"PATH": "/usr/bin", "OMP_NUM_THREADS": "2"}
    assert {k: v["set_by"] for k, v in cuda_devices.gpu_env_sources(base).items()} == {
        "CUDA_DEVICE_ORDER": "suite", "CUDA_CACHE_PATH": "suite", "CUDA_CACHE_MAXSIZE": "suite"}
    assert cuda_devices.device_order_note(base) is None


def test_worker_gpu_env_keeps_the_users_values(tmp_path):
    base = {"CUDA_DEVICE_ORDER": "FASTEST_FIRST", "CUDA_CACHE_PATH": str(tmp_path / "mine"),
            "CUDA_CACHE_MAXSIZE": "1073741824", "CUDA_CACHE_DISABLE": "1"}
    env = cuda_devices.worker_gpu_env(base, cache_path=str(tmp_path / "suite"))
    assert env == base
    sources = cuda_devices.gpu_env_sources(base, cache_path=str(tmp_path / "suite"))
    assert {k: v["set_by"] for k, v in sources.items()} == {
        "CUDA_DEVICE_ORDER": "user", "CUDA_CACHE_PATH": "user", "CUDA_CACHE_MAXSIZE": "user",
        "CUDA_CACHE_DISABLE": "user"}
    note = cuda_devices.device_order_note(base)
    assert "CUDA_DEVICE_ORDER=FASTEST_FIRST" in note and "\n" not in note


# --------------------------------------------------------------------------- fingerprint

def test_fingerprint_identifies_the_kind_not_the_cards():
    part = N.fingerprint_part(load(F.a100_nvswitch_box()).static_facts())
    assert part == [{"name": "NVIDIA A100-SXM4-40GB", "memory_gib": 40, "compute_capability": "8.0",
                     "links": {"NVLINK": 7}, "count": 8}]
    # other cards of the same model, another driver: the same part
    other = F.a100_nvswitch_box()
    other["driver_version"] = "550.54.15"
    for n, d in enumerate(other["devices"]):
        d["uuid"] = F.uuid(n, "beef")
        d["power_limit_w"] = 300.0
        d["max_clocks_mhz"] = {"sm": 1300, "mem": 1215}
    assert N.fingerprint_part(load(other).static_facts()) == part
    blob = json.dumps(part)
    assert "GPU-" not in blob and "00000000:" not in blob


def test_fingerprint_tells_links_apart():
    pcie = N.fingerprint_part(load(F.p100_pcie_box()).static_facts())
    assert pcie == [{"name": "Tesla P100-PCIE-16GB", "memory_gib": 16, "compute_capability": "6.0",
                     "links": {"PHB": 1}, "count": 2}]
    bridged = N.fingerprint_part(load(F.a100_pcie_bridged_pair()).static_facts())
    assert bridged[0]["links"] == {"NVLINK": 1}
    unbridged = F.a100_pcie_bridged_pair()
    for d in unbridged["devices"]:
        del d["nvlinks"]
    assert N.fingerprint_part(load(unbridged).static_facts())[0]["links"] == {"NODE": 1}


# --------------------------------------------------------------------------- sampler

UTIL = [10, 50, 90]
SM = [1400, 1200, 1410]
USED = [1 * GIB, 3 * GIB, 2 * GIB]
THROTTLE = [0x0, 0x4, 0x20 | 0x4, 0x0]


def scripted_box():
    spec = F.scripted(F.p100_pcie_box(), 0, gpu_util_pct=UTIL, sm_clock_mhz=SM, memory_used_bytes=USED,
                      throttle_bitmask=THROTTLE, mem_util_pct=[5, 15, 25])
    return F.module(spec)


def test_sampler_summary_follows_the_scripted_state():
    fake = scripted_box()
    nv = N.load(fake)
    sampler = gpu_sampler.Sampler(nv, indices=[0], interval=0.001).start()
    # drive by sample count: wait until 6 samples were read (a hang guard, not a threshold)
    assert fake.wait_reads("nvmlDeviceGetUtilizationRates", 0, 6, timeout=120)
    sampler.stop()
    assert sampler.stopped_cleanly
    (s,) = sampler.summary()
    n = s["samples"]
    assert n >= 6
    assert s["index"] == 0 and s["uuid"] == F.uuid(0, "p100")
    assert s["gpu_util_max_pct"] == 90
    assert s["gpu_util_mean_pct"] == round((10 + 50 + 90 * (n - 2)) / n, 2)
    assert s["mem_util_max_pct"] == 25
    assert s["memory_used_max_bytes"] == 3 * GIB
    assert (s["sm_clock_min_mhz"], s["sm_clock_max_mhz"]) == (1200, 1410)
    assert s["throttle_reasons_seen"] == ["sw_power_cap", "sw_thermal_slowdown"]
    assert s["slowdown_reasons_seen"] == ["sw_thermal_slowdown"]
    assert s["sample_errors"] == 0
    samples = sampler.samples()[0]
    assert [r["gpu_util_pct"] for r in samples[:3]] == UTIL


def test_sampler_survives_failing_samples_and_stops():
    fake = scripted_box()
    nv = N.load(fake)
    real = nv.volatile_facts
    calls = {"n": 0}
    lock = threading.Lock()

    def flaky(indices=None):
        with lock:
            calls["n"] += 1
            n = calls["n"]
        if n == 2:
            raise RuntimeError("NVML went away for a moment")
        if n == 3:
            raise KeyboardInterrupt  # not even this escapes the thread
        return real(indices)
    nv.volatile_facts = flaky
    sampler = gpu_sampler.Sampler(nv, indices=[0], interval=0.001).start()
    assert fake.wait_reads("nvmlDeviceGetUtilizationRates", 0, 4, timeout=120)
    sampler.stop()
    assert sampler.stopped_cleanly
    (s,) = sampler.summary()
    assert s["sample_errors"] == 2 and s["samples"] >= 4
    assert sampler.last_error in ("NVML went away for a moment", "KeyboardInterrupt")


def test_sampler_sample_once_without_a_thread():
    sampler = gpu_sampler.Sampler(N.load(scripted_box()), indices=[0, 1])
    for _ in range(3):
        sampler.sample_once()
    s0, s1 = sampler.summary()
    assert s0["samples"] == 3 and s0["gpu_util_mean_pct"] == 50.0 and s0["gpu_util_max_pct"] == 90
    assert s1["gpu_util_max_pct"] == 0 and s1["throttle_reasons_seen"] == ["gpu_idle"]


def test_sampler_without_nvml_does_nothing(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    with gpu_sampler.Sampler(N.load()) as sampler:
        pass
    assert sampler.summary() == [] and sampler.stopped_cleanly is None


# ------------------------------------------------------------------ a worker's own GPU memory

def test_own_bytes_is_the_worker_trees_sum_or_says_why_not():
    per_pid = {100: 3 * GIB, 101: 1 * GIB, 4242: 8 * GIB, 77: None}
    assert N.own_bytes(per_pid, [100, 101]) == ("ok", 4 * GIB)  # the worker and its child, no tenant
    assert N.own_bytes(per_pid, [100, 555]) == ("ok", 3 * GIB)  # a descendant holding nothing is not listed
    assert N.own_bytes(per_pid, [555]) == ("absent", None)      # e.g. another PID namespace
    assert N.own_bytes({}, [100]) == ("absent", None)
    assert N.own_bytes(per_pid, [77, 100]) == ("not-reported", None)  # usedGpuMemory not available
    assert N.own_bytes(None, [100]) == ("unlisted", None)       # NVML could not list the processes
    assert set(N.OWN_MEMORY_MISSING) == {"absent", "not-reported", "unlisted"}


def _register(pools, pid, mib):
    (pools / f"{pid}.json").write_text(json.dumps({"gpu": 0, "used_bytes": None if mib is None else int(mib * MIB)}))


@pytest.fixture
def worker_with_child():
    """(worker pid, its child's pid): a sleeping stand-in worker that started a sleeping child."""
    code = ("import subprocess, sys, time; c = subprocess.Popen([sys.executable, '-c', 'import time; "
            "time.sleep(600)']); print(c.pid, flush=True); time.sleep(600)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    child = int(proc.stdout.readline())
    yield proc.pid, child
    import psutil
    for p in [psutil.Process(child), psutil.Process(proc.pid)]:
        p.kill()
    proc.wait()
    proc.stdout.close()


def _pool_box(tmp_path, tenant_mib=8000, **device):
    pools = tmp_path / "pools"
    pools.mkdir(parents=True)
    spec = F.p100_pcie_box()
    spec["devices"][0].update(processes_dir=str(pools), processes=[{"pid": 4242, "used_bytes": tenant_mib * MIB}],
                              **device)
    return pools, N.load(F.module(spec))


def test_the_sampler_keeps_the_peak_of_the_workers_own_gpu_memory(tmp_path, worker_with_child):
    """Each sample reads what the worker's PID and its descendants hold (NVML's per-process
    figures); the summary keeps the largest; another tenant on the GPU (8000 MiB) is never
    counted."""
    worker, child = worker_with_child
    pools, nv = _pool_box(tmp_path)
    sampler = gpu_sampler.Sampler(nv, indices=[0], pid=worker)
    sampler.sample_once()                       # the worker holds nothing yet: not listed
    _register(pools, worker, 1000)
    sampler.sample_once()
    _register(pools, worker, 3000)
    sampler.sample_once()                       # the peak
    _register(pools, worker, 2000)
    _register(pools, child, 500)
    sampler.sample_once()                       # 2500: the worker and its child
    (pools / f"{worker}.json").unlink()
    (pools / f"{child}.json").unlink()
    sampler.sample_once()                       # the pools freed before the worker exits
    assert sampler.own_memory() == {"pid": worker, "peak_bytes": 3000 * MIB, "readings": {"absent": 2, "ok": 3},
                                    "source": N.OWN_MEMORY_SOURCE}
    assert nv.own_memory(worker, [0]) == ("absent", None)
    _register(pools, child, 500)
    assert nv.own_memory(worker, [0]) == ("ok", 500 * MIB)
    (s,) = sampler.summary()
    assert s["memory_used_max_bytes"] == (8000 + 3000) * MIB  # the device-wide figure (tenant in it), shown only


def test_the_sampler_gives_no_own_figure_where_nvml_does_not_report_it(tmp_path, worker_with_child):
    worker, _ = worker_with_child
    pools, nv = _pool_box(tmp_path)
    _register(pools, worker, None)              # listed, usedGpuMemory not available
    sampler = gpu_sampler.Sampler(nv, indices=[0], pid=worker)
    sampler.sample_once()
    sampler.sample_once()
    own = sampler.own_memory()
    assert own["peak_bytes"] is None and own["readings"] == {"not-reported": 2}
    assert own["why"] == N.OWN_MEMORY_MISSING["not-reported"]
    _, unlisted = _pool_box(tmp_path / "b", unsupported=["processes"])  # nvmlDeviceGetComputeRunningProcesses fails
    sampler = gpu_sampler.Sampler(unlisted, indices=[0], pid=worker)
    sampler.sample_once()
    assert sampler.own_memory()["readings"] == {"unlisted": 1} and sampler.own_memory()["peak_bytes"] is None
    assert sampler.errors == 0
    assert gpu_sampler.Sampler(nv, indices=[0]).own_memory() is None  # no PID given: not read


def test_the_utilisation_summary_carries_the_own_peak_that_the_runner_judges():
    from pytest_mxperf.machine import utilisation
    assert utilisation.own_gpu_memory_mib({"gpu_own_memory": {"peak_bytes": 3000 * MIB}}) == 3000.0
    assert utilisation.own_gpu_memory_mib({"gpu_own_memory": {"peak_bytes": None, "why": "x"}}) is None
    assert utilisation.own_gpu_memory_mib({"gpu_own_memory": None}) is None
    assert utilisation.own_gpu_memory_mib({"cpu": {}}) is None and utilisation.own_gpu_memory_mib(None) is None
