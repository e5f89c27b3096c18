"""`rewardsmith serve` over real HTTP on loopback: every endpoint with the bodies OpenRLHF, verl, vLLM and TEI
clients send; scores equal to `rewardsmith score` (to 1e-5, alone and under concurrent load, with a rater map
and with ICRM demonstrations); bad requests refused with one line while a good load keeps being answered;
back-pressure and timeouts; the client (sharding, retries, GRPO reward functions) against two server
processes; graceful shutdown that answers the requests in flight.

Servers run in-process (uvicorn in a thread, on a socket bound to port 0) except where a test needs
processes (sharding over two servers, SIGTERM)."""

from __future__ import annotations

import json
import math
import os
import pickle
import random
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from helpers import ENV, rk, tiny_reward_model
from rewardsmith.serve.app import bind_socket, build_app, make_server
from rewardsmith.serve.config import ServeConfig

TOL = 1e-5
WORDS = [
    "the",
    "cat",
    "sat",
    "on",
    "a",
    "mat",
    "while",
    "rain",
    "fell",
    "over",
    "quiet",
    "hills",
    "and",
    "river",
    "ran",
    "past",
    "old",
    "stone",
    "walls",
    "toward",
    "sea",
    "where",
    "boats",
    "waited",
    "for",
    "morning",
    "tide",
]


def _sentence(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def score_rows(n: int = 24, seed: int = 0) -> list[dict[str, Any]]:
    """Rows as `rewardsmith score` reads them: plain, HH-transcript and chat-list prompts; single responses and
    pairs; some long enough to be truncated at max_length 48."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    for i in range(n):
        kind = i % 3
        if kind == 0:
            prompt: Any = _sentence(rng, 2, 30)
        elif kind == 1:
            prompt = f"\n\nHuman: {_sentence(rng, 2, 8)}?\n\nAssistant: {_sentence(rng, 1, 6)}\n\nHuman: and then?"
        else:
            prompt = [{"role": "system", "content": "be kind"}, {"role": "user", "content": _sentence(rng, 2, 12)}]
        if i % 2:
            rows.append({"prompt": prompt, "response": _sentence(rng, 1, 40)})
        else:
            rows.append({"prompt": prompt, "chosen": _sentence(rng, 1, 40), "rejected": _sentence(rng, 1, 20)})
    return rows


def rewardsmith_score(model: Path, rows: list[dict[str, Any]], tmp: Path, *extra: str | Path) -> list[dict]:
    """The rows scored by `rewardsmith score` (in-process CLI)."""
    inp, out = tmp / f"in-{os.getpid()}-{id(rows)}.jsonl", tmp / f"out-{os.getpid()}-{id(rows)}.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = rk("score", "--model", model, "--input", inp, "--output", out, "--quiet", "--overwrite", *extra)
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in out.read_text().splitlines()]


def assert_same(server: dict[str, Any], expected: dict[str, Any]) -> None:
    keys = [k for k in ("reward", "reward_chosen", "reward_rejected", "p_chosen", "confidence") if k in expected]
    assert keys
    for key in keys:
        assert abs(server[key] - expected[key]) <= TOL, (key, server[key], expected[key])


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """Runs the app with uvicorn in a thread on 127.0.0.1 (a socket bound to port 0); yields the base URL and
    stops the server (draining its queue) afterwards."""
    sock = bind_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    server = make_server(app)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(60)
        sock.close()


class RoundGate:
    """Holds a served app's scoring worker, so tests count rounds instead of timing them: each scoring round waits
    at the gate until the test lets it through (allow(n): n rounds; open(): every round from now on; hold(): shut
    again). entered / scored: rounds that reached the gate / were scored; rounds: per scored round, (texts in the
    request, texts of it in the round) per piece. Used as a context manager; the gate opens on exit, so the server
    can drain."""

    def __init__(self, app: Any) -> None:
        engine = app.state.server.engine
        self._score = engine.score_round
        engine.score_round = self  # the instance attribute shadows the method: the batcher's worker calls this
        self._cond = threading.Condition()
        self._open = False
        self._permits = 0
        self.entered = 0
        self.scored = 0
        self.rounds: list[list[tuple[int, int]]] = []

    def __call__(self, pieces: Any) -> Any:
        with self._cond:
            self.entered += 1
            self._cond.notify_all()
            if not self._cond.wait_for(lambda: self._open or self._permits > 0, 300):
                raise RuntimeError("the test never let this round through")
            if not self._open:
                self._permits -= 1
        try:
            return self._score(pieces)
        finally:
            with self._cond:
                self.rounds.append([(p.job.size, p.size) for p in pieces])
                self.scored += 1
                self._cond.notify_all()

    def __enter__(self) -> RoundGate:
        return self

    def __exit__(self, *_: object) -> None:
        self.open()

    def _set(self, opened: bool, permits: int) -> None:
        with self._cond:
            self._open, self._permits = opened, permits
            self._cond.notify_all()

    def allow(self, n: int = 1) -> None:
        with self._cond:
            self._permits += n
            self._cond.notify_all()

    def open(self) -> None:
        self._set(True, 0)

    def hold(self) -> None:
        self._set(False, 0)

    def wait(self, *, entered: int | None = None, scored: int | None = None) -> None:
        """Until at least `entered` rounds have reached the gate and `scored` have been scored."""
        with self._cond:
            reached = self._cond.wait_for(lambda: self.entered >= (entered or 0) and self.scored >= (scored or 0), 300)
        assert reached, (self.entered, self.scored, entered, scored)


def one_line_error(response: httpx.Response, status: int, *needles: str) -> str:
    assert response.status_code == status, (response.status_code, response.text)
    message = response.json()["error"]
    assert isinstance(message, str) and "\n" not in message and message, message
    for needle in needles:
        assert needle in message, (needle, message)
    return message


# ----------------------------------------------------------------------------------------------------
# Models and maps


@pytest.fixture(scope="module")
def bt_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_reward_model(tmp_path_factory.mktemp("bt") / "model", seed=3)


@pytest.fixture(scope="module")
def icrm_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from rewardsmith.config import ICRMModelConfig
    from rewardsmith.models.factory import build_model, save_model

    cfg = ICRMModelConfig(backbone="tiny-bert", max_length=48, min_prompt_tokens=8, context_dim=8, hidden_dim=16)
    model, tok = build_model(cfg, seed=5)
    return save_model(model, tok, tmp_path_factory.mktemp("icrm") / "model", cfg)


@pytest.fixture
def rater_maps(tmp_path: Path, rater_ratings_csv: Path) -> Path:
    """Per-rater maps fitted by `rewardsmith calibrate fit` (rater a: slope 10, b: slope 30)."""
    result = rk(
        "calibrate",
        "fit",
        "--ratings",
        rater_ratings_csv,
        "--out",
        tmp_path / "maps.json",
        "--score-min",
        "-1000",
        "--score-max",
        "1000",
    )
    assert result.exit_code == 0, result.output
    return tmp_path / "maps.json"


@pytest.fixture(scope="module")
def bt_url(bt_model: Path) -> Iterator[str]:
    with serving(build_app(bt_model, ServeConfig(max_wait_ms=20.0))) as url:
        yield url


# ----------------------------------------------------------------------------------------------------
# Endpoints, with the bodies the existing clients send


def test_openrlhf_remote_reward_body(bt_url: str, bt_model: Path, tmp_path: Path) -> None:
    prompt = "<|im_start|>user\nwhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"
    response = "The capital of France is Paris.<|im_end|>"
    # openrlhf/utils/agent.py SingleTurnAgentExecutor: one sample per request; labels may be None or text.
    body = {"query": [prompt + response], "prompts": [prompt], "labels": [None]}
    answer = httpx.post(f"{bt_url}/get_reward", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    got = answer.json()
    assert set(got) == {"rewards", "scores", "extra_logs"} and got["extra_logs"] == {}
    assert len(got["rewards"]) == 1 and got["scores"] == got["rewards"]
    expected = rewardsmith_score(bt_model, [{"prompt": prompt, "response": response}], tmp_path)[0]["reward"]
    assert abs(got["rewards"][0] - expected) <= TOL
    # With several --remote_rm_url servers, OpenRLHF shards one query over them: the others get empty lists.
    empty = httpx.post(f"{bt_url}/get_reward", json={"query": [], "prompts": [], "labels": []}, timeout=60)
    assert empty.status_code == 200 and empty.json() == {"rewards": [], "scores": [], "extra_logs": {}}
    # A query that does not start with its prompt (a truncated prompt) is scored whole, as a response to no
    # prompt: the same as sending it without prompts, and as vLLM `input`.
    whole = httpx.post(
        f"{bt_url}/get_reward", json={"query": [response], "prompts": [prompt], "labels": ["x"]}, timeout=60
    ).json()["rewards"][0]
    no_prompts = httpx.post(f"{bt_url}/get_reward", json={"query": [response]}, timeout=60).json()["rewards"][0]
    classify = httpx.post(f"{bt_url}/classify", json={"input": response}, timeout=60).json()
    assert abs(whole - no_prompts) <= TOL and abs(whole - classify["data"][0]["probs"][0]) <= TOL


def test_verl_classify_body_and_vllm_shapes(bt_url: str) -> None:
    text = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nhello there<|im_end|>\n"
    # verl/experimental/reward_loop/reward_loop.py compute_score_disrm, engine vllm.
    body = {"model": "/models/reward-model", "input": text, "activation": False}
    out = httpx.post(f"{bt_url}/classify", json=body, timeout=60).json()
    assert set(out) - {"rewardsmith"} == {"id", "object", "created", "model", "data", "usage"}
    # This model reads HH framing: a chat-templated string cannot be split into its turns, and the answer says so.
    assert out["rewardsmith"]["unsplit"] == [0] and "cut from its start" in out["rewardsmith"]["note"]
    assert out["object"] == "list" and out["id"].startswith("classify-")
    entry = out["data"][-1]
    assert set(entry) == {"index", "label", "probs", "num_classes"} and entry["num_classes"] == 1
    rm_score = out["data"][-1]["probs"][-1]  # what verl reads
    assert out["usage"]["prompt_tokens"] > 0 and out["usage"]["completion_tokens"] == 0
    # Raw by default; the sigmoid only when asked (use_activation, or its deprecated names).
    for key in ("use_activation", "activation", "softmax"):
        asked = httpx.post(f"{bt_url}/classify", json={"input": [text, text], key: True}, timeout=60).json()
        assert [d["index"] for d in asked["data"]] == [0, 1]
        assert asked["data"][1]["probs"][0] == pytest.approx(1 / (1 + math.exp(-rm_score)))
    raw = httpx.post(f"{bt_url}/classify", json={"input": [text]}, timeout=60).json()
    assert raw["data"][0]["probs"][0] == pytest.approx(rm_score, abs=TOL)
    chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    assert len(httpx.post(f"{bt_url}/classify", json=chat, timeout=60).json()["data"]) == 1
    pooled = httpx.post(f"{bt_url}/pooling", json={"model": "m", "input": [text, "another reply"]}, timeout=60).json()
    assert pooled["id"].startswith("pool-") and pooled["object"] == "list"
    assert [(d["index"], d["object"], len(d["data"])) for d in pooled["data"]] == [(0, "pooling", 1), (1, "pooling", 1)]
    assert pooled["data"][0]["data"][0] == pytest.approx(rm_score, abs=TOL)


def test_tei_predict_shapes(bt_url: str) -> None:
    single = httpx.post(f"{bt_url}/predict", json={"inputs": "hello there"}, timeout=60).json()
    assert isinstance(single, list) and set(single[0]) == {"score", "label"}
    pair = httpx.post(f"{bt_url}/predict", json={"inputs": ["say hi", "hello there"]}, timeout=60).json()
    batch = httpx.post(
        f"{bt_url}/predict",
        json={"inputs": [["hello there"], ["say hi", "hello there"]], "truncate": True, "raw_scores": True},
        timeout=60,
    ).json()
    assert len(batch) == 2 and all(len(b) == 1 for b in batch)
    assert batch[0][0]["score"] == pytest.approx(single[0]["score"], abs=TOL)
    assert batch[1][0]["score"] == pytest.approx(pair[0]["score"], abs=TOL)
    # A TEI pair is (prompt, response): the same as the native item.
    native = httpx.post(
        f"{bt_url}/v1/score", json={"items": [{"prompt": "say hi", "response": "hello there"}]}, timeout=60
    ).json()
    assert native["results"][0]["reward"] == pytest.approx(pair[0]["score"], abs=TOL)
    sig = httpx.post(f"{bt_url}/predict", json={"inputs": "hello there", "raw_scores": False}, timeout=60).json()
    assert 0 < sig[0]["score"] < 1 and sig[0]["score"] != pytest.approx(single[0]["score"])


def test_health_models_and_metrics(bt_url: str) -> None:
    health = httpx.get(f"{bt_url}/health", timeout=60).json()
    assert health["status"] == "ok" and health["model_type"] == "reward"
    models = httpx.get(f"{bt_url}/v1/models", timeout=60).json()
    assert models["object"] == "list" and models["data"][0]["id"] == health["model"]
    assert models["data"][0]["precision"] == "fp32" and models["data"][0]["max_length"] == 48
    httpx.post(f"{bt_url}/v1/score", content=b"{", timeout=60)
    text = httpx.get(f"{bt_url}/metrics", timeout=60).text
    for name in (
        "rewardsmith_requests_total",
        "rewardsmith_request_seconds_bucket",
        "rewardsmith_batch_texts_bucket",
        "rewardsmith_batch_requests_bucket",
        "rewardsmith_queue_seconds_bucket",
        "rewardsmith_errors_total",
        "rewardsmith_round_seconds_bucket",
        "rewardsmith_queue_texts",
    ):
        assert name in text, name
    assert 'rewardsmith_requests_total{endpoint="/health",status="200"}' in text
    assert 'rewardsmith_errors_total{endpoint="/v1/score",kind="validation"}' in text


# ----------------------------------------------------------------------------------------------------
# The same scores as `rewardsmith score`


def _post_each(
    url: str,
    bodies: list[dict[str, Any]],
    concurrency: int,
    path: str = "/v1/score",
    headers: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    with httpx.Client(timeout=120, headers=headers) as http, ThreadPoolExecutor(concurrency) as pool:
        answers = list(pool.map(lambda body: http.post(url + path, json=body), bodies))
    assert all(a.status_code == 200 for a in answers), [a.text for a in answers if a.status_code != 200][:3]
    return [a.json() for a in answers]


@pytest.mark.parametrize("concurrency", [pytest.param(1, marks=pytest.mark.slow), 16])  # 16 in test-fast
def test_scores_equal_rewardsmith_score(bt_model: Path, tmp_path: Path, concurrency: int) -> None:
    rows = score_rows(48, seed=concurrency)
    expected = rewardsmith_score(bt_model, rows, tmp_path)
    with serving(build_app(bt_model, ServeConfig(max_batch_tokens=600, max_wait_ms=30.0))) as url:
        one_each = _post_each(url, [{"items": [row]} for row in rows], concurrency)
        all_at_once = _post_each(url, [{"items": rows}], 1)[0]["results"]
        # OpenRLHF's form of the single responses: prompt + response strings with their prompts.
        singles = [(i, row) for i, row in enumerate(rows) if "response" in row and isinstance(row["prompt"], str)]
        openrlhf = _post_each(
            url,
            [{"query": [r["prompt"] + r["response"]], "prompts": [r["prompt"]]} for _, r in singles],
            concurrency,
            "/get_reward",
        )
        metrics = httpx.get(f"{url}/metrics", timeout=60).text
    for answer, want in zip(one_each, expected, strict=True):
        assert_same(answer["results"][0], want)
    for got, want in zip(all_at_once, expected, strict=True):
        assert_same(got, want)
    for (i, _), answer in zip(singles, openrlhf, strict=True):
        assert abs(answer["rewards"][0] - expected[i]["reward"]) <= TOL
    if concurrency > 1:  # requests really were merged into shared rounds
        assert 'rewardsmith_batch_requests_bucket{le="1.0"}' in metrics
        rounds = float(metrics.split("rewardsmith_batch_requests_count ")[1].split()[0])
        requests = float(metrics.split('rewardsmith_requests_total{endpoint="/v1/score",status="200"} ')[1].split()[0])
        assert rounds < requests


@pytest.mark.parametrize("kind", ["decoder", "lora"])
def test_decoder_and_lora_models_score_as_rewardsmith_score(kind: str, tmp_path: Path) -> None:
    """A decoder (last-token pooling, saved as sequence-classification) and a LoRA encoder, under load."""
    from rewardsmith.config import LoraSettings, ModelConfig
    from rewardsmith.models.factory import build_model, save_model

    cfg = (
        ModelConfig(backbone="tiny-llama", max_length=48, min_prompt_tokens=8)
        if kind == "decoder"
        else ModelConfig(backbone="tiny-bert", max_length=48, min_prompt_tokens=8, lora=LoraSettings(r=4))
    )
    model, tok = build_model(cfg, seed=1)
    folder = save_model(model, tok, tmp_path / kind, cfg)
    rows = score_rows(24, seed=21)
    expected = rewardsmith_score(folder, rows, tmp_path)
    with serving(build_app(folder, ServeConfig(max_wait_ms=30.0))) as url:
        answers = _post_each(url, [{"items": [row]} for row in rows], 16)
    for answer, want in zip(answers, expected, strict=True):
        assert_same(answer["results"][0], want)


@pytest.mark.parametrize("concurrency", [pytest.param(1, marks=pytest.mark.slow), 16])  # 16 in test-fast
def test_rater_map_equals_rewardsmith_score(bt_model: Path, rater_maps: Path, tmp_path: Path, concurrency: int) -> None:
    rows = score_rows(24, seed=7)
    raw = rewardsmith_score(bt_model, rows, tmp_path)
    mapped = rewardsmith_score(bt_model, rows, tmp_path, "--calibration", rater_maps, "--rater", "b")
    with serving(build_app(bt_model, ServeConfig(max_wait_ms=30.0), calibration=rater_maps)) as url:
        answers = _post_each(url, [{"items": [row], "rater": "b"} for row in rows], concurrency)
        unknown = _post_each(url, [{"items": rows[:2], "rater": "nobody"}], 1)[0]
    for answer, want, unmapped in zip(answers, mapped, raw, strict=True):
        assert answer["rater"] == {"id": "b", "known": True, "map": "rater"}
        assert_same(answer["results"][0], want)
        if "p_chosen" in want:  # on the model's own scale, not the rater's
            assert abs(answer["results"][0]["p_chosen"] - unmapped["p_chosen"]) <= TOL
    assert unknown["rater"]["map"] == "population" and "population map" in unknown["note"]


def _demos(n: int = 4) -> list[dict[str, str]]:
    rng = random.Random(11)
    return [
        {"prompt": _sentence(rng, 2, 8), "chosen": _sentence(rng, 3, 12), "rejected": _sentence(rng, 1, 4)}
        for _ in range(n)
    ]


@pytest.mark.parametrize("concurrency", [pytest.param(1, marks=pytest.mark.slow), 16])  # 16 in test-fast
def test_icrm_demonstrations_equal_rewardsmith_score(icrm_model: Path, tmp_path: Path, concurrency: int) -> None:
    rows = score_rows(24, seed=13)
    demos = _demos()
    demo_file = tmp_path / "demos.jsonl"
    demo_file.write_text("".join(json.dumps(d) + "\n" for d in demos))
    steered = rewardsmith_score(icrm_model, rows, tmp_path, "--demos", demo_file)
    plain = rewardsmith_score(icrm_model, rows, tmp_path)
    app = build_app(icrm_model, ServeConfig(max_wait_ms=30.0))
    with serving(app) as url:
        ad_hoc = _post_each(url, [{"items": [row], "demonstrations": demos} for row in rows], concurrency)
        registered = httpx.post(f"{url}/v1/standards", json={"id": "kind", "demonstrations": demos}, timeout=60)
        assert registered.status_code == 200 and registered.json() == {"standard": "kind", "n_demonstrations": 4}
        by_id = _post_each(url, [{"items": [row], "standard": "kind"} for row in rows], concurrency)
        unsteered = _post_each(url, [{"items": rows}], 1)[0]["results"]
        again = httpx.post(f"{url}/v1/standards", json={"id": "kind", "demonstrations": demos[:2]}, timeout=60)
        one_line_error(again, 409, "kind")
        unknown = httpx.post(f"{url}/v1/score", json={"items": rows[:1], "standard": "nope"}, timeout=60)
        one_line_error(unknown, 422, "standard", "nope")
        models = httpx.get(f"{url}/v1/models", timeout=60).json()["data"][0]
    for answers in (ad_hoc, by_id):
        for row, answer, want in zip(rows, answers, steered, strict=True):
            assert_same(answer["results"][0], want)
            assert ("confidence" if "response" in row else "confidence_chosen") in answer["results"][0]
    assert by_id[0]["standard"] == "kind" and ad_hoc[0]["standard"].startswith("ad-hoc:")
    for got, want in zip(unsteered, plain, strict=True):
        assert_same(got, want)
    cache = app.state.server.engine.inference.scorer.cache
    # One context per standard (the demonstrations, and none), each computed once however many requests used it.
    assert len(cache.contexts) == 2 and cache.misses == 2 and cache.hits >= 2
    assert models["model_type"] == "icrm" and models["standards"] == ["kind"]


def test_identical_demonstrations_follow_one_rule_in_score_and_serve(icrm_model: Path, tmp_path: Path) -> None:
    """A demonstration with the same response on both sides states no preference: `score --demos` and the server
    both leave it out (the same rewards, the count said by both); with none left, both refuse in one line."""
    rows = score_rows(6, seed=17)
    good = _demos(2)
    same = [{"prompt": d["prompt"], "chosen": d["chosen"], "rejected": d["chosen"]} for d in _demos(3)]
    demos = [same[0], good[0], same[1], good[1], good[1], same[2]]  # a duplicate steers twice, in both
    demo_file = tmp_path / "demos.jsonl"
    demo_file.write_text("".join(json.dumps(d) + "\n" for d in demos))
    steered = rewardsmith_score(icrm_model, rows, tmp_path, "--demos", demo_file)
    only_good = tmp_path / "good.jsonl"
    only_good.write_text("".join(json.dumps(d) + "\n" for d in [good[0], good[1], good[1]]))
    assert steered == rewardsmith_score(icrm_model, rows, tmp_path, "--demos", only_good)
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    said = rk("score", "--model", icrm_model, "--input", inp, "--out", tmp_path / "o.jsonl", "--demos", demo_file)
    assert said.exit_code == 0 and "steered by 3 of 6 demonstrations (3 left out" in said.output, said.output
    all_same = tmp_path / "same.jsonl"
    all_same.write_text("".join(json.dumps(d) + "\n" for d in same))
    refused = rk("score", "--model", icrm_model, "--input", inp, "--out", tmp_path / "x.jsonl", "--demos", all_same)
    assert refused.exit_code == 2 and not (tmp_path / "x.jsonl").exists()
    assert refused.stderr.strip().startswith("error: ") and "\n" not in refused.stderr.strip()
    assert "same.jsonl" in refused.stderr and "nothing to steer by" in refused.stderr
    with serving(build_app(icrm_model, ServeConfig(max_wait_ms=10.0))) as url:
        served = _post_each(url, [{"items": rows, "demonstrations": demos}], 1)[0]
        registered = httpx.post(f"{url}/v1/standards", json={"id": "mixed", "demonstrations": demos}, timeout=60)
        none_left = httpx.post(f"{url}/v1/score", json={"items": rows, "demonstrations": same}, timeout=60)
    assert served["n_demonstrations"] == 3
    assert registered.json() == {"standard": "mixed", "n_demonstrations": 3}
    one_line_error(none_left, 422, "demonstrations", "nothing to steer by")
    for got, want in zip(served["results"], steered, strict=True):
        assert_same(got, want)


# ----------------------------------------------------------------------------------------------------
# Bad requests under load


def test_bad_requests_get_one_line_while_good_load_is_answered(
    bt_model: Path, rater_maps: Path, tmp_path: Path
) -> None:
    key_file = tmp_path / "key.txt"
    key_file.write_text("s3cret-key\n")
    good_rows = [{"prompt": f"question {i}", "response": f"answer number {i} " * (1 + i % 5)} for i in range(8)]
    expected = rewardsmith_score(bt_model, good_rows, tmp_path)
    auth = {"Authorization": "Bearer s3cret-key"}
    settings = ServeConfig(
        api_key_file=str(key_file), max_items=64, max_queue=4096, max_body_bytes=64 * 1024, max_wait_ms=10.0
    )
    with serving(build_app(bt_model, settings, calibration=rater_maps)) as url:
        stop = threading.Event()
        failures: list[str] = []
        answered = [0]

        def load() -> None:
            with httpx.Client(timeout=60, headers=auth) as http:
                i = 0
                while not stop.is_set():
                    k = i % len(good_rows)
                    answer = http.post(f"{url}/v1/score", json={"items": [good_rows[k]]})
                    if answer.status_code != 200:
                        failures.append(answer.text)
                    elif abs(answer.json()["results"][0]["reward"] - expected[k]["reward"]) > TOL:
                        failures.append(f"row {k}: wrong score")
                    answered[0] += 1
                    i += 1

        workers = [threading.Thread(target=load) for _ in range(4)]
        for w in workers:
            w.start()
        try:
            http = httpx.Client(timeout=60, headers=auth)
            post = f"{url}/v1/score"
            one_line_error(
                http.post(post, content=b'{"items": [', headers={"content-type": "application/json"}),
                400,
                "not valid JSON",
            )
            one_line_error(http.post(post, json={"items": "text"}), 422, "items")
            one_line_error(
                http.post(post, json={"items": [{"prompt": ["x"], "response": "y"}]}), 422, "items[0].prompt"
            )
            one_line_error(http.post(post, json={"items": [{"prompt": "x", "response": 7}]}), 422, "items[0].response")
            one_line_error(
                http.post(post, json={"items": [{"prompt": "x", "response": "ok"}], "rater": 5}), 422, "rater"
            )
            one_line_error(
                http.post(post, json={"items": [{"prompt": "x", "response": "ok"}], "colour": "red"}),
                422,
                "colour",
                "unknown field",
            )
            one_line_error(http.post(post, json=[1, 2]), 422, "JSON object")
            one_line_error(http.post(post), 422, "missing")
            one_line_error(
                http.post(post, json={"items": [{"prompt": "x", "response": "   "}]}), 422, "items[0].response", "empty"
            )
            one_line_error(http.post(f"{url}/get_reward", json={"query": [""]}), 422, "query[0]", "empty")
            one_line_error(http.post(f"{url}/classify", json={"input": ["fine", ""]}), 422, "input[1]", "empty")
            one_line_error(http.post(f"{url}/predict", json={"inputs": ["a", "b", "c"]}), 422, "inputs")
            one_line_error(http.post(f"{url}/get_reward", json={"query": ["a"], "prompts": ["a", "b"]}), 422, "prompts")
            one_line_error(http.post(post, content=b"x" * (65 * 1024)), 413, "max-body-bytes")

            def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it streams in
                yield b'{"items": ["'
                for _ in range(80):
                    yield b"y" * 1024
                yield b'"]}'

            one_line_error(http.post(post, content=chunks()), 413, "max-body-bytes")
            many = {"query": ["q"] * 10_000}
            one_line_error(http.post(f"{url}/get_reward", json=many), 413, "10000", "max-items")
            one_line_error(httpx.post(post, json={"items": good_rows[:1]}, timeout=60), 401, "API key")
            one_line_error(
                httpx.post(post, json={"items": good_rows[:1]}, headers={"Authorization": "Bearer nope"}, timeout=60),
                401,
                "wrong API key",
            )
            one_line_error(http.get(f"{url}/nowhere"), 404)
            unknown = http.post(post, json={"items": good_rows[:1], "rater": "nobody"})
            assert unknown.status_code == 200 and "population map" in unknown.json()["note"]
            assert "\n" not in unknown.json()["note"]
            assert httpx.get(f"{url}/health", timeout=60).status_code == 200  # open without a key
            # The good load goes on being answered after all that (eight more answers).
            after = answered[0]
            _wait_for(lambda: answered[0] >= after + 8)
        finally:
            stop.set()
            for w in workers:
                w.join(60)
        assert not failures, failures[:3]
        assert http.get(f"{url}/health").json()["status"] == "ok"  # and the server is still up


LONG_REPLY = "the cat sat on a mat while rain fell " * 4  # about 40 tokens: one text per round of 16 tokens


@pytest.mark.slow
def test_full_queue_gets_503_with_retry_after_and_the_client_retries(bt_model: Path) -> None:
    from rewardsmith.client import RewardClient

    settings = ServeConfig(max_items=512, max_queue=1024, max_batch_tokens=16, max_wait_ms=0.0)
    items = [{"prompt": "p", "response": f"reply {i}: {LONG_REPLY}"} for i in range(512)]
    app = build_app(bt_model, settings)

    def queued() -> float:
        return _metric(httpx.get(f"{url}/metrics", timeout=60).text, "rewardsmith_queue_texts")

    with serving(app) as url, ThreadPoolExecutor(24) as pool, RoundGate(app) as gate:
        # Nothing is scored until the gate opens: a request of 512 texts holds half the queue.
        first = pool.submit(httpx.post, f"{url}/v1/score", json={"items": items}, timeout=120)
        gate.wait(entered=1)
        assert queued() == 512
        with httpx.Client(timeout=120) as http:
            posts = [pool.submit(http.post, f"{url}/v1/score", json={"items": items}) for _ in range(8)]
            # Exactly one of the eight fits the queue (512 + 512 = 1024) and waits for the gate; the other seven
            # are refused at once.
            refused = []
            for done in as_completed(posts, timeout=120):
                refused.append(done.result())
                if len(refused) == 7:
                    break
            assert queued() == 1024 and sum(not p.done() for p in posts) == 1
            assert [a.status_code for a in refused] == [503] * 7
            assert all(a.headers["retry-after"] == "1" for a in refused)
            one_line_error(refused[0], 503, "busy", "--max-queue")
            gate.open()
            assert first.result(120).status_code == 200
            assert [p.result(120).status_code for p in posts].count(200) == 1
        # Held again: two client calls fill the queue, the third is refused until the gate opens, and retries.
        gate.hold()
        with RewardClient(url, retries=600, backoff_s=0.05, max_items_per_request=512) as client:
            calls = [pool.submit(client.rewards, ["p"] * 512, [x["response"] for x in items]) for _ in range(3)]
            _wait_for(
                lambda: (
                    _metric(
                        httpx.get(f"{url}/metrics", timeout=60).text,
                        'rewardsmith_requests_total{endpoint="/v1/score",status="503"}',
                    )
                    > len(refused)
                )
            )
            assert queued() == 1024
            gate.open()
            assert [len(c.result(300)) for c in calls] == [512] * 3


def test_request_timeout_is_504_and_the_request_stops_being_scored(bt_model: Path) -> None:
    settings = ServeConfig(request_timeout_s=0.05, max_batch_tokens=16, max_wait_ms=0.0)
    items = [{"prompt": "p", "response": f"reply {i}: {LONG_REPLY}"} for i in range(256)]
    app = build_app(bt_model, settings)
    with serving(app) as url, RoundGate(app) as gate:
        # The first round is held at the gate, so the request cannot have its scores within its 0.05 s.
        answer = httpx.post(f"{url}/v1/score", json={"items": items}, timeout=60)
        one_line_error(answer, 504, "--request-timeout-s")
        assert _metric(httpx.get(f"{url}/metrics", timeout=60).text, "rewardsmith_queue_texts") == 0
        gate.open()
        metrics = httpx.get(f"{url}/metrics", timeout=60).text
    # The server has stopped, every round it began ended: the one it held took one text of the request that timed
    # out, and no later round took any more of it (no timing here: a later request would need its own 0.05 s).
    assert [r for r in gate.rounds if any(size == 256 for size, _ in r)] == [[(256, 1)]]
    assert _metric(metrics, 'rewardsmith_errors_total{endpoint="/v1/score",kind="timeout"}') == 1


# ----------------------------------------------------------------------------------------------------
# Connections: read deadlines, clients that go away, metric labels, content types, schemas


def _raw(url: str, data: bytes = b"") -> socket.socket:
    """A TCP connection to the server that has sent `data` (part of a request, or nothing)."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    if data:
        sock.sendall(data)
    return sock


def _read_all(sock: socket.socket) -> bytes:
    """What the server sends until it closes the connection (bounded by the socket's timeout)."""
    out = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, TimeoutError):
            return out
        if not chunk:
            return out
        out += chunk


def _metric(text: str, prefix: str) -> float:
    """The sum of the samples whose line starts with `prefix` (0 when none)."""
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix))


def _wait_for(check: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def test_half_sent_requests_get_408_and_their_connections_close(bt_model: Path) -> None:
    settings = ServeConfig(header_timeout_s=0.5, body_timeout_s=0.5)
    with serving(build_app(bt_model, settings)) as url:
        half_headers = [_raw(url, b"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Le") for _ in range(10)]
        silent = [_raw(url) for _ in range(10)]
        half_body = [
            _raw(
                url,
                b"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b'Content-Length: 100\r\n\r\n{"items": [',
            )
            for _ in range(3)
        ]
        answers = [_read_all(s) for s in half_headers + silent + half_body]  # each returns once closed
        for s in half_headers + silent + half_body:
            s.close()
        assert all(a.startswith(b"HTTP/1.1 408") and b"--header-timeout-s" in a for a in answers[:10])
        assert answers[10:20] == [b""] * 10  # opened and never used: closed without an answer
        assert all(a.startswith(b"HTTP/1.1 408") and b"--body-timeout-s" in a for a in answers[20:])
        assert httpx.get(f"{url}/health", timeout=60).status_code == 200
        metrics = httpx.get(f"{url}/metrics", timeout=60).text
    assert _metric(metrics, 'rewardsmith_requests_total{endpoint="other",status="408"}') == 10
    assert _metric(metrics, 'rewardsmith_errors_total{endpoint="/v1/score",kind="read_timeout"}') == 3


def test_a_request_whose_client_goes_away_stops_being_scored(bt_model: Path) -> None:
    # 1024 texts, a few per round, rounds let through one at a time: the client closes its connection after the
    # first round, while the second is held.
    settings = ServeConfig(max_batch_tokens=16, max_wait_ms=0.0)
    body = json.dumps({"query": [f"reply number {i} to the question" for i in range(1024)]}).encode()
    app = build_app(bt_model, settings)
    with serving(app) as url, RoundGate(app) as gate:
        sock = _raw(
            url,
            b"POST /get_reward HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body),
        )
        gate.allow(1)
        gate.wait(entered=2, scored=1)
        sock.close()
        _wait_for(  # answered 499 once its job is cancelled
            lambda: (
                _metric(
                    httpx.get(f"{url}/metrics", timeout=60).text,
                    'rewardsmith_requests_total{endpoint="/get_reward",status="499"}',
                )
                == 1
            )
        )
        assert _metric(httpx.get(f"{url}/metrics", timeout=60).text, "rewardsmith_queue_texts") == 0
        gate.open()
        # A later request is answered once the worker is past the round it held.
        assert httpx.post(f"{url}/get_reward", json={"query": ["later"]}, timeout=60).status_code == 200
        metrics = httpx.get(f"{url}/metrics", timeout=60).text
    # The request's texts went into the two rounds that began before its client left, and no more.
    assert sum(any(size == 1024 for size, _ in r) for r in gate.rounds) == 2
    assert _metric(metrics, 'rewardsmith_requests_total{endpoint="/get_reward",status="499"}') == 1
    assert _metric(metrics, 'rewardsmith_errors_total{endpoint="/get_reward",kind="disconnected"}') == 1


class SeenRequests:
    """ASGI middleware for tests: sets `seen` once a request's headers are in (the app has its scope)."""

    def __init__(self, app: Any, seen: threading.Event) -> None:
        self.app = app
        self.seen = seen

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.seen.set()
        await self.app(scope, receive, send)


def test_metric_labels_of_resets_405_and_content_types(bt_model: Path) -> None:
    item = {"items": [{"prompt": "p", "response": "r"}]}
    app = build_app(bt_model, ServeConfig(max_wait_ms=0.0))
    seen = threading.Event()
    app.add_middleware(SeenRequests, seen=seen)
    with serving(app) as url:
        # A client that resets its connection in the middle of the body is a disconnect, not a bad request.
        sock = _raw(
            url,
            b"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b'Content-Length: 1000\r\n\r\n{"items": [',
        )
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with a reset
        assert seen.wait(60)  # reset once the server has begun the request (a reset before would drop its bytes)
        sock.close()
        _wait_for(
            lambda: (
                _metric(
                    httpx.get(f"{url}/metrics", timeout=60).text,
                    'rewardsmith_requests_total{endpoint="/v1/score",status="499"}',
                )
                == 1
            )
        )
        one_line_error(httpx.get(f"{url}/v1/score", timeout=60), 405)
        text = one_line_error(
            httpx.post(f"{url}/v1/score", content=json.dumps(item), headers={"content-type": "text/plain"}, timeout=60),
            415,
        )
        assert "'text/plain'" in text and "application/json" in text
        form = httpx.post(f"{url}/v1/score", data={"items": "x"}, timeout=60)
        assert "'application/x-www-form-urlencoded'" in one_line_error(form, 415)
        bare = httpx.post(f"{url}/v1/score", content=json.dumps(item), timeout=60)  # no Content-Type: read as JSON
        assert bare.status_code == 200 and len(bare.json()["results"]) == 1
        vendor = httpx.post(
            f"{url}/v1/score",
            content=json.dumps(item),
            headers={"content-type": "application/vnd.api+json; charset=utf-8"},
            timeout=60,
        )
        assert vendor.status_code == 200
        metrics = httpx.get(f"{url}/metrics", timeout=60).text
    assert _metric(metrics, 'rewardsmith_errors_total{endpoint="/v1/score",kind="disconnected"}') == 1
    assert _metric(metrics, 'rewardsmith_errors_total{endpoint="/v1/score",kind="validation"}') == 0
    assert _metric(metrics, 'rewardsmith_errors_total{endpoint="/v1/score",kind="method_not_allowed"}') == 1
    assert _metric(metrics, 'rewardsmith_errors_total{endpoint="/v1/score",kind="not_found"}') == 0
    assert _metric(metrics, 'rewardsmith_errors_total{endpoint="/v1/score",kind="unsupported_media_type"}') == 2


def test_items_and_messages_are_read_strictly(bt_url: str) -> None:
    one_line_error(httpx.post(f"{bt_url}/classify", json={"messages": "hi"}, timeout=60), 422, "messages")
    one_line_error(
        httpx.post(f"{bt_url}/v1/score", json={"items": [{"prompt": "p", "response": "r", "colour": 1}]}, timeout=60),
        422,
        "items[0].colour",
        "unknown field",
    )


def test_an_integer_too_long_for_python_is_a_422_naming_its_field(bt_url: str) -> None:
    huge = "9" * 5000  # beyond Python's int <-> str digit limit (4300)
    item = '{"prompt": "p", "response": "r"}'
    for body, field in (
        ('{"items": [' + item + '], "rater": ' + huge + "}", "rater"),
        ('{"items": [' + item + '], "standard": -' + huge + "}", "standard"),
        ('{"items": [{"prompt": ' + huge + ', "response": "r"}]}', "items[0].prompt"),
    ):
        answer = httpx.post(
            f"{bt_url}/v1/score", content=body, headers={"content-type": "application/json"}, timeout=60
        )
        one_line_error(answer, 422, field, "5000 digits" if field != "items[0].prompt" else "")
    # Integers within the limit still parse as integers (and are refused where a string belongs, as before).
    one_line_error(httpx.post(f"{bt_url}/v1/score", json={"items": [], "rater": 10**4000}, timeout=60), 422, "rater")


@pytest.mark.slow
def test_a_4_mb_text_is_answered_as_tokenising_it_whole_would(bt_model: Path) -> None:
    from rewardsmith.evaluate.scoring import RewardScorer
    from rewardsmith.models.loading import load_reward_model

    rng = random.Random(5)
    text = " ".join(rng.choice(WORDS) for _ in range(800_000))  # about 4 MB
    loaded = load_reward_model(bt_model)
    encoder = loaded.encoder()
    want = RewardScorer(loaded.model, encoder, loaded.pad_id).score_encoded([encoder.encode_unsplit(text)])[0]
    with serving(build_app(bt_model)) as url:
        answer = httpx.post(f"{url}/get_reward", json={"query": [text]}, timeout=120)
    assert answer.status_code == 200, answer.text
    assert abs(answer.json()["rewards"][0] - want) <= TOL


def test_reward_functions_and_clients_pickle(bt_url: str) -> None:
    import asyncio

    from rewardsmith.client import AsyncGRPOReward, GRPOReward, RewardClient

    prompts, completions = ["say hi", "greet me"], ["hello there", ""]
    reward = GRPOReward(bt_url, name="served")
    expected = reward(prompts=prompts, completions=completions)
    copy = pickle.loads(pickle.dumps(reward))
    assert copy.__name__ == "served" and copy(prompts=prompts, completions=completions) == expected
    assert expected[1] is None and isinstance(expected[0], float)
    async_copy = pickle.loads(pickle.dumps(AsyncGRPOReward(bt_url)))
    assert asyncio.run(async_copy(prompts=prompts, completions=completions)) == expected
    with pickle.loads(pickle.dumps(RewardClient([bt_url, bt_url], retries=1))) as client:
        assert client.rewards(prompts[:1], completions[:1]) == expected[:1] and client.retries == 1


def test_the_port_is_claimed_before_the_model_loads(tmp_path: Path) -> None:
    taken = bind_socket("127.0.0.1", 0)
    taken.listen()
    try:
        # The model folder does not exist: the error is the port's, so the port was tried first.
        result = rk("serve", "--model", tmp_path / "no-model-here", "--port", str(taken.getsockname()[1]))
    finally:
        taken.close()
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and "cannot listen" in lines[0], result.stderr


@pytest.mark.slow
def test_one_large_request_does_not_hold_back_small_ones(bt_model: Path) -> None:
    # Rounds of at most 256 tokens, so a 1024-text request takes dozens of rounds. Three waves of 8 small requests
    # arrive while it is being scored; each wave is answered within a few rounds, not behind it. The worker is let
    # through one round at a time, so rounds are counted, not timed.
    settings = ServeConfig(max_batch_tokens=256, max_wait_ms=0.0)
    rows = score_rows(64, seed=3)
    small = [
        {"query": [row["prompt"] + " " + (row.get("response") or row["chosen"])]}
        for row in rows
        if isinstance(row["prompt"], str)
    ][:8]
    large = {"query": [b["query"][0] for b in small] * 128}
    app = build_app(bt_model, settings)

    def small_texts_scored() -> int:
        return sum(texts for r in gate.rounds for size, texts in r if size == 1)

    with serving(app) as url, ThreadPoolExecutor(9) as pool, RoundGate(app) as gate:
        big = pool.submit(httpx.post, f"{url}/get_reward", json=large, timeout=120)
        gate.wait(entered=1)  # the large request's first round is held: it is queued whole
        rounds_per_wave = []
        for wave in range(3):
            answers = [pool.submit(httpx.post, f"{url}/get_reward", json=body, timeout=120) for body in small]
            _wait_for(
                lambda: _metric(httpx.get(f"{url}/metrics", timeout=60).text, "rewardsmith_queue_texts") == 1024 + 8
            )
            released = 0
            while small_texts_scored() < 8 * (wave + 1):
                before = gate.scored
                gate.allow(1)
                released += 1
                gate.wait(scored=before + 1)
            rounds_per_wave.append(released)
            assert all(a.result(120).status_code == 200 for a in answers)
            assert not big.done()
        large_scored = sum(texts for r in gate.rounds for size, texts in r if size == 1024)
        gate.open()
        answer = big.result(120)
    assert answer.status_code == 200 and len(answer.json()["rewards"]) == 1024
    # The first round a wave lets through was planned before it arrived; the small requests share the next ones
    # with the large request, which is far from done when the third wave has its answers.
    assert all(n <= 4 for n in rounds_per_wave), rounds_per_wave
    assert large_scored < 256, large_scored


def test_cli_refuses_bad_settings_in_one_line(bt_model: Path, tmp_path: Path) -> None:
    for args, needle in (
        (["--model", tmp_path / "missing"], "missing"),
        (["--model", bt_model, "--port", "70000"], "port"),
        (["--model", bt_model, "--precision", "fp16"], "precision"),
        (["--model", bt_model, "--api-key-file", tmp_path / "nokey"], "nokey"),
        (["--model", bt_model, "--max-items", "9000"], "max_queue"),
        (["--model", bt_model, "--monitor-empty-share", "0"], "monitor.empty_share"),
    ):
        result = rk("serve", *args)
        lines = [x for x in result.stderr.splitlines() if x.strip()]
        assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), result.stderr
        assert needle in lines[0], lines[0]


def test_client_imports_no_torch() -> None:
    code = (
        "import sys, rewardsmith.client; heavy = [m for m in sys.modules if m.split('.')[0] in "
        "('torch', 'numpy', 'transformers', 'fastapi')]; print(heavy); sys.exit(bool(heavy))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")},
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_client_errors_are_one_line(bt_url: str) -> None:
    from rewardsmith.client import RewardClient, RewardClientError, parse_urls

    assert parse_urls("http://a:1/get_reward, http://b:2/") == ["http://a:1", "http://b:2"]
    with RewardClient(bt_url) as client, pytest.raises(RewardClientError, match=r"items\[0\]\.response") as bad:
        client.score([{"prompt": "p", "response": ""}])
    assert bad.value.status == 422
    dead = bind_socket("127.0.0.1", 0)  # bound, never listening: connections are refused
    dead_url = f"http://127.0.0.1:{dead.getsockname()[1]}"
    with (
        RewardClient(dead_url, retries=2, backoff_s=0.01) as client,
        pytest.raises(RewardClientError, match="after 3 attempts"),
    ):
        client.rewards(["p"], ["r"])
    # With a dead server in the list, requests fail over to the live one.
    with RewardClient([dead_url, bt_url], retries=3, backoff_s=0.01) as client:
        assert len(client.rewards(["p"] * 6, [f"r{i}" for i in range(6)])) == 6
    dead.close()


# ----------------------------------------------------------------------------------------------------
# Processes: two servers behind the client's sharding; graceful shutdown


# `rewardsmith serve` with its scoring rounds held while the file SERVE_TEST_HOLD names exists, and each round
# taking at least SERVE_TEST_ROUND_S seconds more: the tests below count on the work in flight, not on timing.
SERVE_BOOT = """
import os, sys, time
from pathlib import Path
from rewardsmith.serve import engine
hold = os.environ.get("SERVE_TEST_HOLD")
extra_s = float(os.environ.get("SERVE_TEST_ROUND_S", "0"))
score_round = engine.ScoringEngine.score_round
def held(self, pieces):
    while hold and Path(hold).exists():
        time.sleep(0.01)
    time.sleep(extra_s)
    return score_round(self, pieces)
engine.ScoringEngine.score_round = held
sys.argv[0] = "rewardsmith"
from rewardsmith.cli import main
main()
"""


@contextmanager
def server_process(
    model: Path, log: Path, *extra: str, hold: Path | None = None, round_s: float = 0.0
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`rewardsmith serve --port 0` in its own process; yields (base URL, process). hold: while this file exists
    the server scores nothing; round_s: seconds each scoring round takes beyond its forward passes."""
    env = {**os.environ, **ENV, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    env |= {"SERVE_TEST_HOLD": str(hold or ""), "SERVE_TEST_ROUND_S": str(round_s)}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", SERVE_BOOT, "serve", "--model", str(model), "--port", "0", *extra],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        deadline = time.monotonic() + 180
        url = None
        while url is None:
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "server did not start: " + log.read_text()
            for line in log.read_text().splitlines():
                if line.startswith("serving "):
                    url = line.split(" on ")[1].split()[0]
            time.sleep(0.1)
        while True:  # the socket is bound before the app starts: wait for it to answer
            try:
                if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        yield url, proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


@pytest.mark.slow
def test_two_server_processes_behind_the_client(bt_model: Path, tmp_path: Path) -> None:
    from rewardsmith.client import AsyncRewardClient, RewardClient

    rows = [{"prompt": f"question {i}", "response": f"reply {i} " * (1 + i % 7)} for i in range(40)]
    expected = [r["reward"] for r in rewardsmith_score(bt_model, rows, tmp_path)]
    with (
        server_process(bt_model, tmp_path / "a.log") as (url_a, _),
        server_process(bt_model, tmp_path / "b.log") as (url_b, _),
    ):
        urls = f"{url_a},{url_b}"
        with RewardClient(urls) as client:
            got = client.rewards([r["prompt"] for r in rows], [r["response"] for r in rows])
            singles = [client.rewards([r["prompt"]], [r["response"]])[0] for r in rows[:10]]
            queries = client.get_reward([r["prompt"] + r["response"] for r in rows], [r["prompt"] for r in rows])
        async_client = AsyncRewardClient([url_a, url_b])

        async def run() -> list[float]:
            try:
                return await async_client.rewards([r["prompt"] for r in rows], [r["response"] for r in rows])
            finally:
                await async_client.aclose()

        import asyncio

        got_async = asyncio.run(run())
        served = [_served(httpx.get(f"{u}/metrics", timeout=60).text) for u in (url_a, url_b)]
    for values in (got, got_async, queries):
        assert max(abs(a - b) for a, b in zip(values, expected, strict=True)) <= TOL
    assert max(abs(a - b) for a, b in zip(singles, expected[:10], strict=True)) <= TOL
    # 16 requests (2 + 10 + 2 sync, 2 async), round robin: both servers took a share.
    assert sum(served) == 16 and min(served) >= 6, served


def _served(metrics: str) -> float:
    """Requests a server answered with 200 on /v1/score and /get_reward."""
    total = 0.0
    for line in metrics.splitlines():
        if (
            line.startswith("rewardsmith_requests_total{")
            and 'status="200"' in line
            and ("/v1/score" in line or "/get_reward" in line)
        ):
            total += float(line.split()[-1])
    return total


@pytest.mark.slow
def test_sigterm_drains_requests_in_flight(bt_model: Path, tmp_path: Path) -> None:
    # One text of about 400 tokens per round: 16 requests of 8 texts take 128 rounds (a second or so), well
    # inside the default 30 s grace period. The server scores nothing until every request is queued and SIGTERM
    # has come: all 128 texts are in flight when it does.
    log, hold = tmp_path / "server.log", tmp_path / "hold"
    hold.touch()
    reply = "the cat sat on a mat " * 70
    with server_process(bt_model, log, "--max-batch-tokens", "16", "--max-length", "512", hold=hold) as (url, proc):
        bodies = [{"items": [{"prompt": "p", "response": f"reply {i}: {reply}"}] * 8} for i in range(16)]
        with httpx.Client(timeout=60) as http, ThreadPoolExecutor(16) as pool:
            pending = [pool.submit(http.post, f"{url}/v1/score", json=b) for b in bodies]
            _wait_for(
                lambda: _metric(httpx.get(f"{url}/metrics", timeout=60).text, "rewardsmith_queue_texts") == 16 * 8
            )
            proc.send_signal(signal.SIGTERM)
            _wait_for(lambda: "stopping: " in log.read_text())
            hold.unlink()
            answers = [p.result(60) for p in pending]
        assert proc.wait(60) == 0
    assert [a.status_code for a in answers] == [200] * 16
    assert all(len(a.json()["results"]) == 8 for a in answers)
    assert log.read_text().strip().splitlines()[-1] == "stopped"


@pytest.mark.slow
def test_sigterm_under_load_answers_200_or_503_and_exits_within_the_timeout(bt_model: Path, tmp_path: Path) -> None:
    # One text per round, each round at least 5 ms: a 4096-text request (over 20 s) cannot finish in the 6 s grace
    # period however fast the machine; small requests keep coming on keep-alive connections. Every request gets 200
    # or 503 (none 500, no reset) and the process exits in time.
    log = tmp_path / "server.log"
    grace = 6.0
    with server_process(
        bt_model,
        log,
        "--shutdown-timeout-s",
        str(grace),
        "--max-batch-tokens",
        "16",
        "--max-length",
        "512",
        "--max-items",
        "4096",
        "--max-queue",
        "16384",
        round_s=0.005,
    ) as (url, proc):
        statuses: list[int] = []
        long_status: list[int] = []
        retry_after: list[str | None] = []
        errors: list[str] = []
        signalled = threading.Event()

        def client(body: dict[str, Any]) -> None:
            with httpx.Client(timeout=60) as http:
                while True:
                    try:
                        answer = http.post(f"{url}/get_reward", json=body)
                    except httpx.ConnectError:
                        if not signalled.is_set():
                            errors.append("refused before SIGTERM")
                        return  # the server has stopped accepting connections
                    except httpx.TransportError as exc:
                        errors.append(f"{type(exc).__name__}: {exc}")
                        return
                    statuses.append(answer.status_code)
                    if len(body["query"]) > 1:
                        long_status.append(answer.status_code)
                    if answer.status_code != 200:
                        retry_after.append(answer.headers.get("retry-after"))
                        return

        bodies = [{"query": [f"a short reply {k}"]} for k in range(8)]
        # About 400 tokens a text, one text a round: the long request needs more than 20 s, past the grace period.
        bodies.append({"query": [f"reply number {i}: " + "the cat sat on a mat " * 70 for i in range(4096)]})
        threads = [threading.Thread(target=client, args=(body,)) for body in bodies]
        for t in threads:
            t.start()
        # The long request is queued (its texts are tokenised) and the small ones are being answered.
        _wait_for(
            lambda: (
                _metric(httpx.get(f"{url}/metrics", timeout=60).text, "rewardsmith_queue_texts") >= 4096
                and len(statuses) >= 20
            )
        )
        signalled.set()
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
        elapsed = time.monotonic() - t0
        for t in threads:
            t.join(60)
    assert not errors, errors[:3]
    assert set(statuses) <= {200, 503} and statuses.count(503) >= 1, statuses[-20:]
    assert long_status == [503]  # it could not be finished in the grace period
    assert retry_after and all(value == "1" for value in retry_after)
    assert code == 0 and elapsed <= grace, (code, elapsed)
    text = log.read_text()
    assert "Traceback" not in text and "Error" not in text, text[-3000:]
    assert text.strip().splitlines()[-1] == "stopped"


@pytest.mark.slow
def test_grpo_steps_with_rewards_from_the_server(bt_model: Path, tiny_grpo_trainer) -> None:
    from rewardsmith.client import AsyncGRPOReward, GRPOReward

    with serving(build_app(bt_model, ServeConfig(max_wait_ms=10.0))) as url:
        sync_reward, async_reward = GRPOReward(url, name="served"), AsyncGRPOReward(url, name="served_async")
        trainer = tiny_grpo_trainer([sync_reward, async_reward])
        trainer.train()
        served = _served(httpx.get(f"{url}/metrics", timeout=60).text)
    assert trainer.state.global_step == 2
    logged = [h for h in trainer.state.log_history if any(k.startswith("rewards/served") for k in h)]
    assert logged, trainer.state.log_history
    assert served >= 4  # both reward functions, both steps
    # The sync and async functions score the same completions: their logged means agree.
    for entry in logged:
        means = [v for k, v in entry.items() if k.startswith("rewards/") and k.endswith("/mean")]
        assert len(means) == 2 and means[0] == pytest.approx(means[1], abs=1e-4)


def test_the_monitors_see_what_the_server_scores(bt_url: str) -> None:
    before = httpx.get(f"{bt_url}/v1/monitors", timeout=30).json()["stats"]["texts"]
    items = [{"prompt": f"question {k % 2}", "response": "word " * (k + 1)} for k in range(6)]
    assert httpx.post(f"{bt_url}/v1/score", json={"items": items}, timeout=60).status_code == 200
    snap = httpx.get(f"{bt_url}/v1/monitors", timeout=30).json()
    assert snap["stats"]["texts"] == min(before + 6, snap["window"]) and snap["rules"] == [
        "length",
        "brevity",
        "repetition",
        "collapse",
        "shrinking",
    ]
    assert snap["stats"]["groups"] >= 2  # the two prompts, three responses each
    text = httpx.get(f"{bt_url}/metrics", timeout=30).text
    for name in ("length_corr", "texts", "empty_share"):
        assert f"rewardsmith_monitor_{name} " in text, name


def test_the_monitor_options_reach_the_monitors(bt_model: Path) -> None:
    from rewardsmith.serve.config import MonitorConfig

    rules = MonitorConfig(shrink_floor_chars=8.0, empty_chars=1)
    monitor = build_app(bt_model, ServeConfig(monitor=rules)).state.server.monitor
    assert monitor is not None and monitor.rules == rules and monitor.rules != MonitorConfig()
    assert build_app(bt_model, ServeConfig(monitor_window=0)).state.server.monitor is None
