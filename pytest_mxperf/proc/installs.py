"""Which MXNet is installed where, and reference installs built on demand (parent side).

This module never imports mxnet: it reads distribution metadata (of this interpreter with
``importlib.metadata``, of another one through a tiny ``python -c`` script) and builds
venvs with ``python -m venv`` + ``pip``.

* ``installed_mxnet_distributions`` / ``check_single_mxnet``: every MXNet wheel (``mxnet``,
  ``mxnet-mkl``, ``mxnet-native``, ``mxnet-cu117``, ...) installs the same ``mxnet/``
  package, so two of them side by side overwrite each other's files and leave a mix that
  may import and then crash or silently run the wrong build. That is refused with one line
  that says what to uninstall and what to reinstall.
* ``reference_python``: ``--perf-reference mxnet==1.8.0.post0`` becomes the python of a venv
  built once and cached under ``spawn.cache_dir("venvs", ...)``. Two sessions never build
  the same venv at once (a file lock), and a build counts as done only once its marker file
  is written, last, so a killed build is rebuilt instead of used.
* ``companion_requirements``: the venv gets the candidate's versions of the packages a
  worker loads besides MXNet (``WORKER_COMPANIONS``), so both sides of an A/B run load the
  same ones and their peak memory compares like with like.
* ``build_variant`` / ``match_variant``: which wheel of a release has MKLDNN, so that a
  search over releases compares like with like (see ``VARIANTS``).
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
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from pytest_mxperf.proc import spawn
from pytest_mxperf.model import jsonio

# The distributions that install the ``mxnet/`` package (names as PEP 503 normalises them).
# Glob-like on the CUDA tag: mxnet-cu75 ... mxnet-cu117 and their ...mkl variants.
MXNET_DISTRIBUTIONS = ("mxnet", "mxnet-mkl", "mxnet-native", "mxnet-cu*", "mxnet-cu*mkl")
_MXNET_NAME = re.compile(r"mxnet(-mkl|-native|-cu\d+(mkl)?)?")

# The CUDA wheels published for MXNet 1.9.1 (``pip index versions mxnet-cuXXX`` for Linux
# x86_64 / Python 3.11): each is an extra of pyproject.toml of the same name.
CUDA_EXTRAS_191 = ("cu102", "cu110", "cu111", "cu112", "cu113", "cu114", "cu115", "cu116", "cu117")

# Releases whose plain ``mxnet`` wheel installs on Python 3.11 (Linux x86_64) next to
# numpy 1.23.5, the numpy every reference venv gets (1.9.1 imports ``np.bool``, removed in
# numpy 1.24; 1.23.5 still runs 1.5.1). The steps of ``python -m pytest_mxperf.cli.find_release``.
KNOWN_RELEASES = ("1.5.1", "1.6.0", "1.7.0.post2", "1.8.0.post0", "1.9.1")

# What a reference venv gets besides the MXNet requirement when the candidate's packages are
# not asked for (``requirements_for(spec)``): the numpy every release here runs with, and
# threadpoolctl so that its workers report their thread pools as the candidate's do.
REFERENCE_EXTRAS = ("numpy<1.24", "threadpoolctl>=3.1")
NUMPY_FOR_MXNET1 = "numpy<1.24"   # MXNet 1.x imports np.bool, which numpy 1.24 removed

# The distributions besides MXNet that a worker's process loads, whose versions a reference
# venv copies from the candidate (``companion_requirements``): the worker imports numpy and
# threadpoolctl; ``import mxnet`` imports scipy (contrib/quantization.py, ndarray/sparse.py)
# and cv2 (image/image.py) whenever they are installed. Measured (MXNet 1.9.1, Inception-BN
# b2 scoring, RSS in MiB at start / after numpy / after import mxnet / after bind / peak):
# a venv with scipy 14 / 32 / 187 / 307 / 385, the same venv with scipy hidden 12 / 33 / 136
# / 244 / 322, a venv built from ``mxnet==1.9.1`` with numpy + threadpoolctl only 10 / 32 /
# 137 / 244 / 322, that venv with scipy added 10 / 32 / 188 / 308 / 385. scipy alone made
# the A/A difference (+63 MiB: 51 at import, its thread and allocations 12 more later).
WORKER_COMPANIONS = ("numpy", "threadpoolctl", "scipy", "opencv-python", "opencv-python-headless",
                     "opencv-contrib-python", "opencv-contrib-python-headless")

PROBE_TIMEOUT_S = 120.0
VENV_TIMEOUT_S = 600.0
PIP_TIMEOUT_S = 3600.0
LOCK_TIMEOUT_S = 2 * 3600.0  # waiting for another session's build of the same venv
COMPLETE_MARKER = "complete.json"


class InstallError(ValueError):
    """An MXNet install that cannot be used (or built); the message is one line."""


def normalize_name(name: str) -> str:
    """A distribution name as PEP 503 compares them: lower case, runs of -_. as one -."""
    return re.sub(r"[-_.]+", "-", name).lower()


def is_mxnet_distribution(name: str) -> bool:
    return _MXNET_NAME.fullmatch(normalize_name(name)) is not None


def one_line(text: str) -> str:
    return " ".join(str(text).split())


# ---------------------------------------------------------------------------------------
# What is installed

# Runs under any Python 3 (3.8+ has importlib.metadata; older ones have pkg_resources).
_LIST_SCRIPT = r"""
import json, sys
try:
    from importlib.metadata import distributions
    found = [(d.metadata["Name"], d.version) for d in distributions()]
except ImportError:
    import pkg_resources
    found = [(d.project_name, d.version) for d in pkg_resources.working_set]
json.dump({"python": sys.executable, "distributions": [[n, v] for n, v in found if n]}, sys.stdout)
"""


def _mxnet_only(found) -> List[Tuple[str, str]]:
    """MXNet distributions among (name, version) pairs, the first of each name (the one
    that import finds first on sys.path), sorted by name."""
    seen: Dict[str, Tuple[str, str]] = {}
    for name, version in found:
        if name and is_mxnet_distribution(name):
            seen.setdefault(normalize_name(name), (normalize_name(name), str(version)))
    return [seen[k] for k in sorted(seen)]


def installed_mxnet_distributions(python: Optional[str] = None,
                                  timeout: float = PROBE_TIMEOUT_S) -> List[Tuple[str, str]]:
    """The MXNet distributions installed for ``python`` (default: this interpreter), as
    sorted (normalised name, version) pairs. Reads metadata only; never imports mxnet."""
    return _mxnet_only(installed_distributions(python, timeout))


def installed_distributions(python: Optional[str] = None,
                            timeout: float = PROBE_TIMEOUT_S) -> List[Tuple[str, str]]:
    """Every distribution installed for ``python`` (default: this interpreter), as (name,
    version) pairs in the order import finds them. Reads metadata only."""
    if python is None:
        from importlib.metadata import distributions
        return [(d.metadata["Name"], d.version) for d in distributions() if d.metadata["Name"]]
    try:
        proc = subprocess.run([python, "-c", _LIST_SCRIPT], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise InstallError(f"{python} did not list its distributions within {timeout:g} s") from None
    except OSError as exc:
        raise InstallError(f"cannot run {python}: {exc.strerror or exc}") from None
    try:
        found = json.loads(proc.stdout.decode("utf-8", "replace"))["distributions"]
    except (ValueError, KeyError, TypeError):
        err = [ln for ln in proc.stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
        raise InstallError(f"{python} could not list its distributions "
                           f"({spawn.describe_returncode(proc.returncode)}): "
                           f"{err[-1].strip() if err else 'no output'}") from None
    return [(n, str(v)) for n, v in found if n]


def companion_requirements(python: Optional[str] = None) -> List[str]:
    """Pins of the candidate's ``WORKER_COMPANIONS`` (``python``, default this interpreter),
    e.g. ``["numpy==1.23.5", "threadpoolctl==3.8.0", "scipy==1.15.3"]``: what a reference
    venv installs beside MXNet so that its workers load the same packages as the candidate's.
    A companion the candidate lacks is left out (its MXNet does not load it either); numpy is
    always there: the candidate's version when MXNet 1.x runs with it, else ``numpy<1.24``.
    A local version label (``1.15.3+cpu``) is pinned by its public version."""
    from packaging.version import InvalidVersion, Version
    have: Dict[str, str] = {}
    for name, version in installed_distributions(python):
        have.setdefault(normalize_name(name), version)
    out = []
    for name in WORKER_COMPANIONS:
        version = have.get(name)
        try:
            public = Version(version).public if version else None
        except InvalidVersion:
            public = None
        if name == "numpy" and (public is None or Version(public) >= Version("1.24")):
            out.append(NUMPY_FOR_MXNET1)
        elif public is not None:
            out.append(f"{name}=={public}")
    return out


def extra_for(dist_name: str) -> Optional[str]:
    """The extra of this project that installs (the 1.9.1 build of) ``dist_name``."""
    name = normalize_name(dist_name)
    if name in ("mxnet", "mxnet-mkl", "mxnet-native"):
        return "cpu"
    m = re.fullmatch(r"mxnet-(cu\d+)(mkl)?", name)
    if m and m.group(1) in CUDA_EXTRAS_191:
        return m.group(1)
    return None


_COUNT = {2: "two", 3: "three", 4: "four"}


def check_single_mxnet(dists: Sequence[Tuple[str, str]], python: Optional[str] = None) -> None:
    """Refuse, in one line, an interpreter with no MXNet or with several MXNet
    distributions side by side (they overwrite each other's ``mxnet/`` package)."""
    where = python or sys.executable
    dists = list(dists)
    if not dists:
        raise InstallError(f"no MXNet in {where}: install an extra, e.g. pip install -e '.[cpu]'")
    if len(dists) == 1:
        return
    names = [n for n, _ in dists]
    listed = ", ".join(f"{n} {v}" for n, v in dists)
    # Reinstall the CUDA build when one was installed (a GPU machine), else the CPU one.
    extras = [extra_for(n) for n in names]
    keep = next((e for e in extras if e and e != "cpu"), None) or "cpu"
    both = "both" if len(dists) == 2 else "all"
    raise InstallError(f"{_COUNT.get(len(dists), len(dists))} MXNet distributions share the mxnet/ "
                       f"package in {where}: {listed}; uninstall {both} (pip uninstall -y "
                       f"{' '.join(names)}) and reinstall one (pip install -e '.[{keep}]')")


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

MKLDNN_IN_PLAIN_WHEEL_FROM = "1.7.0"

#: family -> ((before 1.7.0: without MKLDNN, with MKLDNN), (from 1.7.0: without, with)).
#: "{cu}" is the CUDA tag of the family; None: no such wheel.
VARIANTS = {
    "mxnet": (("mxnet", "mxnet-mkl"), ("mxnet-native", "mxnet")),
    "mxnet-cu": (("mxnet-{cu}", "mxnet-{cu}mkl"), (None, "mxnet-{cu}")),
}
#: last release of each variant that has one (a request beyond it is not made).
VARIANT_LAST_RELEASE = {"mxnet-mkl": "1.6.0", "mxnet-native": "1.8.0.post0"}


def _version(v: str):
    from packaging.version import Version
    return Version(v)


def _family(dist_name: str) -> Tuple[str, Optional[str]]:
    """("mxnet", None) or ("mxnet-cu", "cu102") for any MXNet distribution name."""
    name = normalize_name(dist_name)
    if not is_mxnet_distribution(name):
        raise ValueError(f"{dist_name} is not an MXNet distribution")
    m = re.fullmatch(r"mxnet-(cu\d+)(mkl)?", name)
    return ("mxnet-cu", m.group(1)) if m else ("mxnet", None)


def build_variant(dist_name: str, version: str) -> str:
    """"mkldnn" or "no-mkldnn": whether this wheel of this release is built with MKLDNN."""
    name = normalize_name(dist_name)
    family, cu = _family(name)
    newer = _version(version) >= _version(MKLDNN_IN_PLAIN_WHEEL_FROM)
    without, with_ = (n and n.format(cu=cu) for n in VARIANTS[family][1 if newer else 0])
    if name == with_:
        return "mkldnn"
    if name == without:
        return "no-mkldnn"
    if name.endswith("mkl"):  # mxnet-mkl / mxnet-cuXXXmkl asked for a release after 1.6
        return "mkldnn"
    return "no-mkldnn"  # mxnet-native before 1.7 (not published): the plain build


class VariantMatch(NamedTuple):
    requirement: str            # e.g. "mxnet-mkl==1.6.0"
    fallback: Optional[str]     # the plain wheel, should ``requirement`` not install; else None
    exact: bool                 # False: no wheel of this release matches (the plain one is used)


def match_variant(version: str, like: Tuple[str, str]) -> VariantMatch:
    """The requirement for release ``version`` whose MKLDNN matches ``like`` (a
    (distribution, version) pair, e.g. the newest release of a search), with the plain
    wheel of that release to fall back on when the matching one does not install.

    ``match_variant("1.6.0", ("mxnet", "1.9.1"))`` ->
    ``VariantMatch("mxnet-mkl==1.6.0", fallback="mxnet==1.6.0", exact=True)``.
    """
    family, cu = _family(like[0])
    want = build_variant(*like)
    newer = _version(version) >= _version(MKLDNN_IN_PLAIN_WHEEL_FROM)
    without, with_ = VARIANTS[family][1 if newer else 0]
    plain = (with_ if newer else without).format(cu=cu)
    name = with_ if want == "mkldnn" else without
    last = VARIANT_LAST_RELEASE.get(name or "")
    if name is None or (last and _version(version) > _version(last)):
        return VariantMatch(f"{plain}=={version}", None, False)  # no such wheel was published
    name = name.format(cu=cu)
    return VariantMatch(f"{name}=={version}", None if name == plain else f"{plain}=={version}", True)


def crossing_warning(requirement: str, like: Tuple[str, str],
                     why: str = "the matching MKLDNN variant does not install here") -> str:
    return (f"warning: using {requirement} ({why}); "
            f"the comparison with {like[0]} {like[1]} crosses the MKLDNN packaging change "
            f"(plain mxnet wheels have MKLDNN only from {MKLDNN_IN_PLAIN_WHEEL_FROM})")


# ---------------------------------------------------------------------------------------
# Reference installs: an interpreter path, or a requirement built into a cached venv

Installer = Callable[[Path, Sequence[str]], None]
_THREAD_LOCKS: Dict[str, threading.Lock] = {}
_THREAD_LOCKS_GUARD = threading.Lock()


def venv_python(venv_dir: Path) -> Path:
    return venv_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _check_runs(python: str, timeout: float = PROBE_TIMEOUT_S) -> None:
    try:
        proc = subprocess.run([python, "-c", "import sys; print(sys.version_info[0])"],
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


def pip_installer(venv_dir: Path, requirements: Sequence[str]) -> None:
    """Create a venv at ``venv_dir`` with this interpreter and pip-install ``requirements``."""
    log_path = venv_dir.parent / "build.log"
    try:
        proc = subprocess.run([sys.executable, "-m", "venv", str(venv_dir)], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=VENV_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise InstallError(f"python -m venv {venv_dir} did not finish within {VENV_TIMEOUT_S:g} s") from None
    if proc.returncode != 0:
        raise InstallError(f"python -m venv {venv_dir} failed: "
                           f"{_last_error_line(proc.stdout.decode('utf-8', 'replace').splitlines())}")
    python = str(venv_python(venv_dir))
    command = [python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input", *requirements]
    with open(log_path, "wb") as log:
        try:
            proc = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                  timeout=PIP_TIMEOUT_S)
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


def reference_python(spec: str, *, installer: Optional[Installer] = None,
                     log: Callable[[str], None] = _say, like: Optional[str] = None) -> str:
    """The python of the reference install ``spec``.

    ``spec`` is a path to an interpreter (returned as given once it is seen to run), or a
    pinned MXNet requirement such as ``mxnet==1.8.0.post0`` or ``mxnet-mkl==1.6.0``: a venv
    with it and the candidate's versions of the packages a worker loads besides MXNet
    (``companion_requirements(like)``; ``like`` is the candidate's python, default this
    interpreter) is built once (``installer``, default ``pip_installer``) and cached under
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
    requirements = requirements_for(spec, companion_requirements(like))
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
