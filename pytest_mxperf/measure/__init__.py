"""Measuring: the session (cells, processes bracketed by the machine probe, A/B pairs, the
deadline), the mxperf fixture, one workload's worker process, duet workers, operator
profiles, and the ps-lite cluster launcher."""
