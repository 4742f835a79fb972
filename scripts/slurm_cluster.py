#!/usr/bin/env python3
"""A throwaway Slurm: munged, slurmctld and two slurmd (two nodes of typed fake GPUs each)
under one folder, on free ports, stopped by their PIDs. The SLURM backend's tests and its
benchmark start one; so can anyone who wants to try the backend without a cluster:

    sudo python3 scripts/slurm_cluster.py start /tmp/qp-slurm [--gpus 4]   # prints SLURM_CONF
    sudo python3 scripts/slurm_cluster.py stop /tmp/qp-slurm

Needs Debian's slurm-wlm and munge (`apt-get install slurm-wlm munge`), and root (slurmd
runs jobs as their owners).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

NODES = ("n1", "n2")
GPUS_PER_NODE = 4
GPU_TYPE = "a100"
KILL_WAIT = 2  # seconds between scancel's TERM and its KILL
STATE_FILE = "cluster.json"  # the running daemons' PIDs and ports, for `stop`


def installed() -> bool:
    return all(shutil.which(tool) for tool in ("slurmctld", "slurmd", "munged", "sbatch"))


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


class Cluster:
    def __init__(self, root: Path, gpus_per_node: int = GPUS_PER_NODE, cpus: int = 8):
        self.root = root
        self.conf = root / "slurm.conf"
        self.host = socket.gethostname().split(".")[0]
        self.ctld_port, *self.node_ports = free_ports(1 + len(NODES))
        self.gpus_per_node, self.cpus = gpus_per_node, cpus
        self.processes: dict[str, int] = {}

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, *command: str, check: bool = True) -> str:
        done = subprocess.run(
            list(command), env=self.env, capture_output=True, text=True, timeout=30
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)}: {done.stderr.strip()}")
        return done.stdout

    # -- setting up ---------------------------------------------------------------------------

    def write_config(self) -> None:
        root = self.root
        for folder in ("munge", "state", "log", "gpu", *(f"spool-{n}" for n in NODES)):
            (root / folder).mkdir(parents=True, exist_ok=True)
        (root / "munge").chmod(0o755)  # its socket serves every account (jobs run as any)
        key = root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        gpus, cpus = self.gpus_per_node, self.cpus
        for index in range(gpus * len(NODES)):
            (root / "gpu" / f"nvidia{index}").touch()
        nodes = "\n".join(
            f"NodeName={name} NodeHostname={self.host} NodeAddr=127.0.0.1 Port={port} "
            f"CPUs={cpus} Boards=1 SocketsPerBoard=1 CoresPerSocket={cpus} ThreadsPerCore=1 "
            f"RealMemory=4000 Gres=gpu:{GPU_TYPE}:{gpus} State=UNKNOWN"
            for name, port in zip(NODES, self.node_ports, strict=True)
        )
        self.conf.write_text(
            f"""ClusterName=qptest
SlurmctldHost={self.host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={root}/munge/munge.sock
CredType=cred/munge
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool-%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd-%n.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd-%n.log
SlurmctldPort={self.ctld_port}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmdParameters=config_overrides
KillWait={KILL_WAIT}
MinJobAge=600
SchedulerParameters=sched_interval=2,bf_interval=2
SlurmctldTimeout=30
{nodes}
PartitionName=gpu Nodes={",".join(NODES)} Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
"""
        )
        gres = "\n".join(
            f"NodeName={name} Name=gpu Type={GPU_TYPE} "
            f"File={root}/gpu/nvidia[{i * gpus}-{(i + 1) * gpus - 1}]"
            for i, name in enumerate(NODES)
        )
        (root / "gres.conf").write_text(f"AutoDetect=off\n{gres}\n")
        (root / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\n")

    def start(self) -> None:
        self.write_config()
        munge = self.root / "munge"
        subprocess.run(
            [
                "munged",
                "--force",
                f"--socket={munge}/munge.sock",
                f"--key-file={munge}/munge.key",
                f"--pid-file={munge}/munged.pid",
                f"--log-file={munge}/munged.log",
                f"--seed-file={munge}/seed",
            ],
            check=True,
        )
        self.processes["munged"] = int((munge / "munged.pid").read_text())
        self.start_controller()
        for name in NODES:
            subprocess.run(["slurmd", "-f", str(self.conf), "-N", name], env=self.env, check=True)
            self.processes[f"slurmd-{name}"] = self._pid(self.root / f"slurmd-{name}.pid")
        self.wait_for_nodes()
        (self.root / STATE_FILE).write_text(json.dumps(self.processes))

    def start_controller(self) -> None:
        subprocess.run(["slurmctld", "-f", str(self.conf)], env=self.env, check=True)
        self.processes["slurmctld"] = self._pid(self.root / "slurmctld.pid")
        deadline = time.monotonic() + 30
        while subprocess.run(["scontrol", "ping"], env=self.env, capture_output=True).returncode:
            if time.monotonic() > deadline:
                raise RuntimeError("slurmctld did not answer:\n" + self.log("slurmctld"))
            time.sleep(0.2)

    def wait_for_nodes(self) -> None:
        deadline = time.monotonic() + 30
        while True:
            states = self.run("sinfo", "-N", "-h", "-o", "%N %T").split()
            if states and all(s in ("idle", "mixed", "allocated") for s in states[1::2]):
                return
            if any(s.startswith(("drain", "down", "inval")) for s in states[1::2]):
                self.run(
                    "scontrol", "update", f"nodename={','.join(NODES)}", "state=resume", check=False
                )
            if time.monotonic() > deadline:
                raise RuntimeError(f"nodes not ready: {states}\n" + self.log("slurmctld"))
            time.sleep(0.3)

    def _pid(self, path: Path) -> int:
        deadline = time.monotonic() + 10
        while True:
            text = path.read_text().strip() if path.exists() else ""
            if text.isdigit():
                return int(text)
            if time.monotonic() > deadline:
                raise RuntimeError(f"{path.name} never appeared:\n" + self.log("slurmctld"))
            time.sleep(0.05)

    # -- during a test ------------------------------------------------------------------------

    def log(self, name: str) -> str:
        path = self.root / "log" / f"{name}.log"
        return path.read_text()[-3000:] if path.exists() else ""

    def kill_controller(self) -> None:
        """slurmctld gone, as a crash takes it (its jobs run on under their slurmd)."""
        os.kill(self.processes.pop("slurmctld"), signal.SIGKILL)
        (self.root / "slurmctld.pid").unlink(missing_ok=True)  # the next one writes its own
        time.sleep(0.2)

    def save_state(self, seconds: float = 30) -> None:
        """Make slurmctld write its job state now. It writes the file soon after a submit, but
        not soon after a start (not within 10 s here): killed in between, it comes back with
        the job PENDING, a run it lost. A reconfigure writes it; wait until the file changed."""
        path = self.root / "state" / "job_state"
        before = path.stat().st_mtime_ns if path.exists() else 0
        self.run("scontrol", "reconfigure")
        deadline = time.monotonic() + seconds
        while not path.exists() or path.stat().st_mtime_ns == before:
            if time.monotonic() > deadline:
                raise RuntimeError("slurmctld did not write its state:\n" + self.log("slurmctld"))
            time.sleep(0.1)

    def lose_job_state(self) -> None:
        """What a crash before slurmctld saved its state leaves: slurmctld gone, and no
        record of its jobs (their ids are handed out again)."""
        self.kill_controller()
        for name in ("job_state", "job_state.old"):
            (self.root / "state" / name).unlink(missing_ok=True)

    def drain(self, node: str, reason: str = "maintenance") -> None:
        self.run("scontrol", "update", f"nodename={node}", "state=drain", f"reason={reason}")

    def resume(self, node: str) -> None:
        """Take the node back into service (a node that was not out says so; that is fine)."""
        self.run("scontrol", "update", f"nodename={node}", "state=resume", check=False)

    def foreign_job(self, gpus: int, seconds: int = 600) -> str:
        """A job submitted straight to Slurm, not through the portal."""
        return self.run(
            "sbatch",
            "--parsable",
            "-J",
            "someone-else",
            f"--gres=gpu:{GPU_TYPE}:{gpus}",
            "-o",
            "/dev/null",
            f"--wrap=sleep {seconds}",
        ).strip()

    def jobs(self) -> dict[str, str]:
        """Slurm job id -> state, of the jobs it shows (pending and running)."""
        out = self.run("squeue", "-h", "-o", "%i %T")
        return dict(line.split() for line in out.splitlines() if line.strip())

    def cancel_all(self) -> None:
        self.run("scancel", "--full", "-u", "root", check=False)
        self.run("scancel", "-u", "root", check=False)
        deadline = time.monotonic() + 20
        while self.jobs() and time.monotonic() < deadline:
            time.sleep(0.2)

    # -- tearing down -------------------------------------------------------------------------

    def stop(self) -> None:
        if "slurmctld" in self.processes:
            self.cancel_all()
        for pid in reversed(list(self.processes.values())):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            deadline = time.monotonic() + 10
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        self.processes.clear()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purposes
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1][0] != "Z"
    except OSError:
        return False
    return True


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="A throwaway Slurm for trying quotaportal.")
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("folder", type=Path, help="where its configuration, state and logs go")
    parser.add_argument("--gpus", type=int, default=GPUS_PER_NODE, help="fake GPUs per node")
    parser.add_argument("--cpus", type=int, default=8, help="CPUs per node (one per task)")
    args = parser.parse_args(argv)
    if not installed():
        parser.error("slurm-wlm and munge are not installed: apt-get install slurm-wlm munge")
    if args.action == "start":
        args.folder.mkdir(parents=True, exist_ok=True)
        cluster = Cluster(args.folder.resolve(), args.gpus, args.cpus)
        cluster.start()
        print(f"export SLURM_CONF={cluster.conf}")
        print(f"partition gpu: {', '.join(NODES)}, {args.gpus} {GPU_TYPE} GPUs each")
        return 0
    running = json.loads((args.folder / STATE_FILE).read_text())
    cluster = Cluster(args.folder.resolve())
    cluster.processes = running
    cluster.stop()
    print("stopped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
