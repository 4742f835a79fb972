"""The SIMULATED backend: a room beside hosts/, slurm/ and awsbatch/ for environments whose
jobs only pretend to run (demos, replays, what-if)."""
