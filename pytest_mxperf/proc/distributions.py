"""Which MXNet distributions are installed in an interpreter (parent side: never imports
mxnet; reads distribution metadata, of this interpreter with importlib.metadata, of
another one through a tiny python -c script).

Every MXNet wheel (mxnet, mxnet-mkl, mxnet-native, mxnet-cu117, ...) installs
the same mxnet/ package, so two of them side by side overwrite each other's files and
leave a mix that may import and then crash or silently run the wrong build
(check_single_mxnet refuses that with one line that says what to uninstall and what to
reinstall). companion_requirements: the candidate's versions of the packages a worker
loads besides MXNet (WORKER_COMPANIONS), which a reference venv gets too, so both sides of
an A/B run load the same ones."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from pytest_mxperf.proc import spawn
from pytest_mxperf.proc.child_env import child_env

# The CUDA wheels published for MXNet 1.9.1 (``pip index versions mxnet-cuXXX`` for Linux
# x86_64 / Python 3.11): each is an extra of pyproject.toml of the same name.
CUDA_EXTRAS_191 = ("cu102", "cu110", "cu111", "cu112", "cu113", "cu114", "cu115", "cu116", "cu117")
NUMPY_FOR_MXNET1 = "numpy<1.24"   # MXNet 1.x imports np.bool, which numpy 1.24 removed
PROBE_TIMEOUT_S = 120.0

# The distributions that install the ``mxnet/`` package (names as PEP 503 normalises them).
# Glob-like on the CUDA tag: mxnet-cu75 ... mxnet-cu117 and their ...mkl variants.
MXNET_DISTRIBUTIONS = ("mxnet", "mxnet-mkl", "mxnet-native", "mxnet-cu*", "mxnet-cu*mkl")
_MXNET_NAME = re.compile(r"mxnet(-mkl|-native|-cu\d+(mkl)?)?")


# The distributions besides MXNet that a worker's process loads, whose versions a reference
# venv copies from the candidate (``companion_requirements``): the worker imports numpy and
# threadpoolctl; ``import mxnet`` imports scipy (contrib/quantization.py, ndarray/sparse.py)
# and cv2 (image/image.py) whenever they are installed. Measured (MXNet 1.9.1, Inception-BN
# b2 scoring, RSS in MiB at start / after numpy / after import mxnet / after bind / peak):
# a venv with scipy 14 / 32 / 187 / 307 / 385, the same venv with scipy hidden 12 / 33 / 136
# / 244 / 322, a venv built from ``mxnet==1.9.1`` with numpy + threadpoolctl only 10 / 32 /
# 137 / 244 / 322, that venv with scipy added 10 / 32 / 188 / 308 / 385. scipy alone made
# the A/A difference (+63 MiB: 51 at import, its thread and allocations 12 more later). The
# input-pipeline worker encodes its synthetic JPEGs with Pillow (workers/synthetic_images.py):
# a reference venv without it could not measure an io cell (seen: mxnet-mkl 1.5.1 in a venv
# of mxnet and numpy, "building the synthetic RecordIO data set needs Pillow"). The serving
# worker drives MLPerf's LoadGen (``mlperf_loadgen``, workers/serving.py): both installs serve
# under the same LoadGen, or a serving cell's A/B would compare two load generators.
WORKER_COMPANIONS = ("numpy", "threadpoolctl", "scipy", "pillow", "opencv-python", "opencv-python-headless",
                     "opencv-contrib-python", "opencv-contrib-python-headless", "mlcommons-loadgen")


class InstallError(ValueError):
    """An MXNet install that cannot be used (or built); the message is one line."""


def normalize_name(name: str) -> str:
    """A distribution name as PEP 503 compares them: lower case, runs of -_. as one -."""
    return re.sub(r"[-_.]+", "-", name).lower()


def is_mxnet_distribution(name: str) -> bool:
    return _MXNET_NAME.fullmatch(normalize_name(name)) is not None


def one_line(text: str) -> str:
    return " ".join(str(text).split())


# Runs under any Python 3 (3.8+ has importlib.metadata; older ones have pkg_resources).
_LIST_SCRIPT = r"""
import json, sys
try:
    from importlib.metadata import distributions
    found = [(m["Name"], m["Version"]) for m in (d.metadata for d in distributions())]
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


def _ask(python: str, script: str, what: str, timeout: float, key: Optional[str] = None):
    """The JSON ``python -c script`` prints (its ``key`` when given); InstallError (one line,
    saying ``what`` it could not do) when the interpreter cannot be run or prints no such JSON."""
    try:
        proc = subprocess.run([python, "-c", script], stdin=subprocess.DEVNULL, env=child_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise InstallError(f"{python} did not {what} within {timeout:g} s") from None
    except OSError as exc:
        raise InstallError(f"cannot run {python}: {exc.strerror or exc}") from None
    try:
        out = json.loads(proc.stdout.decode("utf-8", "replace"))
        return out[key] if key is not None else out
    except (ValueError, KeyError, TypeError):
        err = [ln for ln in proc.stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
        raise InstallError(f"{python} could not {what} ({spawn.describe_returncode(proc.returncode)}): "
                           f"{err[-1].strip() if err else 'no output'}") from None


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
        # each distribution's metadata parsed once: ``Distribution.metadata`` (and ``.version``,
        # which reads it) parses the file again at every access: three parses a distribution
        # took 0.091 CPU-s a call for 42 distributions here, one 0.034 (Zen 3)
        found = [(m["Name"], m["Version"]) for m in (d.metadata for d in distributions())]
        return [(n, v) for n, v in found if n]
    found = _ask(python, _LIST_SCRIPT, "list its distributions", timeout, "distributions")
    return [(n, str(v)) for n, v in found if n]


# Runs under the interpreter whose MXNet install is described (3.8+: importlib.metadata).
_IDENTITY_SCRIPT = r"""
import hashlib, json, re, sys
from importlib.metadata import distributions
out = {"mxnet": None, "numpy_version": None}
for d in distributions():
    n = re.sub(r"[-_.]+", "-", d.metadata["Name"] or "").lower()
    if n == "numpy" and out["numpy_version"] is None:
        out["numpy_version"] = d.version
    if re.fullmatch(r"mxnet(-mkl|-native|-cu\d+(mkl)?)?", n) and out["mxnet"] is None:
        info = {"name": n, "version": d.version, "direct_url": None, "libmxnet": None, "libmxnet_sha256": None}
        try:
            text = d.read_text("direct_url.json")
            info["direct_url"] = json.loads(text) if text else None
        except (OSError, ValueError):
            pass
        for f in d.files or []:
            if f.name.startswith("libmxnet") and ".so" in f.name:
                h = hashlib.sha256()
                with open(d.locate_file(f), "rb") as fh:
                    for chunk in iter(lambda: fh.read(1 << 20), b""):
                        h.update(chunk)
                info["libmxnet"], info["libmxnet_sha256"] = str(f), h.hexdigest()
                break
        out["mxnet"] = info
json.dump(out, sys.stdout)
"""


def install_identity(python: Optional[str] = None, timeout: float = PROBE_TIMEOUT_S) -> Optional[Dict[str, object]]:
    """Which build of MXNet ``python`` (default: this interpreter) has, read from its metadata
    and files, never by importing it: {"name", "version", "direct_url" (what pip wrote for an
    install from a URL or a path, else None), "libmxnet", "libmxnet_sha256", "numpy_version"};
    None when it has no MXNet distribution. A baseline records it, so that a later session can
    tell whether an install rebuilt from ``name==version`` is that build. InstallError (one
    line) when the interpreter cannot be asked."""
    out = _ask(python or sys.executable, _IDENTITY_SCRIPT, "describe its MXNet", timeout)
    if not isinstance(out, dict) or not isinstance(out.get("mxnet"), dict):
        return None
    return dict(out["mxnet"], numpy_version=out.get("numpy_version"))


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
