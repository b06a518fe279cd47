"""The data of a measurement, shared by both sides of the process boundary: the workload
spec (a cell), the per-process record and the cell of processes, the --perf-* options,
your own network's reference and inputs, pure statistics, and JSON files written atomically.
Standard library (and numpy, scipy where statistics need them); never MXNet."""
