"""What a child process's environment may hold: the one builder every child of the suite gets
its environment from (workers, the calibration probe, users' network code, cluster roles,
reference-venv interpreters, ``pip``, the child sessions of ``find_release``).

It passes an allowlist, never a denylist: a session runs with the environment of a CI job
(a store URL, ``GITHUB_TOKEN``, cloud credentials, ``DATABASE_URL``, a proxy URL with a
password) and a child sees only what MXNet, OpenMP and the BLAS libraries, CUDA, the C
library, Python and the suite itself read:

- names: ``ALLOWED_NAMES`` (the system's: PATH, HOME, the locale, the time zone, temporary
  directories; Python's interpreter variables; the dynamic loader's);
- prefixes: ``ALLOWED_PREFIXES`` (``MXNET_``, ``OMP_``, ``KMP_``, ``GOMP_``, ``DNNL_``,
  ``MKLDNN_``, ``ONEDNN_``, ``OPENBLAS_``, ``MKL_``, ``BLIS_``, ``GOTO``, ``CUDA_``,
  ``NVIDIA_``, ``NCCL_``, ``CUDNN_``, ``TF_`` is not among them, ``DMLC_`` and ``PS_`` for
  ps-lite, ``LC_`` for the locale, ``XDG_`` for the cache directory);
- the suite's own variables that a child reads (``SUITE_NAMES``), never its store location;
- for ``pip`` only (``purpose="install"``): ``PIP_*``, the proxies (``http_proxy``,
  ``https_proxy``, ``no_proxy`` in either case, ``all_proxy``), ``NETRC`` and the CA bundles,
  which it needs to reach a private index;
- and any name the user passes through with ``--perf-pass-env NAME`` (``pass_through``).

A name that matches a prefix but says it holds a secret (``PASSWORD``, ``TOKEN``, ``SECRET``,
``CREDENTIAL``, ``_KEY``: ``MXNET_S3_SECRET_KEY`` or ``CUDA_..._TOKEN``) is dropped too, unless
passed through by name.
"""

from __future__ import annotations

import os
from typing import FrozenSet, Iterable, Mapping, Optional

ALLOWED_NAMES: FrozenSet[str] = frozenset({
    # the system
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TERM", "TMPDIR", "TEMP", "TMP",
    "HOSTNAME", "PWD", "GIT_DIR", "GIT_WORK_TREE",
    # Python (not PYTHONSTARTUP or PYTHONINSPECT, which run code or stop a child)
    "PYTHONPATH", "PYTHONHOME", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED",
    "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONNOUSERSITE", "PYTHONWARNINGS", "PYTHONFAULTHANDLER",
    "VIRTUAL_ENV",
    # the dynamic loader and the C library's allocator
    "LD_LIBRARY_PATH", "LD_PRELOAD", "MALLOC_ARENA_MAX", "MALLOC_CONF", "JE_MALLOC_CONF",
})

ALLOWED_PREFIXES = ("MXNET_", "OMP_", "KMP_", "GOMP_", "DNNL_", "MKLDNN_", "ONEDNN_", "OPENBLAS_", "MKL_",
                    "BLIS_", "GOTO", "CUDA_", "NVIDIA_", "NCCL_", "CUDNN_", "DMLC_", "PS_", "LC_", "XDG_",
                    "TCMALLOC_", "MALLOC_")

#: the suite's own variables a child reads (the store location, MXPERF_HISTORY, is not one)
SUITE_NAMES: FrozenSet[str] = frozenset({"MXPERF_CACHE_DIR"})

#: what pip needs besides, to reach a private index
INSTALL_NAMES: FrozenSet[str] = frozenset({
    "http_proxy", "https_proxy", "no_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
    "ALL_PROXY", "NETRC", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
})
INSTALL_PREFIXES = ("PIP_",)

#: words in a name that say it holds a secret
SECRET_WORDS = ("PASSWORD", "PASSWD", "TOKEN", "SECRET", "CREDENTIAL", "_KEY", "AUTH")

_passed: FrozenSet[str] = frozenset()


def pass_through(names: Iterable[str]) -> None:
    """Names (``--perf-pass-env NAME``) every child gets as they are, whatever they hold: set
    once as the session starts."""
    global _passed
    _passed = frozenset(n for n in names if n)


def _secret(name: str) -> bool:
    upper = name.upper()
    return any(w in upper for w in SECRET_WORDS)


def allowed(name: str, purpose: str = "run") -> bool:
    """Whether a child started for ``purpose`` ("run": anything that runs the suite's or the
    user's code; "install": pip) gets variable ``name``."""
    if name in _passed:
        return True
    if purpose == "install" and (name in INSTALL_NAMES or name.startswith(INSTALL_PREFIXES)):
        return True  # pip's own settings may hold an index URL with its token: pip needs it
    if _secret(name):
        return False
    return name in ALLOWED_NAMES or name in SUITE_NAMES or name.startswith(ALLOWED_PREFIXES)


def child_env(base: Optional[Mapping[str, str]] = None, *, purpose: str = "run",
              extra: Optional[Mapping[str, str]] = None) -> dict:
    """The environment of a child: ``base`` (default ``os.environ``) cut to what is
    ``allowed`` for ``purpose``, with ``extra`` (the suite's own settings for the child: a
    cell's threads, ps-lite's roles) laid over it as given."""
    src = os.environ if base is None else base
    env = {k: v for k, v in src.items() if allowed(k, purpose)}
    if extra:
        env.update(extra)
    return env

