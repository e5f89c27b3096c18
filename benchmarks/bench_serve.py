"""Load test of `rewardsmith serve` on loopback, each measured configuration in a fresh process.

The model is the embedded MiniLM with a seeded, untrained reward head (HH framing, 256 tokens), saved once; the
texts are HH-RLHF harmless-base conversations sent as OpenRLHF's remote reward client sends them: one sample per
request (`{"query": [prompt + response], "prompts": [prompt], "labels": [null]}` to /get_reward), a new
connection per request as `requests.post` makes one. Per torch thread count (the machine's, and 1) and round,
these run in the rotating order of _common.rotated, each in its own worker process:
- bare: the bare batched forward. The same texts, tokenised beforehand by the server's own code
  (ScoringEngine.prepare), scored through the server's scorer (the same forward-pass caps) in consecutive groups
  of C texts, C the number of clients of a level: what a server whose every round holds one request from each
  client runs, without HTTP, queueing or tokenising;
- batched C: `rewardsmith serve` with its defaults, C closed-loop clients;
- one_per_forward C: `rewardsmith serve --max-batch-tokens 1 --max-wait-ms 0` (every text scored alone, one per
  forward pass, as a server without batching does), C clients;
- mixed alone / mixed large (at the first thread count only: the longest runs): the batched server with 8
  single-sample clients, and the same with one 1,024-text /get_reward request sent among them: the small
  requests' p99 latency while the large one is in flight, against their p99 without it.
The servers run with OMP_WAIT_POLICY=PASSIVE (`rewardsmith serve` sets it), and so does the bare forward (set
here unless the environment gives another value): with OpenMP's default spinning, the bare 2-thread forward
fell from about 50 to 1-5 texts/s whenever other processes shared the machine.
A load runs for --warmup-s, then is measured for --measure-s: throughput is the texts answered in that window
per second, latencies those of the requests answered in it. Ratios (server / bare, batched / one per forward,
p99 with / without the large request) are taken within a round and reported as the median over rounds with their
range. Each worker also scores the first 64 texts, so the scores of every configuration are compared.

    flock /tmp/bench.lock .venv/bin/python benchmarks/bench_serve.py --threads 2 1 --rounds 3 --warmup-s 2 \
        --measure-s 6 --texts 256 --quiet-wait-s 0 --run-quiet-wait-s 0

Before each measured run the 1-minute load average is checked; a run starts once it is below --quiet-load
(polling every 30 s, at most --quiet-wait-s before the first run and --run-quiet-wait-s before each other;
both 0 by default: on a shared machine the wait can be unbounded, and the ratios are taken within a round
anyway), and the load is recorded with the run. The defaults are those of the committed run (about 25 minutes
on 2 cores). Writes
benchmarks/results/serve.json (with the command) and prints the table. The load generator runs on the same
machine as the server (in the worker process), so it takes CPU time the server could have used.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import markdown_table, rotated, run_worker, spread, write_results

from rewardsmith.evaluate.formatting import with_range

RESULTS = Path(__file__).resolve().parent / "results" / "serve.json"
ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
ONE_PER_FORWARD = ["--max-batch-tokens", "1", "--max-wait-ms", "0"]
AGREEMENT_TEXTS = 64


# ----------------------------------------------------------------------------------------------------
# Preparation (the driving process)


def save_minilm(folder: Path) -> Path:
    """The embedded MiniLM with a freshly initialised (seeded) reward head, as a model folder."""
    from rewardsmith.config import ModelConfig
    from rewardsmith.models.factory import build_model, save_model

    cfg = ModelConfig(backbone="minilm", max_length=256, template="hh")
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


def wait_for_quiet(limit: float, max_wait_s: float) -> list[float]:
    """Polls the load average every 30 s until its 1-minute value is below `limit` or max_wait_s has passed;
    returns the load average the run starts at."""
    deadline = time.monotonic() + max_wait_s
    while os.getloadavg()[0] >= limit and time.monotonic() < deadline:
        print(f"load {os.getloadavg()[0]:.2f} >= {limit}: waiting", file=sys.stderr, flush=True)
        time.sleep(30)
    return [round(x, 2) for x in os.getloadavg()]


# ----------------------------------------------------------------------------------------------------
# Workers (each in a fresh process)


class Server:
    """`rewardsmith serve --port 0` in its own process, its output in a log file."""

    def __init__(self, model: Path, flags: list[str], log: Path):
        env = {**os.environ, "PYTHONPATH": str(SRC), "HF_HUB_OFFLINE": "1"}
        self.log = log
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "rewardsmith.cli", "serve", "--model", str(model), "--port", "0", *flags],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
            )
        self.url = self._wait_ready()

    def _wait_ready(self, timeout: float = 600.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"the server exited: {self.log.read_text()[-2000:]}")
            lines = [x for x in self.log.read_text().splitlines() if x.startswith("serving ")]
            if lines:
                url = lines[0].split(" on ")[1].split()[0]
                try:
                    if httpx.get(f"{url}/health", timeout=30).status_code == 200:
                        return url
                except httpx.TransportError:
                    pass
            time.sleep(0.2)
        raise SystemExit("the server did not start in time")

    def rss_mb(self) -> float:
        import psutil

        return float(psutil.Process(self.proc.pid).memory_info().rss / 2**20)

    def rounds(self) -> tuple[float, float]:
        """(scoring rounds so far, texts scored so far) from /metrics."""
        values = {}
        for line in httpx.get(f"{self.url}/metrics", timeout=60).text.splitlines():
            name, _, value = line.partition(" ")
            if name in ("rewardsmith_batch_texts_count", "rewardsmith_batch_texts_sum"):
                values[name] = float(value)
        return values.get("rewardsmith_batch_texts_count", 0.0), values.get("rewardsmith_batch_texts_sum", 0.0)

    def stop(self) -> dict[str, float]:
        """SIGTERM; the exit code and the seconds to exit."""
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(120)
        return {"exit_code": float(code), "shutdown_seconds": round(time.monotonic() - t0, 2)}


def _http(concurrency: int, new_connection: bool) -> httpx.AsyncClient:
    keep = 0 if new_connection else concurrency
    return httpx.AsyncClient(
        timeout=3600, limits=httpx.Limits(max_connections=concurrency + 4, max_keepalive_connections=keep)
    )


async def closed_loop(
    url: str,
    bodies: list[dict[str, Any]],
    concurrency: int,
    warmup_s: float,
    measure_s: float,
    new_connection: bool,
    during: Any = None,
) -> dict[str, Any]:
    """`concurrency` clients, each sending the next body as soon as its last one is answered: for warmup_s +
    measure_s seconds, or, with `during` (a coroutine function taking the HTTP client, started after the
    warm-up), until it returns. Returns the (start, end) times of every answer, the failures, the start time
    and what `during` returned."""
    answers: list[tuple[float, float]] = []
    failures: list[str] = []
    issued = [0]
    done = asyncio.Event()
    async with _http(concurrency, new_connection) as http:
        started = time.monotonic()
        stop_at = started + warmup_s + measure_s if during is None else float("inf")

        async def client() -> None:
            while time.monotonic() < stop_at and not done.is_set():
                body = bodies[issued[0] % len(bodies)]
                issued[0] += 1
                t0 = time.monotonic()
                try:
                    answer = await http.post(f"{url}/get_reward", json=body)
                except httpx.HTTPError as exc:
                    failures.append(f"{type(exc).__name__}: {exc}")
                    continue
                if answer.status_code == 200 and len(answer.json()["rewards"]) == 1:
                    answers.append((t0, time.monotonic()))
                else:
                    failures.append(f"{answer.status_code} {answer.text[:200]}")

        async def extra() -> Any:
            if during is None:
                return None
            await asyncio.sleep(warmup_s)
            try:
                return await during(http)
            finally:
                done.set()

        results = await asyncio.gather(extra(), *(client() for _ in range(concurrency)))
    return {"answers": answers, "failures": failures, "started": started, "extra": results[0]}


def _window(run: dict[str, Any], warmup_s: float, measure_s: float) -> list[float]:
    """Latencies (s) of the answers that came within the measured window."""
    lo, hi = run["started"] + warmup_s, run["started"] + warmup_s + measure_s
    return [end - start for start, end in run["answers"] if lo <= end <= hi]


async def agreement_scores(url: str, bodies: list[dict[str, Any]]) -> list[float]:
    async with httpx.AsyncClient(timeout=3600) as http:
        answers = await asyncio.gather(*(http.post(f"{url}/get_reward", json=b) for b in bodies))
    return [a.json()["rewards"][0] for a in answers]


def measure_server(args: argparse.Namespace, flags: list[str]) -> dict[str, Any]:
    bodies = json.loads(args.bodies.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(args.model_dir, flags, Path(tmp) / "server.log")
        asyncio.run(agreement_scores(server.url, bodies[:32]))  # warm-up
        before = server.rounds()
        run = asyncio.run(
            closed_loop(server.url, bodies, args.concurrency, args.warmup_s, args.measure_s, not args.keep_alive)
        )
        after = server.rounds()
        rss = server.rss_mb()
        scores = asyncio.run(agreement_scores(server.url, bodies[:AGREEMENT_TEXTS]))
        stopped = server.stop()
    lat = np.array(_window(run, args.warmup_s, args.measure_s)) * 1000.0
    rounds, texts = after[0] - before[0], after[1] - before[1]
    return {
        "concurrency": args.concurrency,
        "texts_per_s": lat.size / args.measure_s,
        "answered": int(lat.size),
        "failed": len(run["failures"]),
        "failures": run["failures"][:3],
        "p50_ms": float(np.percentile(lat, 50)) if lat.size else None,
        "p99_ms": float(np.percentile(lat, 99)) if lat.size else None,
        "mean_texts_per_round": texts / max(rounds, 1.0),
        "rss_mb": round(rss, 1),
        **stopped,
        "scores": scores,
    }


def measure_mixed(args: argparse.Namespace, large: bool) -> dict[str, Any]:
    """8 single-sample clients, with or without one large request sent after the warm-up; the small requests'
    latencies while the large one is in flight (or in the measured window without it)."""
    bodies = json.loads(args.bodies.read_text())
    big = {"query": [b["query"][0] for b in bodies] * (args.large // len(bodies) + 1), "labels": None}
    big["query"] = big["query"][: args.large]
    with tempfile.TemporaryDirectory() as tmp:
        # The large request shares the machine with the small ones for minutes on a CPU: no 504 for it.
        server = Server(args.model_dir, ["--request-timeout-s", "3600"], Path(tmp) / "server.log")
        asyncio.run(agreement_scores(server.url, bodies[:32]))

        async def send_large(http: httpx.AsyncClient) -> tuple[float, float, int]:
            t0 = time.monotonic()
            answer = await http.post(f"{server.url}/get_reward", json=big)
            return t0, time.monotonic(), answer.status_code

        if large:
            # The small clients run until the large request is answered (measure_s is only a floor).
            run = asyncio.run(
                closed_loop(
                    server.url, bodies, args.mixed_clients, args.warmup_s, 0.0, not args.keep_alive, during=send_large
                )
            )
            t0, t1, status = run["extra"]
            lat = [end - start for start, end in run["answers"] if start >= t0 and end <= t1]
            extra = {"large_seconds": round(t1 - t0, 2), "large_status": status}
        else:
            run = asyncio.run(
                closed_loop(server.url, bodies, args.mixed_clients, args.warmup_s, args.measure_s, not args.keep_alive)
            )
            lat = _window(run, args.warmup_s, args.measure_s)
            extra = {}
        server.stop()
    ms = np.array(lat) * 1000.0
    return {
        "small_answered": int(ms.size),
        "failed": len(run["failures"]),
        "failures": run["failures"][:3],
        "small_p50_ms": float(np.percentile(ms, 50)) if ms.size else None,
        "small_p99_ms": float(np.percentile(ms, 99)) if ms.size else None,
        **extra,
    }


def measure_bare(args: argparse.Namespace) -> dict[str, Any]:
    """Texts/s of the server's scorer on the texts, tokenised beforehand, in consecutive groups of C."""
    import torch

    from rewardsmith.serve.engine import ScoringEngine
    from rewardsmith.serve.requests import query_texts

    torch.set_num_threads(args.threads)
    bodies = json.loads(args.bodies.read_text())
    engine = ScoringEngine.load(args.model_dir, "fp32")
    texts = [engine.prepare(query_texts(b["query"], b["prompts"])).encoded[0] for b in bodies]
    score = engine.inference.score_encoded
    score(texts[:32])  # warm-up
    rates = {}
    for c in args.levels:
        done, k = 0, 0
        t0 = time.monotonic()
        while time.monotonic() - t0 < args.measure_s:
            group = [texts[(k + j) % len(texts)] for j in range(c)]
            score(group)
            done += c
            k += c
        rates[str(c)] = done / (time.monotonic() - t0)
    scores = [float(x) for x in score(texts[:AGREEMENT_TEXTS]).rewards]
    return {
        "texts_per_s": rates,
        "torch_threads": torch.get_num_threads(),
        "max_batch_tokens": engine.max_batch_tokens,
        "scores": scores,
    }


def worker(args: argparse.Namespace) -> dict[str, Any]:
    kind = args.worker
    if kind == "bare":
        return measure_bare(args)
    if kind == "batched":
        return measure_server(args, [])
    if kind == "one_per_forward":
        return measure_server(args, ONE_PER_FORWARD)
    return measure_mixed(args, large=kind == "mixed_large")


# ----------------------------------------------------------------------------------------------------
# Driving


def drive(args: argparse.Namespace, command: str) -> None:
    out: dict[str, Any] = {
        "command": command,
        "settings": {
            "model": "minilm (embedded all-MiniLM-L6-v2), seeded untrained reward head, HH template, max_length 256",
            "texts": f"hh-rlhf/harmless-base, {args.texts} OpenRLHF-style single-sample /get_reward bodies, cycled",
            "connections": "kept alive" if args.keep_alive else "a new connection per request (as requests.post)",
            "batched_flags": "the server's defaults",
            "one_per_forward_flags": " ".join(ONE_PER_FORWARD),
            "warmup_s": args.warmup_s,
            "measure_s": args.measure_s,
            "rounds": args.rounds,
            "mixed": f"{args.mixed_clients} single-sample clients, one {args.large}-text request",
            "mixed_threads": args.threads[0],
            "omp_wait_policy": {
                "servers": "PASSIVE (set by `rewardsmith serve` unless given)",
                "bare": os.environ.get("OMP_WAIT_POLICY", "the OpenMP default"),
            },
            "mixed_flags": "the server's defaults, --request-timeout-s 3600 (the large request takes minutes)",
        },
        "by_threads": [],
    }
    # The bare forward waits as the servers do (`rewardsmith serve` sets PASSIVE): with OpenMP's default spinning
    # its 2-thread rate fell from about 50 to 1-5 texts/s whenever other work shared the 2 cores (load ~3).
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    out["settings"]["omp_wait_policy"]["bare"] = os.environ["OMP_WAIT_POLICY"]
    out["load_average_at_start"] = wait_for_quiet(args.quiet_load, args.quiet_wait_s)
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
        model = save_minilm(Path(tmp) / "minilm-rm")
        bodies_file = Path(tmp) / "bodies.json"
        bodies = openrlhf_bodies(args.texts, args.data_dir)
        bodies_file.write_text(json.dumps(bodies))
        for threads in args.threads:
            os.environ["OMP_NUM_THREADS"] = str(threads)  # run_worker passes it on; the worker to its server
            # The mixed run at the first thread count only (the machine's): it is the longest run.
            mixed = ["mixed_alone", "mixed_large"] if threads == args.threads[0] else []
            configs = [
                "bare",
                *[f"batched:{c}" for c in args.concurrency],
                *[f"one_per_forward:{c}" for c in args.concurrency],
                *mixed,
            ]
            runs: dict[str, list[dict[str, Any]]] = {c: [] for c in configs}
            for r in range(args.rounds):
                for config in rotated(configs, r):
                    kind, _, level = config.partition(":")
                    load = wait_for_quiet(args.quiet_load, args.run_quiet_wait_s)
                    worker_args = [
                        "--worker",
                        kind,
                        "--model-dir",
                        str(model),
                        "--bodies",
                        str(bodies_file),
                        "--threads",
                        str(threads),
                        "--warmup-s",
                        str(args.warmup_s),
                        "--measure-s",
                        str(args.measure_s),
                        "--large",
                        str(args.large),
                        "--mixed-clients",
                        str(args.mixed_clients),
                        "--levels",
                        *map(str, args.concurrency),
                    ]
                    if level:
                        worker_args += ["--concurrency", level]
                    if args.keep_alive:
                        worker_args.append("--keep-alive")
                    record = run_worker(__file__, worker_args, f"{config} ({threads} threads)")
                    record["load_average_at_start"] = load
                    runs[config].append(record)
                    print(
                        f"{threads} threads, round {r + 1}, {config}: {_short(record)} (load {load[0]})",
                        file=sys.stderr,
                        flush=True,
                    )
            out["by_threads"].append(summarise(threads, args, runs))
    out["table"] = table(out)
    write_results(RESULTS if args.out is None else args.out, out, out["table"])


def _short(record: dict[str, Any]) -> str:
    if "small_p99_ms" in record:
        return f"small p99 {record['small_p99_ms']:.0f} ms" + (
            f", large {record['large_seconds']:.1f} s" if "large_seconds" in record else ""
        )
    rate = record["texts_per_s"]
    if isinstance(rate, dict):
        return ", ".join(f"C={c}: {v:.1f}" for c, v in rate.items()) + " texts/s"
    return f"{rate:.1f} texts/s, p99 {record['p99_ms']:.0f} ms, {record['mean_texts_per_round']:.1f} texts/round"


def summarise(threads: int, args: argparse.Namespace, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Medians over rounds and the per-round ratios of one thread count."""
    med = statistics.median
    levels = []
    for c in args.concurrency:
        bare = [run["texts_per_s"][str(c)] for run in runs["bare"]]
        batched, single = runs[f"batched:{c}"], runs[f"one_per_forward:{c}"]
        levels.append(
            {
                "concurrency": c,
                "batched_texts_per_s": med(x["texts_per_s"] for x in batched),
                "one_per_forward_texts_per_s": med(x["texts_per_s"] for x in single),
                "bare_texts_per_s": med(bare),
                # What batching buys the model itself: the bare forward in groups of C over one text at a time.
                "bare_over_bare_one": spread(
                    [run["texts_per_s"][str(c)] / run["texts_per_s"]["1"] for run in runs["bare"]]
                )
                if "1" in runs["bare"][0]["texts_per_s"]
                else None,
                "batched_over_bare": spread([b["texts_per_s"] / x for b, x in zip(batched, bare, strict=True)]),
                "batched_over_one_per_forward": spread(
                    [b["texts_per_s"] / s["texts_per_s"] for b, s in zip(batched, single, strict=True)]
                ),
                "batched_p50_ms": med(x["p50_ms"] for x in batched),
                "batched_p99_ms": med(x["p99_ms"] for x in batched),
                "one_per_forward_p50_ms": med(x["p50_ms"] for x in single),
                "one_per_forward_p99_ms": med(x["p99_ms"] for x in single),
                "batched_texts_per_round": med(x["mean_texts_per_round"] for x in batched),
                "failed": sum(x["failed"] for x in batched + single),
            }
        )
    alone, large = runs.get("mixed_alone", []), runs.get("mixed_large", [])
    mixed = (
        None
        if not large
        else {
            "small_p99_ms_alone": med(x["small_p99_ms"] for x in alone),
            "small_p99_ms_with_large": med(x["small_p99_ms"] for x in large),
            "p99_with_over_without": spread(
                [w["small_p99_ms"] / a["small_p99_ms"] for w, a in zip(large, alone, strict=True)]
            ),
            "small_answered_during_large": med(x["small_answered"] for x in large),
            "large_seconds": med(x["large_seconds"] for x in large),
            "failed": sum(x["failed"] for x in alone + large) + sum(x["large_status"] != 200 for x in large),
        }
    )
    reference = runs["bare"][0]["scores"]
    others = [run["scores"] for config, rs in runs.items() for run in rs if config != "bare" and "scores" in run]
    diff = max(float(np.max(np.abs(np.array(s) - np.array(reference)))) for s in others)
    servers = [run for config, rs in runs.items() for run in rs if "exit_code" in run]
    return {
        "threads": threads,
        "max_batch_tokens": runs["bare"][0]["max_batch_tokens"],
        "levels": levels,
        "mixed": mixed,
        "max_abs_score_difference_vs_bare": diff,
        "server_rss_mb_max": max(run["rss_mb"] for run in servers),
        "server_exit_codes": sorted({int(run["exit_code"]) for run in servers}),
        "server_shutdown_seconds_max": max(run["shutdown_seconds"] for run in servers),
        "load_average_at_start": [run["load_average_at_start"][0] for rs in runs.values() for run in rs],
        "runs": {
            config: [{k: v for k, v in run.items() if k != "scores"} for run in rs] for config, rs in runs.items()
        },
    }


SERVE_HEADER = [
    "clients",
    "server texts/s",
    "bare batched forward texts/s",
    "server / bare",
    "one-per-forward server texts/s",
    "server / one-per-forward",
    "server p50 / p99 ms",
    "texts per round",
    "failed",
]


def table(out: dict[str, Any]) -> str:
    """The results as markdown (stored in the JSON as `table`; tools/build_docs.py puts it in the docs)."""
    parts = []
    for block in out["by_threads"]:
        lines = [
            f"**{block['threads']} torch thread{'s' if block['threads'] > 1 else ''}** (rounds of at most "
            f"{block['max_batch_tokens']} tokens; median of {out['settings']['rounds']} rounds, range in "
            "brackets):",
            "",
        ]
        rows = [
            [
                lv["concurrency"],
                f"{lv['batched_texts_per_s']:.1f}",
                f"{lv['bare_texts_per_s']:.1f}",
                with_range(lv["batched_over_bare"], percent=True),
                f"{lv['one_per_forward_texts_per_s']:.1f}",
                with_range(lv["batched_over_one_per_forward"]),
                f"{lv['batched_p50_ms']:.0f} / {lv['batched_p99_ms']:.0f}",
                f"{lv['batched_texts_per_round']:.1f}",
                lv["failed"],
            ]
            for lv in block["levels"]
        ]
        lines += markdown_table(SERVE_HEADER, "r" * len(SERVE_HEADER), rows)
        m = block["mixed"]
        load = block["load_average_at_start"]
        mixed = (
            "No mixed run at this thread count."
            if m is None
            else (
                f"One {out['settings']['mixed'].split('one ')[1]} among {out['settings']['mixed'].split(' ')[0]} "
                f"single-sample clients: their p99 {m['small_p99_ms_with_large']:.0f} ms while it was scored "
                f"({m['small_answered_during_large']:.0f} small requests answered meanwhile; the large one took "
                f"{m['large_seconds']:.1f} s) against {m['small_p99_ms_alone']:.0f} ms without it: "
                f"{with_range(m['p99_with_over_without'])}. Failed requests: {m['failed']}."
            )
        )
        lines += [
            "",
            f"{mixed} Largest score "
            f"difference from the bare forward: {block['max_abs_score_difference_vs_bare']:.1e}. Server "
            f"RSS at most {block['server_rss_mb_max']:.0f} MB; SIGTERM to exit at most "
            f"{block['server_shutdown_seconds_max']:.1f} s (exit codes {block['server_exit_codes']}). "
            f"1-minute load average at the start of the runs: {min(load):.1f}-{max(load):.1f}.",
        ]
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--threads",
        type=int,
        nargs="+",
        default=[os.cpu_count() or 1, 1],
        help="torch threads of the servers and the bare forward, one block each",
    )
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32, 128])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup-s", type=float, default=2.0)
    parser.add_argument("--measure-s", type=float, default=6.0)
    parser.add_argument("--texts", type=int, default=256, help="distinct queries, cycled")
    parser.add_argument("--large", type=int, default=1024, help="texts of the mixed run's large request")
    parser.add_argument("--mixed-clients", type=int, default=8)
    parser.add_argument("--keep-alive", action="store_true", help="clients keep their connections open")
    parser.add_argument("--quiet-load", type=float, default=1.0)
    parser.add_argument(
        "--quiet-wait-s",
        type=float,
        default=0.0,
        help="longest wait for a quiet machine before the benchmark starts",
    )
    parser.add_argument("--run-quiet-wait-s", type=float, default=0.0, help="longest wait before each run")
    parser.add_argument(
        "--data-dir", default=os.environ.get("REWARDSMITH_DATA_DIR", str(ROOT.parent / "shared" / "data"))
    )
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--worker", choices=("bare", "batched", "one_per_forward", "mixed_alone", "mixed_large"), help=argparse.SUPPRESS
    )
    parser.add_argument("--model-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--bodies", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--levels", type=int, nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        args.concurrency = args.concurrency[0] if isinstance(args.concurrency, list) else args.concurrency
        args.threads = args.threads[0]
        print(json.dumps(worker(args)))
        return
    command = ".venv/bin/python benchmarks/bench_serve.py " + shlex.join(sys.argv[1:])
    drive(args, command.strip())


if __name__ == "__main__":
    main()
