"""The README's "Use a reward model you already have" section as a user types it, on a reward model TRL's
RewardTrainer trained (its own file, so `make test`'s workers run it beside the quick-start test)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_readme import README, ROOT, _commands


def _own_model_block() -> list[str]:
    section = README.split("## Use a reward model you already have", 1)[1].split("\n## ", 1)[0]
    return _commands(re.search(r"```bash\n(.*?)```", section, re.S).group(1))


@pytest.mark.slow
def test_use_a_reward_model_you_already_have_runs_as_written(tmp_path: Path, trl_chat_model: Path) -> None:
    """The section's commands, verbatim, on a reward model TRL's RewardTrainer trained (`my-reward-model`); the
    server is started as written, asked for its health and a reward, then stopped."""
    import signal

    import httpx

    from rewardsmith.data.sources import find_data_dir

    (tmp_path / ".venv").symlink_to(Path(sys.executable).parents[1])
    (tmp_path / "configs").symlink_to(ROOT / "configs")
    (tmp_path / "my-reward-model").symlink_to(trl_chat_model)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    data = find_data_dir()
    commands = _own_model_block()
    assert any(" export " in c for c in commands) and any(" serve " in c for c in commands)
    for command in commands:
        if "--shift-config" in command and (data is None or not data.is_dir()):
            continue  # needs the real datasets (present in CI)
        if " serve " in command:
            server = subprocess.Popen(
                shlex.split(command), cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            try:
                deadline = time.monotonic() + 300
                while True:
                    assert server.poll() is None, server.stderr.read() if server.stderr else ""
                    try:
                        if httpx.get("http://127.0.0.1:8000/health", timeout=2).status_code == 200:
                            break
                    except httpx.HTTPError:
                        assert time.monotonic() < deadline, "the server did not come up"
                        time.sleep(0.5)
                body = {"items": [{"prompt": "hi", "response": "hello"}], "rater": "17"}
                answer = httpx.post("http://127.0.0.1:8000/v1/score", json=body, timeout=60)
                assert answer.status_code == 200, answer.text
            finally:
                server.send_signal(signal.SIGTERM)
                server.wait(timeout=120)
            continue
        done = subprocess.run(shlex.split(command), cwd=tmp_path, capture_output=True, text=True, env=env, timeout=1200)
        assert done.returncode == 0, (command, done.stderr[-2000:])
    assert (tmp_path / "runs" / "smollm2-chat-hf" / "config.json").exists()
