"""What a stack run (scripts/stack.py) holds on the servers and in the temporary folder, each
marked with its owner: the run's name, its process and this host. A run ended in the normal
way gives it all back in `Stack.stop`; a run killed outright (`kill -9`, where no `finally`
runs) cannot, so the next run sweeps what such an owner left. Only marks naming a process of
this host that no longer exists are swept: a live run, another host's run, a kept run (its
marks are taken off when it stops) and anything unmarked are never touched."""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
import socket
import sys
from pathlib import Path

CLAIM_KEY = "quotaportal:claimed-by"
DATABASE_MARK = "quotaportal stack run "
FOLDER_MARK = ".owner"


def owner(run: str) -> str:
    return f"{run} pid={os.getpid()} host={socket.gethostname()}"


def _owner_is_gone(mark: str) -> bool:
    found = re.fullmatch(r"\S+ pid=(\d+) host=(\S+)", mark.strip())
    if not found or found[2] != socket.gethostname():
        return False
    try:
        os.kill(int(found[1]), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, someone else's
        return False
    return False


# -- Redis: one empty database claimed per run -------------------------------------------


def claim_redis_database(server_url: str, run: str) -> str:
    """The URL of a Redis database on `server_url` that was empty (or held by a run that is
    gone), claimed for `run` (a key set only if absent, so two runs never take the same one),
    never the one `server_url` names. Highest numbers first: the lowest are where other
    applications usually live."""
    import redis

    base, named = server_url.rsplit("/", 1)
    for number in range(15, 0, -1):
        if str(number) == named:
            continue  # the database REDIS_URL names is its user's, empty or not
        client = redis.Redis.from_url(f"{base}/{number}")
        if client.dbsize() and not _freed_from_a_gone_owner(client):
            continue
        if client.set(CLAIM_KEY, owner(run), nx=True):
            return f"{base}/{number}"
    raise SystemExit(f"no empty Redis database on {base} to use; free one (1-15) and try again")


def _freed_from_a_gone_owner(client) -> bool:
    """Empty a database a gone run claimed; whether it was emptied."""
    import redis

    with client.pipeline() as pipe:
        try:
            pipe.watch(CLAIM_KEY)
            mark = pipe.get(CLAIM_KEY)
            if mark is None or not _owner_is_gone(mark.decode()):
                return False
            pipe.multi()  # flushed only if the claim is still the same, unchanged since
            pipe.flushdb()
            pipe.execute()
            return True
        except redis.WatchError:
            return False


def release_redis_database(url: str, run: str) -> None:
    """Empty the claimed database, if the claim is still `run`'s (from any process)."""
    import redis

    client = redis.Redis.from_url(url)
    mark = client.get(CLAIM_KEY)
    if mark is not None and mark.decode().split(" ", 1)[0] == run:
        client.flushdb()


# -- PostgreSQL: one database per run ------------------------------------------------------


def mark_database(conn, database: str, run: str | None) -> None:
    """Name the database's owner in its comment (None: take the mark off, a kept run's)."""
    from psycopg import sql

    comment = sql.Literal(DATABASE_MARK + owner(run)) if run else sql.SQL("NULL")
    conn.execute(sql.SQL("COMMENT ON DATABASE {} IS {}").format(sql.Identifier(database), comment))


def drop_databases_whose_owner_is_gone(conn) -> None:
    from psycopg import sql

    marked = conn.execute(
        "SELECT d.datname, s.description FROM pg_database d JOIN pg_shdescription s"
        " ON s.objoid = d.oid AND s.classoid = 'pg_database'::regclass"
        " WHERE s.description LIKE %s",
        [DATABASE_MARK + "%"],
    ).fetchall()
    for name, description in marked:
        if _owner_is_gone(description.removeprefix(DATABASE_MARK)):
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


# -- the work folder -----------------------------------------------------------------------


def mark_folder(folder: Path, run: str | None) -> None:
    """Name the folder's owner in it (None: take the mark off, a kept run's)."""
    if run:
        (folder / FOLDER_MARK).write_text(owner(run))
    else:
        (folder / FOLDER_MARK).unlink(missing_ok=True)


def remove_folders_whose_owner_is_gone(parent: Path, prefix: str) -> None:
    for folder in parent.glob(f"{prefix}*"):
        try:
            mark = (folder / FOLDER_MARK).read_text()
        except OSError:
            continue
        if _owner_is_gone(mark):
            shutil.rmtree(folder, ignore_errors=True)


# -- the services ----------------------------------------------------------------------------

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None


def ended_with(parent: int):
    """For Popen's preexec_fn: the child is sent SIGTERM when the process that started it
    ends, however it ends (Linux). The services run in sessions of their own, so nothing
    else would stop them after a `kill -9` of the run."""

    def preexec() -> None:
        if _libc is None:
            return
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # it ended before the line above
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec
