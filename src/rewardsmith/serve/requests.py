"""Request bodies of every endpoint and their conversion to (prompt text, response) texts.

Prompts are read as `rewardsmith score` reads its `prompt` field (data/adapters/generic.py: plain user text, an
HH transcript or a chat list; a native item is parsed by the same `parse_score_record`), so a text scores the
same through the server and through `rewardsmith score`. A text sent without a prompt (vLLM `input`, a TEI
single text, an OpenRLHF query that does not start with its prompt) is scored as a response to no prompt at
all: the prompt text is "" and the sequence holds the tokenizer's pair template around the response only.
Unpaired UTF-16 surrogates (JSON escapes such as "\\ud800") are replaced by U+FFFD, as `score` does.

Every problem is a RequestError: an HTTP status and one line naming the field (`query[3]: empty response`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict
from starlette.exceptions import HTTPException

from rewardsmith.data.adapters._common import BadRow
from rewardsmith.data.adapters.generic import parse_prompt, parse_response, parse_score_record
from rewardsmith.data.schema import PreferencePair, Turn, render_turns, sanitise_pair, sanitise_text

Text = tuple[str, str]  # (prompt text, response); "" as the prompt text: no prompt


class RequestError(HTTPException):
    """A request the server refuses: status code and a one-line message (the response body's `error`)."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(status_code=status, detail=message, headers=headers)


def invalid(field: str, message: str) -> RequestError:
    return RequestError(422, f"{field}: {message}")


def check_count(n: int, field: str, max_items: int) -> None:
    """413 when a request holds more than max_items texts or pairs."""
    if n > max_items:
        raise RequestError(413, f"{field}: {n} items; at most {max_items} per request (--max-items)")


# ----------------------------------------------------------------------------------------------------
# Bodies. Strict types (no "1" read as 1 or true); fields other servers define and this one does not use are
# accepted and ignored on the drop-in endpoints, refused on the native ones.


class _Compatible(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")


class _Native(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")


class GetRewardRequest(_Compatible):
    """OpenRLHF remote reward (`--remote_rm_url`): full prompt + response strings, their prompts, labels."""

    query: list[str]
    prompts: list[str | None] | None = None
    labels: list[Any] | None = None


class TextsRequest(_Compatible):
    """vLLM /classify and /pooling: `input` (a text or a list of texts) or `messages` (one conversation ending
    with the assistant's reply). use_activation (activation and softmax are its deprecated names): sigmoid."""

    model: str | None = None
    input: Any = None
    messages: Any = None
    use_activation: bool | None = None
    activation: bool | None = None
    softmax: bool | None = None

    def wants_activation(self) -> bool:
        """The first of use_activation, activation, softmax that is given; raw scores when none is."""
        for value in (self.use_activation, self.activation, self.softmax):
            if value is not None:
                return value
        return False


class PredictRequest(_Compatible):
    """text-embeddings-inference /predict. inputs: a text, a [text, text_pair] pair, or a batch (a list of
    those as lists). raw_scores: false asks for the sigmoid; true or absent gives raw scores."""

    inputs: Any
    truncate: bool | None = None
    truncation_direction: str | None = None
    raw_scores: bool | None = None


class ScoreRequest(_Native):
    """Native scoring. items: {prompt, response} or {prompt, chosen, rejected}; rater: map the rewards to this
    rater's scale (--calibration); demonstrations or standard: steer an in-context model."""

    items: list[Any]
    rater: str | None = None
    demonstrations: list[Any] | None = None
    standard: str | None = None


class StandardRequest(_Native):
    """Registers demonstrations under an id (default: a hash of the demonstrations)."""

    demonstrations: list[Any]
    id: str | None = None


# ----------------------------------------------------------------------------------------------------
# Texts


def prompt_text(turns: Sequence[Turn]) -> str:
    """The HH framing of a conversation (as PreferencePair.prompt_text), or "" for none."""
    return render_turns(tuple(turns)) if turns else ""


def _clean(text: str) -> str:
    return sanitise_text(text)[0]


def _response(value: Any, field: str) -> str:
    """A non-empty string, sanitised."""
    if not isinstance(value, str):
        raise invalid(field, f"expected a string, got {type(value).__name__}")
    if not value.strip():
        raise invalid(field, "empty text")
    return _clean(value)


def score_items(records: Sequence[Any], field: str = "items") -> tuple[list[Text], list[bool]]:
    """Texts of native items (a single response: one text; a pair: chosen then rejected) and whether each item
    is a single response."""
    texts: list[Text] = []
    singles: list[bool] = []
    for i, record in enumerate(records):
        try:
            pair, single = parse_score_record(record)
        except BadRow as bad:
            raise invalid(f"{field}[{i}]" + (f".{bad.field}" if bad.field else ""), bad.message) from None
        pair, _ = sanitise_pair(pair)
        prompt = pair.prompt_text()
        texts.append((prompt, pair.chosen))
        if not single:
            texts.append((prompt, pair.rejected))
        singles.append(single)
    return texts, singles


def demonstrations(records: Sequence[Any], field: str = "demonstrations") -> tuple[PreferencePair, ...]:
    """Demonstration pairs {prompt, chosen, rejected}, sanitised."""
    out = []
    for i, record in enumerate(records):
        where = f"{field}[{i}]"
        if isinstance(record, Mapping) and "response" in record and "chosen" not in record:
            raise invalid(where, "a demonstration needs `chosen` and `rejected`")
        try:
            pair, _ = parse_score_record(record)
        except BadRow as bad:
            raise invalid(where + (f".{bad.field}" if bad.field else ""), bad.message) from None
        out.append(sanitise_pair(pair)[0])
    return tuple(out)


def query_texts(query: Sequence[str], prompts: Sequence[str | None] | None) -> list[Text]:
    """OpenRLHF queries: when prompts[i] is a non-empty string and query[i] starts with it, the prompt is read
    as `score` reads a prompt and the response is the rest of the query; otherwise the whole query is the
    response to no prompt."""
    if prompts is not None and len(prompts) != len(query):
        raise invalid("prompts", f"{len(prompts)} prompts for {len(query)} queries")
    texts: list[Text] = []
    for i, q in enumerate(query):
        p = prompts[i] if prompts is not None else None
        if p and p.strip() and q.startswith(p):
            response = q[len(p):]
            if not response.strip():
                raise invalid(f"query[{i}]", "empty response (the query holds only its prompt)")
            try:
                turns = parse_prompt(_clean(p), f"prompts[{i}]")
            except BadRow as bad:
                raise invalid(f"prompts[{i}]", bad.message) from None
            texts.append((prompt_text(turns), _clean(response)))
        else:
            texts.append(("", _response(q, f"query[{i}]")))
    return texts


def conversation_text(messages: Any, field: str = "messages") -> Text:
    """A chat list ending with the assistant's reply: the reply is the response, the messages before it the
    prompt."""
    try:
        response, turns = parse_response(messages, field)
    except BadRow as bad:
        raise invalid(bad.field or field, bad.message) from None
    turns = tuple(Turn(t.role, _clean(t.content)) for t in turns)
    return prompt_text(turns), _clean(response)


def input_texts(body: TextsRequest) -> list[Text]:
    """vLLM `input` (texts scored as responses to no prompt) or `messages` (one conversation)."""
    if (body.input is None) == (body.messages is None):
        raise invalid("input", "give exactly one of `input` (a text or a list of texts) and `messages`")
    if body.messages is not None:
        return [conversation_text(body.messages)]
    values = [body.input] if isinstance(body.input, str) else body.input
    if not isinstance(values, list):
        raise invalid("input", f"expected a string or a list of strings, got {type(body.input).__name__}")
    if not values:
        raise invalid("input", "empty list")
    return [("", _response(v, f"input[{i}]")) for i, v in enumerate(values)]


def predict_texts(inputs: Any) -> tuple[list[Text], bool]:
    """TEI inputs as TEI reads them: a string is one text; a list of one or two strings is one sequence (a
    text, or a (text, text_pair) pair: prompt and response); a list of such lists is a batch. Returns the
    texts and whether the request was a batch."""
    if isinstance(inputs, str):
        return [("", _response(inputs, "inputs"))], False
    if isinstance(inputs, list) and inputs and all(isinstance(x, str) for x in inputs):
        return [_sequence(inputs, "inputs")], False
    if isinstance(inputs, list) and inputs and all(isinstance(x, list) for x in inputs):
        return [_sequence(x, f"inputs[{i}]") for i, x in enumerate(inputs)], True
    raise invalid("inputs", "expected a string, a [text] or [text, text_pair] list, or a list of those lists")


def _sequence(values: list[Any], field: str) -> Text:
    if len(values) == 1:
        return "", _response(values[0], f"{field}[0]")
    if len(values) == 2:
        prompt = _response(values[0], f"{field}[0]")
        try:
            turns = parse_prompt(prompt, f"{field}[0]")
        except BadRow as bad:
            raise invalid(f"{field}[0]", bad.message) from None
        return prompt_text(turns), _response(values[1], f"{field}[1]")
    raise invalid(field, f"a sequence is [text] or [text, text_pair], got {len(values)} strings")
