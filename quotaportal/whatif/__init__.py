"""Looking ahead: a draft of a queue's configuration replayed against its history
(drafts, runs), the start-time estimates the ticks keep on waiting jobs (estimates), and
workloads played into and out of the control plane (replays)."""
