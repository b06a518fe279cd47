"""Facts about the machine, read in the parent without MXNet: its id (hardware only), CPU
topology and default threads, GPUs through NVML, utilisation while a worker runs, the
calibration probe and load meter, and the environment advisor."""
