"""Infrastructure the domain and the interfaces stand on, knowing nothing of either: the Redis
client, bulk SQL (COPY, UPDATE ... FROM unnest), PostgreSQL advisory locks, correlated
subqueries, request bodies (JSON with a depth limit, text the database can store), the
Celery broker's transport and the worker's heartbeat for /healthz."""
