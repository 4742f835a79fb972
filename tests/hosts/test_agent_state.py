"""The agent's state file (what a restarted agent must stop first) is written once per turn
of its loop, listing every job it runs, however many an answer started."""

from __future__ import annotations

import json

from quotaportal.hosts.agent.agent import STATE_FILE, Agent
from tests.hosts.builders import rank


class AnsweringServer:
    timeout = 10.0

    def reports(self, name, batch):
        return {"results": [{"ok": True} for _ in batch]}

    def post_output(self, name, placement, offset, data, final):
        return {"next_offset": offset + len(data), "full": False}


class Counting(Agent):
    def save_state(self):
        self.saves = getattr(self, "saves", 0) + 1
        super().save_state()


def saved_pgids(tmp_path) -> set[int]:
    return {entry["pgid"] for entry in json.loads((tmp_path / STATE_FILE).read_text())["jobs"]}


def test_an_answer_that_starts_two_jobs_writes_the_state_file_once_with_both(tmp_path):
    agent = Counting(
        client=AnsweringServer(),
        name="gpu-1",
        capacity_unit="gpu1",
        gpus=[0, 1],
        work_dir=tmp_path,
        address="",
    )
    try:
        sleepers = [rank(7, "sleep 30", gpu=0), rank(8, "sleep 30", gpu=1)]
        agent.take({"placements": sleepers, "horizon": 8})
        assert sorted(agent.running) == [7, 8]
        assert getattr(agent, "saves", 0) == 0, "written at the end of the loop's turn"
        agent.save_state_if_changed()
        agent.save_state_if_changed()  # nothing changed since
        assert agent.saves == 1
        assert saved_pgids(tmp_path) == {job.process.pid for job in agent.running.values()}
    finally:
        agent.shutdown()
        agent.reporter.close()
    assert agent.running == {}
    assert saved_pgids(tmp_path) == set(), "the stopped jobs are gone from the file"
