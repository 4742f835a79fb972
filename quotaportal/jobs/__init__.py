"""A job's life in the domain: what a scientist asks (user_actions: submit, reprioritise,
terminate; arrays), what a submitted job must hold (fields, retries), how it runs and ends
(transitions: every change of a job's status, one function each), the queue's time limits
(time_limits), its output (output), and the job list's filter (filters).

The models stay in quotas.models (the one Django app whose tables these are); the tick
(quotaportal.tick) plans the jobs these functions write."""
