"""Which release did it? The A/B gate over each pair of adjacent MXNet releases.

    python -m pytest_mxperf.cli.find_release --range 1.6.0..1.9.1 -- perf_tests/test_scoring.py -m cpu \\
        --perf-models resnet50_v2 --perf-batch-sizes 8

A venv is built (once, cached: ``installs.reference_python``) for every release in the
range, each with the wheel whose MKLDNN matches the newest release's (``mxnet-mkl`` up to
1.6, plain ``mxnet`` from 1.7: ``wheel_variants.match_variant``), so that a step measures the
release, not the packaging. Then, for each adjacent pair (older, newer), this runs

    <this python> -m pytest <pytest args> --perf-python <newer> --perf-reference <older>
        --perf-report <dir> -p no:cacheprovider

and reads ``<dir>/results.json``: every record's ``ab`` (ratio, interval, verdict and
both sides' MXNet version and build features). It prints each step's cells, and at the
end the step(s) where a cell changed with the build-features diff between the two sides.

Exit code: 0 when every step ran (whatever it found; a regression that fails a step's
gate is a finding), 2 on a usage error, 1 when a reference install could not be built or a
step could not run (pytest interrupted, a usage error of pytest, no results, no A/B cell):
the search stops there, with what the steps before found and one line saying why.

The releases are ``installs.KNOWN_RELEASES`` (CPU wheels); ``--report-dir`` keeps each
step's report (``results.json``, plots).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, TextIO, Tuple

from pytest_mxperf.model.outcome import EXIT_FAILED, EXIT_NONE_SELECTED, EXIT_PASSED, EXIT_STATUSES, EXIT_WRITER
from pytest_mxperf.proc import distributions, installs, spawn, wheel_variants
from pytest_mxperf.proc.child_env import child_env

RESERVED_OPTIONS = ("--perf-python", "--perf-reference", "--perf-report")
DEFAULT_PYTEST_ARGS = ("perf_tests", "-m", "cpu")
CHANGED = ("regression", "improvement")
NO_AB = "no A/B result"
# the exit statuses after which a step's results are usable (model/outcome.py's table): 0
# passed, 1 a judged failure (a regression fails the gate: that is a finding, not a failure to
# run), 6 a writer other than the report failed (the step's results.json is read all the same;
# without it the step says so)
USABLE_EXIT_CODES = (EXIT_PASSED, EXIT_FAILED, EXIT_WRITER)
INTERRUPT_GRACE_S = 15.0
PYTEST_EXIT = {2: "interrupted", 3: "internal error", 4: "usage error",
               EXIT_NONE_SELECTED: "no tests collected, or " + EXIT_STATUSES[EXIT_NONE_SELECTED],
               EXIT_WRITER: EXIT_STATUSES[EXIT_WRITER]}


class UsageError(Exception):
    pass


class StepError(Exception):
    """A step that could not run; the message is one line."""


@dataclasses.dataclass
class Install:
    release: str
    requirement: str
    python: str
    warning: Optional[str] = None  # the comparison crosses the MKLDNN packaging change


@dataclasses.dataclass
class Step:
    older: Install
    newer: Install
    pytest_args: List[str]
    report_dir: Path

    @property
    def name(self) -> str:
        return f"{self.older.release} -> {self.newer.release}"

    def command(self, python: Optional[str] = None) -> List[str]:
        return [python or sys.executable, "-m", "pytest", *self.pytest_args,
                "--perf-python", self.newer.python, "--perf-reference", self.older.python,
                "--perf-report", str(self.report_dir), "-p", "no:cacheprovider"]


@dataclasses.dataclass
class ReleaseCell:
    key: str
    verdict: str
    ratio: Optional[float]
    low: Optional[float]
    high: Optional[float]
    pairs: Optional[int]
    reference: Dict
    candidate: Dict

    def describe(self) -> str:
        if self.ratio is None:
            return f"{self.verdict}"
        interval = "" if self.low is None or self.high is None else f" [{self.low:.3f}, {self.high:.3f}]"
        pairs = "" if self.pairs is None else f", {self.pairs} pairs"
        return f"ratio {self.ratio:.3f}{interval}  {self.verdict}{pairs}"


# ---------------------------------------------------------------------------------------
# Arguments


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # a usage error is returned as exit code 2, never sys.exit'ed from a library
        raise UsageError(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m pytest_mxperf.cli.find_release", allow_abbrev=False,
                description="Run the A/B gate over each pair of adjacent MXNet releases and show where a "
                            "cell changed. Arguments after -- (or not recognised here) go to pytest "
                            f"(default: {' '.join(DEFAULT_PYTEST_ARGS)}).")
    p.add_argument("--range", required=True, metavar="OLD..NEW",
                   help=f"releases to search, from {', '.join(installs.KNOWN_RELEASES)}")
    p.add_argument("--report-dir", metavar="DIR",
                   help="keep each step's report in DIR/<old>..<new> (default: temporary, removed)")
    return p


def parse_range(text: str, known: Sequence[str] = installs.KNOWN_RELEASES) -> List[str]:
    """``"1.6.0..1.9.1"`` -> the known releases from 1.6.0 to 1.9.1, oldest first."""
    old, sep, new = text.partition("..")
    old, new = old.strip(), new.strip()
    if not sep or not old or not new:
        raise UsageError(f"--range {text}: expected OLD..NEW, e.g. {known[0]}..{known[-1]}")
    for r in (old, new):
        if r not in known:
            raise UsageError(f"--range {text}: {r} is not one of the releases this searches "
                             f"({', '.join(known)})")
    i, j = known.index(old), known.index(new)
    if i >= j:
        raise UsageError(f"--range {text}: the first release must be older than the second")
    return list(known[i:j + 1])


def parse_args(argv: Sequence[str]) -> Tuple[argparse.Namespace, List[str]]:
    argv = list(argv)
    # our options anywhere before a "--"; what they leave there, and all after it, is pytest's
    cut = argv.index("--") if "--" in argv else len(argv)
    ns, before = _parser().parse_known_args(argv[:cut])
    pytest_args = before + argv[cut + 1:]
    for arg in pytest_args:
        for opt in RESERVED_OPTIONS:
            if arg == opt or arg.startswith(opt + "="):
                raise UsageError(f"{opt} is set by the search for every step; leave it out of the pytest arguments")
    return ns, list(pytest_args) or list(DEFAULT_PYTEST_ARGS)


# ---------------------------------------------------------------------------------------
# Reference installs


def build_installs(releases: Sequence[str], out: TextIO,
                   reference_python: Callable[[str], str] = installs.reference_python) -> List[Install]:
    """A venv per release, each with the wheel whose MKLDNN matches the newest release's."""
    like = ("mxnet", releases[-1])
    result = []
    for release in releases:
        match = wheel_variants.match_variant(release, like)
        warning = None
        if not match.exact:
            warning = wheel_variants.crossing_warning(match.requirement, like,
                                                f"no wheel of {release} matches its MKLDNN")
        try:
            python = reference_python(match.requirement)
            requirement = match.requirement
        except distributions.InstallError as exc:
            if not match.fallback:
                raise
            warning = wheel_variants.crossing_warning(match.fallback, like, f"{match.requirement} did not install: {exc}")
            print(warning, file=out, flush=True)
            python = reference_python(match.fallback)
            requirement = match.fallback
        else:
            if warning:
                print(warning, file=out, flush=True)
        print(f"  {release}: {requirement} -> {python}", file=out, flush=True)
        result.append(Install(release, requirement, python, warning))
    return result


# ---------------------------------------------------------------------------------------
# One step


def run_pytest_step(step: Step) -> int:
    """The default runner: pytest as a child with this terminal; returns its exit code."""
    proc = subprocess.Popen(step.command(), stdin=subprocess.DEVNULL, env=child_env())
    try:
        return proc.wait()
    finally:
        if proc.poll() is None:  # interrupted here (Ctrl-C reaches pytest too): let it clean up
            try:
                proc.wait(timeout=INTERRUPT_GRACE_S)
            except subprocess.TimeoutExpired:
                spawn.kill_process_tree(proc.pid)  # its workers die with it (parent-death signal)
                proc.wait()


def _float(value) -> Optional[float]:
    try:
        return None if value is None or isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        return None


def read_cells(report_dir: Path) -> List[ReleaseCell]:
    """The A/B cells of a step's results.json, or StepError."""
    path = Path(report_dir) / "results.json"
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise StepError(f"no {path} (did the session start measuring?)") from None
    except (OSError, ValueError) as exc:
        raise StepError(f"unreadable {path}: {distributions.one_line(exc)}") from None
    records = doc.get("records") if isinstance(doc, dict) else None
    if not isinstance(records, list):
        raise StepError(f"{path} has no list of records")
    cells = []
    for rec in records:
        if not isinstance(rec, dict):
            continue
        ab = rec.get("ab")
        if not isinstance(ab, dict):  # e.g. a cell that crashed on one side: shown, not judged
            status = rec.get("status") or rec.get("verdict")
            cells.append(ReleaseCell(key=str(rec.get("key", "?")), verdict=NO_AB + (f" ({status})" if status else ""),
                              ratio=None, low=None, high=None, pairs=None, reference={}, candidate={}))
            continue
        pairs = ab.get("pairs")
        cells.append(ReleaseCell(key=str(rec.get("key", "?")), verdict=str(ab.get("verdict", "unknown")),
                          ratio=_float(ab.get("ratio")), low=_float(ab.get("low")), high=_float(ab.get("high")),
                          pairs=pairs if isinstance(pairs, int) else None,
                          reference=ab.get("reference") if isinstance(ab.get("reference"), dict) else {},
                          candidate=ab.get("candidate") if isinstance(ab.get("candidate"), dict) else {}))
    if not any(c.ratio is not None or not c.verdict.startswith(NO_AB) for c in cells):
        raise StepError(f"{path} has no A/B cell (do the pytest arguments select a measured test?)")
    return cells


def features_diff(reference: Optional[Sequence[str]], candidate: Optional[Sequence[str]]) -> List[str]:
    """``+FEATURE`` for each build feature only the candidate has, ``-FEATURE`` for each only
    the reference has."""
    ref, cand = set(reference or ()), set(candidate or ())
    return [f"+{f}" for f in sorted(cand - ref)] + [f"-{f}" for f in sorted(ref - cand)]


def _side(cells: Sequence[ReleaseCell], side: str, field: str):
    for c in cells:
        value = getattr(c, side).get(field)
        if value is not None:
            return value
    return None


def describe_sides(cells: Sequence[ReleaseCell]) -> str:
    """``mxnet 1.6.0 -> 1.7.0; build features: +MKLDNN`` for a step's two sides."""
    v_ref, v_cand = _side(cells, "reference", "mxnet_version"), _side(cells, "candidate", "mxnet_version")
    f_ref, f_cand = _side(cells, "reference", "features"), _side(cells, "candidate", "features")
    if f_ref is None or f_cand is None:
        feats = "build features unknown (not reported by "
        feats += " and ".join(s for s, f in (("the reference", f_ref), ("the candidate", f_cand)) if f is None) + ")"
    else:
        diff = features_diff(f_ref, f_cand)
        feats = "build features: " + (" ".join(diff) if diff else "same")
    return f"mxnet {v_ref or '?'} -> {v_cand or '?'}; {feats}"


# ---------------------------------------------------------------------------------------
# The search


def main(argv: Optional[Sequence[str]] = None, *, run_step: Callable[[Step], int] = run_pytest_step,
         reference_python: Callable[[str], str] = installs.reference_python,
         out: Optional[TextIO] = None, err: Optional[TextIO] = None) -> int:
    """The command line; ``run_step`` (a Step -> pytest's exit code) and ``reference_python``
    (a requirement -> an interpreter) are injectable."""
    out = out or sys.stdout
    err = err or sys.stderr
    prog = "pytest_mxperf.cli.find_release"
    try:
        ns, pytest_args = parse_args(sys.argv[1:] if argv is None else argv)
        releases = parse_range(ns.range)
    except UsageError as exc:
        print(f"{prog}: usage error: {exc}", file=err)
        return 2
    except SystemExit as exc:  # --help
        return int(exc.code or 0)

    print(f"== reference installs for {', '.join(releases)}", file=out, flush=True)
    try:
        built = build_installs(releases, out, reference_python)
    except distributions.InstallError as exc:
        print(f"{prog}: {distributions.one_line(exc)}", file=err)
        return 1

    steps: List[Tuple[Step, List[ReleaseCell]]] = []
    failed: Optional[str] = None
    with contextlib.ExitStack() as stack:
        # the step reports: kept in --report-dir, else in a work dir removed at the end (and
        # swept by the next session if this process is killed)
        base = Path(ns.report_dir) if ns.report_dir else stack.enter_context(
            spawn.WorkDir(prefix=f"{spawn.WORKDIR_PREFIX}bisect-"))
        pairs = list(zip(built, built[1:]))
        for n, (older, newer) in enumerate(pairs, 1):
            report_dir = base / f"{older.release}..{newer.release}"
            report_dir.mkdir(parents=True, exist_ok=True)
            (report_dir / "results.json").unlink(missing_ok=True)  # never an earlier run's
            step = Step(older, newer, pytest_args, report_dir)
            print(f"== step {n}/{len(pairs)}: {older.release} ({older.requirement}) -> "
                  f"{newer.release} ({newer.requirement})", file=out, flush=True)
            try:
                rc = run_step(step)
                if rc not in USABLE_EXIT_CODES:
                    raise StepError(f"pytest exited with code {rc}"
                                    + (f" ({PYTEST_EXIT[rc]})" if rc in PYTEST_EXIT else ""))
                cells = read_cells(report_dir)
            except StepError as exc:
                failed = f"step {step.name} could not run: {distributions.one_line(exc)}"
                break
            width = max(len(c.key) for c in cells)
            for c in cells:
                print(f"   {c.key:<{width}}  {c.describe()}", file=out)
            print(f"   {describe_sides(cells)}", file=out, flush=True)
            steps.append((step, cells))

    summarize(releases, steps, out)
    if failed:
        print(f"{prog}: {failed}", file=err)
        return 1
    return 0


def summarize(releases: Sequence[str], steps: Sequence[Tuple[Step, List[ReleaseCell]]], out: TextIO) -> None:
    """The step(s) where a cell changed, each with the build-features diff of its sides."""
    span = f"{releases[0]} and {releases[-1]}"
    changed = [(s, [c for c in cells if c.verdict in CHANGED], cells) for s, cells in steps]
    changed = [(s, hits, cells) for s, hits, cells in changed if hits]
    unclear = [(s, c) for s, cells in steps for c in cells if c.verdict == "unresolved"]
    if not steps:
        print(f"== no step ran between {span}", file=out)
        return
    if not changed:
        print(f"== no cell changed between {span} ({len(steps)} step(s) measured)", file=out)
    else:
        print(f"== where cells changed between {span}:", file=out)
        for step, hits, cells in changed:
            print(f"   {step.name}: {describe_sides(cells)}", file=out)
            for c in hits:
                print(f"     {c.key}  {c.describe()}", file=out)
            for inst in (step.older, step.newer):
                if inst.warning:
                    print(f"     ({inst.release}: {inst.warning})", file=out)
    for step, c in unclear:
        print(f"   unresolved at {step.name}: {c.key} (re-run this step with more --perf-processes)", file=out)
    out.flush()


if __name__ == "__main__":
    sys.exit(main())
