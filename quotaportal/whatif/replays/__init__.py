"""Workloads into and out of the control plane: a queue's history as a simulator workload
(history), a workload played through the services and the ticks (stack), and scenario files
played through the database (scenario_world). The simulator's entry points live in
scheduler.simulate; these serve it from the database."""
