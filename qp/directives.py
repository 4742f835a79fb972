"""A batch script's directives: `#QP` lines in qp's own words, and the common `#SBATCH` ones,
so a Slurm script submits unchanged. Like sbatch, they are read from the top of the script,
up to its first line that is neither a comment nor blank.

Pure functions: they read text and return what to submit, or raise Invalid naming the line.
"""

from __future__ import annotations

import re
import secrets
import shlex
from dataclasses import dataclass, field

# qp lists an array's task ids in memory before it submits; this guards that list against a
# range typed by mistake (0-99999999999). It is qp's own limit, far above any array the
# portal takes: the portal's limits (array size, time limit) are its own to state, in its
# answer, which qp shows.
EXPANDS_AT_MOST = 1_000_000


class Invalid(ValueError):
    pass


@dataclass
class Request:
    """What a script (or the command line) asks for; None: not said."""

    name: str | None = None
    share: str | None = None
    queue: str | None = None
    unit: str | None = None
    instances: int | None = None
    priority: int | None = None
    time_limit: int | None = None  # seconds
    retries: int | None = None
    array: Array | None = None
    after: list[tuple[str, str]] = field(default_factory=list)  # (job, afterok|…)
    env: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was read but has no meaning here

    def merged_over(self, lower: Request) -> Request:
        """This request's answers, and `lower`'s where this one says nothing."""
        merged = Request()
        for name in (
            "name",
            "share",
            "queue",
            "unit",
            "instances",
            "priority",
            "time_limit",
            "retries",
            "array",
        ):
            mine = getattr(self, name)
            setattr(merged, name, mine if mine is not None else getattr(lower, name))
        merged.after = self.after or lower.after
        merged.env = lower.env + self.env
        merged.notes = lower.notes + self.notes
        return merged


@dataclass(frozen=True)
class Array:
    """Children 0 … size-1; `ids` the Slurm task ids they stand for (SLURM_ARRAY_TASK_ID)."""

    ids: tuple[int, ...]
    max_running: int | None = None

    @property
    def size(self) -> int:
        return len(self.ids)


# -- times -------------------------------------------------------------------------------

SLURM_TIME = re.compile(
    r"^(?:(?P<days>\d+)-(?P<dh>\d+)(?::(?P<dm>\d+)(?::(?P<ds>\d+))?)?"
    r"|(?P<h>\d+):(?P<m>\d+):(?P<s>\d+)|(?P<mm>\d+):(?P<ss>\d+)|(?P<minutes>\d+))$"
)
SHORT_TIME = re.compile(r"^(?P<n>\d+(?:\.\d+)?)(?P<unit>[smhd])$")


def seconds(text: str) -> int:
    """Slurm's forms (minutes; MM:SS; HH:MM:SS; D-HH[:MM[:SS]]) or 90s, 30m, 2h, 1.5d."""
    text = text.strip()
    if short := SHORT_TIME.match(text):
        factor = {"s": 1, "m": 60, "h": 3600, "d": 86400}[short["unit"]]
        total = round(float(short["n"]) * factor)
    elif (match := SLURM_TIME.match(text)) is None:
        raise Invalid(
            f"{text!r} is not a time: write minutes (90), HH:MM:SS, D-HH:MM, or 90s, 30m, 2h, 1d"
        )
    elif match["days"] is not None:
        total = (int(match["days"]) * 24 + int(match["dh"])) * 3600
        total += int(match["dm"] or 0) * 60 + int(match["ds"] or 0)
    elif match["h"] is not None:
        total = int(match["h"]) * 3600 + int(match["m"]) * 60 + int(match["s"])
    elif match["mm"] is not None:
        total = int(match["mm"]) * 60 + int(match["ss"])
    else:
        total = int(match["minutes"]) * 60
    if total < 1:
        raise Invalid(f"{text[:40]!r}: a time limit is at least a second")
    return total


# -- arrays and dependencies -------------------------------------------------------------

ARRAY = re.compile(r"^(?P<spec>[0-9,:\-]+)(?:%(?P<limit>\d+))?$")


def array(text: str) -> Array:
    """0-99%10, 1-100, 0-30:10, 1,3,5%2 (Slurm's forms)."""
    match = ARRAY.match(text.strip())
    if match is None:
        raise Invalid(f"{text!r} is not an array: write e.g. 0-99%10 (indices, % at most at once)")
    ids: list[int] = []
    for part in match["spec"].split(","):
        ids += _array_part(part, text)
        if len(ids) > EXPANDS_AT_MOST:
            raise Invalid(f"{text!r}: qp lists at most {EXPANDS_AT_MOST:,} task ids")
    if len(set(ids)) != len(ids):
        raise Invalid(f"{text!r}: an index appears twice")
    limit = int(match["limit"]) if match["limit"] else None
    if limit == 0:
        raise Invalid(f"{text!r}: %0 would run none at once; write %1 or more")
    return Array(tuple(ids), limit)


def _array_part(part: str, text: str) -> list[int]:
    bounds, _, step = part.partition(":")
    first, dash, last = bounds.partition("-")
    if not first.isdigit() or (dash and not last.isdigit()) or (step and not step.isdigit()):
        raise Invalid(f"{text!r}: {part!r} is not N, N-M or N-M:STEP")
    start, end = int(first), int(last) if dash else int(first)
    if end < start or (step and int(step) < 1):
        raise Invalid(f"{text!r}: {part!r} runs backwards")
    if (end - start) // int(step or 1) >= EXPANDS_AT_MOST:
        raise Invalid(f"{text!r}: qp lists at most {EXPANDS_AT_MOST:,} task ids")
    return list(range(start, end + 1, int(step or 1)))


KINDS = {"ok": "afterok", "any": "afterany", "notok": "afternotok"}


def after(text: str) -> list[tuple[str, str]]:
    """qp's ID[:ok|any|notok] or Slurm's afterok:ID[:ID…][,afterany:ID…]."""
    found = []
    for part in text.split(","):
        head, _, rest = part.strip().partition(":")
        if head in KINDS.values():
            if not rest:
                raise Invalid(f"{part!r}: name the jobs, e.g. {head}:JOB")
            found += [(job, head) for job in rest.split(":") if job]
        elif head.startswith("after") or head in ("singleton", "aftercorr", "afterburstbuffer"):
            raise Invalid(f"{part!r}: qp waits on afterok, afterany or afternotok only")
        else:
            kind = KINDS.get(rest or "ok")
            if kind is None or not head:
                raise Invalid(f"{part!r}: write JOB, JOB:ok, JOB:any or JOB:notok")
            found.append((head, kind))
    return found


# -- the script ---------------------------------------------------------------------------

IGNORED = {  # sbatch options with no meaning here, and why
    "output": "the portal keeps the whole output: qp logs JOB",
    "error": "the portal keeps the whole output: qp logs JOB",
    "partition": "the quota share decides (qp submit --share)",
    "account": "the quota share decides (qp submit --share)",
    "qos": "the quota share decides (qp submit --share)",
}
SHORT = {
    "J": "job-name",
    "N": "nodes",
    "n": "ntasks",
    "t": "time",
    "a": "array",
    "d": "dependency",
    "o": "output",
    "e": "error",
    "p": "partition",
    "A": "account",
    "G": "gpus",
    "c": "cpus-per-task",
}


def read(script: str) -> Request:
    """The directives of a script: #QP lines over #SBATCH ones."""
    qp, slurm = Request(), Request()
    gpus = {"total": None, "per_node": None, "per_task": None, "nodes": None, "tasks": None}
    for number, line in _directive_lines(script):
        kind, words = line
        try:
            if kind == "QP":
                _qp_options(qp, words)
            else:
                _sbatch_options(slurm, gpus, words)
        except Invalid as err:
            raise Invalid(f"line {number}: {err}") from None
    slurm.instances = _instances(gpus)
    return qp.merged_over(slurm)


def _directive_lines(script: str):
    for number, raw in enumerate(script.splitlines(), start=1):
        line = raw.strip()
        if number == 1 and line.startswith("#!"):
            continue
        if line and not line.startswith("#"):
            return
        for kind in ("QP", "SBATCH"):
            if line.startswith(f"#{kind}") and line[len(kind) + 1 : len(kind) + 2] in (" ", "\t"):
                try:
                    words = shlex.split(line[len(kind) + 1 :], comments=True)
                except ValueError as err:
                    raise Invalid(f"line {number}: {err}") from None
                yield number, (kind, words)


def _options(words: list[str]):
    """(name, value) pairs of --name=value, --name value, -X value, -Xvalue."""
    index = 0
    while index < len(words):
        word = words[index]
        if word.startswith("--"):
            name, eq, value = word[2:].partition("=")
            if not eq:
                index += 1
                value = words[index] if index < len(words) else ""
        elif word.startswith("-") and len(word) >= 2:
            name, value = word[1], word[2:]
            if not value:
                index += 1
                value = words[index] if index < len(words) else ""
        else:
            raise Invalid(f"{word!r} is not an option")
        yield name, value
        index += 1


QP_NAMES = {"J": "name", "n": "instances", "job-name": "name", "time": "time-limit"}


def _qp_options(request: Request, words: list[str]) -> None:
    for name, value in _options(words):
        name = QP_NAMES.get(name, name)
        if name in ("name", "share", "queue", "unit"):
            setattr(request, name, value)
        elif name in ("instances", "priority", "retries"):
            setattr(request, name, _whole(value, name))
        elif name == "time-limit":
            request.time_limit = seconds(value)
        elif name == "array":
            request.array = array(value)
        elif name == "after":
            request.after += after(value)
        elif name == "env":
            request.env.append(env_pair(value))
        else:
            raise Invalid(f"#QP --{name} is not a qp option (see qp submit --help)")


def _sbatch_options(request: Request, gpus: dict, words: list[str]) -> None:
    for name, value in _options(words):
        name = SHORT.get(name, name)
        if name == "job-name":
            request.name = value
        elif name == "time":
            request.time_limit = seconds(value)
        elif name == "array":
            request.array = array(value)
        elif name == "dependency":
            request.after += after(value)
        elif name == "gres":
            _gres(request, gpus, value)
        elif name in ("gpus", "gpus-per-node", "gpus-per-task"):
            unit, count = _typed_count(value, name)
            request.unit = unit or request.unit
            gpus[{"gpus": "total", "gpus-per-node": "per_node"}.get(name, "per_task")] = count
        elif name in ("nodes", "ntasks"):
            low = value.split("-")[0]
            gpus["nodes" if name == "nodes" else "tasks"] = _whole(low, name)
        elif name in IGNORED:
            request.notes.append(f"#SBATCH --{name} ignored: {IGNORED[name]}")
        else:
            request.notes.append(f"#SBATCH --{name} ignored: qp has no such setting")


def _gres(request: Request, gpus: dict, value: str) -> None:
    """gpu:4, gpu:a100:4, or a list of generic resources of which the GPUs count."""
    for item in value.split(","):
        parts = item.split("(")[0].split(":")
        if parts[0] != "gpu":
            request.notes.append(f"#SBATCH --gres={item} ignored: qp counts GPUs only")
            continue
        count = _whole(parts[-1], "gres") if len(parts) > 1 and parts[-1].isdigit() else 1
        if len(parts) == 3 or (len(parts) == 2 and not parts[1].isdigit()):
            request.unit = parts[1]
        gpus["per_node"] = count


def _typed_count(value: str, name: str) -> tuple[str | None, int]:
    unit, _, count = value.rpartition(":")
    return unit or None, _whole(count, name)


def _instances(gpus: dict) -> int | None:
    if gpus["total"]:
        return gpus["total"]
    if gpus["per_node"]:
        return gpus["per_node"] * (gpus["nodes"] or 1)
    if gpus["per_task"]:
        return gpus["per_task"] * (gpus["tasks"] or 1)
    return None


def _whole(value: str, name: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise Invalid(f"--{name} wants a whole number of at least 1, not {value!r}")
    return int(value)


ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def env_pair(text: str) -> tuple[str, str]:
    name, eq, value = text.partition("=")
    if not eq or not ENV_NAME.match(name):
        raise Invalid(f"{text!r}: write --env NAME=VALUE (NAME of letters, digits and _)")
    return name, value


# -- what runs ----------------------------------------------------------------------------


def command_for(script: str, env: list[tuple[str, str]], array_ids: tuple[int, ...] | None) -> str:
    """The job's command: the environment asked for, SLURM_ARRAY_TASK_ID for a Slurm array,
    then the script, run by its own #! interpreter when it names one other than sh."""
    lines = [f"export {name}={shlex.quote(value)}" for name, value in env]
    if array_ids:
        lines.append(_task_id(array_ids))
    first = script.splitlines()[0] if script else ""
    if not first.startswith("#!") or first.split()[0] in ("#!/bin/sh", "#!/usr/bin/sh"):
        return "\n".join([*lines, script])
    end = f"QP_SCRIPT_{secrets.token_hex(8)}"
    body = script if script.endswith("\n") else script + "\n"
    return "\n".join(
        [
            *lines,
            'qp_script="${TMPDIR:-/tmp}/qp-script.$$"',
            f"cat > \"$qp_script\" <<'{end}'",
            body + end,
            'chmod 700 "$qp_script"',
            'exec "$qp_script"',
        ]
    )


def _task_id(ids: tuple[int, ...]) -> str:
    """The Slurm task id of child QP_ARRAY_INDEX: arithmetic for an even range, a lookup
    otherwise."""
    start = ids[0]
    step = ids[1] - ids[0] if len(ids) > 1 else 1
    if all(ids[i] == start + i * step for i in range(len(ids))):
        return f"export SLURM_ARRAY_TASK_ID=$(({start} + QP_ARRAY_INDEX * {step}))"
    listed = " ".join(map(str, ids))
    return f"export SLURM_ARRAY_TASK_ID=$(echo {listed} | cut -d' ' -f$((QP_ARRAY_INDEX + 1)))"
