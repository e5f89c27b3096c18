"""Request bodies of every endpoint and their conversion to the texts the model scores (TextItem).

Prompts are read as `rewardsmith score` reads its `prompt` field (data/adapters/generic.py: plain user text, an
HH transcript or a chat list; a native item is parsed by the same `parse_score_record`; a chat-templated string
is read back into turns by the model's template), so a text scores the same through the server and through
`rewardsmith score`. A conversation that arrives as one rendered string (vLLM `input`, verl's chat-templated
text, a TEI single text) is split into turns by the model's template markers (data.templates), never truncated
by cutting its response away; an OpenRLHF query keeps the response that follows its last assistant marker even
when the query no longer starts with its (left-truncated) prompt. A string that cannot be split is tokenised
whole and cut from its start, and the response says so. Unpaired UTF-16 surrogates (JSON escapes such as
"\\ud800") are replaced by U+FFFD, as `score` does.

A text far longer than the model reads is cut before it is tokenised (bounded_parts): each prompt message keeps
its last characters and the response its first, just enough of them to hold more tokens than max_length (the
window is grown until its tokens do), so the tokens kept are the ones tokenising the whole text would keep, at
a cost bounded by max_length rather than by the text's size.

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
from rewardsmith.data.collate import EncodedText
from rewardsmith.data.schema import PreferencePair, Turn, sanitise_pair, sanitise_text
from rewardsmith.data.templates import HHEncoder, TextEncoder
from rewardsmith.errors import ConfigError
from rewardsmith.icrm.scoring import steering_demos


@dataclass(frozen=True)
class TextItem:
    """One text of a request. prompt: the turns before the response, or a prompt string the model's template
    reads (chat-templated, HH or plain text); None when `text` is a whole conversation rendered as one string.
    query: `text` is an OpenRLHF query that does not start with its prompt: the response is what follows its last
    assistant marker. closing: `text` is the rest of a rendered string after its prompt, so it may end with the
    policy's end-of-turn token, which the model's template writes itself (TextEncoder.strip_closing)."""

    prompt: tuple[Turn, ...] | str | None
    text: str
    query: bool = False
    closing: bool = False


def response_text(item: TextItem) -> str:
    """The response of a text as the monitors count it: the text when its prompt came apart, what follows the
    prompt in an OpenRLHF query that starts with it, else the whole text."""
    if item.prompt is not None and not item.query:
        return item.text
    if isinstance(item.prompt, str) and item.text.startswith(item.prompt):
        return item.text[len(item.prompt) :]
    return item.text


def resolve_item(encoder: TextEncoder, item: TextItem) -> tuple[tuple[Turn, ...] | str, str] | None:
    """(prompt, response) of a text, read by the model's template; None when it cannot be read back exactly (it
    is then tokenised whole, and the response says so)."""
    if item.prompt is not None and not item.query:
        return item.prompt, encoder.strip_closing(item.text) if item.closing else item.text
    # A query with its prompt given needs only the response's start from the split; a whole conversation needs a
    # split that renders back to the string that arrived.
    split = encoder.split(item.text) if item.query else encoder.read_back(item.text)
    if split is None or not split.response.strip():
        return None
    return (split.prompt if item.prompt is None else item.prompt), split.response


def encode_item(encoder: TextEncoder, item: TextItem) -> EncodedText:
    """The EncodedText of one text (EncodedText.unsplit marks a string that could not be split): what
    encoder.encode / encode_unsplit give for the whole text, with long parts cut before tokenising."""
    resolved = resolve_item(encoder, item)
    if resolved is not None:
        return encoder.encode(*bounded_parts(encoder, *resolved))
    split = encoder.read_back(item.text)
    if split is not None:  # turns ending in an empty response: encode_unsplit encodes them as turns
        return encoder.encode(*bounded_parts(encoder, split.prompt, split.response))
    # Tokenised whole: the pair template keeps an HH model's text from its start, the others from its end.
    keep = "start" if isinstance(encoder, HHEncoder) else "end"
    window = _window(encoder, item.text, keep)
    if window is not item.text and encoder.read_back(window) is not None:
        window = item.text  # the cut text reads as turns where the whole did not: tokenise the whole (exact)
    return encoder.encode_unsplit(window)


def item_parts(encoder: TextEncoder, item: TextItem) -> tuple[tuple[Turn, ...] | str, str]:
    """(prompt, response) an in-context model scores for a text (a text that cannot be split: a response to no
    prompt), long parts cut as encode_item cuts them."""
    return bounded_parts(encoder, *(resolve_item(encoder, item) or ((), item.text)))


# A part is cut to CHARS_PER_TOKEN x (max_length + MARGIN_TOKENS) characters first (most texts are shorter and
# are never tokenised twice); a window holding fewer tokens than that is grown 4x until it holds them.
CHARS_PER_TOKEN = 8
# Tokens a cut window must hold beyond max_length: the cut lands inside a word, which changes at most the
# window's first few tokens, and those are among the ones truncation drops.
MARGIN_TOKENS = 16


def bounded_parts(
    encoder: TextEncoder, prompt: tuple[Turn, ...] | str, response: str
) -> tuple[tuple[Turn, ...] | str, str]:
    """(prompt, response) with every part the encoder would truncate cut before tokenising: the response keeps
    its first characters, each prompt message (or an HH model's rendered prompt string) its last ones, each
    still holding more than max_length tokens. A part holding more tokens than the whole sequence may is cut by
    the encoder whatever else it holds (the prompt keeps its end, the response its start), so the encoded ids
    are those of the whole text."""
    response = _window(encoder, response, "start")
    if isinstance(prompt, str):
        if isinstance(encoder, HHEncoder):  # it reads a prompt string as rendered: cut the string itself
            return _window(encoder, prompt, "end"), response
        prompt = encoder.parse_prompt(prompt)  # what encoder.encode does with a prompt string
    return tuple(Turn(t.role, _window(encoder, t.content, "end")) for t in prompt), response


def _window(encoder: TextEncoder, text: str, keep: str) -> str:
    """The last (keep="end") or first ("start") characters of `text` that hold at least max_length +
    MARGIN_TOKENS tokens; `text` itself when it is shorter than the first window tried or no shorter window
    holds them."""
    need = encoder.max_length + MARGIN_TOKENS
    size = CHARS_PER_TOKEN * need
    while size < len(text):
        part = text[-size:] if keep == "end" else text[:size]
        if len(encoder.tokenizer(part, add_special_tokens=False)["input_ids"]) >= need:
            return part
        size *= 4
    return text


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
