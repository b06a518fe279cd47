"""The probe measures the machine, not the setup (issue #35 part 3): no change of the
session's setup (threading variables, ``taskset``, a cgroup CPU quota) is filed as the
machine's slow spell (machine/topology.py, machine/state.py, workers/calibrate.py,
judge/machine_states.py, judge/verdict.py's spell rule). Real probe runs assert what the
probe ran on (CPUs, threads, its recorded setup), never a speed."""

from pytest_mxperf.machine import topology


def fake_cgroup(tmp_path, proc_line, files):
    """A cgroup tree under tmp_path/cg and a /proc/self/cgroup naming this process's place in it."""
    root = tmp_path / "cg"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    proc = tmp_path / "proc-self-cgroup"
    proc.write_text(proc_line + "\n")
    return root, proc


# -- taskset (the machine's CPUs) -------------------------------------------------------------------------------

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


