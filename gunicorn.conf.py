"""gunicorn settings, read from the working directory by every `gunicorn` started here.

Agents' heartbeats are long-polls: each holds a request open for up to 10 s waiting for work,
so workers are threaded (one thread per open request) instead of gunicorn's sync default,
where one waiting agent would take a whole worker.
"""

import os

worker_class = "gthread"
threads = int(os.environ.get("QP_WEB_THREADS", "32"))
# A long-poll is not a stuck worker: allow well past the longest wait.
timeout = 60
