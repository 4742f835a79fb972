"""The tick: when a service environment is planned, what the plan reads and writes, and who
hears of it.

- bridge: the tick's reads and effects on the database (the snapshot the planner sees, the
  heads of each share's line, capacity, and the plan applied as rows and events);
- changes: what a transaction changed (services say so), acted on once at commit: an
  immediate tick per environment, wake-ups for waiting agents, ticks at instants;
- requests: asking a worker for a tick, coalesced to one waiting per environment and spaced
  after the last one (TickGate), or at an instant;
- run: the tick itself (snapshot, plan, check, apply per queue, under the environment's
  advisory lock), and a caller's own tick of an environment it holds (tick_held);
- carry: a checked plan carried out under the lock (starts, preemptions, reasons, samples,
  the plan's memo, TickMemo), for a tick and for a full plan alike;
- records: what a tick leaves behind (its SchedulerRun and /metrics' counters, or a skip);
- full_plan: the periodic read and plan of every active job of a long queue, made outside
  the environment's lock and applied under it only if what it read still holds;
- loop: the embedded default's scheduler thread (no Celery).

The Celery tasks (quotas.tasks) are thin entry points above it. The job state changes
the services make (quotaportal.jobs) sit between the tick's run and its bridge.
"""
