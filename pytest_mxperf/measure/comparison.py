"""How a session compares its cells, settled against this machine once, before anything is
measured: the reference install (``reference_python``: an interpreter's path as given, or a
requirement built into a cached venv with the candidate's packages; ``--perf-reference
baseline``: the install this machine's baseline recorded, ``baseline_requirement``, rebuilt and
checked to be the recorded build, ``check_rebuilt_install``), the session's ``Comparison``
(``comparison_for``: the only place the option decides the mode; ``settle``: the whole
decision), and, in baseline mode, the baseline's recorded setup rebuilt to settle suspects
against (``recorded_setup``). Every problem is a ``ComparisonError`` in one line, which the
plugin raises as pytest's usage error; every other line it says is returned, not printed."""

from __future__ import annotations

import os
from typing import List, Optional, Tuple

from pytest_mxperf.measure.session import Comparison, RecordedSetup, SessionContext
from pytest_mxperf.store.baselines import Baseline

#: ``--perf-reference baseline``: the A/B reference is the install this machine's baseline
#: was recorded with (its stored MXNet requirement, built into a cached venv)
REFERENCE_BASELINE = "baseline"


class ComparisonError(ValueError):
    """The comparison cannot be settled as asked (one line: a usage error)."""


def comparison_for(reference: Optional[str], requirement: Optional[str] = None) -> Comparison:
    """The session's comparison from the settled ``--perf-reference`` (an interpreter, or
    None): the only place the option decides the mode."""
    if reference:
        return Comparison("ab", reference=reference, requirement=requirement)
    return Comparison("baseline")


def settle(options, machine_id: str, baseline: Optional[Baseline], where: str) -> Tuple[Comparison, List[str]]:
    """The session's comparison, from its options and this machine's ``baseline`` (at
    ``where``): the reference install settled and, for ``--perf-reference baseline``, checked
    to be the recorded build; in baseline mode, the baseline's recorded requirement checked to
    be one that can be rebuilt. Returns it with the lines to say; ``ComparisonError``. (Two
    MXNet distributions in the candidate are checked first, ``check_mxnet_distributions``.)"""
    said: List[str] = []
    requirement, reference = None, options.reference
    if reference == REFERENCE_BASELINE:
        requirement = baseline_requirement(machine_id, baseline, where)
        reference = requirement
    if reference:
        reference = reference_python(reference, options.python)
    if requirement:
        line = check_rebuilt_install(baseline, requirement, reference, where)
        if line:
            said.append(line)
    elif not options.update_baselines:
        check_recorded_requirement(baseline, where)
    return comparison_for(reference, requirement), said


def check_mxnet_distributions(python) -> None:
    """Two MXNet distributions installed side by side (e.g. mxnet and mxnet-cu117 share the
    mxnet/ package) are a usage error, said before anything is measured."""
    from pytest_mxperf.proc import distributions
    try:
        dists = distributions.installed_mxnet_distributions(python)
    except distributions.InstallError:
        return  # an interpreter we cannot list: its probe says what is wrong when a cell needs it
    if len(dists) > 1:
        try:
            distributions.check_single_mxnet(dists, python)
        except distributions.InstallError as exc:
            raise ComparisonError(str(exc)) from None


def _recorded_pin(baseline: Baseline) -> Optional[str]:
    """The MXNet requirement ``baseline`` recorded (None when it records none), checked to be
    ``NAME==VERSION`` of an MXNet distribution, the only kind rebuilt (``InstallError``
    otherwise: a URL, a path, a range); ``BaselineError`` when its cells name several."""
    from pytest_mxperf.proc import installs
    requirement = baseline.recorded_requirement()
    if requirement:
        installs.parse_pinned(requirement)
    return requirement


def _builds(baseline: Baseline, python: str) -> Tuple[Optional[str], Optional[str]]:
    """(the libmxnet sha256 ``baseline`` recorded, or None when it records no build; the
    sha256 of the install at ``python``, or None): the rebuilt install is the recorded build
    when the two are equal. ``BaselineError`` / ``InstallError`` as they are raised."""
    from pytest_mxperf.proc import distributions
    recorded = (baseline.recorded_install() or {}).get("libmxnet_sha256")
    if not recorded:
        return None, None
    return recorded, (distributions.install_identity(python) or {}).get("libmxnet_sha256")


def baseline_requirement(machine_id: str, baseline: Optional[Baseline], where: str) -> str:
    """``--perf-reference baseline``: the MXNet requirement this machine's baseline (at
    ``where``) was recorded with (e.g. "mxnet==1.9.1"); a one-line usage error when there is
    no baseline, it predates stored requirements, or its cells were recorded with different
    installs."""
    from pytest_mxperf.store.baselines import BaselineError
    if baseline is None:
        raise ComparisonError(f"--perf-reference baseline: machine {machine_id} has no baseline ({where}): "
                                "record one with --perf-update-baselines, or give --perf-reference REQ")
    from pytest_mxperf.proc import distributions
    try:
        requirement = _recorded_pin(baseline)
    except BaselineError as exc:
        raise ComparisonError(f"--perf-reference baseline: {exc}") from None
    except distributions.InstallError as exc:
        raise ComparisonError(f"--perf-reference baseline: {where} names an install that is not rebuilt: "
                                f"{distributions.one_line(exc)}") from None
    if not requirement:  # recorded before requirements were: the wheel that fits its recorded release, if one does
        try:
            requirement, why = _fitted_requirement(baseline)
        except BaselineError as exc:
            raise ComparisonError(f"--perf-reference baseline: {exc}") from None
        if not requirement:
            raise ComparisonError(f"--perf-reference baseline: {where} does not say which MXNet install it was "
                                    f"recorded with (recorded before requirements were stored) and no install fits "
                                    f"what it does record ({why}): re-record it with --perf-update-baselines, or give "
                                    "--perf-reference REQ")
    return requirement


def check_rebuilt_install(baseline: Baseline, requirement: str, python: str, where: str) -> Optional[str]:
    """``--perf-reference baseline``: the install rebuilt from the baseline's ``requirement``
    (at ``python``) must be the build the baseline recorded (the sha256 of its libmxnet); a
    custom build or another build of the same version is a usage error in one line. A
    baseline that records no build: the line that says so (the rebuilt install is taken);
    else None."""
    from pytest_mxperf.proc import distributions
    from pytest_mxperf.store.baselines import BaselineError
    try:
        recorded, got = _builds(baseline, python)
    except BaselineError as exc:
        raise ComparisonError(f"--perf-reference baseline: {exc}") from None
    except distributions.InstallError as exc:
        raise ComparisonError(f"--perf-reference baseline: {distributions.one_line(exc)}") from None
    if recorded is None:
        return (f"mxperf: --perf-reference baseline: {where} records no build of {requirement} (recorded before "
                "builds were, or its files could not be read): the install rebuilt from it is taken as that build")
    if got != recorded:
        raise ComparisonError(
            f"--perf-reference baseline: the install rebuilt from {requirement} ({python}) is not the build "
            f"{where} recorded: libmxnet sha256 {str(got)[:16]}… against {recorded[:16]}… "
            "(a custom build, or another build of the same version); give --perf-reference the recorded "
            "interpreter's path, or re-record the baseline with --perf-update-baselines")
    return None


#: variables that change how a worker runs that a baseline does not record: both sides of a
#: duet against the recorded setup run with this session's, and they are not compared
UNRECORDED_VARIABLES = ("LD_PRELOAD", "LD_LIBRARY_PATH", "PYTHONPATH", "MALLOC_ARENA_MAX", "TCMALLOC_",
                        "JE_MALLOC_CONF", "MALLOC_CONF", "PYTHONHASHSEED")


def check_recorded_requirement(baseline: Optional[Baseline], where: str) -> None:
    """Baseline mode: a baseline whose recorded install would be rebuilt to settle suspects
    (``recorded_setup``) must name ``NAME==VERSION`` of an MXNet distribution; anything else (a
    URL, a path, a range) is a one-line usage error now, before any install."""
    from pytest_mxperf.proc import distributions
    from pytest_mxperf.store.baselines import BaselineError
    if baseline is None:
        return
    try:
        _recorded_pin(baseline)
    except BaselineError:
        return  # several installs: no one setup to rebuild (said when the session plans)
    except distributions.InstallError as exc:
        raise ComparisonError(f"baseline {where} names an install that is not rebuilt: "
                                f"{distributions.one_line(exc)}; re-record it with --perf-update-baselines") from None


def _fitted_requirement(baseline: Baseline) -> Tuple[Optional[str], str]:
    """A baseline that names no install (recorded before installs were): (the requirement of
    the one published wheel that fits the MXNet release and build features it recorded, or
    None; why none fits, when None). ``BaselineError`` when it recorded several releases."""
    from pytest_mxperf.proc import wheel_variants
    release = baseline.recorded_release()
    if release is None:
        return None, "it records no MXNet release"
    try:
        return wheel_variants.fitting_requirement(release["mxnet_version"], release["features"],
                                                  release["cuda_runtime"]), ""
    except ValueError as exc:
        return None, str(exc)


def recorded_setup(ctx: SessionContext, environ) -> RecordedSetup:
    """Baseline mode, before the first measuring test: the setup the baseline recorded, to
    settle suspects against in a duet. Its MXNet requirement is rebuilt (or found) in a cached
    venv with the recorded numpy, and taken only when it is the build the baseline recorded
    (the sha256 of its libmxnet). A baseline that records no build (recorded before builds
    were) is settled against its requirement as the index has it; one that records no install
    at all, against the published wheel that fits its recorded release and build features
    (``wheel_variants.fitting_requirement``): each verdict then says the build was not
    recorded. What becomes of it is said in one line (``RecordedSetup``)."""
    from pytest_mxperf.proc import distributions, installs
    from pytest_mxperf.store.baselines import BaselineError
    where = str(ctx.store.path(ctx.machine["id"]))
    keep = "the baseline's verdicts stand as they are (a provisional resolution stays provisional)"
    unsure = "a slowdown beyond the minimum effect fails as unresolved, never passes"
    try:
        requirement = ctx.baseline.recorded_requirement()  # NAME==VERSION: checked as the session started
        recorded = ctx.baseline.recorded_install() or {}
        release = ctx.baseline.recorded_release()
        why = ""
        recorded_pin = bool(requirement)
        if not requirement:
            requirement, why = _fitted_requirement(ctx.baseline)
    except BaselineError as exc:
        return RecordedSetup("unrecorded", line=f"mxperf: no recorded setup to settle suspects against: {exc}; {keep}")
    if not requirement:
        return RecordedSetup("unfit", line=(
            f"mxperf: {where} does not record which MXNet install measured it (recorded before installs were) "
            f"and no install fits what it does record ({why}): no duet against it; {unsure}"))
    want = recorded.get("libmxnet_sha256")
    numpy = recorded.get("numpy_version") or (release or {}).get("numpy_version")
    pins = {"numpy": numpy} if numpy else {}
    try:
        python = installs.reference_python(requirement, like=ctx.options.python, pins=pins)
        got = (distributions.install_identity(python) or {}).get("libmxnet_sha256") if want else None
    except distributions.InstallError as exc:
        return RecordedSetup("unbuilt", requirement, line=(
            f"mxperf: the recorded setup ({requirement}) could not be rebuilt: {distributions.one_line(exc)}; "
            f"{unsure}"))
    if want and got != want:
        return RecordedSetup("other-build", requirement, python, line=(
            f"mxperf: {requirement} rebuilt in {python} is not the build {where} recorded (libmxnet sha256 "
            f"{str(got)[:16]}… against {str(want)[:16]}…: a custom build, or another build of that version): "
            f"no duet against it; {keep}"))
    unrecorded = [k for k in sorted(environ) if k.startswith(UNRECORDED_VARIABLES)]
    outside = (f"; {', '.join(unrecorded)} set here, not recorded: both sides run with them, not compared"
               if unrecorded else "")
    if want:
        return RecordedSetup("ready", requirement, python, line=(
            f"mxperf: suspects are settled in a duet against the recorded setup: {requirement} (the build the "
            f"baseline recorded, in {python}) with each cell's recorded variables{outside}"))
    how = ("records its install but not its build (recorded before builds were)" if recorded_pin else
           f"records MXNet {release['mxnet_version']} but not its install (recorded before installs were), "
           f"and {requirement} is the published wheel that fits its build features")
    return RecordedSetup("ready", requirement, python, build_recorded=False, line=(
        f"mxperf: suspects are settled in a duet against the recorded setup: {where} {how}: {requirement} "
        f"from the package index (in {python}) stands for it, with each cell's recorded variables{outside}"))


def reference_python(spec: str, candidate: Optional[str] = None) -> str:
    """A reference interpreter path as given, or a cached venv built for a requirement with
    the candidate's versions of the packages a worker loads besides MXNet (like with like)."""
    if os.sep in spec and os.access(spec, os.X_OK):
        return spec
    from pytest_mxperf.proc import distributions, installs
    try:
        return installs.reference_python(spec, like=candidate)
    except distributions.InstallError as exc:
        raise ComparisonError(f"--perf-reference: {exc}") from None
