"""The benchmark commands, together: `bench_tick` (a tick at scale) and `bench_dashboard`
(the dashboard's live fragment). The scripts in scripts/ time the running stack."""
