"""Every session kept: a history store (SQLite by default, PostgreSQL for a fleet of runners),
change points found in each cell's history, and static trend pages drawn from it.

``ingest.py`` turns a session's results document (results.json) into rows; ``schema.py``
declares the tables and their migrations; ``store.py`` appends a session in one transaction
and reads histories back; ``changepoints.py`` segments a cell's history into steps;
``pages.py`` writes the trend pages; ``fleet.py`` splits a selection across runners;
``python -m pytest_mxperf.history`` is the command line (import, changes, publish, summary).
"""
