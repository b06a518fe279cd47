"""The probe measures the machine, not the setup (issue #35 part 3): no change of the
session's setup (threading variables, ``taskset``, a cgroup CPU quota) is filed as the
machine's slow spell (machine/topology.py, machine/state.py, workers/calibrate.py,
judge/machine_states.py, judge/verdict.py's spell rule). Real probe runs assert what the
probe ran on (CPUs, threads, its recorded setup), never a speed."""

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from pytest_mxperf.judge import machine_states as L
from pytest_mxperf.judge import verdict as V
from pytest_mxperf.machine import state as M
from pytest_mxperf.machine import topology
from pytest_mxperf.model.measurement import METRICS

MACHINE = {"cpus": 2, "quota_cpus": None, "env": {}}   # a probe's setup on a 2-CPU machine
QUOTA_1 = {"cpus": 2, "quota_cpus": 1.0, "env": {}}    # the same machine under a 1-CPU quota


def probe(gemm, setup=MACHINE, stream=20.0):
    p = {"gemm_gflops": gemm, "stream_gbps": stream, "seconds": 0.4}
    return dict(p, setup=setup) if setup is not None else p


def fake_cgroup(tmp_path, proc_line, files):
    """A cgroup tree under tmp_path/cg and a /proc/self/cgroup naming this process's place in it."""
    root = tmp_path / "cg"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    proc = tmp_path / "proc-self-cgroup"
    proc.write_text(proc_line + "\n")
    return root, proc


def probe_in_child(code):
    """Run ``code`` (which prints one JSON line) in a fresh interpreter: its affinity can be
    narrowed without narrowing this test process's."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- variables -----------------------------------------------------------------------------

def test_variables_do_not_reach_the_probe_and_do_not_change_its_setup():
    """Every threading and BLAS variable is dropped (the ones the old probe kept too:
    OPENBLAS_*, MKL_*, GOTOBLAS_*, BLIS_*), the threads are the machine's; a real probe run
    with the session's variables records the same setup and threads as one without."""
    user = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            "MXNET_ENGINE_TYPE": "NaiveEngine", "KMP_AFFINITY": "compact", "GOMP_CPU_AFFINITY": "0",
            "OPENBLAS_VERBOSE": "2", "OPENBLAS_BLOCK_FACTOR": "1", "MKL_DEBUG_CPU_TYPE": "5",
            "MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "GOTOBLAS_MAIN_FREE": "1", "BLIS_NUM_THREADS": "1",
            "VECLIB_MAXIMUM_THREADS": "1", "NUMEXPR_NUM_THREADS": "1"}
    env = M.probe_env(dict(user, PATH="/bin"))
    n = str(M.probe_threads())
    assert {k: env[k] for k in user if k in env} == {"OMP_NUM_THREADS": n, "OPENBLAS_NUM_THREADS": n,
                                                     "MKL_NUM_THREADS": n}
    assert env["PATH"] == "/bin"

    clean = M.run_probe(env={k: v for k, v in M.os.environ.items() if k not in user})
    with_vars = M.run_probe(env=dict(M.os.environ, **user))
    assert clean and with_vars, (clean, with_vars)
    assert with_vars["setup"] == clean["setup"] and with_vars["blas_threads"] == clean["blas_threads"] == int(n)
    assert L.setup_change([with_vars], L.reference_from([clean])) is None


def test_a_kept_blas_variable_is_a_setup_change_not_a_slow_spell():
    """OPENBLAS_CORETYPE is kept (some CPUs need it to run at all) and selects the GEMM
    kernels: the probe records it, and a probe run with another one is not held to the
    reference's speed."""
    env = M.probe_env({"OPENBLAS_CORETYPE": "Prescott", "OPENBLAS_L2_SIZE": "1048576"})
    assert env["OPENBLAS_CORETYPE"] == "Prescott"
    assert M.probe_setup(2, env)["env"] == {"OPENBLAS_CORETYPE": "Prescott", "OPENBLAS_L2_SIZE": "1048576"}
    ref = L.reference_from([probe(153.0)] * 6)
    st = L.label(probe(20.0, dict(MACHINE, env={"OPENBLAS_CORETYPE": "Prescott"})), None, None, ref)
    assert st.state == L.UNKNOWN and "OPENBLAS_CORETYPE=Prescott" in st.reason and "setup change" in st.reason, st


# -- taskset -------------------------------------------------------------------------------

def test_a_probe_started_under_a_narrowed_affinity_runs_on_the_machines_cpus():
    """A session started as ``taskset -c <one CPU>``: its probe widens its affinity back to the
    machine's CPUs before numpy loads, so it runs the machine's threads on all of them and
    records the setup an unnarrowed session records. The old probe ran 1 thread on 1 CPU."""
    if len(topology.machine_cpus()) < 2:
        pytest.skip("one CPU: no affinity narrower than the machine")
    machine = {"cpus": len(topology.machine_cpus()), "threads": M.probe_threads()}
    got = probe_in_child(
        "import json, os\n"
        "from pytest_mxperf.machine import state as M, topology\n"
        "os.sched_setaffinity(0, [min(os.sched_getaffinity(0))])\n"
        "p = M.run_probe()\n"
        "print(json.dumps({'affinity': len(os.sched_getaffinity(0)), 'env_threads': M.probe_env(os.environ)"
        "['OMP_NUM_THREADS'], 'blas_threads': p['blas_threads'], 'setup': p['setup']}))\n")
    assert got["affinity"] == 1  # the session stayed narrowed; only its probe widened
    assert got["env_threads"] == str(machine["threads"]) and got["blas_threads"] == machine["threads"], got
    assert got["setup"]["cpus"] == machine["cpus"], got
    unnarrowed = M.run_probe()
    assert unnarrowed and got["setup"] == unnarrowed["setup"]


def test_the_machines_cpus_are_the_cpusets_not_the_affinity_masks(tmp_path):
    root, proc = fake_cgroup(tmp_path, "0::/user.slice/s.scope", {"user.slice/cpuset.cpus.effective": "0-3,8\n"})
    assert topology.machine_cpus(root, proc, sysfs=tmp_path / "none") == (0, 1, 2, 3, 8)  # the nearest ancestor's
    root, proc = fake_cgroup(tmp_path / "v1", "3:cpuset:/docker/x", {"cpuset/docker/x/cpuset.effective_cpus": "2-3"})
    assert topology.machine_cpus(root, proc, sysfs=tmp_path / "none") == (2, 3)
    (tmp_path / "sys").mkdir()
    (tmp_path / "sys" / "online").write_text("0-5\n")
    assert topology.machine_cpus(tmp_path / "nocg", proc, sysfs=tmp_path / "sys") == tuple(range(6))
    assert topology.parse_cpu_list("0-1,4,7-8\n") == (0, 1, 4, 7, 8) and topology.parse_cpu_list("") == ()


# -- a cgroup CPU quota --------------------------------------------------------------------

def test_the_quota_is_read_from_the_process_own_cgroup(tmp_path):
    """``systemd-run -p CPUQuota=100%`` on a cgroup v2 host sets cpu.max in the unit's
    cgroup; the root's says nothing (the old reading: unlimited). v1 likewise, and the
    tightest of the ancestors counts."""
    root, proc = fake_cgroup(tmp_path, "0::/system.slice/run-u7.service",
                             {"system.slice/run-u7.service/cpu.max": "100000 100000\n", "cpu.max": "max 100000\n"})
    assert topology.cgroup_cpu_quota(root, proc) == 1.0
    root, proc = fake_cgroup(tmp_path / "v1", "4:cpu,cpuacct:/batch/job",
                             {"cpu,cpuacct/batch/cpu.cfs_quota_us": "150000",
                              "cpu,cpuacct/batch/cpu.cfs_period_us": "100000",
                              "cpu,cpuacct/batch/job/cpu.cfs_quota_us": "-1",
                              "cpu,cpuacct/batch/job/cpu.cfs_period_us": "100000"})
    assert topology.cgroup_cpu_quota(root, proc) == 1.5
    root, proc = fake_cgroup(tmp_path / "none", "0::/a", {"a/cpu.max": "max 100000\n"})
    assert topology.cgroup_cpu_quota(root, proc) is None


def test_a_probe_under_a_quota_records_it(tmp_path, monkeypatch):
    """The quota cannot be escaped: the probe runs the threads it allows and records it, so
    that its figures are not held to a reference measured without it."""
    root, proc = fake_cgroup(tmp_path, "0::/run.scope", {"run.scope/cpu.max": "100000 100000\n"})
    real = topology.cgroup_cpu_quota
    monkeypatch.setattr(topology, "cgroup_cpu_quota", lambda *a: real(root, proc))
    p = M.run_probe()
    assert p is not None and p["blas_threads"] == 1 and p["setup"]["quota_cpus"] == 1.0, p
    assert L.setup_of(p).cpus == 1.0 and L.setup_of(p).quota
    assert str(L.setup_of(p)).startswith("1 CPU (cgroup quota)")


def test_a_probe_under_a_quota_is_a_setup_change_not_a_slow_spell():
    """The -48% session of issue #35: the GEMM probe at 82 GFLOP/s under a quota against 153
    recorded without it. Labelled unknown, naming the change; the machine's own slow spell
    (same setup, as slow) is still one."""
    ref = L.reference_from([probe(153.0)] * 10 + [probe(82.0, QUOTA_1)] * 4)
    assert ref["gemm_gflops"] == pytest.approx(153.0) and ref["setup"] == L.Setup(2.0)
    st = L.label(probe(82.0, QUOTA_1), probe(84.0, QUOTA_1), None, ref)
    assert st.state == L.UNKNOWN, st
    assert st.reason == ("the probe ran on 1 CPU (cgroup quota), the reference on 2 CPUs: "
                         "a setup change, not a slow spell")
    assert L.label(probe(82.0), probe(84.0), None, ref).state == L.SPELL
    # a neighbour is still a neighbour, whatever the setup
    assert L.label(probe(82.0, QUOTA_1), None, {"other_cpus": 1.5, "steal_frac": 0.0}, ref).state == L.SLOWED


def test_the_reference_is_of_one_setup_and_old_probes_compare_as_before():
    """The reference is the setup of most probes (a tie: more CPUs); probes recorded before
    the setup was (old baselines) join it and are labelled as they were."""
    ref = L.reference_from([probe(82.0, QUOTA_1)] * 6 + [probe(153.0)] * 4)
    assert ref["setup"] == L.Setup(1.0) and ref["gemm_gflops"] == pytest.approx(82.0)
    assert L.label(probe(153.0), None, None, ref).state == L.UNKNOWN  # the baseline's side now
    assert L.reference_from([probe(82.0, QUOTA_1)] * 2 + [probe(153.0)] * 2)["setup"] == L.Setup(2.0)
    old = L.reference_from([probe(153.0, setup=None)] * 4)
    assert "setup" not in old
    assert L.label(probe(82.0, setup=None), None, None, old).state == L.SPELL
    assert L.label(probe(82.0, QUOTA_1), None, None, old).state == L.SPELL  # nothing to tell it by
    mixed = L.reference_from([probe(153.0, setup=None)] * 4 + [probe(150.0)] * 2)
    assert mixed["setup"] == L.Setup(2.0) and mixed["gemm_gflops"] > 150


def test_a_slowdown_under_a_quota_is_judged_as_a_plain_slowdown():
    """The whole chain, as ``outcome/judging.py`` runs it: the baseline recorded normally (5
    processes, GEMM probe 153), the session under a 1-CPU quota (AlexNet b8 -48%, GEMM probe
    82). With the probes' setups its processes are not a slow spell, and the slowdown is a
    regression; the same slowdown in a real slow spell of the machine stays unresolved."""
    base = [150.0, 152.0, 149.0, 151.0, 150.5]
    cur = [v * 0.516 for v in base + base[:3]]

    def verdict(cur_setup):
        base_ms = [(probe(153.0 + i), probe(152.0 + i)) for i in range(len(base))]
        cur_ms = [(probe(82.0 + i, cur_setup), probe(83.0 + i, cur_setup)) for i in range(len(cur))]
        ref = L.reference_from([p for pair in base_ms + cur_ms for p in pair])
        runs = [L.label(b, a, None, ref) for b, a in cur_ms]
        c = V.Comparison(METRICS["throughput"], cur, base, [r.state for r in runs],
                         [L.label(b, a, None, ref).state for b, a in base_ms], confirmed=True,
                         state_reasons=[r.reason for r in runs if r.state in (L.SLOWED, L.SPELL)],
                         spell_depth=L.spell_depth([SimpleNamespace(machine_state=vars(r)) for r in runs], ref))
        return V.judge_session({"c": c})["c"]

    plain = verdict(QUOTA_1)
    assert plain.kind == "regression" and not plain.busy and "slow spell" not in plain.reason, plain
    spell = verdict(MACHINE)
    assert spell.kind == "unresolved" and spell.busy and "slow spell" in spell.reason, spell
