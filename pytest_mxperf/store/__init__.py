"""What is kept between sessions: the per-machine baselines (``baselines/<machine id>.json``),
a session's results.json, and the operator profiles a baseline keeps."""
