"""A job cannot escape its rank: whatever it does with sessions and process groups (`setsid`,
a double fork, fifty detached sleepers), it is over only when all of it is gone, and a stop
reaches all of it. With cgroup v2, with cgroup v1's freezer, and with neither (the shim as
subreaper)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

import pytest

from quotaportal.hosts.agent import containment
from quotaportal.hosts.agent.containment import Containment
from quotaportal.hosts.agent.runner import RunningJob, StartFailed
from quotaportal.hosts.agent.spawner import Spawner
from tests.hosts.builders import pid_alive, rank

ESCAPES = {
    "setsid": "setsid sleep 302 >/dev/null 2>&1 </dev/null & echo $! > {pids}; exit 0",
    "double fork": (
        "(setsid sh -c 'sleep 303 >/dev/null 2>&1 </dev/null & echo $! > {pids}' &); exit 0"
    ),
    "fifty sleepers": (
        "for i in $(seq 50); do setsid sleep 306 >/dev/null 2>&1 </dev/null &"
        " echo $! >> {pids}; done; exit 0"
    ),
}


@pytest.fixture
def lifeline():
    read, write = os.pipe()
    yield read, write
    for fd in (read, write):
        with contextlib.suppress(OSError):  # the test may have closed one
            os.close(fd)


def cgroup_v2(tmp_path) -> Containment:
    found = containment.detect("test-agent", tmp_path)
    if found.kind != "cgroup v2":
        pytest.skip(f"no writable cgroup v2 here ({found.describe()})")
    return found


def cgroup_v1(tmp_path) -> Containment:
    mount = containment._cgroup_mounts().get("freezer")
    if mount is None:
        pytest.skip("no cgroup v1 freezer here")
    base = mount / f"quotaportal-test-{os.getpid()}-{tmp_path.name}"
    try:
        base.mkdir()
    except OSError as err:
        pytest.skip(f"cannot make a v1 freezer cgroup: {err}")
    return Containment("cgroup v1 freezer", base)


def no_cgroups(tmp_path) -> Containment:
    return Containment("none")


KINDS = {"cgroup v2": cgroup_v2, "cgroup v1 freezer": cgroup_v1, "subreaper": no_cgroups}


@pytest.fixture(params=list(KINDS))
def contained(request, tmp_path):
    found = KINDS[request.param](tmp_path)
    yield found
    if found.base is not None:
        found.stop_leftovers()
        found.base.rmdir()


@pytest.fixture(params=["spawner", "alone"])
def spawner(request, lifeline):
    if request.param == "alone":
        yield None
        return
    forks = Spawner(lifeline[0])
    yield forks
    forks.close()


def read_pids(path: Path, count: int) -> list[int]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if path.exists():
            pids = [int(line) for line in path.read_text().split()]
            if len(pids) >= count:
                return pids
        time.sleep(0.02)
    raise AssertionError(f"the job did not write {count} pid(s) to {path}")


def wait_for(condition, what: str, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        assert time.monotonic() < deadline, what
        time.sleep(0.02)
    return result


@pytest.mark.parametrize("escape", list(ESCAPES))
def test_an_escaped_process_keeps_the_rank_busy_until_a_stop_ends_it(
    tmp_path, lifeline, spawner, contained, escape
):
    pids_file = tmp_path / "pids"
    count = 50 if escape == "fifty sleepers" else 1
    job = RunningJob(
        rank(1, ESCAPES[escape].format(pids=pids_file)),
        tmp_path,
        lifeline=lifeline[0],
        orphan_grace=1,
        spawner=spawner,
        contained=contained,
    )
    escaped = read_pids(pids_file, count)
    time.sleep(0.3)  # the shell has long exited
    assert all(pid_alive(pid) for pid in escaped)
    assert job.poll() is None, "the rank was reported over while its processes run"
    job.stop(grace=0.2)
    while job.poll() is None:
        job.enforce_deadline()
        time.sleep(0.02)
    assert not [pid for pid in escaped if pid_alive(pid)], "a stop left escaped processes alive"
    job.release()
    assert not job.cgroups


def test_an_agent_killed_outright_takes_escaped_processes_with_it(tmp_path, lifeline, contained):
    """The shim stops the whole job when its lifeline is cut, escapees included."""
    read, write = lifeline
    pids_file = tmp_path / "pids"
    job = RunningJob(
        rank(2, ESCAPES["double fork"].format(pids=pids_file)),
        tmp_path,
        lifeline=read,
        orphan_grace=0.2,
        spawner=None,
        contained=contained,
    )
    (escaped,) = read_pids(pids_file, 1)
    os.close(write)  # what the agent's death does to the pipe
    wait_for(lambda: not pid_alive(escaped), "the escaped process outlived its agent")
    wait_for(lambda: job.process.poll() is not None, "the shim did not end")
    job.release()


def test_a_restarted_agent_clears_what_an_earlier_one_left_in_its_cgroups(tmp_path, lifeline):
    """Shim and agent both gone: the escaped process is still in its rank's cgroup, and the
    next agent of the same work dir kills it before it does anything else."""
    first = cgroup_v2(tmp_path)
    pids_file = tmp_path / "pids"
    job = RunningJob(
        rank(3, ESCAPES["setsid"].format(pids=pids_file)),
        tmp_path,
        lifeline=lifeline[0],
        orphan_grace=1,
        spawner=None,
        contained=first,
    )
    (escaped,) = read_pids(pids_file, 1)
    os.kill(job.process.pid, signal.SIGKILL)
    job.process.wait()
    assert pid_alive(escaped)
    again = containment.detect("test-agent", tmp_path)
    assert again.base == first.base
    assert again.stop_leftovers() == 1
    assert not pid_alive(escaped)
    assert not any(p.is_dir() for p in again.base.iterdir())
    again.base.rmdir()


class Unjoinable(Containment):
    """Hands the rank a cgroup folder that does not exist."""

    def create(self, rank: str, gpus: int = 1) -> list[str]:
        return [str(self.base / rank)]


def test_a_job_that_cannot_join_its_cgroup_does_not_run(tmp_path, lifeline):
    """Better a failed attempt than a job nothing could stop whole."""
    marker = tmp_path / "ran"
    job = RunningJob(
        rank(4, f"touch {marker}"),
        tmp_path,
        lifeline=lifeline[0],
        orphan_grace=1,
        spawner=None,
        contained=Unjoinable("cgroup v2", tmp_path / "missing"),
    )
    code = wait_for(job.poll, "the shim did not end")
    assert code == 127
    assert not marker.exists()
    assert "could not start the job" in job.output_tail()


def test_a_rank_cgroup_that_cannot_be_made_fails_the_start_clearly(tmp_path, lifeline):
    with pytest.raises(StartFailed, match="Could not start the job"):
        RunningJob(
            rank(5, "true"),
            tmp_path,
            lifeline=lifeline[0],
            orphan_grace=1,
            contained=Containment("cgroup v2", Path("/proc/no-cgroups-here")),
        )


# -- memory and CPU limits per GPU (Slurm's DefMemPerGPU, DefCpuPerGPU) ---------------------

MIB = 1 << 20


def limited(tmp_path, limits: containment.Limits) -> Containment:
    try:
        found = containment.detect("test-limits", tmp_path, limits)
    except containment.ContainmentError as err:
        pytest.skip(f"limits cannot be set here: {err}")
    return found


@pytest.fixture
def remove_after():
    made: list[Containment] = []
    yield made.append
    for found in made:
        found.stop_leftovers()
        for folder in {found.base, *(parent for _, parent in found.limited)}:
            folder.rmdir()


def exit_code(job: RunningJob, timeout: float = 20.0) -> int:
    """The rank's exit code once all of it is gone; its cgroups are removed."""
    codes: list[int] = []
    wait_for(lambda: codes.append(job.poll()) or codes[-1] is not None, "the job ran on", timeout)
    job.release()
    return codes[-1]


def test_a_rank_over_its_memory_limit_is_killed_and_one_within_it_runs(
    tmp_path, lifeline, remove_after
):
    found = limited(tmp_path, containment.Limits(memory_per_gpu=64 * MIB))
    remove_after(found)
    allocate = "python3 -c 'b = bytearray({mib} << 20); b[::4096] = b\"x\" * len(b[::4096])'"
    within = RunningJob(
        rank(6, allocate.format(mib=16)),
        tmp_path,
        lifeline=lifeline[0],
        orphan_grace=1,
        contained=found,
    )
    assert exit_code(within) == 0, within.output_tail()
    over = RunningJob(
        rank(7, allocate.format(mib=256)),
        tmp_path,
        lifeline=lifeline[0],
        orphan_grace=1,
        contained=found,
    )
    assert exit_code(over) != 0, "256 MiB fitted in a 64 MiB limit"


def test_a_ranks_limits_scale_with_its_gpus(tmp_path, remove_after):
    found = limited(tmp_path, containment.Limits(memory_per_gpu=100 * MIB, cpus_per_gpu=0.5))
    remove_after(found)
    one, *one_limits = found.create("one-gpu", 1)
    three, *three_limits = found.create("three-gpus", 3)
    assert memory_limit(one, one_limits) == 100 * MIB
    assert memory_limit(three, three_limits) == 300 * MIB
    assert cpu_limit(one, one_limits) == 0.5
    assert cpu_limit(three, three_limits) == 1.5
    containment.release([one, *one_limits, three, *three_limits])
    assert not Path(one).exists()
    assert not Path(three).exists()


def memory_limit(tracking: str, others: list[str]) -> int:
    for folder in (Path(tracking), *map(Path, others)):
        for name in ("memory.max", "memory.limit_in_bytes"):
            if (folder / name).exists():
                return int((folder / name).read_text())
    raise AssertionError("no memory limit was set")


def cpu_limit(tracking: str, others: list[str]) -> float:
    for folder in (Path(tracking), *map(Path, others)):
        if (folder / "cpu.max").exists():
            quota, period = (folder / "cpu.max").read_text().split()
            return int(quota) / int(period)
        if (folder / "cpu.cfs_quota_us").exists():
            quota = int((folder / "cpu.cfs_quota_us").read_text())
            return quota / int((folder / "cpu.cfs_period_us").read_text())
    raise AssertionError("no CPU limit was set")


def test_a_busy_rank_is_held_to_its_cpu_quota(tmp_path, lifeline, remove_after):
    found = limited(tmp_path, containment.Limits(cpus_per_gpu=0.05))
    remove_after(found)
    job = RunningJob(
        rank(8, "timeout 1 sh -c 'while :; do :; done'; exit 0"),
        tmp_path,
        lifeline=lifeline[0],
        orphan_grace=1,
        contained=found,
    )
    stats = [Path(folder) / "cpu.stat" for folder in job.cgroups]
    throttled: list[int] = []

    def count_throttling() -> bool:
        throttled.extend(
            int(line.split()[1])
            for path in stats
            if path.exists()
            for line in path.read_text().splitlines()
            if line.startswith("nr_throttled")
        )
        return job.poll() is not None

    wait_for(count_throttling, "the busy job did not end", timeout=20)
    job.release()
    assert throttled, "no cpu.stat was read"
    assert max(throttled) > 0, "a busy loop was never throttled"


def test_an_agent_asked_for_a_limit_it_cannot_set_refuses_to_start(tmp_path, monkeypatch):
    monkeypatch.setattr(containment, "MOUNTS", tmp_path / "no-mounts")
    with pytest.raises(containment.ContainmentError, match="need cgroups"):
        containment.detect("test-limits", tmp_path, containment.Limits(memory_per_gpu=MIB))
    assert containment.detect("test-limits", tmp_path).kind == "none"


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("16G", 16 << 30),
        ("512M", 512 * MIB),
        ("1.5T", int(1.5 * (1 << 40))),
        ("4096", 4096),
        ("2GiB", 2 << 30),
    ],
)
def test_sizes_read_as_slurm_writes_them(text, size):
    assert containment.parse_size(text) == size


@pytest.mark.parametrize("text", ["", "lots", "-1G", "0", "16X"])
def test_a_size_that_is_not_one_says_how_to_write_it(text):
    with pytest.raises(ValueError, match="write e.g. 16G"):
        containment.parse_size(text)
