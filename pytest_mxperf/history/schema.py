"""The history store's tables, one SQL text for SQLite and PostgreSQL, and their migrations.

``SCHEMA_VERSION`` is the version this code writes; ``MIGRATIONS[v]`` takes a store from
version v to v + 1 (``MIGRATIONS[0]`` creates it). A store of a newer version than this
code knows is refused, untouched (``store.HistoryError``).

A session is one row of ``sessions``; a fleet's session (several runners, each a shard,
sharing a ``fleet_id``) is the sessions of that fleet id. Per cell and session,
``cell_results`` holds the figure the history is drawn from (the median and the fast end of
its processes, in the cell's unit) and the test that measured it (its node id, from version 2); ``processes`` every process's figures and facts as JSON;
``verdicts`` every judged figure's verdict; ``test_durations`` what each measuring test took
(from version 3, with the session's ``wall_seconds``); ``pair_spreads`` the session's pooled
spread of duet pairs per kind of figure (from version 4).
"""

from __future__ import annotations

from typing import List

SCHEMA_VERSION = 4

_V1 = [
    """CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS machines (
        id TEXT PRIMARY KEY,
        facts TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS sessions (
        id TEXT PRIMARY KEY,
        started DOUBLE PRECISION NOT NULL,
        kind TEXT NOT NULL,
        machine_id TEXT NOT NULL REFERENCES machines(id),
        mxnet_version TEXT,
        features TEXT,
        python TEXT,
        software TEXT NOT NULL,
        environment TEXT NOT NULL,
        git_commit TEXT,
        ci_run TEXT,
        fleet_id TEXT,
        shard TEXT,
        reference TEXT,
        complete INTEGER NOT NULL)""",
    """CREATE INDEX IF NOT EXISTS sessions_by_fleet ON sessions (fleet_id)""",
    """CREATE TABLE IF NOT EXISTS cells (
        key TEXT PRIMARY KEY,
        metric TEXT NOT NULL,
        unit TEXT NOT NULL,
        higher_is_better INTEGER NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS cell_results (
        session_id TEXT NOT NULL REFERENCES sessions(id),
        cell_key TEXT NOT NULL REFERENCES cells(key),
        status TEXT NOT NULL,
        median DOUBLE PRECISION,
        fast_end DOUBLE PRECISION,
        processes INTEGER NOT NULL,
        floor DOUBLE PRECISION,
        published DOUBLE PRECISION,
        PRIMARY KEY (session_id, cell_key))""",
    """CREATE INDEX IF NOT EXISTS cell_results_by_cell ON cell_results (cell_key)""",
    """CREATE TABLE IF NOT EXISTS processes (
        session_id TEXT NOT NULL REFERENCES sessions(id),
        cell_key TEXT NOT NULL REFERENCES cells(key),
        side TEXT NOT NULL,
        idx INTEGER NOT NULL,
        status TEXT NOT NULL,
        figures TEXT NOT NULL,
        facts TEXT NOT NULL,
        PRIMARY KEY (session_id, cell_key, side, idx))""",
    """CREATE TABLE IF NOT EXISTS verdicts (
        session_id TEXT NOT NULL REFERENCES sessions(id),
        figure_key TEXT NOT NULL,
        cell_key TEXT NOT NULL,
        kind TEXT NOT NULL,
        change DOUBLE PRECISION,
        low DOUBLE PRECISION,
        high DOUBLE PRECISION,
        reason TEXT,
        PRIMARY KEY (session_id, figure_key))""",
]

#: version 2: the test that measured each cell in a session (its node id), for the command
#: that reproduces a step on the trend pages (NULL in the rows of older stores)
_V2 = ["ALTER TABLE cell_results ADD COLUMN nodeid TEXT"]

#: version 3: what each measuring test of a session took (wall seconds, its node id) and the
#: session's own wall time: a later session's estimate on the same machine starts from them
_V3 = ["ALTER TABLE sessions ADD COLUMN wall_seconds DOUBLE PRECISION",
       """CREATE TABLE IF NOT EXISTS test_durations (
        session_id TEXT NOT NULL REFERENCES sessions(id),
        nodeid TEXT NOT NULL,
        seconds DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (session_id, nodeid))"""]

#: version 4: each session's pooled spread of duet pair log ratios per kind of figure (the
#: within-cell sum of squares and its degrees of freedom): a later session's pair-by-pair rule
#: on the same machine judges its pairs at the spread pooled with these
_V4 = ["""CREATE TABLE IF NOT EXISTS pair_spreads (
        session_id TEXT NOT NULL REFERENCES sessions(id),
        family TEXT NOT NULL,
        ss DOUBLE PRECISION NOT NULL,
        df INTEGER NOT NULL,
        PRIMARY KEY (session_id, family))"""]

#: MIGRATIONS[v]: the statements that take a store from version v to v + 1
MIGRATIONS: List[List[str]] = [_V1, _V2, _V3, _V4]
assert len(MIGRATIONS) == SCHEMA_VERSION
