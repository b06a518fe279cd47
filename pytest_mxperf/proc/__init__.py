"""Processes and installs: start a worker in its own session, bound it in time and memory,
reap its whole tree, classify how it ended (``worker.py``, ``spawn.py``); find, check and
build the MXNet installs an A/B session compares (``installs.py``)."""
