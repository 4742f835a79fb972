"""The admin console (/manage/): teams and people, capacity units, environments, queues,
reservations and Slurm settings. Every view here is for platform admins alone
(common.require_admin)."""
