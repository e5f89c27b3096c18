"""`rewardsmith rl`: GRPO of a policy (TRL's GRPOTrainer) on the rewards of a served proxy, the gold tracked on
held-out prompts against KL, the server's reward-hacking monitors read after every step; a run folder like every
other command's, resumed from TRL's last checkpoint after a kill.

    rewardsmith rl --policy smollm2 --prompts prompts.jsonl --proxy runs/helpful/model --gold ifeval --out runs/rl

Steps, each resumable in the run folder:
1. the prompts (rollouts.prompts), those whose chat prompt exceeds --max-prompt-tokens left out and counted; the
   first --heldout by a stable hash of their id are the tracker's, the rest train;
2. the start policy: `smollm2` is read from its GGUF file once and saved as a plain folder (policy-start/), so TRL
   can load the reference policy of a KL term and a resumed run can load it again;
3. the proxy served by `rewardsmith serve` in its own process on loopback (server.log), stopped when the command
   ends, or a running server's URL (--server); demonstrations registered as a standard;
4. GRPO (rl.recipe) rewarded by the client's GRPO reward function, with the gold tracker (rl.tracker: points.jsonl)
   and the monitors (steps.jsonl: TRL's step log, the seconds spent waiting for the reward, /v1/monitors) as
   callbacks; a checkpoint every --save-every steps in trainer/checkpoint-<step>, its files' sha256 recorded in
   checkpoints.json, so a resume reads only checkpoints this run wrote (TRL reads them with torch.load
   weights_only); a resumed run drops the records made after its checkpoint and makes them again;
5. metrics.json (rl.summary: the gold's change with its CI over prompts, KL reached, reward-wait share, monitors
   fired, the collapse facts) and the final policy (policy/).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rewardsmith.errors import ConfigError
from rewardsmith.io.digests import file_sha256
from rewardsmith.io.environment import environment_info
from rewardsmith.io.jsonsafe import jsonl_lines
from rewardsmith.io.runfolder import RunFolder
from rewardsmith.jobs.common import JobResult, finished_run, open_run, written_line
from rewardsmith.rl.config import RLConfig
from rewardsmith.rl.summary import run_summary
from rewardsmith.rl.tracker import POINTS_FILE, SAMPLES_FILE
from rewardsmith.rollouts.gold import resolve_gold
from rewardsmith.rollouts.prompt import BonPrompt
from rewardsmith.rollouts.prompts import load_prompts

COMMAND = "rl"
STEPS_FILE = "steps.jsonl"
CHECKPOINTS_FILE = "checkpoints.json"
START_DIR = "policy-start"
TRAINER_DIR = "trainer"
SERVER_LOG = "server.log"
SERVER_WAIT_S = 600  # a server that is not answering by then is reported with its log's last lines
KILL_AFTER_SAVE_ENV = "REWARDSMITH_FAULT_KILL_AFTER_SAVE"  # a real SIGKILL after the checkpoint of this step (tests)


def check_config(cfg: RLConfig) -> None:
    """One-line ConfigErrors for settings that cannot run, before anything is loaded or written."""
    if cfg.prompts is None:
        raise ConfigError("give --prompts (what the policy answers)")
    if cfg.proxy is None and cfg.server is None:
        raise ConfigError("give --proxy (a reward model this command serves) or --server (a running server's URL)")
    if (cfg.calibration is None) != (cfg.rater is None) and cfg.server is None:
        raise ConfigError("--calibration and --rater go together")
    if cfg.server is not None and cfg.calibration is not None:
        raise ConfigError("--calibration is the started server's: a running --server applies its own maps")
    for gold in cfg.golds:
        resolved = resolve_gold(gold)  # an unknown name is one line here
        if cfg.proxy is not None and resolved.name == "reward-model":
            from rewardsmith.models.identity import shared_weights

            if shared_weights(gold, cfg.proxy):
                raise ConfigError(f"--gold {gold} holds the proxy's weights: a proxy cannot be its own gold")
    if cfg.demos is not None:
        from rewardsmith.icrm.scoring import read_demos

        read_demos(cfg.demos)


def _start_policy(cfg: RLConfig, folder: RunFolder) -> Path:
    """The folder the policy starts from: a plain safetensors copy of `smollm2` in the run folder (written once), or
    the given causal LM folder."""
    from rewardsmith.rollouts.policy import SMOLLM2, load_policy

    if cfg.policy != SMOLLM2:
        return Path(cfg.policy)
    target = folder.claim(START_DIR)
    if not (target / "config.json").is_file():
        from rewardsmith.io.atomic import atomic_folder
        from rewardsmith.rl.recipe import trainable

        policy = load_policy(SMOLLM2)
        with atomic_folder(target) as tmp:
            trainable(policy.model).save_pretrained(str(tmp))
            policy.tokenizer.save_pretrained(str(tmp))
    return target


def _split(prompts: Sequence[BonPrompt], policy: Any, cfg: RLConfig) -> tuple[list[BonPrompt], list[BonPrompt], int]:
    """(held-out, training, left out as too long): prompts in their stable-hash order, the long ones left out."""
    kept = [p for p in prompts if cfg.max_prompt_tokens is None or len(policy.prompt_ids(p)) <= cfg.max_prompt_tokens]
    if len(kept) <= cfg.heldout:
        raise ConfigError(
            f"--prompts {cfg.prompts}: {len(kept)} prompts of at most {cfg.max_prompt_tokens} policy tokens, none left "
            f"to train on after --heldout {cfg.heldout}"
        )
    return kept[: cfg.heldout], kept[cfg.heldout :], len(prompts) - len(kept)


def _die_with_parent() -> None:
    """In the server's process before it starts: ask Linux to stop it (SIGTERM) when this command's process dies, so
    a killed run leaves no server behind (elsewhere it is stopped on a normal exit only)."""
    import contextlib
    import ctypes
    import signal

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG


class Server:
    """`rewardsmith serve` in its own process on loopback, its output in the run folder; stopped on exit."""

    def __init__(self, cfg: RLConfig, folder: RunFolder):
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = cfg.server
        if cfg.server is not None:
            return
        assert cfg.proxy is not None
        args = [sys.executable, "-m", "rewardsmith.cli", "serve", "--model", cfg.proxy, "--port", "0"]
        if cfg.calibration is not None:
            args += ["--calibration", cfg.calibration]
        self.log = folder.claim(SERVER_LOG)
        handle = folder.open_append(SERVER_LOG)
        # A resumed run appends to the killed run's log: only what this server writes names its address.
        self.start = handle.tell()
        self.proc = subprocess.Popen(args, stdout=handle, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        handle.close()
        self.url = self._wait()

    def _wait(self) -> str:
        import httpx

        assert self.proc is not None
        deadline = time.monotonic() + SERVER_WAIT_S
        while True:
            with self.log.open("rb") as f:
                f.seek(self.start)
                text = f.read().decode("utf-8", errors="replace")
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = " | ".join(x for x in text.splitlines()[-3:] if x.strip())
                raise ConfigError(f"the reward server did not start (its log, {self.log}: {tail or 'empty'})")
            found = re.search(r"serving .* on (http://\S+)", text)
            if found:
                try:
                    if httpx.get(f"{found.group(1)}/health", timeout=5).status_code == 200:
                        return found.group(1)
                except httpx.TransportError:
                    pass
            time.sleep(0.5)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def _checkpoint(folder: RunFolder) -> Path | None:
    """The last checkpoint of trainer/ whose files are the ones this run recorded (checkpoints.json), or None."""
    saved = folder.read_text(CHECKPOINTS_FILE)
    records: dict[str, dict[str, str]] = json.loads(saved) if saved else {}
    for name in sorted(records, key=lambda n: int(n.rsplit("-", 1)[1]), reverse=True):
        path = folder.path / TRAINER_DIR / name
        files = records[name]
        if path.is_dir() and all(
            (path / f).is_file() and not (path / f).is_symlink() and file_sha256(path / f) == digest
            for f, digest in files.items()
        ):
            return path
    return None


def _truncate(folder: RunFolder, name: str, keep: Any) -> None:
    """Rewrites a JSONL record file with the records `keep(record)` accepts (the ones made before a checkpoint)."""
    text = folder.read_text(name)
    if text is None:
        return
    lines = []
    for line in jsonl_lines(text):
        try:
            record = json.loads(line)
        except ValueError:
            break  # a line a kill cut
        if keep(record):
            lines.append(line + "\n")
    folder.write_text(name, "".join(lines))


def _read_jsonl(folder: RunFolder, name: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in jsonl_lines(folder.read_text(name) or "") if x.strip()]


def _callbacks(folder: RunFolder, url: str, reward: Any) -> list[Any]:
    """The monitors' log (steps.jsonl) and the checkpoint record (checkpoints.json), as TrainerCallbacks."""
    import os
    import signal

    import httpx
    from transformers import TrainerCallback

    class Monitors(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
            if logs is None or "loss" not in logs:
                return
            snapshot = httpx.get(f"{url}/v1/monitors", timeout=30).json() if url else {}
            record = {
                "step": state.global_step,
                "logs": logs,
                "reward_seconds": reward.seconds[-1] if reward.seconds else None,
                "monitors": snapshot,
            }
            with folder.open_append(STEPS_FILE) as handle:
                handle.write(json.dumps(record) + "\n")

    class Checkpoints(TrainerCallback):
        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            name = f"checkpoint-{state.global_step}"
            path = folder.path / TRAINER_DIR / name
            records = json.loads(folder.read_text(CHECKPOINTS_FILE) or "{}")
            records[name] = {
                p.relative_to(path).as_posix(): file_sha256(p) for p in sorted(path.rglob("*")) if p.is_file()
            }
            folder.write_json(CHECKPOINTS_FILE, records)
            at = os.environ.get(KILL_AFTER_SAVE_ENV)
            if at is not None and int(at) == state.global_step:
                os.kill(os.getpid(), signal.SIGKILL)

    return [Monitors(), Checkpoints()]


class TimedReward:
    """The GRPO reward function, negated for a harm scale, timing each call (the trainer waits for it)."""

    def __init__(self, inner: Any, negate: bool):
        self.inner = inner
        self.negate = negate
        self.__name__ = inner.__name__
        self.seconds: list[float] = []

    def __call__(self, *args: Any, **kwargs: Any) -> list[float | None]:
        start = time.perf_counter()
        try:
            out = self.inner(*args, **kwargs)
        finally:
            self.seconds.append(time.perf_counter() - start)
        return [None if r is None else (-r if self.negate else r) for r in out]


def run_rl(cfg: RLConfig, out: str | Path, progress: bool = True, overwrite: bool = False) -> JobResult:
    """Runs (or resumes) GRPO as `cfg` says into the run folder `out` (see the module docstring)."""
    check_config(cfg)
    assert cfg.prompts is not None
    prompts = load_prompts(cfg.prompts, cfg.data_dir, cfg.prompts_limit, cfg.grpo.seed)
    title = f"rewardsmith rl -> {out}"
    started = time.perf_counter()
    with open_run(out, COMMAND, cfg, overwrite) as folder:
        reused = finished_run(folder, title, lambda m: _rows(m))
        if reused is not None:
            return reused
        from rewardsmith.client import GRPOReward, RewardClient
        from rewardsmith.inference import ModelScores
        from rewardsmith.rl.recipe import grpo_trainer, trainable
        from rewardsmith.rl.tracker import GoldTracker, served_proxy
        from rewardsmith.rollouts.policy import load_policy

        start = _start_policy(cfg, folder)
        policy = load_policy(str(start))
        heldout, train, too_long = _split(prompts, policy, cfg)
        for name in (STEPS_FILE, POINTS_FILE, SAMPLES_FILE, CHECKPOINTS_FILE, TRAINER_DIR, "policy"):
            folder.claim(name)
        checkpoint = _checkpoint(folder)
        resume_step = int(checkpoint.name.rsplit("-", 1)[1]) if checkpoint is not None else 0
        # Records made after the checkpoint (or all of them, without one) go: the resumed run makes them again.
        _truncate(folder, STEPS_FILE, lambda r: r.get("step", 0) <= resume_step and resume_step > 0)
        _truncate(folder, POINTS_FILE, lambda r: r.get("step", 0) < resume_step)
        _truncate(folder, SAMPLES_FILE, lambda r: r.get("step", 0) < resume_step)
        server = Server(cfg, folder)
        try:
            assert server.url is not None
            client = RewardClient(server.url)
            standard = None
            if cfg.demos is not None:
                demos = [json.loads(x) for x in jsonl_lines(Path(cfg.demos).read_text(encoding="utf-8")) if x.strip()]
                standard = client.register_standard(demos)
            served = served_proxy(client, cfg.rater, standard)
            proxy = (lambda items: -served(items)) if cfg.negate else served
            reference = None if cfg.grpo.lora_r else load_policy(str(start)).model.eval()
            tracker = GoldTracker(
                folder.path,
                heldout,
                policy,
                cfg.golds,
                ModelScores(),
                proxy,
                cfg.tracker,
                reference=reference,
                open_append=folder.open_append,
            )
            reward = TimedReward(GRPOReward(server.url, rater=cfg.rater, standard=standard), cfg.negate)
            trainer = grpo_trainer(
                trainable(policy.model),
                policy.tokenizer,
                train,
                reward,
                folder.path / TRAINER_DIR,
                cfg.grpo,
                [tracker.callback(), *_callbacks(folder, server.url, reward)],
                save_every=cfg.save_every,
            )
            policy.model.train()
            trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint is not None else None)
            client.close()
        finally:
            server.stop()
        from rewardsmith.io.atomic import atomic_folder

        with atomic_folder(folder.path / "policy") as tmp:
            trainable(policy.model).save_pretrained(str(tmp))
            policy.tokenizer.save_pretrained(str(tmp))
        points, steps = _read_jsonl(folder, POINTS_FILE), _read_jsonl(folder, STEPS_FILE)
        metrics = {
            "command": COMMAND,
            "proxy": cfg.proxy or cfg.server,
            "golds": list(cfg.golds),
            "heldout_prompts": len(heldout),
            "train_prompts": len(train),
            "prompts_over_the_token_limit": too_long,
            "resumed_at_step": resume_step,
            "seconds": round(time.perf_counter() - started, 1),
            **run_summary(points, steps, cfg.golds, cfg.tracker.n_boot),
            "track": [
                {"step": p["step"], "kl": p["kl"], "proxy": p["proxy"], "golds": p["golds"], "length": p["length"]}
                for p in points
            ],
            "environment": environment_info(cfg.grpo.seed),
        }
        folder.write_json("metrics.json", metrics)
        folder.mark_complete()
    summary = [
        f"read {cfg.prompts}: {len(heldout)} held-out prompts, {len(train)} to train on"
        + (f" ({too_long} over --max-prompt-tokens {cfg.max_prompt_tokens} left out)" if too_long else ""),
        f"proxy {cfg.proxy or cfg.server}"
        + (f", rater {cfg.rater}" if cfg.rater else "")
        + (", negated" if cfg.negate else "")
        + (f"; resumed at step {resume_step}" if resume_step else ""),
        "monitors fired: " + (", ".join(metrics["monitors_fired"]) or "none"),
        written_line(folder.path, ["metrics.json", POINTS_FILE, STEPS_FILE, "policy", TRAINER_DIR]),
    ]
    return JobResult(folder.path, title, metrics, _rows(metrics), summary)


def _rows(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """The console table: one row per tracker point (step, KL, proxy, each gold)."""

    def shown(v: dict[str, Any]) -> str:
        e = v.get("estimate")
        return "n/a" if e is None else f"{e:.3f}"

    return [
        {
            "step": p["step"],
            "KL": shown(p["kl"]),
            "proxy": shown(p["proxy"]),
            **{g: shown(v) for g, v in p["golds"].items()},
        }
        for p in metrics.get("track", [])
    ]
