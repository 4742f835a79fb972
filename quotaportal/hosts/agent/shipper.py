"""Each rank's whole output, streamed to the portal from a thread of its own.

A rank writes its output to `output.log` beside it (runner.RunningJob). The shipper reads each
file from where it last stopped and posts what is new, in chunks, to /api/v1/agent/output/;
once the rank has exited and everything is sent, a last empty chunk marks it final (or, when
nothing is left to send at its exit, the exit report itself does: ended() says where the
output ends, and a trivial job costs no request of its own). The
portal answers each chunk with the offset it expects next, so a chunk sent again after a lost
answer is stored once, and a shipper that restarted from zero skips ahead.

Disk stays bounded: what the portal has stored is punched out of the file (a sparse file
keeps its offsets, and frees its blocks), so a host keeps only what is not yet sent; and while
the portal cannot be reached, beyond `space` unsent bytes in all the oldest unsent ones are
dropped, the portal told how many in the output itself.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from quotaportal.hosts.agent.client import AgentError, Client, Gap, Unreachable

log = logging.getLogger("quotaportal-agent")
CHUNK = 256 * 1024
PAUSE = 0.5  # between rounds while there is nothing new
RETRY = 2.0  # after the portal could not be reached
DEFAULT_SPACE = 2 * 1024**3


@dataclass
class Stream:
    """One rank's output: where the file has been read to and where the portal's copy ends
    (they differ by what was dropped for want of space, less the notes saying so)."""

    path: Path
    file_pos: int = 0
    portal_pos: int = 0
    ended: bool = False  # the rank exited: ship to the end, then the final mark
    full: bool = False  # the portal keeps no more of it
    note: bytes = b""  # a note about dropped output, sent before the next bytes
    sending: bool = False  # the shipper's thread has a chunk of it on its way


class Shipper:
    def __init__(self, client: Client, name: str, space: int = DEFAULT_SPACE):
        self.client, self.name, self.space = client, name, space
        self._streams: dict[int, Stream] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="output", daemon=True)
        self._thread.start()

    # -- the agent's loop calls these --------------------------------------------------

    def follow(self, placement: int, path: Path) -> None:
        with self._lock:
            self._streams.setdefault(placement, Stream(path))

    def ended(self, placement: int) -> int | None:
        """The rank exited. When all it printed is with the portal already, the stream is done
        here and this says where its output ends (the exit report marks it final there);
        otherwise None: the shipper sends the rest, then the final mark."""
        with self._lock:
            stream = self._streams.get(placement)
            if stream is None:
                return None
            if not (stream.sending or stream.note) and _size(stream.path) <= stream.file_pos:
                del self._streams[placement]
                return stream.portal_pos
            stream.ended = True
        self._wake.set()
        return None

    def shipping(self) -> set[int]:
        with self._lock:
            return set(self._streams)

    def saved(self) -> dict:
        """What the state file keeps, so a restarted agent ships the rest."""
        with self._lock:
            return {
                str(p): [str(s.path), s.file_pos, s.portal_pos, s.ended]
                for p, s in self._streams.items()
            }

    def restore(self, saved: dict) -> None:
        with self._lock:
            for placement, (path, file_pos, portal_pos, _) in saved.items():
                # Its rank is gone with the earlier agent: ship what it wrote, then end it.
                self._streams[int(placement)] = Stream(Path(path), file_pos, portal_pos, True)
        self._wake.set()

    def close(self, timeout: float = 2.0) -> None:
        """Ship what is there for up to `timeout`, then stop."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self._round(deadline) and self._streams:
            pass
        self._closing = True
        self._wake.set()

    # -- the thread ----------------------------------------------------------------------

    def _run(self) -> None:
        while not self._closing:
            try:
                busy = self._round()
            except Unreachable as err:
                log.debug("output not shipped: %s", err)
                self._keep_within_space()
                self._wake.wait(RETRY)
                self._wake.clear()
                continue
            except Exception:  # one bad file must not stop shipping the others
                log.exception("shipping output failed")
                busy = False
            if not busy:
                self._wake.wait(PAUSE)
                self._wake.clear()

    def _round(self, deadline: float | None = None) -> bool:
        """Ship a chunk of each stream; True when more is waiting."""
        with self._lock:
            streams = list(self._streams.items())
        busy = False
        for placement, stream in streams:
            if deadline is not None and time.monotonic() >= deadline:
                return True
            with self._lock:
                if self._streams.get(placement) is not stream:
                    continue  # done at its exit meanwhile (ended)
                stream.sending = True
            try:
                busy |= self._ship(placement, stream)
            finally:
                with self._lock:
                    stream.sending = False
        return busy

    def _ship(self, placement: int, stream: Stream) -> bool:
        size = _size(stream.path)
        data = stream.note + (b"" if stream.full else _read(stream.path, stream.file_pos, CHUNK))
        read = len(data) - len(stream.note)
        at_end = stream.file_pos + read >= size
        final = stream.ended and (at_end or stream.full)
        if not data and not final:
            return False
        try:
            answer = self.client.post_output(self.name, placement, stream.portal_pos, data, final)
        except Gap as gap:  # the portal has more (a resend) or less (it lost some): follow it
            moved = gap.expected - stream.portal_pos
            stream.portal_pos, stream.file_pos = gap.expected, max(0, stream.file_pos + moved)
            return True
        except AgentError as err:  # a placement the portal no longer has: nothing to send to
            log.warning("output of placement %s dropped: %s", placement, err)
            self._forget(placement)
            return False
        stream.note = b""
        stream.file_pos += read
        stream.portal_pos = answer["next_offset"]
        stream.full = stream.full or answer.get("full", False)
        _punch(stream.path, stream.file_pos)
        if final:
            self._forget(placement)
            return False
        return not at_end

    def _forget(self, placement: int) -> None:
        with self._lock:
            self._streams.pop(placement, None)

    def _keep_within_space(self) -> None:
        """While the portal is away: past `space` unsent bytes, drop the oldest of the
        largest stream's, and note it for the portal."""
        with self._lock:
            streams = list(self._streams.values())
        unsent = {id(s): max(0, _size(s.path) - s.file_pos) for s in streams}
        over = sum(unsent.values()) - self.space
        for stream in sorted(streams, key=lambda s: unsent[id(s)], reverse=True):
            if over <= 0:
                return
            dropped = min(over, unsent[id(stream)])
            stream.file_pos += dropped
            _punch(stream.path, stream.file_pos)
            stream.note += (
                f"\n[quotaportal: {dropped} bytes of output dropped here: the host's space for "
                "unsent output was full while the portal could not be reached]\n"
            ).encode()
            over -= dropped


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _read(path: Path, offset: int, size: int) -> bytes:
    try:
        with open(path, "rb") as file:
            file.seek(offset)
            return file.read(size)
    except OSError:
        return b""


_FALLOC_FL_KEEP_SIZE, _FALLOC_FL_PUNCH_HOLE = 0x01, 0x02
_BLOCK = 4096
_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]


def _punch(path: Path, upto: int) -> None:
    """Free the blocks of the file before `upto` (already sent), keeping its size and
    offsets. A file system that cannot punch holes keeps them: only the space is lost."""
    length = upto // _BLOCK * _BLOCK
    if length <= 0:
        return
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError:
        return
    try:
        _libc.fallocate(fd, _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE, 0, length)
    finally:
        os.close(fd)
