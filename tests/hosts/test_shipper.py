"""The agent's output shipper on its own: what it sends while the portal is there, and what it
keeps (and drops, saying so) while the portal is away."""

from __future__ import annotations

import os

from quotaportal.hosts.agent.client import Unreachable
from quotaportal.hosts.agent.shipper import Shipper


class Portal:
    """The output endpoint's contract: chunks at their offsets, stored once."""

    def __init__(self):
        self.stored, self.final, self.away = bytearray(), False, False

    def post_output(self, name, placement, offset, data, final):
        if self.away:
            raise Unreachable("the portal is away")
        assert offset <= len(self.stored)
        self.stored += data[len(self.stored) - offset :]
        self.final = self.final or final
        return {"next_offset": len(self.stored), "full": False}


def test_unsent_output_beyond_the_space_is_dropped_and_the_portal_told(tmp_path):
    portal = Portal()
    shipper = Shipper(portal, "host-1", space=4096)
    shipper.close(timeout=0)  # driven by hand below, not by its thread
    log = tmp_path / "output.log"
    log.write_bytes(b"a" * 10_000)
    shipper.follow(1, log)
    portal.away = True
    shipper._keep_within_space()
    portal.away = False
    with log.open("ab") as more:
        more.write(b"tail\n")
    shipper.ended(1)
    while shipper.shipping():
        shipper._round()
    text = bytes(portal.stored)
    assert text.startswith(b"\n[quotaportal: 5904 bytes of output dropped here")
    assert text.endswith(b"a" * 4096 + b"tail\n")
    assert portal.final


def test_what_the_portal_stored_leaves_the_disk(tmp_path):
    portal = Portal()
    shipper = Shipper(portal, "host-1")
    shipper.close(timeout=0)
    log = tmp_path / "output.log"
    printed = os.urandom(1024 * 1024)
    log.write_bytes(printed)
    shipper.follow(1, log)
    shipper.ended(1)
    while shipper.shipping():
        shipper._round()
    assert bytes(portal.stored) == printed
    assert log.stat().st_size == 1024 * 1024
    assert log.stat().st_blocks * 512 < 64 * 1024


def test_a_rank_whose_output_is_all_sent_at_its_exit_needs_no_last_chunk(tmp_path):
    """Its exit report says where the output ends and marks it final: a job that printed
    nothing (or whose output went out already) costs no request of the shipper's."""
    portal = Portal()
    shipper = Shipper(portal, "host-1")
    shipper.close(timeout=0)
    log = tmp_path / "output.log"
    log.write_bytes(b"done\n")
    shipper.follow(1, log)
    shipper._round()  # the output goes while the rank runs
    assert bytes(portal.stored) == b"done\n"
    assert shipper.ended(1) == 5
    assert shipper.shipping() == set()
    assert not portal.final  # the exit report carries the mark, not a chunk

    silent = tmp_path / "silent.log"
    silent.write_bytes(b"")
    shipper.follow(2, silent)
    assert shipper.ended(2) == 0


def test_output_left_unsent_at_the_exit_is_shipped_then_marked_final(tmp_path):
    portal = Portal()
    shipper = Shipper(portal, "host-1")
    shipper.close(timeout=0)
    log = tmp_path / "output.log"
    log.write_bytes(b"a" * 1000)
    shipper.follow(1, log)
    assert shipper.ended(1) is None  # 1000 bytes not yet sent
    while shipper.shipping():
        shipper._round()
    assert bytes(portal.stored) == b"a" * 1000
    assert portal.final


def test_a_chunk_on_its_way_at_the_exit_leaves_the_final_mark_to_the_shipper(tmp_path):
    """While the shipper's thread sends a chunk the portal's end is not yet known here."""
    log = tmp_path / "output.log"
    log.write_bytes(b"x" * 10)

    class Slow(Portal):
        def post_output(self, name, placement, offset, data, final):
            self.ended_meanwhile = shipper.ended(1)
            return super().post_output(name, placement, offset, data, final)

    portal = Slow()
    shipper = Shipper(portal, "host-1")
    shipper.close(timeout=0)
    shipper.follow(1, log)
    shipper._round()
    assert portal.ended_meanwhile is None
    while shipper.shipping():
        shipper._round()
    assert portal.final
    assert bytes(portal.stored) == b"x" * 10
