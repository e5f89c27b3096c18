"""Request bodies of every endpoint and their conversion to the texts the model scores (inference.TextItem, read
by the model's template as every command reads it: rewardsmith/inference/items.py).

A native item is parsed by the same `parse_score_record` as a `score` file's row. Unpaired UTF-16 surrogates (JSON
escapes such as "\\ud800") are replaced by U+FFFD, as `score` does.

Every problem is a RequestError: an HTTP status and one line naming the field (`query[3]: empty response`).
"""

from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from starlette.exceptions import HTTPException

from rewardsmith.config import from_dict
from rewardsmith.data.adapters._common import BadRow
from rewardsmith.data.adapters.generic import parse_response, parse_score_record
from rewardsmith.data.schema import PreferencePair, Turn, sanitise_pair, sanitise_text
from rewardsmith.errors import ConfigError
from rewardsmith.icrm.scoring import steering_demos
from rewardsmith.inference import TextItem


class RequestError(HTTPException):
    """A request the server refuses: status code and a one-line message (the response body's `error`). kind:
    how /metrics counts it when the status alone does not say (serve.metrics.error_kind)."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None, kind: str | None = None):
        super().__init__(status_code=status, detail=message, headers=headers)
        self.kind = kind


def invalid(field: str, message: str) -> RequestError:
    return RequestError(422, f"{field}: {message}")


def check_count(n: int, field: str, max_items: int) -> None:
    """413 when a request holds more than max_items texts or pairs."""
    if n > max_items:
        raise RequestError(413, f"{field}: {n} items; at most {max_items} per request (--max-items)")


# ----------------------------------------------------------------------------------------------------
# Bodies: frozen dataclasses read by rewardsmith.config.from_dict, the loader every rewardsmith config goes
# through, so types are exact (no "1" read as 1 or true) and a problem is one line naming the field. Fields other
# servers define and this one does not use are accepted and ignored on the drop-in endpoints (UNKNOWN_FIELDS
# "ignore"), refused on the native ones ("refuse").


@dataclass(frozen=True)
class GetRewardRequest:
    """OpenRLHF remote reward (`--remote_rm_url`): full prompt + response strings, their prompts, labels."""

    UNKNOWN_FIELDS: ClassVar[str] = "ignore"
    query: list[str]
    prompts: list[str | None] | None = None
    labels: list[Any] | None = None


@dataclass(frozen=True)
class TextsRequest:
    """vLLM /classify and /pooling: `input` (a text or a list of texts) or `messages` (one conversation ending
    with the assistant's reply). use_activation (activation and softmax are its deprecated names): sigmoid."""

    UNKNOWN_FIELDS: ClassVar[str] = "ignore"
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


@dataclass(frozen=True)
class PredictRequest:
    """text-embeddings-inference /predict. inputs: a text, a [text, text_pair] pair, or a batch (a list of
    those as lists). raw_scores: false asks for the sigmoid; true or absent gives raw scores."""

    UNKNOWN_FIELDS: ClassVar[str] = "ignore"
    inputs: Any
    truncate: bool | None = None
    truncation_direction: str | None = None
    raw_scores: bool | None = None


@dataclass(frozen=True)
class ScoreRequest:
    """Native scoring. items: {prompt, response} or {prompt, chosen, rejected}; rater: map the rewards to this
    rater's scale (--calibration); demonstrations or standard: steer an in-context model."""

    UNKNOWN_FIELDS: ClassVar[str] = "refuse"
    items: list[Any]
    rater: str | None = None
    demonstrations: list[Any] | None = None
    standard: str | None = None


@dataclass(frozen=True)
class StandardRequest:
    """Registers demonstrations under an id (default: a hash of the demonstrations)."""

    UNKNOWN_FIELDS: ClassVar[str] = "refuse"
    demonstrations: list[Any]
    id: str | None = None


Body = TypeVar("Body")
_CONFIG_KEY = re.compile(r"^config key '(?P<key>[^']+)' (?P<rest>.+)$")


def read_body(cls: type[Body], data: Any) -> Body:
    """A request body (parsed JSON) as the dataclass `cls`. A field the body leaves out takes its default; one
    without a default must be given. Raises RequestError 422 naming the field: a body that is not an object, a
    missing or (UNKNOWN_FIELDS "refuse") unknown field, a list field given anything but a list (from_dict reads a
    lone value as a list of one, as YAML configs write it; a request must send the list), and every type error
    from_dict finds, its message read as `<field>: <problem>`."""
    if not isinstance(data, dict):
        raise RequestError(422, f"the request body must be a JSON object, got {_json_type(data)}")
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - set(fields))
    if unknown and getattr(cls, "UNKNOWN_FIELDS", "refuse") == "refuse":
        raise invalid(unknown[0], "unknown field (known: " + ", ".join(fields) + ")")
    data = {k: v for k, v in data.items() if k in fields}
    hints = typing.get_type_hints(cls)
    for name, f in fields.items():
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise invalid(name, "required field missing")
            continue
        value, allowed = data[name], typing.get_args(hints[name])
        if value is None and type(None) not in allowed and hints[name] is not Any:
            raise invalid(name, "must not be null")
        if value is not None and _is_list(hints[name]) and not isinstance(value, list):
            raise invalid(name, f"expected a list, got {_json_type(value)}")
    try:
        return from_dict(cls, data)
    except ConfigError as exc:
        found = _CONFIG_KEY.match(str(exc))
        raise RequestError(422, f"{found['key']}: {found['rest']}" if found else str(exc)) from None


def _is_list(tp: Any) -> bool:
    """Whether a field type is a list or an optional list."""
    return typing.get_origin(tp) is list or any(typing.get_origin(a) is list for a in typing.get_args(tp))


def _json_type(value: Any) -> str:
    """How JSON names the type of a parsed value."""
    if value is None:
        return "null"
    for kind, name in (
        (bool, "true or false"),
        (str, "a string"),
        (int | float, "a number"),
        (list, "a list"),
        (dict, "an object"),
    ):
        if isinstance(value, kind):
            return name
    return type(value).__name__


# ----------------------------------------------------------------------------------------------------
# Texts


def _clean(text: str) -> str:
    return sanitise_text(text)[0]


def _response(value: Any, field: str) -> str:
    """A non-empty string, sanitised."""
    if not isinstance(value, str):
        raise invalid(field, f"expected a string, got {type(value).__name__}")
    if not value.strip():
        raise invalid(field, "empty text")
    return _clean(value)


def score_items(records: Sequence[Any], field: str = "items") -> tuple[list[TextItem], list[bool]]:
    """Texts of native items (a single response: one text; a pair: chosen then rejected) and whether each item
    is a single response."""
    texts: list[TextItem] = []
    singles: list[bool] = []
    for i, record in enumerate(records):
        if isinstance(record, Mapping):
            unknown = sorted(set(record) - {"prompt", "response", "chosen", "rejected"})
            if unknown:
                raise invalid(
                    f"{field}[{i}].{unknown[0]}",
                    "unknown field (an item holds prompt with response, or prompt with chosen and rejected)",
                )
        try:
            pair, single = parse_score_record(record)
        except BadRow as bad:
            raise invalid(f"{field}[{i}]" + (f".{bad.field}" if bad.field else ""), bad.message) from None
        pair, _ = sanitise_pair(pair)
        texts.append(TextItem(pair.prompt, pair.chosen))
        if not single:
            texts.append(TextItem(pair.prompt, pair.rejected))
        singles.append(single)
    return texts, singles


def demonstrations(records: Sequence[Any], field: str = "demonstrations") -> tuple[PreferencePair, ...]:
    """Demonstration pairs {prompt, chosen, rejected}, sanitised; those that steer chosen as `score --demos`
    chooses them (icrm.scoring.steering_demos), a DataError (422) naming the field when none does."""
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
    return steering_demos(out, field).pairs


def query_texts(query: Sequence[str], prompts: Sequence[str | None] | None) -> list[TextItem]:
    """OpenRLHF queries: when prompts[i] is a non-empty string, it is the prompt (read by the model's template)
    and the response is the rest of the query when the query starts with it, else what follows the query's last
    assistant marker (OpenRLHF left-truncates long prompts); without a prompt the query is one rendered
    conversation."""
    if prompts is not None and len(prompts) != len(query):
        raise invalid("prompts", f"{len(prompts)} prompts for {len(query)} queries")
    texts: list[TextItem] = []
    for i, q in enumerate(query):
        text = _response(q, f"query[{i}]")
        p = prompts[i] if prompts is not None else None
        if not (isinstance(p, str) and p.strip()):
            texts.append(TextItem(None, text))
            continue
        prompt = _clean(p)
        if text.startswith(prompt):
            response = text[len(prompt) :]
            if not response.strip():
                raise invalid(f"query[{i}]", "empty response (the query holds only its prompt)")
            texts.append(TextItem(prompt, response, closing=True))
        else:
            texts.append(TextItem(prompt, text, query=True))
    return texts


def conversation_text(messages: Any, field: str = "messages") -> TextItem:
    """A chat list ending with the assistant's reply: the reply is the response, the messages before it the
    prompt."""
    if isinstance(messages, str) or not isinstance(messages, list):
        raise invalid(field, f"expected a list of {{role, content}} messages, got {type(messages).__name__}")
    try:
        response, turns = parse_response(messages, field)
    except BadRow as bad:
        raise invalid(bad.field or field, bad.message) from None
    return TextItem(tuple(Turn(t.role, _clean(t.content)) for t in turns), _clean(response))


def input_texts(body: TextsRequest) -> list[TextItem]:
    """vLLM `input` (each text one rendered conversation) or `messages` (one conversation)."""
    if (body.input is None) == (body.messages is None):
        raise invalid("input", "give exactly one of `input` (a text or a list of texts) and `messages`")
    if body.messages is not None:
        return [conversation_text(body.messages)]
    values = [body.input] if isinstance(body.input, str) else body.input
    if not isinstance(values, list):
        raise invalid("input", f"expected a string or a list of strings, got {type(body.input).__name__}")
    if not values:
        raise invalid("input", "empty list")
    return [TextItem(None, _response(v, f"input[{i}]")) for i, v in enumerate(values)]


def predict_texts(inputs: Any) -> tuple[list[TextItem], bool]:
    """TEI inputs as TEI reads them: a string is one text; a list of one or two strings is one sequence (a
    text, or a (text, text_pair) pair: prompt and response); a list of such lists is a batch. Returns the
    texts and whether the request was a batch."""
    if isinstance(inputs, str):
        return [TextItem(None, _response(inputs, "inputs"))], False
    if isinstance(inputs, list) and inputs and all(isinstance(x, str) for x in inputs):
        return [_sequence(inputs, "inputs")], False
    if isinstance(inputs, list) and inputs and all(isinstance(x, list) for x in inputs):
        return [_sequence(x, f"inputs[{i}]") for i, x in enumerate(inputs)], True
    raise invalid("inputs", "expected a string, a [text] or [text, text_pair] list, or a list of those lists")


def _sequence(values: list[Any], field: str) -> TextItem:
    if len(values) == 1:
        return TextItem(None, _response(values[0], f"{field}[0]"))
    if len(values) == 2:
        return TextItem(_response(values[0], f"{field}[0]"), _response(values[1], f"{field}[1]"))
    raise invalid(field, f"a sequence is [text] or [text, text_pair], got {len(values)} strings")
