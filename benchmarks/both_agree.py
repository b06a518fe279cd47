"""What the two rules for "both setups agree" do to the gate's error rates (issue 75, part 2),
measured on the product's own end of a session: recorded processes replayed through
``outcome.finish.end_session`` in baseline mode with suspects (regressions among them) settled
against the recorded setup (``replay_lib.baseline_session(setup=True)``, the corpus's A/A duet
pairs as its pairs; each recorded process keeps the machine probes measured around it, so the
replayed baseline records them and the session's verdicts say what moved).

A figure the baseline called changed beyond its resolution and the duet finds the same on
both setups is ``machine-differs`` (the probes moved with it), ``system-differs`` (they did
not) or ``unexplained`` (nothing tells). Two rules for ``system-differs``:

* fails (``model/options.DEFAULT_FAIL_ON``): a session fails on it;
* passes (``--perf-fail-on -system-differs``).

For each corpus with duet pairs, baseline (this VM's own, or one recorded on a host 25% faster
of the same machine type, with or without its probe readings 25% faster: ``HOSTS``), N cells,
and the changed cell's effect (x1.00: unchanged; x0.90: a -10% change of the setup, candidate
side only), ``SESSIONS`` sessions, fixed before any ran: the sessions failed under each rule, the changed cell caught, and how many figures
each session called machine-differs, system-differs and unexplained. Fixed seeds: the same
table on any machine.

    .venv/bin/python benchmarks/both_agree.py > benchmarks/results/both-agree-2026-12-02.txt
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import replay_lib as L  # noqa: E402

#: sessions a row replays, fixed before the replays ran (the rule of docs/baselines.md: a count
#: is never raised after a miss)
SESSIONS = 200
SIZES = (6, 24)
EFFECTS = (1.0, 0.90)
SEED = 20261202
AGREE = ("machine-differs", "system-differs", "unexplained")


#: the baselines the sessions are judged against: this VM's own (recorded from the same corpus
#: at other times), and one recorded on a host 25% faster of the same machine type, its probe
#: readings 25% faster too or not (``replay_lib.baseline_session``'s ``host``)
HOSTS = (("this VM's", 1.0, True), ("a host 25% faster, probes too", 1.25, True),
         ("a host 25% faster, figures alone", 1.25, False))


def row(corpus: L.Corpus, n: int, effect: float, sessions: int = SESSIONS, host: float = 1.0,
        host_probes: bool = True) -> dict:
    rng = random.Random(f"{SEED}-{corpus.name}-{n}-{effect}-{host}-{host_probes}")
    out = {"failed": 0, "failed_unless_system": 0, "caught": 0, "kinds": {}, "agree": {k: 0 for k in AGREE},
           "sessions_with": {k: 0 for k in AGREE}}
    for _ in range(sessions):
        s = L.baseline_session(corpus, n, effect, rng, setup=True, host=host, host_probes=host_probes)
        out["failed"] += s.failed
        out["failed_unless_system"] += bool(set(s.kinds) - {"system-differs"})
        out["caught"] += s.caught
        for k in s.kinds:
            out["kinds"][k] = out["kinds"].get(k, 0) + 1
        for k in AGREE:
            c = sum(kind == k for kind in s.cell_kinds)
            out["agree"][k] += c
            out["sessions_with"][k] += bool(c)
    return out


def main() -> None:
    corpora = [c for c in (a.with_fresh(L.MIN_FRESH).with_pairs() for a in L.aa_corpora()) if c.pools]
    print(f"# both setups agree: the two rules for system-differs, {SESSIONS} replayed sessions a row (fixed before "
          f"they ran), seed {SEED}")
    print("# failed: sessions that fail (any failing kind) with system-differs failing (the default) / passing; "
          "caught: the changed cell fails; the last columns: figures each kind, over all sessions (sessions with any)")
    for corpus in corpora:
        print(f"\n## {corpus.describe()}")
        for (baseline, host, probes), n, effect in ((h, n, e) for h in HOSTS for n in SIZES for e in EFFECTS):
            t0 = time.process_time()
            r = row(corpus, n, effect, host=host, host_probes=probes)
            kinds = ", ".join(f"{k} {v}" for k, v in sorted(r["kinds"].items())) or "-"
            agree = ", ".join(f"{k} {r['agree'][k]} ({r['sessions_with'][k]})" for k in AGREE)
            caught = f"  caught {100 * r['caught'] / SESSIONS:5.1f}%" if effect != 1.0 else ""
            print(f"{baseline:<33} N={n:<3d} x{effect:.2f}  failed {100 * r['failed'] / SESSIONS:5.1f}% / "
                  f"{100 * r['failed_unless_system'] / SESSIONS:5.1f}%  ({kinds}){caught}  [{agree}]  "
                  f"{time.process_time() - t0:.0f} CPU-s", flush=True)


if __name__ == "__main__":
    main()
