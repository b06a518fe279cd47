"""Reference MXNet installs built on demand (parent side: never imports mxnet; builds venvs
with ``python -m venv`` + ``pip``).

``reference_python``: ``--perf-reference mxnet==1.8.0.post0`` becomes the python of a venv
built once and cached under ``spawn.cache_dir("venvs", ...)``. Two sessions never build the
same venv at once (a file lock), and a build counts as done only once its marker file is
written, last, so a killed build is rebuilt instead of used. The venv gets the candidate's
versions of the packages a worker loads besides MXNet (``distributions.companion_requirements``).
Which MXNet is installed where is ``distributions.py``'s; which wheel of a release has
MKLDNN is ``wheel_variants.py``'s.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from pytest_mxperf.model import jsonio
from pytest_mxperf.proc import spawn
from pytest_mxperf.proc.child_env import child_env
from pytest_mxperf.proc.distributions import (
    MXNET_DISTRIBUTIONS,
    PROBE_TIMEOUT_S,
    InstallError,
    check_single_mxnet,
    companion_requirements,
    installed_mxnet_distributions,
    is_mxnet_distribution,
    normalize_name,
)

# Releases whose plain ``mxnet`` wheel installs on Python 3.11 (Linux x86_64) next to
# numpy 1.23.5, the numpy every reference venv gets (1.9.1 imports ``np.bool``, removed in
# numpy 1.24; 1.23.5 still runs 1.5.1). The steps of ``python -m pytest_mxperf.cli.find_release``.
KNOWN_RELEASES = ("1.5.1", "1.6.0", "1.7.0.post2", "1.8.0.post0", "1.9.1")

# What a reference venv gets besides the MXNet requirement when the candidate's packages are
# not asked for (``requirements_for(spec)``): the numpy every release here runs with, and
# threadpoolctl so that its workers report their thread pools as the candidate's do.
REFERENCE_EXTRAS = ("numpy<1.24", "threadpoolctl>=3.1")


VENV_TIMEOUT_S = 600.0
PIP_TIMEOUT_S = 3600.0
LOCK_TIMEOUT_S = 2 * 3600.0  # waiting for another session's build of the same venv
COMPLETE_MARKER = "complete.json"


# ---------------------------------------------------------------------------------------
# What is installed


# ---------------------------------------------------------------------------------------
# Build variants: which wheel of a release has MKLDNN
#
# Up to 1.6.x the plain ``mxnet`` wheel was built without MKLDNN (oneDNN); the MKLDNN build
# was a separate distribution, ``mxnet-mkl`` (``mxnet-cuXXXmkl`` for CUDA), whose last
# release is 1.6.0. From 1.7.0 the plain wheel (and every CUDA wheel) has MKLDNN, and the
# build without it is ``mxnet-native`` (published for 1.7.0 and 1.8.0.post0 only).
# Comparing ``mxnet==1.6.0`` with ``mxnet==1.9.1`` therefore mostly measures MKLDNN, not
# the release: a search over releases takes, for each release, the wheel that has MKLDNN
# exactly when the other side does. Checked for Python 3.11 on Linux x86_64: mxnet-mkl
# 1.5.1 and 1.6.0 resolve (``py2.py3-none-manylinux1`` wheels), and mx.runtime.Features()
# lists MKLDNN for mxnet-mkl 1.6.0 and mxnet 1.9.1, not for mxnet 1.6.0. Where the
# matching wheel does not exist or does not install, the plain wheel is used and the
# comparison crosses the MKLDNN packaging change, with a warning saying so
# (``crossing_warning``).


# ---------------------------------------------------------------------------------------
# Reference installs: an interpreter path, or a requirement built into a cached venv

Installer = Callable[[Path, Sequence[str]], None]
_THREAD_LOCKS: Dict[str, threading.Lock] = {}
_THREAD_LOCKS_GUARD = threading.Lock()


def venv_python(venv_dir: Path) -> Path:
    return venv_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _check_runs(python: str, timeout: float = PROBE_TIMEOUT_S) -> None:
    try:
        proc = subprocess.run([python, "-c", "import sys; print(sys.version_info[0])"], env=child_env(),
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        raise InstallError(f"{python} did not start within {timeout:g} s") from None
    except OSError as exc:
        raise InstallError(f"cannot run {python}: {exc.strerror or exc}") from None
    if proc.returncode != 0 or proc.stdout.strip() != b"3":
        err = [ln for ln in proc.stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
        raise InstallError(f"{python} is not a working Python 3 interpreter "
                           f"({spawn.describe_returncode(proc.returncode)}): {err[-1].strip() if err else 'no output'}")


def parse_requirement(spec: str):
    """A pinned MXNet requirement (``mxnet==1.8.0.post0``), or InstallError."""
    from packaging.requirements import InvalidRequirement, Requirement
    try:
        req = Requirement(spec)
    except InvalidRequirement:
        raise InstallError(f"{spec!r} is neither an interpreter path nor a requirement like "
                           f"mxnet==1.8.0.post0") from None
    if not is_mxnet_distribution(req.name):
        raise InstallError(f"{spec!r}: {req.name} is not an MXNet distribution "
                           f"({', '.join(MXNET_DISTRIBUTIONS)})")
    pins = [s for s in req.specifier if s.operator in ("==", "===") and "*" not in s.version]
    if req.url is None and not pins:
        # A cached venv for a range would silently keep whatever release was newest when built.
        raise InstallError(f"{spec!r}: pin one release (e.g. {normalize_name(req.name)}==1.8.0.post0); "
                           "reference venvs are cached by requirement")
    return req


def parse_pinned(spec: str):
    """``(name, version)`` of ``NAME==VERSION`` of a known MXNet distribution and a public
    release version, nothing else: what a baseline file may name as the install to rebuild
    (the file decides what gets installed, so a URL, a path, extras, markers, a range or a
    local version are refused). InstallError (one line) otherwise."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion, Version
    text = spec.strip() if isinstance(spec, str) else ""
    try:
        req = Requirement(text)
    except InvalidRequirement:
        req = None
    pins = list(req.specifier) if req is not None else []
    if (req is None or req.url or req.extras or req.marker or not is_mxnet_distribution(req.name)
            or len(pins) != 1 or pins[0].operator != "==" or "*" in pins[0].version
            or not re.fullmatch(r"[A-Za-z0-9_.-]+==[A-Za-z0-9_.!+-]+", text.replace(" ", ""))):
        raise InstallError(f"{spec!r} is not NAME==VERSION of an MXNet distribution "
                           f"({', '.join(MXNET_DISTRIBUTIONS)}), e.g. mxnet==1.9.1: only such an install is rebuilt")
    try:
        version = Version(pins[0].version)
    except InvalidVersion:
        raise InstallError(f"{spec!r}: {pins[0].version!r} is not a release version") from None
    if version.local:
        raise InstallError(f"{spec!r}: a local version ({version}) is no release on a package index")
    return normalize_name(req.name), str(version)


def requirements_for(spec: str, companions: Optional[Sequence[str]] = None) -> List[str]:
    """The MXNet requirement and what its venv gets beside it: ``companions`` (the
    candidate's, from ``companion_requirements``) or, without them, ``REFERENCE_EXTRAS``."""
    return [spec.strip()] + list(REFERENCE_EXTRAS if companions is None else companions)


def venv_slug(spec: str, requirements: Sequence[str]) -> str:
    """A readable, unique directory name: requirement, Python version, digest of the rest."""
    req = parse_requirement(spec)
    readable = re.sub(r"[^A-Za-z0-9.+]+", "-", f"{normalize_name(req.name)}{req.specifier}").strip("-")
    ident = json.dumps({"requirements": list(requirements), "python": list(sys.version_info[:2]),
                        "implementation": sys.implementation.name, "base": sys.base_prefix})
    digest = hashlib.sha256(ident.encode()).hexdigest()[:10]
    return f"{readable}-py{sys.version_info[0]}{sys.version_info[1]}-{digest}"


def _last_error_line(lines: Sequence[str]) -> str:
    lines = [ln.strip() for ln in lines if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("ERROR:")]
    return (errors or lines or ["no output"])[-1]


#: the first pip whose ``--python`` installs into another environment (pip 22.3)
PIP_WITH_PYTHON_OPTION = (22, 3)


def _own_pip() -> bool:
    """Whether this interpreter's pip can install into a venv that has none (``--python``)."""
    try:
        from pip import __version__ as version
    except ImportError:
        return False
    try:
        return tuple(int(p) for p in version.split(".")[:2]) >= PIP_WITH_PYTHON_OPTION
    except ValueError:
        return False


def venv_commands(venv_dir: Path) -> Tuple[List[str], List[str]]:
    """(the command that makes a venv at ``venv_dir`` with this interpreter, the pip command that
    installs into it): a venv without a pip of its own and this interpreter's pip (``--python``)
    when it can (``ensurepip`` costs several seconds a venv), else the venv's own pip."""
    python = str(venv_python(venv_dir))
    if _own_pip():
        return ([sys.executable, "-m", "venv", "--without-pip", str(venv_dir)],
                [sys.executable, "-m", "pip", "--python", python])
    return [sys.executable, "-m", "venv", str(venv_dir)], [python, "-m", "pip"]


def pip_installer(venv_dir: Path, requirements: Sequence[str]) -> None:
    """Create a venv at ``venv_dir`` with this interpreter and pip-install ``requirements``
    (``venv_commands``)."""
    log_path = venv_dir.parent / "build.log"
    make_venv, pip = venv_commands(venv_dir)
    try:
        proc = subprocess.run(make_venv, stdin=subprocess.DEVNULL,
                              env=child_env(purpose="install"),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=VENV_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise InstallError(f"python -m venv {venv_dir} did not finish within {VENV_TIMEOUT_S:g} s") from None
    if proc.returncode != 0:
        raise InstallError(f"python -m venv {venv_dir} failed: "
                           f"{_last_error_line(proc.stdout.decode('utf-8', 'replace').splitlines())}")
    python = str(venv_python(venv_dir))
    # MXNet itself from a binary wheel only (never built from a source distribution)
    mxnet = [normalize_name(parse_requirement(r).name) for r in requirements[:1]]
    command = [*pip, "install", "--disable-pip-version-check", "--no-input",
               *(f"--only-binary={name}" for name in mxnet), *requirements]
    with open(log_path, "wb") as log:
        try:
            proc = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                  timeout=PIP_TIMEOUT_S, env=child_env(purpose="install"))
        except subprocess.TimeoutExpired:
            raise InstallError(f"pip install {' '.join(requirements)} did not finish within "
                               f"{PIP_TIMEOUT_S:g} s (log: {log_path})") from None
    if proc.returncode != 0:
        raise InstallError(f"pip install {' '.join(requirements)} failed: "
                           f"{_last_error_line(spawn.tail(log_path, 40))} (log: {log_path})")
    check_single_mxnet(installed_mxnet_distributions(python), python)


def _thread_lock(key: str) -> threading.Lock:
    with _THREAD_LOCKS_GUARD:
        return _THREAD_LOCKS.setdefault(key, threading.Lock())


def _complete(root: Path, requirements: Sequence[str]) -> Optional[str]:
    """The venv's python when its build finished (marker written last) and it still runs
    from here (its base interpreter may have gone), else None."""
    try:
        marker = json.loads((root / COMPLETE_MARKER).read_text())
    except (OSError, ValueError):
        return None
    python = venv_python(root / "venv")
    if not isinstance(marker, dict) or marker.get("requirements") != list(requirements):
        return None
    if not (python.exists() and os.access(python, os.X_OK)):  # exists() follows the symlink
        return None
    return str(python)


def _looks_like_path(spec: str) -> bool:
    """An interpreter (a path, or a command on PATH) rather than a requirement."""
    if "://" in spec or "@" in spec or any(op in spec for op in "=<>!~"):
        return False
    if os.sep in spec or (os.altsep and os.altsep in spec) or os.path.exists(spec):
        return True
    return shutil.which(spec) is not None and not is_mxnet_distribution(spec)


def _say(msg: str) -> None:
    print(f"pytest-mxperf: {msg}", file=sys.stderr, flush=True)


def _pinned(companions: Sequence[str], pins: Mapping[str, str]) -> List[str]:
    """``companions`` with the versions ``pins`` names (name -> version) instead of theirs, and
    any pinned package they lack added."""
    pins = {normalize_name(k): v for k, v in pins.items()}
    out = []
    for req in companions:
        name = normalize_name(re.split(r"[<>=!~ ;\[]", req, maxsplit=1)[0])
        out.append(f"{name}=={pins.pop(name)}" if name in pins else req)
    return out + [f"{k}=={v}" for k, v in sorted(pins.items())]


def reference_python(spec: str, *, installer: Optional[Installer] = None,
                     log: Callable[[str], None] = _say, like: Optional[str] = None,
                     pins: Optional[Mapping[str, str]] = None) -> str:
    """The python of the reference install ``spec``.

    ``spec`` is a path to an interpreter (returned as given once it is seen to run), or a
    pinned MXNet requirement such as ``mxnet==1.8.0.post0`` or ``mxnet-mkl==1.6.0``: a venv
    with it and the candidate's versions of the packages a worker loads besides MXNet
    (``companion_requirements(like)``; ``like`` is the candidate's python, default this
    interpreter; ``pins``, name -> version, replace theirs: a baseline's recorded numpy) is
    built once (``installer``, default ``pip_installer``) and cached under
    ``spawn.cache_dir("venvs", <slug>)`` (another candidate's packages: another venv). A
    file lock keeps two sessions (and a lock two threads) from building the same venv at
    once; the build happens in place and counts as done only when ``complete.json`` is
    written after it, so an interrupted build is removed and redone by the next call.
    Raises InstallError (one line).
    """
    spec = spec.strip()
    if _looks_like_path(spec):
        if not os.path.isfile(spec) and not shutil.which(spec):
            raise InstallError(f"{spec}: no such interpreter")
        _check_runs(spec)
        return spec
    parse_requirement(spec)  # a bad requirement is said before the candidate is listed
    companions = companion_requirements(like)
    requirements = requirements_for(spec, _pinned(companions, pins) if pins else companions)
    slug = venv_slug(spec, requirements)
    root = spawn.cache_dir("venvs", slug)
    python = _complete(root, requirements)
    if python:
        return python

    from filelock import FileLock, Timeout
    with _thread_lock(str(root)):
        lock = FileLock(str(root / "build.lock"))
        try:
            lock.acquire(timeout=0)
        except Timeout:
            log(f"waiting for another session building the venv for {spec} ({root})")
            try:
                lock.acquire(timeout=LOCK_TIMEOUT_S)
            except Timeout:
                # (an flock dies with its process: this is a build still running elsewhere)
                raise InstallError(f"another session has been building the venv for {spec} in {root} "
                                   f"for over {LOCK_TIMEOUT_S:g} s; see {root / 'build.log'}") from None
        try:
            python = _complete(root, requirements)  # built while we waited
            if python:
                return python
            venv_dir = root / "venv"
            (root / COMPLETE_MARKER).unlink(missing_ok=True)
            if venv_dir.exists():  # a build that was killed or failed: never taken as done
                shutil.rmtree(venv_dir)
            log(f"building a reference venv for {spec} in {root} (once; it is cached)")
            try:
                (installer or pip_installer)(venv_dir, requirements)
                python = venv_python(venv_dir)
                if not python.exists():
                    raise InstallError(f"the venv built for {spec} has no {python}")
            except BaseException:
                shutil.rmtree(venv_dir, ignore_errors=True)
                raise
            jsonio.write_json(root / COMPLETE_MARKER,
                              {"spec": spec, "requirements": list(requirements), "python": str(python),
                               "built_with": sys.version.split()[0]}, indent=1)
            return str(python)
        finally:
            lock.release()
