"""A long experiment's steps (experiments/bon.py, experiments/testbed.py): each one rewardsmith command, run in its
own process and logged with what it cost, so a report can say what each step took, even when sessions end mid-way
and the machine is shared.

The log (the experiment's commands.txt) holds, for every run of a command, its line as it starts and, when it ends,
`# <wall> s, cpu <cpu> s: <line>`: wall-clock seconds (which count any time the process sat stopped or shared the
machine) and the CPU seconds of the command and the processes it waited for (which do not); or, when it fails,
`# exit <code> after <wall> s, cpu <cpu> s: <line>`. A start with no end after it was killed with the experiment
(a session ended; its run folder resumes it, so the run that finished did only the rest). Each `run` of an
experiment first writes `## machine: {...}` (the CPU, its count, whether it has native bf16), so a log that several
sessions wrote says which machines ran it. Logs written before 2026-12-08 end a run with `# <wall> s: <line>`, or
with `# <wall> s` alone on the line after the start; both read.
"""

from __future__ import annotations

import json
import re
import resource
import shlex
import subprocess
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

_MACHINE = "## machine: "
_END = re.compile(r"^# (\d+(?:\.\d+)?) s(?:, cpu (\d+(?:\.\d+)?) s)?(?:: (.*))?$")
_FAILED = re.compile(r"^# exit -?\d+ after \d+ s, cpu \d+ s: (.*)$")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def note_machine(log: Path) -> None:
    """Appends this machine's line to the log (module docstring)."""
    from rewardsmith.io.environment import cpu_facts

    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a", encoding="utf-8") as handle:
        handle.write(_MACHINE + json.dumps(cpu_facts()) + "\n")


def machines(text: str) -> list[dict[str, object]]:
    """The distinct machines a log's `run`s noted, in the order first seen."""
    out: list[dict[str, object]] = []
    for line in text.splitlines():
        if line.startswith(_MACHINE) and (facts := json.loads(line[len(_MACHINE) :])) not in out:
            out.append(facts)
    return out


def run_step(exe: str, args: Sequence[str], log: Path, cwd: Path) -> None:
    """Runs `exe args` in cwd (a non-zero exit raises) and logs its start and its end with its times (module
    docstring). A finished run folder is reported by the command itself, not redone, so a rerun logs seconds."""
    line = shlex.join(["rewardsmith", *args])
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a", encoding="utf-8") as handle:
        handle.write(line + "\n")
    print(f"$ {line}", flush=True)
    start, cpu = time.perf_counter(), _children_cpu()
    done = subprocess.run([exe, *args], cwd=cwd, check=False)
    wall, cpu = time.perf_counter() - start, _children_cpu() - cpu
    failed = f"exit {done.returncode} after " if done.returncode else ""
    with log.open("a", encoding="utf-8") as handle:  # the line again: steps run side by side interleave lines
        handle.write(f"# {failed}{wall:.0f} s, cpu {cpu:.0f} s: {line}\n")
    done.check_returncode()


@dataclass
class _Times:
    command: str
    seconds: float | None = None
    cpu_seconds: float | None = None
    failed: int = 0
    killed: int = 0  # starts not yet matched by an end


def step_times(text: str, root: Path | None = None) -> list[dict[str, object]]:
    """Each command of a log's text, in the order first started: `seconds` and `cpu_seconds` (None where the log
    did not record CPU) of its longest finished run (a rerun that finds the run folder finished takes seconds),
    `failed`: its runs that exited with an error, and `killed`: its runs that started and never ended. Paths under
    `root` are written relative to it; a trailing `-q` is left out (testbed.py ran its commands quiet before
    2026-12-08; it now shows their progress)."""

    def name(line: str) -> str:
        line = line.removesuffix(" -q")  # the quiet flag changes nothing a command computes (logs before 2026-12-08)
        return line.replace(f"{root}/", "") if root is not None else line

    out: dict[str, _Times] = {}
    last = None
    for line in text.splitlines():
        end, failed = _END.match(line), _FAILED.match(line)
        if not line.strip() or (line.startswith("#") and end is None and failed is None):  # a note (the machine's)
            continue
        if end is None and failed is None:  # a start
            last = name(line)
            out.setdefault(last, _Times(last)).killed += 1
            continue
        ended = failed.group(1) if failed is not None else end.group(3) if end is not None else None
        record = out.get(name(ended) if ended is not None else last or "")
        if record is None:
            continue
        record.killed -= 1
        if failed is not None:
            record.failed += 1
        elif end is not None and (record.seconds is None or float(end.group(1)) > record.seconds):
            record.seconds = float(end.group(1))
            record.cpu_seconds = float(end.group(2)) if end.group(2) is not None else None
    return [{**asdict(r), "killed": max(r.killed, 0)} for r in out.values()]
