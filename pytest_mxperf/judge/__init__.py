"""Rules, pure of processes and files: statistics of processes to verdicts (baseline mode,
A/B pairs), the published floors, and the machine-state labels."""
