"""Build variants: which wheel of an MXNet release has MKLDNN (oneDNN).

Up to 1.6.x the plain mxnet wheel was built without MKLDNN; the MKLDNN build was a
separate distribution, mxnet-mkl (mxnet-cuXXXmkl for CUDA), whose last release is
1.6.0. From 1.7.0 the plain wheel (and every CUDA wheel) has MKLDNN, and the build without it
is mxnet-native (published for 1.7.0 and 1.8.0.post0 only). Comparing mxnet==1.6.0
with mxnet==1.9.1 therefore mostly measures MKLDNN, not the release: a search over
releases takes, for each release, the wheel that has MKLDNN exactly when the other side does.
Checked for Python 3.11 on Linux x86_64: mxnet-mkl 1.5.1 and 1.6.0 resolve
(py2.py3-none-manylinux1 wheels), and mx.runtime.Features() lists MKLDNN for mxnet-mkl
1.6.0 and mxnet 1.9.1, not for mxnet 1.6.0. Where the matching wheel does not exist or does
not install, the plain wheel is used and the comparison crosses the MKLDNN packaging change,
with a warning saying so (crossing_warning)."""

from __future__ import annotations

import re
from typing import NamedTuple, Optional, Sequence, Tuple

from pytest_mxperf.proc.distributions import is_mxnet_distribution, normalize_name

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


def fitting_requirement(version: str, features: Optional[Sequence[str]], cuda_runtime: Optional[str] = None) -> str:
    """The ``NAME==VERSION`` of the one published wheel of MXNet ``version`` whose build has
    the recorded ``features`` (``mx.runtime.Features``' enabled names) on Linux x86_64: a CUDA
    build is ``mxnet-cuXY`` (XY from the recorded CUDA runtime, "11.2" -> cu112), MKLDNN before
    1.7.0 is ``mxnet-mkl`` (``mxnet-cuXYmkl``), from 1.7.0 the plain wheel, and a build without
    it from 1.7.0 is ``mxnet-native`` (``VARIANTS``). What a baseline that records only its
    MXNet release (no install: recorded before installs were) is settled against. ValueError
    (a few words: why none fits) when the features are not recorded, a CUDA build's CUDA
    version is not, or no such wheel was published."""
    from packaging.version import InvalidVersion
    try:
        release = _version(version)
    except InvalidVersion:
        raise ValueError(f"{version!r} is not a release version") from None
    if release.local or release.is_devrelease:
        raise ValueError(f"mxnet {version} is no release on a package index")
    if features is None:
        raise ValueError(f"its build's features are not recorded, so which wheel of mxnet {version} it was is not known")
    names = {str(f).upper() for f in features}
    cu = None
    if "CUDA" in names:
        m = re.fullmatch(r"(\d+)\.(\d+)", str(cuda_runtime or ""))
        if not m:
            raise ValueError(f"a CUDA build of mxnet {version} whose CUDA version is not recorded")
        cu = f"cu{m.group(1)}{m.group(2)}"
    newer = release >= _version(MKLDNN_IN_PLAIN_WHEEL_FROM)
    without, with_ = VARIANTS["mxnet-cu" if cu else "mxnet"][1 if newer else 0]
    name = with_ if "MKLDNN" in names else without
    if name is None:
        raise ValueError(f"no wheel of mxnet {version} was published for a CUDA build without MKLDNN")
    last = VARIANT_LAST_RELEASE.get(name)
    if last and release > _version(last):
        raise ValueError(f"no {name} wheel of {version} was published (its last release is {last})")
    return f"{name.format(cu=cu)}=={version}"
