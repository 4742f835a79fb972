"""The SLURM backend's writes: looking at the cluster and bringing the portal in line
(watching), submitting what a plan started (submitting), and the admin's configuration
(config)."""
