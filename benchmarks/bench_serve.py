"""Load test of `rewardsmith serve`: the batched server against a one-request-one-forward server.

Both are `rewardsmith serve` processes on the same model (the embedded MiniLM with an untrained head, saved
with save_model) on loopback: "batched" with the server's batching flags as given, "one per forward" with
--max-batch-tokens 1 --max-wait-ms 0 (every request scored alone, one text per forward pass). Clients send
single-sample requests as OpenRLHF's remote reward client does (`{"query": [prompt + response], "prompts":
[prompt], "labels": [null]}` to /get_reward), with HH-RLHF harmless-base conversations as the texts. At each
concurrency level each server gets the same fixed number of requests (stopped at a time limit) twice, in the
order batched, one per forward, one per forward, batched, so a change in the machine's load during the level
falls on both alike. Recorded per level and server: throughput, p50 / p99 latency, failed requests, the
server's resident memory (RSS) and the mean texts per scoring round the server reports. Both servers score
the same queries once more at the end: batching must not change a score.

    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/bench_serve.py

Writes benchmarks/results/serve.json (with the command) and prints a markdown table. The load generator runs
on the same machine as the server (one asyncio process), so it takes CPU time the server could have used.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psutil

RESULTS = Path(__file__).resolve().parent / "results" / "serve.json"
SRC = Path(__file__).resolve().parents[1] / "src"


def save_minilm(folder: Path) -> Path:
    """The embedded MiniLM with a freshly initialised (seeded) reward head, as a model folder."""
    from rewardsmith.config import ModelConfig
    from rewardsmith.models.factory import build_model, save_model

    cfg = ModelConfig(backbone="minilm")
    model, tokenizer = build_model(cfg, seed=0)
    return save_model(model, tokenizer, folder, cfg)


def openrlhf_bodies(n: int, data_dir: str) -> list[dict[str, Any]]:
    """n single-sample /get_reward bodies from HH-RLHF harmless-base (chosen and rejected responses in turn)."""
    from rewardsmith.data.registry import load_dataset

    pairs = load_dataset("hh-rlhf/harmless-base", data_dir=data_dir, limit=(n + 1) // 2).pairs
    bodies = []
    for pair in pairs:
        prompt = pair.prompt_text()
        for response in (pair.chosen, pair.rejected):
            bodies.append({"query": [f"{prompt} {response}"], "prompts": [prompt], "labels": [None]})
    return bodies[:n]


class Server:
    """`rewardsmith serve --port 0` in its own process."""

    def __init__(self, model: Path, flags: list[str], log: Path, threads: int):
        env = {**os.environ, "PYTHONPATH": str(SRC), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": str(threads)}
        self.log = log
        with log.open("wb") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "rewardsmith.cli", "serve", "--model", str(model),
                                          "--port", "0", *flags], stdout=out, stderr=subprocess.STDOUT, env=env)
        self.url = self._wait_ready()
        self.process = psutil.Process(self.proc.pid)

    def _wait_ready(self, timeout: float = 300.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"the server exited: {self.log.read_text()[-2000:]}")
            lines = [x for x in self.log.read_text().splitlines() if x.startswith("serving ")]
            if lines:
                url = lines[0].split(" on ")[1].split()[0]
                try:
                    if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                        return url
                except httpx.TransportError:
                    pass
            time.sleep(0.2)
        raise SystemExit("the server did not start in time")

    def rss_mb(self) -> float:
        return self.process.memory_info().rss / 2**20

    def round_texts(self) -> tuple[float, float]:
        """(scoring rounds so far, texts scored so far) from /metrics."""
        values = {}
        for line in httpx.get(f"{self.url}/metrics", timeout=30).text.splitlines():
            name, _, value = line.partition(" ")
            if name in ("rewardsmith_batch_texts_count", "rewardsmith_batch_texts_sum"):
                values[name] = float(value)
        return values.get("rewardsmith_batch_texts_count", 0.0), values.get("rewardsmith_batch_texts_sum", 0.0)

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(120)


async def run_level(server: Server, bodies: list[dict[str, Any]], concurrency: int, n_requests: int,
                    time_limit: float) -> dict[str, Any]:
    """n_requests single-sample requests from `concurrency` clients (stopped after time_limit seconds): raw
    latencies (s), failures, seconds, RSS samples (MB) and the server's (rounds, texts) counters before / after."""
    latencies: list[float] = []
    failures: list[str] = []
    issued = [0]
    rss: list[float] = [server.rss_mb()]
    counters = [server.round_texts()]
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=300, limits=limits) as http:
        started = time.perf_counter()
        stop_at = started + time_limit

        async def client() -> None:
            while issued[0] < n_requests and time.perf_counter() < stop_at:
                body = bodies[issued[0] % len(bodies)]
                issued[0] += 1
                t0 = time.perf_counter()
                try:
                    answer = await http.post(f"{server.url}/get_reward", json=body)
                except httpx.HTTPError as exc:
                    failures.append(f"{type(exc).__name__}: {exc}")
                    continue
                if answer.status_code == 200 and len(answer.json()["rewards"]) == 1:
                    latencies.append(time.perf_counter() - t0)
                else:
                    failures.append(f"{answer.status_code} {answer.text[:200]}")

        async def sample_memory() -> None:
            while True:
                await asyncio.sleep(0.5)
                rss.append(server.rss_mb())

        sampler = asyncio.create_task(sample_memory())
        await asyncio.gather(*(client() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
        sampler.cancel()
    rss.append(server.rss_mb())
    counters.append(server.round_texts())
    return {"latencies": latencies, "failures": failures, "requests": issued[0], "seconds": elapsed, "rss": rss,
            "counters": counters}


def summarise(concurrency: int, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One server's figures at one level over its runs: throughput = answered / seconds over all of them."""
    lat = np.array([x for run in runs for x in run["latencies"]]) * 1000.0
    answered, seconds = lat.size, sum(run["seconds"] for run in runs)
    rounds = sum(run["counters"][1][0] - run["counters"][0][0] for run in runs)
    texts = sum(run["counters"][1][1] - run["counters"][0][1] for run in runs)
    failures = [f for run in runs for f in run["failures"]]
    return {"concurrency": concurrency, "requests": sum(run["requests"] for run in runs), "answered": answered,
            "failed": len(failures), "failures": failures[:5], "seconds": seconds,
            "throughput_rps": answered / seconds, "throughput_rps_per_run": [len(r["latencies"]) / r["seconds"]
                                                                           for r in runs],
            "p50_ms": float(np.percentile(lat, 50)) if lat.size else None,
            "p99_ms": float(np.percentile(lat, 99)) if lat.size else None,
            "mean_texts_per_round": texts / max(rounds, 1.0),
            "rss_mb_start": runs[0]["rss"][0], "rss_mb_max": max(max(r["rss"]) for r in runs),
            "rss_mb_end": runs[-1]["rss"][-1]}


def forward_rates(model_dir: Path, bodies: list[dict[str, Any]], precision: str) -> dict[str, float]:
    """Texts per second of the model's forward pass alone, in this process, on texts of one length (no
    padding), one at a time and 16 at a time: what batching can gain on this machine before any padding."""
    import torch

    from rewardsmith.data.collate import PairEncoder
    from rewardsmith.evaluate.scoring import score_encoded
    from rewardsmith.models.factory import load_model

    model, tokenizer, meta = load_model(model_dir)
    cfg = meta["model_config"]
    encoder = PairEncoder(tokenizer, cfg.max_length, cfg.min_prompt_tokens)
    text = encoder.encode(bodies[0]["prompts"][0], bodies[0]["query"][0][len(bodies[0]["prompts"][0]):])
    texts = [text] * 64
    rates = {"tokens_per_text": float(len(text.input_ids)), "torch_threads": float(torch.get_num_threads())}
    for batch_size in (1, 16):
        score_encoded(model, texts[:16], tokenizer.pad_token_id, batch_size, precision == "bf16")
        t0 = time.perf_counter()
        score_encoded(model, texts, tokenizer.pad_token_id, batch_size, precision == "bf16")
        rates[f"batch_{batch_size}_texts_per_s"] = len(texts) / (time.perf_counter() - t0)
    return rates


async def scores_of(url: str, bodies: list[dict[str, Any]]) -> list[float]:
    async with httpx.AsyncClient(timeout=300) as http:
        answers = await asyncio.gather(*(http.post(f"{url}/get_reward", json=b) for b in bodies))
    return [a.json()["rewards"][0] for a in answers]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32, 128])
    parser.add_argument("--requests", type=int, default=256, help="requests per concurrency level and run")
    parser.add_argument("--time-limit-s", type=float, default=60.0, help="stop a run after this many seconds")
    parser.add_argument("--texts", type=int, default=512, help="distinct queries, cycled")
    parser.add_argument("--max-batch-tokens", type=int, default=4096, help="the batched server's token budget")
    parser.add_argument("--max-wait-ms", type=float, default=2.0, help="the batched server's wait")
    parser.add_argument("--max-padding", type=float, default=None, help="the batched server's padding cap "
                        "(default: the server's)")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    parser.add_argument("--server-threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "2")),
                        help="torch threads of each server process (OMP_NUM_THREADS)")
    parser.add_argument("--data-dir", default=os.environ.get("REWARDSMITH_DATA_DIR",
                                                             str(Path(__file__).resolve().parents[2] / "shared/data")))
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    command = "OMP_NUM_THREADS={} .venv/bin/python benchmarks/bench_serve.py {}".format(
        os.environ.get("OMP_NUM_THREADS", "unset"), shlex.join(sys.argv[1:])).strip()

    bodies = openrlhf_bodies(args.texts, args.data_dir)
    batching = ["--max-batch-tokens", str(args.max_batch_tokens), "--max-wait-ms", str(args.max_wait_ms)]
    if args.max_padding is not None:
        batching += ["--max-padding", str(args.max_padding)]
    modes = {"batched": batching, "one_per_forward": ["--max-batch-tokens", "1", "--max-wait-ms", "0"]}
    results: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
    memory: dict[str, dict[str, float]] = {}
    agreement: dict[str, list[float]] = {}
    load_start = list(os.getloadavg())
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
        model = save_minilm(Path(tmp) / "minilm-rm")
        forward = forward_rates(model, bodies, args.precision)
        servers = {mode: Server(model, [*flags, "--precision", args.precision], Path(tmp) / f"{mode}.log",
                                args.server_threads) for mode, flags in modes.items()}
        warm = {}
        for mode, server in servers.items():
            asyncio.run(scores_of(server.url, bodies[:32]))  # warm-up
            warm[mode] = server.rss_mb()
        for c in args.concurrency:
            runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
            for mode in ("batched", "one_per_forward", "one_per_forward", "batched"):
                runs[mode].append(asyncio.run(run_level(servers[mode], bodies, c, args.requests, args.time_limit_s)))
            for mode in modes:
                level = summarise(c, runs[mode])
                results[mode].append(level)
                print(f"{mode} c={c}: {level['throughput_rps']:.1f} req/s, p50 {level['p50_ms']:.0f} ms, "
                      f"p99 {level['p99_ms']:.0f} ms, failed {level['failed']}, "
                      f"{level['mean_texts_per_round']:.1f} texts/round, rss {level['rss_mb_end']:.0f} MB",
                      file=sys.stderr, flush=True)
        for mode, server in servers.items():
            agreement[mode] = asyncio.run(scores_of(server.url, bodies[:64]))
            memory[mode] = {"rss_mb_after_warmup": warm[mode], "rss_mb_end": server.rss_mb(),
                            "rss_mb_max": max(level["rss_mb_max"] for level in results[mode])}
            memory[mode]["growth_mb"] = memory[mode]["rss_mb_end"] - warm[mode]
            memory[mode]["exit_code"] = float(server.stop())

    levels = []
    for batched, single in zip(results["batched"], results["one_per_forward"], strict=True):
        levels.append({"concurrency": batched["concurrency"], "batched": batched, "one_per_forward": single,
                       "throughput_ratio": batched["throughput_rps"] / single["throughput_rps"]})
    diff = float(np.max(np.abs(np.array(agreement["batched"]) - np.array(agreement["one_per_forward"]))))
    result = {
        "command": command,
        "setting": {"model": "minilm (embedded all-MiniLM-L6-v2), untrained reward head, max_length 256",
                    "texts": f"hh-rlhf/harmless-base, {len(bodies)} OpenRLHF-style single-sample /get_reward "
                             "bodies, cycled",
                    "batched_flags": modes["batched"], "one_per_forward_flags": modes["one_per_forward"],
                    "precision": args.precision, "server_threads": args.server_threads,
                    "requests_per_level_and_run": args.requests, "runs_per_level": "2 per server, in the order "
                    "batched, one per forward, one per forward, batched", "time_limit_s": args.time_limit_s},
        "levels": levels,
        "failed_requests": sum(level[m]["failed"] for level in levels for m in ("batched", "one_per_forward")),
        "max_abs_score_difference_batched_vs_alone": diff,
        "memory": memory,
        "forward_pass_alone": forward,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "processor": platform.processor(),
                    "load_average_at_start": load_start, "load_average_at_end": list(os.getloadavg()),
                    "note": "shared machine (other jobs ran during the benchmark); the load generator runs on it "
                            "too"},
    }
    result["table"] = markdown_table(result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(result["table"])


def markdown_table(result: dict[str, Any]) -> str:
    """The results as a markdown table (stored in the JSON as `table`; tools/build_docs.py puts it in
    docs/serve.md)."""
    lines = ["| clients | batched req/s | one-per-forward req/s | ratio | batched p50 / p99 ms | "
             "one-per-forward p50 / p99 ms | texts per round (batched) | failed |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for level in result["levels"]:
        b, s = level["batched"], level["one_per_forward"]
        lines.append(f"| {level['concurrency']} | {b['throughput_rps']:.1f} | {s['throughput_rps']:.1f} | "
                     f"{level['throughput_ratio']:.2f}x | {b['p50_ms']:.0f} / {b['p99_ms']:.0f} | "
                     f"{s['p50_ms']:.0f} / {s['p99_ms']:.0f} | {b['mean_texts_per_round']:.1f} | "
                     f"{b['failed'] + s['failed']} |")
    memory = result["memory"]
    lines.append("")
    lines.append("Server RSS after warm-up -> end (max): " + "; ".join(
        f"{mode} {m['rss_mb_after_warmup']:.0f} -> {m['rss_mb_end']:.0f} MB ({m['rss_mb_max']:.0f})"
        for mode, m in memory.items()) + f". Largest score difference between the two servers: "
        f"{result['max_abs_score_difference_batched_vs_alone']:.1e}.")
    forward = result["forward_pass_alone"]
    lines.append("")
    lines.append(f"The forward pass alone on this machine ({forward['tokens_per_text']:.0f}-token texts of one "
                 f"length, {forward['torch_threads']:.0f} torch thread(s)): "
                 f"{forward['batch_1_texts_per_s']:.1f} texts/s one at a time, "
                 f"{forward['batch_16_texts_per_s']:.1f} texts/s 16 at a time. Load average of the machine "
                 f"({result['machine']['cpus']} CPUs, shared): {result['machine']['load_average_at_start'][0]:.1f} "
                 f"at the start, {result['machine']['load_average_at_end'][0]:.1f} at the end.")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
