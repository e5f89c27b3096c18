"""The command lines the multi-process tests run: a target in one plain process, or under `accelerate launch` on
a free loopback port (gloo between CPU processes)."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

ACCELERATE = str(Path(sys.executable).with_name("accelerate"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def command(target: list[str], processes: int, config: Path | None = None) -> list[str]:
    """`python TARGET` for one process without a config; otherwise `accelerate launch` of TARGET with `processes`
    processes, from CONFIG when given, else as plain data-parallel processes. TARGET: [script, ...] or
    ["-m", module, ...]."""
    if processes == 1 and config is None:
        return [sys.executable, *target]
    how = (
        ["--config_file", str(config)]
        if config is not None
        else ["--multi_gpu", "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]
    )
    return [
        ACCELERATE,
        "launch",
        *how,
        "--num_processes",
        str(processes),
        "--main_process_port",
        str(free_port()),
        *target,
    ]
