"""What this machine's history store says before a session measures anything: its last
sessions' costs (``known_costs``), its duet pairs' spreads (``known_spreads``, summed into the
pairs a cell gets before its first look, ``first_pairs``) and how its sessions against a
baseline settled (``first_path``). Each read once, when the plan is made; a store that does
not exist or cannot be read is as if it held nothing: what the suite takes from its history
is a courtesy, never a reason to stop."""

from __future__ import annotations

import dataclasses
from typing import Dict, Optional, Sequence, Tuple

from pytest_mxperf.measure import planning

#: sessions of the same kind on this machine whose test durations, pair spreads and duet
#: shares the plan starts from
KNOWN_SESSIONS = 3


def from_history(options, read):
    """``read(store)`` of the history store the session writes to; None when there is none (no
    location, or a SQLite file not made yet) or it cannot be read."""
    from pytest_mxperf.history import location
    from pytest_mxperf.history.store import open_store, sqlite_path
    where = options.history
    if not where or (not location.is_postgres(where) and not sqlite_path(where).is_file()):
        return None
    try:
        with open_store(where) as store:
            return read(store)
    except Exception:  # noqa: BLE001 - any store error: as if there were none
        return None


def _machine_id(machine) -> str:
    return str((machine or {}).get("id"))


def first_path(options, machine, baseline) -> planning.FirstPath:
    """How a session against ``baseline`` measures from its first process
    (``planning.first_path``): from what the baseline says of its resolution and from this
    machine's last sessions against it in the history store (none when the store does not
    exist or cannot be read: the baseline alone then decides)."""
    from pytest_mxperf.judge import thresholds
    shares = from_history(options, lambda store: store.duet_shares(_machine_id(machine), "baseline",
                                                                   KNOWN_SESSIONS)) or []
    return planning.first_path(baseline.resolution_summary(), shares, thresholds.PROVISIONAL_CLEARS)


def known_spreads(options, machine) -> Tuple[Tuple[str, float, int], ...]:
    """This machine's pooled spreads of duet pairs per kind of figure from its last sessions
    (``HistoryStore.pair_spreads``), for the pair-by-pair rule; none without a store."""
    if options.smoke:
        return ()
    rows = from_history(options, lambda store: store.pair_spreads(_machine_id(machine), KNOWN_SESSIONS))
    return tuple(rows or ())


def first_pairs(options, spreads: Sequence[Tuple[str, float, int]]) -> planning.FirstPairs:
    """The duet pairs a paired or A/B session's cells get before their first look
    (``planning.first_pairs``), from this machine's pair spreads (``known_spreads``) summed per
    kind of figure as the pair-by-pair rule sums them (``verdict_duet.history_by_kind``),
    for each kind of cell the kinds of figure its rows have, and each cell's own (its figures'
    rows)."""
    from pytest_mxperf.judge.sequential import Spread
    from pytest_mxperf.judge.thresholds import OWN_DF
    from pytest_mxperf.judge.verdict_duet import family_of_key, history_by_kind
    known = {key: Spread(ss, df) for key, ss, df in spreads}
    families = history_by_kind(known)
    kind_df: Dict[str, Dict[str, int]] = {}
    own_df: Dict[str, int] = {}
    for key, s in known.items():
        f = family_of_key(key)
        if f is not None:
            kind_df.setdefault(key.split("/", 1)[0], {})[f] = families[f].df
            cell = key.partition("#")[0]
            own_df[cell] = min(own_df.get(cell, s.df), s.df)
    return planning.first_pairs(options.duet_pairs, kind_df, own_df, OWN_DF)


def known_costs(options, machine, kind: str, setup: Optional[dict] = None) -> Optional[planning.Known]:
    """This machine's own costs: what its last sessions of ``kind`` (``SessionContext.kind``: a
    recording, a session against the baseline, one with nothing to compare) took, from the
    history store the session writes to; of those, the ones that ran ``setup``
    (``planning.session_setup``: a candidate with fusion off, one thread or another release
    takes other minutes), else, when none did, the others (``Known.of_setup`` says which).
    None (the constants) when the store does not exist yet, holds none, or cannot be read."""
    if options.smoke:
        return None
    machine_id = _machine_id(machine)

    def read(store):
        rows = (store.durations(machine_id, kind, KNOWN_SESSIONS, same=lambda s: planning.same_setup(s, setup))
                if setup else [])
        return rows or store.durations(machine_id, kind, KNOWN_SESSIONS), (bool(rows) if setup else None)
    rows, of_setup = from_history(options, read) or ([], None)
    return dataclasses.replace(planning.known_from(rows), of_setup=of_setup) if rows else None
