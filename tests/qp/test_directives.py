"""Reading #QP and #SBATCH lines, times, arrays and dependencies: what a Slurm user writes."""

from __future__ import annotations

import subprocess

import pytest

from qp import directives
from qp.directives import Invalid

SLURM_SCRIPT = """#!/bin/bash
#SBATCH --job-name=resnet-sweep
#SBATCH -N 2 --gres=gpu:a100:4   # two nodes of four
#SBATCH --time=1-02:30:00
#SBATCH --array=1-100%10
#SBATCH --dependency=afterok:prep-1:prep-2,afternotok:guard
#SBATCH --output=slurm-%A_%a.out
#SBATCH --partition=gpu --mem=64G

python train.py --seed $SLURM_ARRAY_TASK_ID
#SBATCH --job-name=ignored-after-the-first-command
"""


def test_a_slurm_script_reads_as_sbatch_would():
    asked = directives.read(SLURM_SCRIPT)
    assert (asked.name, asked.unit, asked.instances) == ("resnet-sweep", "a100", 8)
    assert asked.time_limit == (26 * 60 + 30) * 60
    assert (asked.array.size, asked.array.max_running, asked.array.ids[0]) == (100, 10, 1)
    assert asked.after == [("prep-1", "afterok"), ("prep-2", "afterok"), ("guard", "afternotok")]
    assert any("--output ignored: the portal keeps the whole output" in n for n in asked.notes)
    assert any("--mem ignored" in n for n in asked.notes)


def test_qp_lines_win_over_sbatch_lines_and_flags_over_both():
    script = "#!/bin/sh\n#SBATCH -J slurm-name -t 10\n#QP --share vision --name qp-name -n 3\nrun\n"
    asked = directives.read(script)
    assert (asked.name, asked.share, asked.instances, asked.time_limit) == (
        "qp-name",
        "vision",
        3,
        600,
    )
    flags = directives.Request(name="flag-name")
    assert flags.merged_over(asked).name == "flag-name"
    assert flags.merged_over(asked).share == "vision"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90", 5400),
        ("05:30", 330),
        ("2:00:00", 7200),
        ("1-0", 86400),
        ("2-12:30", 217800),
        ("90s", 90),
        ("30m", 1800),
        ("2h", 7200),
        ("1.5d", 129600),
    ],
)
def test_times_in_slurms_forms_and_short_ones(text, expected):
    assert directives.seconds(text) == expected


@pytest.mark.parametrize("text", ["", "soon", "1:2:3:4", "-5", "0", "0s", "0.1s"])
def test_bad_times_say_how_to_write_one(text):
    with pytest.raises(Invalid):
        directives.seconds(text)


@pytest.mark.parametrize(
    ("text", "size", "first", "limit"),
    [
        ("0-99%10", 100, 0, 10),
        ("1-100", 100, 1, None),
        ("0-30:10", 4, 0, None),
        ("1,3,5%2", 3, 1, 2),
        ("7", 1, 7, None),
        ("0-9999", 10_000, 0, None),
    ],
)
def test_arrays(text, size, first, limit):
    array = directives.array(text)
    assert (array.size, array.ids[0], array.max_running) == (size, first, limit)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("5-1", "backwards"),
        ("0-9%0", "%0"),
        ("1,1", "twice"),
        ("a-b", "not an array"),
        ("0-99999999999999", "at most 1,000,000 task ids"),
        ("0-2000000:2", "at most 1,000,000 task ids"),
    ],
)
def test_bad_arrays(text, words):
    with pytest.raises(Invalid, match=words):
        directives.array(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("abc", [("abc", "afterok")]),
        ("abc:any", [("abc", "afterany")]),
        ("afternotok:1:2", [("1", "afternotok"), ("2", "afternotok")]),
    ],
)
def test_dependencies_in_qps_and_slurms_words(text, expected):
    assert directives.after(text) == expected


@pytest.mark.parametrize("text", ["singleton", "aftercorr:3", "abc:maybe", "afterok:", ":ok"])
def test_dependencies_qp_cannot_keep_are_refused(text):
    with pytest.raises(Invalid):
        directives.after(text)


def test_a_bad_directive_names_its_line():
    with pytest.raises(Invalid, match="line 3"):
        directives.read("#!/bin/bash\n#SBATCH -J ok\n#SBATCH --time=whenever\n")
    with pytest.raises(Invalid, match="not a qp option"):
        directives.read("#QP --frobnicate 3\n")


def run(command: str, env: dict) -> str:
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_command_runs_the_script_by_its_interpreter_with_the_slurm_index(tmp_path):
    script = (
        "#!/bin/bash\n#SBATCH --array=1-100\n"
        'echo "task=$SLURM_ARRAY_TASK_ID ${BASH_VERSION:+bash} $GREETING"\n'
    )
    command = directives.command_for(
        script, [("GREETING", "it's me")], directives.array("1-100").ids
    )
    printed = run(
        command, {"QP_ARRAY_INDEX": "41", "TMPDIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    )
    assert printed == "task=42 bash it's me\n"
    odd = directives.command_for("echo $SLURM_ARRAY_TASK_ID\n", [], directives.array("3,8,20").ids)
    assert run(odd, {"QP_ARRAY_INDEX": "2", "PATH": "/usr/bin:/bin"}) == "20\n"


def test_a_script_holding_its_own_end_marker_cannot_break_out(tmp_path):
    script = "#!/bin/bash\necho before\nQP_SCRIPT_0000\necho after\n"
    command = directives.command_for(script, [], None)
    printed = run(command, {"TMPDIR": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert printed.splitlines()[0] == "before"
    assert printed.splitlines()[-1] == "after"
