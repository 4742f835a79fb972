"""What the portal reads from Slurm's commands and writes for sbatch, without a Slurm: host
lists, GRES strings, scontrol's job lines (values with spaces, per-node GPUs), sinfo's
nodes, the capacity they give, and a job's options and script (a hostile name or command
stays one argument)."""

from __future__ import annotations

import shlex
import subprocess

import pytest

from quotaportal.slurm import cli
from quotaportal.slurm.capacity import UnitMap, capacity_of, features_match
from quotaportal.slurm.hostlists import expand
from quotaportal.slurm.requests import account_for, attempt_of, batch_script, sbatch_options

JOB_LINE = (
    "JobId=42 JobName=qp-train UserId=alice(1001) GroupId=alice(1001) JobState=RUNNING "
    "Reason=None ExitCode=0:0 StartTime=2026-12-04T16:15:43 EndTime=Unknown Partition=gpu "
    "NodeList=n[1-2] Comment=qp:3:77 TRES=cpu=3,node=2 JOB_GRES=gpu:a100:6   "
    "Nodes=n1 CPU_IDs=0 Mem=0 GRES=gpu:a100:2(IDX:0,3)   Nodes=n2 CPU_IDs=0-1 Mem=0 "
    "GRES=gpu:a100:4(IDX:0-3) WorkDir=/scratch/my jobs StdOut=/scratch/quotaportal-42.out"
)


def test_host_lists_expand_as_slurm_writes_them():
    assert expand("n[1-3],gpu05") == ["n1", "n2", "n3", "gpu05"]
    assert expand("gpu[01-02,10]") == ["gpu01", "gpu02", "gpu10"]
    assert expand("rack[1-2]-n[1-2]") == ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]
    assert expand("(null)") == []
    with pytest.raises(ValueError, match="not a Slurm host list"):
        expand("n[a-b]")


def test_gres_strings_give_gpus_by_type():
    assert cli.parse_gres("gpu:a100:4(S:0-1)") == {"a100": 4}
    assert cli.parse_gres("gpu:a100:2,gpu:v100:2,gpu:1") == {"a100": 2, "v100": 2, "": 1}
    assert cli.parse_gres("gpu:a100:2(IDX:0,3)") == {"a100": 2}
    assert cli.parse_gres("(null)") == {}
    assert cli.parse_gres("mps:100") == {}


def test_a_job_line_is_read_with_its_gpus_on_each_node():
    (job,) = cli.parse_jobs(JOB_LINE + "\n").values()
    assert (job.job_id, job.state, job.user, job.comment) == ("42", "RUNNING", "alice", "qp:3:77")
    assert job.gpus_on == {"n1": {"a100": 2}, "n2": {"a100": 4}}
    assert job.stdout == "/scratch/quotaportal-42.out"
    assert (job.exit_code, job.end) == (0, None)
    assert job.start is not None
    assert not job.ended


def test_an_ended_job_carries_its_exit_code_and_signal():
    line = "JobId=7 JobName=x UserId=root(0) JobState=FAILED Reason=NonZeroExitCode ExitCode=3:0"
    assert cli.parse_jobs(line)["7"].exit_code == 3
    killed = cli.parse_jobs(line.replace("ExitCode=3:0", "ExitCode=0:9"))["7"]
    assert (killed.exit_code, killed.signal, killed.ended) == (0, 9, True)
    assert cli.parse_jobs("No jobs in the system\n") == {}


def test_nodes_merge_their_partitions_and_say_whether_they_take_jobs():
    nodes = {
        n.name: n
        for n in cli.parse_nodes(
            "n1|mixed|gpu:a100:4|ib,fast|gpu*|none\n"
            "n1|mixed|gpu:a100:4|ib,fast|long|none\n"
            "n2|drained|gpu:a100:4|(null)|gpu*|fan broken\n"
            "n3|idle*|gpu:a100:4|(null)|gpu*|none\n"
        )
    }
    assert nodes["n1"].partitions == {"gpu", "long"}
    assert nodes["n1"].features == {"ib", "fast"}
    assert (nodes["n1"].usable, nodes["n2"].usable, nodes["n3"].usable) == (True, False, False)
    assert nodes["n2"].reason == "fan broken"


def test_capacity_counts_whole_instances_on_usable_nodes_less_foreign_gpus():
    nodes = cli.parse_nodes(
        "n1|mixed|gpu:a100:4|ib|gpu|none\nn2|idle|gpu:a100:4|(null)|gpu|none\n"
        "n3|drained|gpu:a100:4|ib|gpu|down\nn4|idle|gpu:v100:8|ib|gpu|none\n"
    )
    foreign = cli.Job("9", "theirs", "RUNNING", gpus_on={"n1": {"a100": 1}})
    ours = cli.Job("10", "qp-x", "RUNNING", comment="qp:1:5", gpus_on={"n2": {"a100": 2}})
    poll = cli.Poll({"9": foreign, "10": ours}, nodes)
    units = {
        "a100x1": UnitMap("gpu", "a100", "", 1),
        "a100x2": UnitMap("gpu", "a100", "", 2),
        "ib-any": UnitMap("gpu", "", "ib", 4),
    }
    # a100x1: n1 4-1, n2 4 (the portal's own jobs do not count against it), n3 drained: 7.
    # a100x2: n1 floor(3/2)=1, n2 2: 3 (an instance never spans nodes).
    # ib-any: n1 (3 GPUs: none of 4), n4 (8: 2).
    assert capacity_of(poll, units, ours={"10"}) == {"a100x1": 7, "a100x2": 3, "ib-any": 2}


@pytest.mark.parametrize(
    ("constraint", "features", "matches"),
    [
        ("", set(), True),
        ("ib", {"ib"}, True),
        ("ib&fast", {"ib"}, False),
        ("ib|fast", {"fast"}, True),
        ("[rack1|rack2]", set(), True),  # left to Slurm
    ],
)
def test_constraints_as_the_portal_counts_them(constraint, features, matches):
    assert features_match(constraint, frozenset(features)) is matches


def test_the_portals_mark_ties_a_slurm_job_to_one_attempt_of_one_environment():
    assert attempt_of("qp:3:77", 3) == 77
    assert attempt_of("qp:4:77", 3) is None
    assert attempt_of("something else", 3) is None
    assert account_for("", {}, "alice") == ""
    assert account_for("{username}", {"alice": "asmith"}, "alice") == "asmith"
    assert account_for("{username}", {}, "bob") == "bob"


def test_a_hostile_name_and_command_stay_single_arguments(tmp_path):
    options = sbatch_options(
        env_id=1,
        attempt_id=5,
        name="x; rm -rf / $(id)",
        quantity=2,
        gpus_per_unit=4,
        partition="gpu",
        gpu_type="a100",
        constraint="",
        account="alice",
        work_dir="/scratch",
        time_limit_seconds=90,
    )
    assert "--job-name=qp-x__rm_-rf_____id_" in options
    assert {"--ntasks=2", "--gpus-per-task=a100:4", "--uid=alice", "--time=2"} <= set(options)
    command = "echo 'it''s' \"$QP_RANK\" `hostname`; printf '%s\\n' \"$(echo ok)\""
    script = batch_script(job_id="j-1", job_name="x", attempt=1, command=command)
    argv = shlex.split(script[script.index("exec srun") :])
    assert argv[:5] == ["exec", "srun", "--kill-on-bad-exit=1", "--export=ALL", "/bin/bash"]
    assert argv[-1] == f'export QP_RANK="$SLURM_PROCID"\n{command}'
    bash = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
    assert bash.returncode == 0, bash.stderr
    assert "QP_ARRAY_INDEX" not in script


def test_an_array_childs_script_exports_its_index():
    script = batch_script(job_id="j-1", job_name="s[7]", attempt=1, command="true", array_index=7)
    assert "export QP_ARRAY_INDEX=7\n" in script
    assert "export AWS_BATCH_JOB_ARRAY_INDEX=7\n" in script


def test_over_ssh_each_command_is_one_quoted_remote_command():
    access = cli.Access(
        ssh_host="login1", ssh_user="svc", ssh_key="/etc/qp/key", slurm_conf="/etc/slurm x.conf"
    )
    argv = access.argv(["sbatch", "--job-name=qp-a b", "--comment=qp:1:2"])
    assert argv[:3] == ["ssh", "-o", "BatchMode=yes"]
    assert argv[-3:-1] == ["svc@login1", "--"]
    assert argv[argv.index("-i") + 1] == "/etc/qp/key"
    remote = shlex.split(argv[-1])
    assert remote == [
        "SLURM_CONF=/etc/slurm x.conf",
        "sbatch",
        "--job-name=qp-a b",
        "--comment=qp:1:2",
    ]
    assert cli.Access().argv(["sinfo"]) == ["sinfo"]  # on this machine: as is


def test_an_unreachable_slurm_is_unavailable_and_an_answer_is_refused(tmp_path):
    broken = cli.Access(ssh_host="127.0.0.1", ssh_key=str(tmp_path / "no-key"), timeout=2)
    with pytest.raises(cli.Unavailable):
        cli.run(broken, ["true"])
    with pytest.raises(cli.Unavailable, match="not installed"):
        cli.run(cli.Access(), ["no-such-slurm-command"])
    with pytest.raises(cli.Refused, match="denied"):
        cli.run(cli.Access(), ["sh", "-c", "echo 'sbatch: error: access denied' >&2; exit 1"])
