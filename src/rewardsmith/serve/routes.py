"""The reward server's endpoints, in three groups: the drop-in ones other trainers' clients call (OpenRLHF
/get_reward, vLLM /classify and /pooling, TEI /predict), the native ones (/v1/score, /v1/standards) and the
information ones (/health, /v1/models, /metrics, /v1/monitors); and the builders of their responses. Each route
reads its body (gate.read_json, requests.read_body), scores through ServerState.score and answers; every refusal
is a RequestError the gate's handlers answer in one line."""

from __future__ import annotations

import time
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from rewardsmith.icrm.scoring import demo_key
from rewardsmith.inference import Standard, TextScores, item_results
from rewardsmith.serve.engine import check_in_context
from rewardsmith.serve.gate import read_json
from rewardsmith.serve.requests import (
    GetRewardRequest,
    PredictRequest,
    RequestError,
    ScoreRequest,
    StandardRequest,
    TextsRequest,
    check_count,
    demonstrations,
    input_texts,
    invalid,
    predict_texts,
    query_texts,
    read_body,
    score_items,
)
from rewardsmith.serve.state import ServerState
from rewardsmith.stats import sigmoid

LABEL = "LABEL_0"  # the label transformers gives the one class of a single-logit classifier


def add_routes(app: FastAPI, state: ServerState) -> None:
    """Every endpoint of the server, on `app`, over `state`."""
    _add_drop_in_routes(app, state)
    _add_native_routes(app, state)
    _add_info_routes(app, state)


def _add_drop_in_routes(app: FastAPI, state: ServerState) -> None:
    """The endpoints of other servers, as their clients call them: OpenRLHF, vLLM and TEI."""
    max_items = state.settings.max_items

    @app.post("/get_reward")
    async def get_reward(request: Request) -> JSONResponse:
        """OpenRLHF: {"query": [...], "prompts": [...], "labels": [...]} -> rewards (raw), scores (the same
        values, as OpenRLHF's own serve_rm answers), extra_logs; an ensemble adds uncertainties (the sd of its
        standardised members per query)."""
        body = read_body(GetRewardRequest, await read_json(request))
        check_count(len(body.query), "query", max_items)
        scores = await state.score(request, query_texts(body.query, body.prompts), field="query")
        rewards = _values(scores, False)
        logs = {"unsplit_texts": [len(scores.unsplit)] * len(rewards)} if scores.unsplit else {}
        spread = {} if scores.uncertainty is None else {"uncertainties": [float(u) for u in scores.uncertainty]}
        return JSONResponse({"rewards": rewards, "scores": rewards, **spread, "extra_logs": logs, **_unsplit(scores)})

    async def vllm_scores(request: Request) -> tuple[list[float], TextScores]:
        """A vLLM /classify or /pooling request's texts scored: each text's value (its reward, or the reward's
        sigmoid when the request asks for the activation) and the scores."""
        body = read_body(TextsRequest, await read_json(request))
        texts = input_texts(body)
        check_count(len(texts), "input", max_items)
        scores = await state.score(request, texts)
        return _values(scores, body.wants_activation()), scores

    @app.post("/classify")
    async def classify(request: Request) -> JSONResponse:
        """vLLM classify: one entry per text, probs = [reward] (num_classes 1)."""
        values, scores = await vllm_scores(request)
        data = [{"index": i, "label": LABEL, "probs": [v], "num_classes": 1} for i, v in enumerate(values)]
        return JSONResponse(_vllm_list("classify", state.name, data, scores))

    @app.post("/pooling")
    async def pooling(request: Request) -> JSONResponse:
        """vLLM pooling: the pooled output of a reward model is its reward, as a 1-element list per text."""
        values, scores = await vllm_scores(request)
        data = [{"index": i, "object": "pooling", "data": [v]} for i, v in enumerate(values)]
        return JSONResponse(_vllm_list("pool", state.name, data, scores))

    @app.post("/predict")
    async def predict(request: Request) -> JSONResponse:
        """TEI predict: [{score, label}] for one sequence, a list of those for a batch."""
        body = read_body(PredictRequest, await read_json(request))
        texts, batched = predict_texts(body.inputs)
        check_count(len(texts), "inputs", max_items)
        scores = await state.score(request, texts, field="inputs")
        values = _values(scores, body.raw_scores is False)
        predictions = [[{"score": v, "label": LABEL}] for v in values]
        headers = {"X-Rewardsmith-Note": UNSPLIT_NOTE.format(scores.unsplit)} if scores.unsplit else None
        return JSONResponse(predictions if batched else predictions[0], headers=headers)


def _add_native_routes(app: FastAPI, state: ServerState) -> None:
    """rewardsmith's own endpoints: scoring of responses and pairs, with rater maps and ICRM standards."""
    max_items = state.settings.max_items

    @app.post("/v1/score")
    async def score(request: Request) -> JSONResponse:
        """Native scoring; see ScoreRequest and docs/serve.md."""
        body = read_body(ScoreRequest, await read_json(request))
        check_count(len(body.items), "items", max_items)
        if not body.items:
            raise invalid("items", "empty list")
        if body.rater is not None and state.maps is None:
            raise invalid("rater", "this server has no rater maps (start it with --calibration)")
        texts, singles = score_items(body.items)
        standard = state.standard_for(body.standard, body.demonstrations)
        scores = await state.score(request, texts, standard, field="items", singles=singles)
        return JSONResponse(_native_response(state, body, scores, singles, standard))

    @app.post("/v1/standards")
    async def register_standard(request: Request) -> JSONResponse:
        """Registers demonstrations under an id; their ICRM context is computed now and cached."""
        body = read_body(StandardRequest, await read_json(request))
        check_in_context(state.engine, "demonstrations")
        if not body.demonstrations:
            raise invalid("demonstrations", "empty list")
        check_count(len(body.demonstrations), "demonstrations", max_items)
        if body.id is not None and not (0 < len(body.id) <= 128 and body.id.strip() == body.id):
            raise invalid("id", "1 to 128 characters, no surrounding spaces")
        pairs = demonstrations(body.demonstrations)
        key = demo_key(pairs)
        standard_id = body.id or key[:16]
        known = state.standards.get(standard_id)
        if known is not None and known.key != key:
            raise RequestError(409, f"id: standard {standard_id!r} is registered with other demonstrations")
        if known is None and len(state.standards) >= state.settings.max_standards:
            raise RequestError(
                422,
                f"id: {len(state.standards)} standards are registered (--max-standards {state.settings.max_standards})",
            )
        standard = Standard(key, pairs, registered=True)
        await state.score(request, [], standard)
        state.standards[standard_id] = standard
        return JSONResponse({"standard": standard_id, "n_demonstrations": len(pairs)})


def _add_info_routes(app: FastAPI, state: ServerState) -> None:
    """What the server says about itself: health, the model card, Prometheus metrics and the monitors."""

    @app.get("/health")
    async def health() -> JSONResponse:
        return JSONResponse(
            {
                "status": "ok",
                "model": state.name,
                "model_type": state.engine.model_type,
                "waiting_texts": state.batcher.waiting,
            }
        )

    @app.get("/v1/models")
    async def models() -> JSONResponse:
        return JSONResponse({"object": "list", "data": [_model_card(state)]})

    @app.get("/metrics")
    async def metrics() -> Response:
        if state.monitor is not None:
            state.monitor.snapshot()  # the monitor gauges, as of now
        return Response(state.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    @app.get("/v1/monitors")
    async def monitors() -> JSONResponse:
        """The reward-hacking monitors over the window (serve/monitors.py): statistics, rules firing, counts."""
        if state.monitor is None:
            raise RequestError(404, "the monitors are off (--monitor-window 0)")
        return JSONResponse(state.monitor.snapshot())


def _model_card(state: ServerState) -> dict[str, Any]:
    """The served model, OpenAI-style, with what rewardsmith knows of it (kind, backbone, template, limits)."""
    loaded = state.engine.loaded
    cfg = loaded.model_config
    return {
        "id": state.name,
        "object": "model",
        "created": state.started,
        "owned_by": "rewardsmith",
        "root": str(state.model_dir),
        "model_type": state.engine.model_type,
        "model_kind": loaded.kind,
        "kind": loaded.meta.get("kind"),
        "backbone": cfg.backbone if cfg is not None else None,
        "template": loaded.template,
        "max_length": loaded.max_length,
        "precision": "bf16" if state.engine.bf16 else "fp32",
        "max_batch_tokens": state.engine.max_batch_tokens,
        "calibration": state.calibration,
        "standards": sorted(state.standards),
    }


def _values(scores: TextScores, activation: bool) -> list[float]:
    values = sigmoid(scores.rewards) if activation else scores.rewards
    return [float(v) for v in values]


def _vllm_list(prefix: str, model: str, data: list[dict[str, Any]], scores: Any) -> dict[str, Any]:
    """vLLM's list envelope of /classify and /pooling responses around `data`."""
    return {
        "id": f"{prefix}-{uuid.uuid4().hex}",
        "object": "list",
        "created": int(time.time()),
        "model": model,
        "data": data,
        "usage": _usage(scores.tokens),
        **_unsplit(scores),
    }


def _usage(tokens: int) -> dict[str, Any]:
    return {"prompt_tokens": tokens, "total_tokens": tokens, "completion_tokens": 0, "prompt_tokens_details": None}


UNSPLIT_NOTE = (
    "texts {} were scored verbatim: rendering the turns read off each with the model's template does not give the "
    "text, so each was tokenised whole (cut from its start when too long) and its reward can differ from "
    "`rewardsmith score` on the same conversation"
)


def _unsplit(scores: TextScores) -> dict[str, Any]:
    """What a response says about texts that could not be split into turns (empty when every one was)."""
    if not scores.unsplit:
        return {}
    return {"rewardsmith": {"unsplit": scores.unsplit, "note": UNSPLIT_NOTE.format(scores.unsplit)}}


def _native_response(
    state: ServerState, body: ScoreRequest, scores: TextScores, singles: list[bool], standard: Standard | None
) -> dict[str, Any]:
    """results[i] as `rewardsmith score` writes them (inference.item_results): {reward} (+ confidence) for a
    single response; {reward_chosen, reward_rejected, p_chosen} (+ confidences) for a pair, p_chosen on the model's
    own scale before any rater map. Under a standard, n_demonstrations: how many demonstrations steered the scores
    (icrm.scoring.steering_demos)."""
    rater, note = None, None
    if body.rater is not None:
        known = state.maps.apply(body.rater, scores.rewards[:1])[1]
        rater = {"id": body.rater, "known": known, "map": "rater" if known else "population"}
        if not known:
            note = f"rater {body.rater!r} is not in {state.calibration}: the population map was used"
    results = item_results(singles, scores, state.maps if body.rater is not None else None, body.rater)
    out: dict[str, Any] = {
        "model": state.name,
        "results": results,
        "rater": rater,
        "standard": _standard_name(state, standard),
        **({"n_demonstrations": len(standard.demos)} if standard is not None else {}),
        **_unsplit(scores),
    }
    if note:
        out["note"] = note
    return out


def _standard_name(state: ServerState, standard: Standard | None) -> str | None:
    if standard is None:
        return None
    for name, known in state.standards.items():
        if known.key == standard.key:
            return name
    return f"ad-hoc:{standard.key[:16]}"
