"""Would one resident probe process read what a fresh probe process reads? (#37: the probe's
process start is about 0.14 s of its 0.60; a session runs 37 of them.)

Alternating, in turn order swapped every pair: ``machine_state.run_probe()`` (a fresh process,
as the scheduler runs it) and a request to one long-lived process that runs the same
``workers/calibrate.run`` on each line it reads (its affinity widened once, numpy imported
once). Per arm: GEMM and memory-probe medians, quartiles and the request's wall; paired: the
mean log ratio resident / fresh with its standard error.

    .venv/bin/python benchmarks/probe_resident.py 60
"""
import json, math, os, statistics, subprocess, sys, time
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from pytest_mxperf.machine import state as M, topology
from pytest_mxperf.proc import spawn
CHILD = r'''
import json, sys
from pytest_mxperf.workers import calibrate
spec = json.loads(sys.argv[1])
cpus = calibrate.widen_affinity(spec.get("cpus"))
import numpy as np
for line in sys.stdin:
    out = calibrate.run(dict(spec))
    print(json.dumps(out), flush=True)
'''
penv = spawn.with_package_path(M.probe_env(os.environ))
spec = dict(M.PROBE_SPEC, cpus=list(topology.machine_cpus()))
p = subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(spec)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=penv)
rows = {"fresh": [], "resident": []}
for i in range(int(sys.argv[1])):
    def fresh():
        t = time.perf_counter(); f = M.run_probe(); tf = time.perf_counter() - t
        rows["fresh"].append((f["gemm_gflops"], f["stream_gbps"], tf))
    def resident():
        t = time.perf_counter(); p.stdin.write("x\n"); p.stdin.flush(); r = json.loads(p.stdout.readline()); tr = time.perf_counter() - t
        rows["resident"].append((r["gemm_gflops"], r["stream_gbps"], tr))
    for f in ((fresh, resident) if i % 2 else (resident, fresh)):
        f(); time.sleep(0.3)
p.stdin.close(); p.wait()
for k, v in rows.items():
    for j, name in enumerate(("gemm", "stream", "wall")):
        xs = sorted(x[j] for x in v)
        q = statistics.quantiles(xs, n=4)
        print(f"{k:9s} {name:6s} median {statistics.median(xs):8.3f}  IQR {q[0]:8.3f}-{q[2]:8.3f}  min {xs[0]:8.3f} max {xs[-1]:8.3f}")


for j, name in enumerate(("gemm", "stream")):
    lr = [math.log(r[j] / f[j]) for f, r in zip(rows["fresh"], rows["resident"])]
    m = statistics.mean(lr); se = statistics.stdev(lr) / math.sqrt(len(lr))
    print(f"paired log ratio resident/fresh {name}: {100*m:+.1f}% +- {100*se:.1f}% (n={len(lr)})")
