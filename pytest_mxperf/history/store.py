"""The history store: every session appended in one transaction, histories read back.

``open_store(where)``: a path (or ``sqlite:///path``) is an SQLite file (standard library
``sqlite3``, write-ahead log, so a writer killed mid-session loses at most that session);
``postgresql://...`` is a PostgreSQL database through psycopg 3, which several runners write
at once (shared rows are inserted with ``ON CONFLICT DO NOTHING``, a session is one
transaction, and a session already stored is skipped: nothing is lost or duplicated).
``DEFAULT_PATH``: ``$MXPERF_HISTORY`` when set, else ``$XDG_DATA_HOME/pytest-mxperf/history.sqlite``
(``~/.local/share/...``).

A store of a newer schema than this code knows is refused with one line, before anything
is written to it.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from pytest_mxperf.history import ingest, location
from pytest_mxperf.history.schema import MIGRATIONS, SCHEMA_VERSION

ENV = "MXPERF_HISTORY"
#: how many of a machine's newest sessions of a kind ``durations`` looks through for a setup
SETUP_SCAN = 200


class HistoryError(RuntimeError):
    """The store cannot be opened or written (one line)."""


def default_location() -> str:
    if os.environ.get(ENV):
        return os.environ[ENV]
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "pytest-mxperf", "history.sqlite")


def describe(where: str) -> str:
    """``where`` without its credentials (``location.shown``), for messages and files."""
    try:
        return location.shown(where)
    except location.LocationError:
        return "(a PostgreSQL connection string that cannot be read)"


class HistoryStore:
    """One store; ``append`` a results document, read histories. Use as a context manager."""

    def __init__(self, conn, postgres: bool, where: str):
        self.conn, self.postgres, self.where = conn, postgres, where

    # -- SQL that runs on both ----------------------------------------------------------
    def _q(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.postgres else sql

    def _rows(self, sql: str, args: Sequence[Any] = ()) -> List[tuple]:
        cur = self.conn.cursor()
        cur.execute(self._q(sql), tuple(args))
        return list(cur.fetchall())

    def _version(self) -> int:
        try:
            rows = self._rows("SELECT version FROM schema_version")
        except Exception:  # noqa: BLE001 - no such table: a new store
            if self.postgres:
                self.conn.rollback()
            return 0
        return int(rows[0][0]) if rows else 0

    def _migrate(self) -> None:
        version = self._version()
        if version > SCHEMA_VERSION:
            raise HistoryError(f"history store {describe(self.where)} has schema {version}, newer than this "
                               f"pytest-mxperf knows ({SCHEMA_VERSION}): upgrade pytest-mxperf; the store was "
                               "left untouched")
        if version == SCHEMA_VERSION:
            return
        cur = self.conn.cursor()
        # one migrator at a time when several runners open a new store (PostgreSQL: a
        # session-level lock, which a failed query's rollback does not release)
        if self.postgres:
            self.conn.rollback()
            cur.execute("SELECT pg_advisory_lock(727217)")
            self.conn.commit()
        else:
            cur.execute("BEGIN IMMEDIATE")
        try:
            version = self._version()
            if version > SCHEMA_VERSION:
                raise HistoryError(f"history store {describe(self.where)} has schema {version}, newer than this "
                                   f"pytest-mxperf knows ({SCHEMA_VERSION}): upgrade pytest-mxperf; the store was "
                                   "left untouched")
            for v in range(version, SCHEMA_VERSION):
                for stmt in MIGRATIONS[v]:
                    cur.execute(stmt)
            if version < SCHEMA_VERSION:
                cur.execute("DELETE FROM schema_version")
                cur.execute(self._q("INSERT INTO schema_version (version) VALUES (?)"), (SCHEMA_VERSION,))
            self.conn.commit()
        except BaseException:
            self._rollback_quietly()
            raise
        finally:
            if self.postgres:
                cur.execute("SELECT pg_advisory_unlock(727217)")
                self.conn.commit()

    # -- writing ------------------------------------------------------------------------
    #: columns that key rows (never rewritten by ``scrub``: they hold ids, not text)
    _KEYS = frozenset({"id", "key", "session_id", "cell_key", "machine_id", "figure_key"})

    def _text_columns(self) -> List[tuple]:
        if self.postgres:
            return self._rows("SELECT table_name, column_name FROM information_schema.columns "
                              "WHERE table_schema = current_schema() AND data_type = 'text'")
        out = []
        for (table,) in self._rows("SELECT name FROM sqlite_master WHERE type = 'table'"):
            out += [(table, col[1]) for col in self._rows(f"PRAGMA table_info({table})")
                    if str(col[2]).upper() == "TEXT"]
        return out

    def scrub(self, clean) -> int:
        """Every stored text value rewritten as ``clean(value)`` where that differs (``clean``:
        ``location.scrub_text``, which removes credentials), in one transaction; returns the
        values rewritten."""
        changed = 0
        cur = self.conn.cursor()
        try:
            if not self.postgres:
                cur.execute("BEGIN IMMEDIATE")
            for table, column in self._text_columns():
                if column in self._KEYS:
                    continue
                for (value,) in self._rows(f"SELECT DISTINCT {column} FROM {table} WHERE {column} IS NOT NULL"):
                    new = clean(value)
                    if new != value:
                        cur.execute(self._q(f"UPDATE {table} SET {column} = ? WHERE {column} = ?"), (new, value))
                        changed += 1
            self.conn.commit()
        except Exception as exc:  # noqa: BLE001 - a database error, said in one line
            self._rollback_quietly()
            raise HistoryError(f"cannot scrub {describe(self.where)}: {type(exc).__name__}: "
                               f"{(str(exc).strip().splitlines() or [''])[0]}") from None
        return changed

    def append(self, doc: Mapping[str, Any]) -> bool:
        """Store one session in one transaction; False when it was stored already."""
        rows = ingest.session_rows(doc)
        sid = rows.session["id"]
        cur = self.conn.cursor()
        try:
            if self.postgres:
                cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (sid,))
            else:
                cur.execute("BEGIN IMMEDIATE")
            cur.execute(self._q("SELECT 1 FROM sessions WHERE id = ?"), (sid,))
            if cur.fetchone():
                self.conn.rollback()
                return False
            cur.execute(self._q("INSERT INTO machines (id, facts) VALUES (?, ?) ON CONFLICT (id) DO UPDATE "
                                "SET facts = excluded.facts"), rows.machine)
            cols = list(rows.session)
            cur.execute(self._q(f"INSERT INTO sessions ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"),
                        [rows.session[c] for c in cols])
            self._many(cur, "INSERT INTO cells (key, metric, unit, higher_is_better) VALUES (?, ?, ?, ?) "
                            "ON CONFLICT (key) DO NOTHING", rows.cells)
            self._many(cur, "INSERT INTO cell_results (session_id, cell_key, status, median, fast_end, processes, floor, "
                               "published, nodeid) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows.cell_results)
            self._many(cur, "INSERT INTO processes VALUES (?, ?, ?, ?, ?, ?, ?)", rows.processes)
            self._many(cur, "INSERT INTO verdicts VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows.verdicts)
            self._many(cur, "INSERT INTO test_durations (session_id, nodeid, seconds) VALUES (?, ?, ?)",
                       rows.durations)
            self._many(cur, "INSERT INTO pair_spreads (session_id, family, ss, df) VALUES (?, ?, ?, ?)",
                       rows.spreads)
            self.conn.commit()
        except Exception as exc:  # noqa: BLE001 - a database error, said in one line
            self._rollback_quietly()
            text = str(exc).strip().splitlines()
            raise HistoryError(f"cannot append session {sid} to {describe(self.where)}: "
                               f"{type(exc).__name__}: {text[0] if text else ''}") from None
        except BaseException:
            self._rollback_quietly()
            raise
        return True

    def _rollback_quietly(self) -> None:
        try:
            self.conn.rollback()
        except Exception:  # noqa: BLE001 - the connection itself is gone
            pass

    def _many(self, cur, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        rows = list(rows)
        if rows:
            cur.executemany(self._q(sql), rows)

    # -- reading ------------------------------------------------------------------------
    def session_ids(self) -> List[str]:
        return [r[0] for r in self._rows("SELECT id FROM sessions ORDER BY started, id")]

    def sessions(self) -> List[Dict[str, Any]]:
        cols = ["id", "started", "kind", "machine_id", "mxnet_version", "features", "python", "software",
                "environment", "git_commit", "ci_run", "fleet_id", "shard", "reference", "complete"]
        out = []
        for r in self._rows(f"SELECT {', '.join(cols)} FROM sessions ORDER BY started, id"):
            d = dict(zip(cols, r))
            for k in ("features", "software", "environment"):
                d[k] = json.loads(d[k]) if d[k] else None
            out.append(d)
        return out

    def cells(self) -> List[Dict[str, Any]]:
        return [{"key": k, "metric": m, "unit": u, "higher_is_better": bool(h)}
                for k, m, u, h in self._rows("SELECT key, metric, unit, higher_is_better FROM cells ORDER BY key")]

    def history(self, cell_key: str) -> List[Dict[str, Any]]:
        """The cell's figure in every session that measured it, oldest first, with the
        session's facts and the cell's verdict there."""
        rows = self._rows(
            "SELECT s.id, s.started, s.machine_id, s.mxnet_version, s.features, s.python, s.environment, "
            "s.kind, s.fleet_id, r.status, r.median, r.fast_end, r.processes, r.floor, r.published, v.kind, v.change, "
            "r.nodeid "
            "FROM cell_results r JOIN sessions s ON s.id = r.session_id "
            "LEFT JOIN verdicts v ON v.session_id = r.session_id AND v.figure_key = r.cell_key "
            "WHERE r.cell_key = ? ORDER BY s.started, s.id", (cell_key,))
        cols = ["session", "started", "machine_id", "mxnet_version", "features", "python", "environment", "kind",
                "fleet_id", "status", "median", "fast_end", "processes", "floor", "published", "verdict", "change",
                "nodeid"]
        out = []
        for r in rows:
            d = dict(zip(cols, r))
            d["features"] = json.loads(d["features"]) if d["features"] else None
            d["environment"] = json.loads(d["environment"]) if d["environment"] else {}
            out.append(d)
        return out

    def durations(self, machine_id: str, kind: str, last: int = 3,
                  same: Optional[Callable[[Dict[str, Any]], bool]] = None) -> List[Dict[str, Any]]:
        """What the last ``last`` complete sessions of ``kind`` on ``machine_id`` took, newest
        first: {"session", "wall_seconds", "tests": {nodeid: seconds}, "setup": {"mxnet_version",
        "python", "environment"}} (sessions stored before version 3, which kept no durations, are
        left out). ``same``: a test of a session's "setup"; the last ``last`` of the newest
        ``SETUP_SCAN`` sessions that pass it."""
        rows = self._rows("SELECT id, wall_seconds, mxnet_version, python, environment FROM sessions "
                          "WHERE machine_id = ? AND kind = ? AND complete = 1 AND wall_seconds IS NOT NULL "
                          "ORDER BY started DESC, id LIMIT ?", (machine_id, kind, last if same is None else SETUP_SCAN))
        out = []
        for sid, wall, version, python, environment in rows:
            setup = {"mxnet_version": version, "python": python,
                     "environment": json.loads(environment) if environment else {}}
            if same is not None and not same(setup):
                continue
            tests = {n: float(t) for n, t in self._rows("SELECT nodeid, seconds FROM test_durations "
                                                         "WHERE session_id = ?", (sid,))}
            out.append({"session": sid, "wall_seconds": float(wall), "tests": tests, "setup": setup})
            if len(out) == last:
                break
        return out

    def duet_shares(self, machine_id: str, kind: str = "baseline", last: int = 3) -> List[float]:
        """For each of the last ``last`` complete sessions of ``kind`` on ``machine_id``, newest
        first, the share of its measured cells that were also measured on a reference side
        (against a baseline: the cells it sent on to the duet against the recorded setup);
        sessions that measured no cell are left out."""
        rows = self._rows("SELECT id FROM sessions WHERE machine_id = ? AND kind = ? AND complete = 1 "
                          "ORDER BY started DESC, id LIMIT ?", (machine_id, kind, last))
        out = []
        for (sid,) in rows:
            cells = self._rows("SELECT COUNT(DISTINCT cell_key) FROM processes WHERE session_id = ?", (sid,))[0][0]
            paired = self._rows("SELECT COUNT(DISTINCT cell_key) FROM processes WHERE session_id = ? "
                                "AND side = 'reference'", (sid,))[0][0]
            if cells:
                out.append(paired / cells)
        return out

    def pair_spreads(self, machine_id: str, last: int = 3) -> List[Tuple[str, float, int]]:
        """The pooled spread of duet pair log ratios per kind of figure (family, sum of squares,
        degrees of freedom), added up over the last ``last`` complete sessions on
        ``machine_id`` that measured pairs of that kind, whatever the sessions' kind (the spread
        within a cell is the machine's, whichever installs the pairs compared). Each kind its
        own last sessions: a session of two distributed cells does not push a whole session's
        kvstore pairs out of the history."""
        rows = self._rows("SELECT family, SUM(ss), SUM(df) FROM ("
                          "SELECT p.family, p.ss, p.df, ROW_NUMBER() OVER ("
                          "PARTITION BY p.family ORDER BY s.started DESC, s.id) AS n "
                          "FROM pair_spreads p JOIN sessions s ON s.id = p.session_id "
                          "WHERE s.machine_id = ? AND s.complete = 1) t "
                          "WHERE n <= ? GROUP BY family ORDER BY family",
                          (machine_id, last))
        return [(str(f), float(ss), int(df)) for f, ss, df in rows if df]

    def fleet_session(self, fleet_id: str) -> Dict[str, Any]:
        """A fleet's session as one: its runners' sessions, the shards seen and missing, and
        every cell measured by any of them."""
        rows = self._rows("SELECT id, shard, machine_id FROM sessions WHERE fleet_id = ? ORDER BY shard, id",
                          (fleet_id,))
        shards = sorted({r[1] for r in rows if r[1]})
        total = {int(s.partition("/")[2]) for s in shards if "/" in s}
        seen = {int(s.partition("/")[0]) for s in shards if "/" in s}
        missing = sorted(set(range(1, max(total) + 1)) - seen) if len(total) == 1 else []
        cells = self._rows("SELECT DISTINCT r.cell_key FROM cell_results r JOIN sessions s ON s.id = r.session_id "
                           "WHERE s.fleet_id = ? ORDER BY r.cell_key", (fleet_id,))
        return {"fleet_id": fleet_id, "sessions": [r[0] for r in rows], "shards": shards,
                "missing_shards": missing, "cells": [c[0] for c in cells]}

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "HistoryStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def sqlite_path(where: str) -> Path:
    """The file of a SQLite store location (a path, or ``sqlite:///path``)."""
    return Path(where.removeprefix("sqlite:///") if where.startswith("sqlite:///") else where).expanduser()


def open_store(where: Optional[str] = None) -> HistoryStore:
    """The store at ``where`` (default ``default_location()``), created or migrated."""
    where = where or default_location()
    if location.is_postgres(where):
        try:
            import psycopg
        except ImportError:
            raise HistoryError("a PostgreSQL history store needs psycopg: pip install 'pytest-mxperf[fleet]'") from None
        try:
            conn = psycopg.connect(location.connect_string(where), connect_timeout=10)
        except psycopg.Error as exc:
            raise HistoryError(f"cannot connect to history store {describe(where)}: "
                               f"{str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}") from None
        store = HistoryStore(conn, True, describe(where))
    else:
        path = sqlite_path(where)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(str(path), timeout=60, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise HistoryError(f"cannot open history store {path}: {exc}") from None
        store = HistoryStore(_SqliteConn(conn), False, str(path))
    try:
        store._migrate()
        if not store.postgres:
            store.conn.raw.execute("PRAGMA journal_mode=WAL")
            store.conn.raw.execute("PRAGMA foreign_keys=ON")
    except HistoryError:
        store.close()
        raise
    except Exception as exc:  # noqa: BLE001 - not a store at all (another file), a broken one
        store.close()
        raise HistoryError(f"cannot use history store {describe(where)}: "
                           f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
    return store


class _SqliteConn:
    """sqlite3 in autocommit mode with explicit transactions, behind the DB-API calls the
    store uses (commit / rollback end the open transaction, if any)."""

    def __init__(self, raw: sqlite3.Connection):
        self.raw = raw

    def cursor(self):
        return self.raw.cursor()

    def commit(self) -> None:
        if self.raw.in_transaction:
            self.raw.execute("COMMIT")

    def rollback(self) -> None:
        if self.raw.in_transaction:
            self.raw.execute("ROLLBACK")

    def close(self) -> None:
        self.raw.close()
