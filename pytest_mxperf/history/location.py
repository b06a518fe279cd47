"""Where the history store is, said without its credentials.

A store location (``--perf-store``, ``$MXPERF_HISTORY``) is an SQLite path, ``sqlite:///path``,
a ``postgresql://`` (or ``postgres://``) URL, or a libpq keyword DSN (``host=h dbname=d``).
A URL or DSN may hold a password: in its user-info (``user:pw@``), or as the ``password`` or
``sslpassword`` parameter. ``shown(value)`` is the location with every one of them removed:
the only form the suite writes (results.json, the interim file, summary, report), prints or
stores. ``remember(value)`` returns that form and keeps the whole value in this process's
memory only, for ``connect_string`` to give back to the driver when the store is opened; a
child process never gets it (``proc/child_env``). The documented ways to give a password are
the driver's own: ``PGPASSWORD``, ``~/.pgpass``, a service file (``PGSERVICEFILE``).

Pure but for the one in-memory table.
"""

from __future__ import annotations

import re
from typing import Dict, List, Tuple
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

#: parameters of a URL's query or a keyword DSN that hold a secret
SECRET_PARAMETERS = ("password", "sslpassword")

_KEYWORD = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*")
_remembered: Dict[str, str] = {}


class LocationError(ValueError):
    """A location that cannot be read (one line)."""


def is_postgres(value: str) -> bool:
    """A PostgreSQL location: a ``postgresql://`` / ``postgres://`` URL or a keyword DSN."""
    return value.startswith(("postgresql://", "postgres://")) or is_keyword_dsn(value)


def is_keyword_dsn(value: str) -> bool:
    """``host=h dbname=d ...``: libpq's keyword form (an SQLite path never starts with
    ``name=``; one that does is written ``sqlite:///name=...``)."""
    return bool(_KEYWORD.match(value)) and "://" not in value.split("=", 1)[0]


def _keyword_pairs(dsn: str) -> List[Tuple[str, str]]:
    """libpq's keyword/value pairs: values bare or single-quoted with backslash escapes."""
    pairs, i = [], 0
    while i < len(dsn):
        if dsn[i:].strip() == "":
            break
        m = _KEYWORD.match(dsn, i)
        if not m:
            raise LocationError(f"a keyword connection string that cannot be read at character {i + 1}: "
                                "write it as key=value pairs, or as a postgresql:// URL")
        key, i = m.group(1), m.end()
        if i < len(dsn) and dsn[i] == "'":
            i += 1
            value = []
            while i < len(dsn) and dsn[i] != "'":
                if dsn[i] == "\\" and i + 1 < len(dsn):
                    i += 1
                value.append(dsn[i])
                i += 1
            if i >= len(dsn):
                raise LocationError("a keyword connection string with an unterminated quote")
            i += 1
            pairs.append((key, "".join(value)))
        else:
            j = i
            while j < len(dsn) and not dsn[j].isspace():
                j += 1
            pairs.append((key, dsn[i:j]))
            i = j
    return pairs


def _quoted(value: str) -> str:
    if value and not any(c.isspace() or c in "'\\" for c in value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def shown(value: str) -> str:
    """``value`` with every credential removed (user-info password, ``password`` and
    ``sslpassword`` parameters); an SQLite path as it is. ``LocationError`` for a keyword
    DSN that cannot be read (it might hide a password where it could not be found)."""
    if value.startswith(("postgresql://", "postgres://")):
        parts = urlsplit(value)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, hostport = netloc.rpartition("@")
            user = userinfo.partition(":")[0]
            netloc = f"{user}@{hostport}" if user else hostport
        query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
                 if k.lower() not in SECRET_PARAMETERS]
        return urlunsplit((parts.scheme, netloc, parts.path, urlencode(query, quote_via=quote), ""))
    if is_keyword_dsn(value):
        return " ".join(f"{k}={_quoted(v)}" for k, v in _keyword_pairs(value) if k.lower() not in SECRET_PARAMETERS)
    return value


def remember(value: str) -> str:
    """The location as it may be written (``shown``), the whole value kept in memory for
    ``connect_string``."""
    safe = shown(value)
    _remembered[safe] = value
    return safe


def connect_string(location: str) -> str:
    """What the driver connects with: the whole value ``remember`` kept for this shown
    location, else the location as given."""
    return _remembered.get(location, location)


SCRUB_PATTERN = re.compile(r"postgres(?:ql)?://[^\s\"'<>]*")
KEYWORD_SECRET = re.compile(r"(?i)\b(ssl)?password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)")


def scrub_text(text: str) -> str:
    """``text`` (a stored JSON document, a line) with every PostgreSQL URL's credentials
    removed and every ``password=`` / ``sslpassword=`` keyword's value replaced: what
    ``python -m pytest_mxperf.history scrub`` writes back over a stored row."""
    def url(m):
        try:
            return shown(m.group(0))
        except ValueError:
            return "postgresql://(removed)"
    text = SCRUB_PATTERN.sub(url, text)
    return KEYWORD_SECRET.sub(lambda m: f"{m.group(1) or ''}password=(removed)", text)
