"""Machine fingerprint: stable id, hardware in the hash, software and volatile state not."""

import re

import pytest

from pytest_mxperf.machine import fingerprint as fpm


def test_fingerprint_shape_and_stability():
    a = fpm.machine_fingerprint()
    b = fpm.machine_fingerprint()
    assert set(a) >= {"id", "hardware", "volatile"}
    assert a["id"] == b["id"]  # volatile state (load, clock) changes, the id does not
    assert re.match(r"^[a-z0-9][a-z0-9._-]+-[0-9a-f]{8}$", a["id"]), a["id"]
    fpm.validate_machine_name(a["id"])
    hw = a["hardware"]
    for k in ("cpu_vendor", "cpu_model", "cpu_family", "cpu_model_number", "cpu_stepping", "isa", "cache",
              "logical_cpus", "physical_cores", "available_cores", "memory_gib", "gpus", "gpu_count"):
        assert k in hw
    assert "mxnet" not in str(sorted(hw)).lower()


def test_hash_depends_on_hardware_not_on_volatile():
    hw = dict(fpm.hardware_facts())
    base = fpm.machine_id(hw)
    assert fpm.machine_id(dict(hw)) == base
    for key, value in [("cpu_stepping", "99"), ("cpu_model_number", "1"), ("isa", ["avx", "avx2"]),
                       ("available_cores", 64), ("memory_gib", 4096),
                       ("gpus", [{"name": "Tesla V100-SXM2-16GB", "memory": "16160 MiB"}])]:
        if hw.get(key) == value:  # this machine has it already (AMD EPYC family 25 is model 1)
            value = "2" if key == "cpu_model_number" else value * 2
        changed = dict(hw, **{key: value})
        assert fpm.machine_id(changed) != base, key


def test_generic_model_string_is_not_enough():
    hw = {"cpu_model": "Intel(R) Xeon(R) Processor", "available_cores": 2, "cpu_model_number": "85"}
    other = dict(hw, cpu_model_number="167")
    assert fpm.machine_id(hw) != fpm.machine_id(other)
    assert fpm.machine_id(hw).startswith("intel-xeon-processor-2c-")


def test_gpu_slug_in_id():
    hw = {"cpu_model": "AMD EPYC 7R13 Processor", "available_cores": 8,
          "gpus": [{"name": "NVIDIA A10G", "memory": "23028 MiB"}]}
    assert fpm.machine_id(hw).startswith("amd-epyc-7r13-processor-8c-1xa10g-")


def test_isa_flags_filter():
    flags = "fpu sse2 ssse3 fma avx avx2 avx512f avx512_vnni amx_tile avx_vnni ht lm".split()
    assert fpm.isa_flags(flags) == ["amx_tile", "avx", "avx2", "avx512_vnni", "avx512f", "avx_vnni", "fma"]


def test_override_name():
    fp = fpm.machine_fingerprint("ci-runner-c5.4xlarge")
    assert fp["id"] == "ci-runner-c5.4xlarge" and fp["name_source"] == "override"
    assert fp["hardware"]["cpu_model"]


@pytest.mark.parametrize("bad", ["", "../etc", "a/b", "Upper", ".hidden", "x" * 81, "a b", "name.", "a..b"])
def test_bad_override_name(bad):
    with pytest.raises(ValueError) as ei:
        fpm.machine_fingerprint(bad)
    assert "\n" not in str(ei.value) and "--perf-machine" in str(ei.value)


def test_proc_stat_steal():
    d = fpm.steal_since_boot("cpu  100 0 50 800 10 0 5 35 0 0\ncpu0 1 2 3\n")
    assert d["steal_jiffies"] == 35 and abs(d["steal_fraction"] - 35 / 1000) < 1e-12


def test_cache_sizes_from_sysfs(tmp_path):
    for i, (lvl, typ, size) in enumerate([("1", "Data", "48K"), ("1", "Instruction", "32K"), ("2", "Unified", "1M")]):
        d = tmp_path / f"index{i}"
        d.mkdir()
        (d / "level").write_text(lvl)
        (d / "type").write_text(typ)
        (d / "size").write_text(size)
    assert fpm.cache_sizes(root=tmp_path) == {"L1d": "48K", "L1i": "32K", "L2": "1M"}
