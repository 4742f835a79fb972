"""The tags quotaportal reads on AWS resources, shared by the endpoint (which is asked to make
them) and the sync (which finds them on AWS's resources)."""

BACKEND_TAG = "quotaportal:backend"  # an environment made through the endpoint: LOCAL or not
TEAM_TAG = "quotaportal:team"  # the team a quota share belongs to
SIMULATED_SECONDS_TAG = "quotaportal:simulated-seconds"  # how long a SIMULATED job runs
