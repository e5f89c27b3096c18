"""A text to score, read as every command and the server read it: the one record of a scored text's input
(TextItem), its reading by a model's template into (prompt, response) (resolve_item, encode_item, item_parts), and
the items of a scoring file (read_score_rows) and their results (item_texts, item_results).

Prompts are read as `rewardsmith score` reads its `prompt` field (data/adapters/generic.py: plain user text, an
HH transcript or a chat list; a chat-templated string is read back into turns by the model's template), so a text
scores the same through the server and through `rewardsmith score`. A conversation that arrives as one rendered
string (vLLM `input`, verl's chat-templated text, a TEI single text) is split into turns by the model's template
markers (data.templates), never truncated by cutting its response away; an OpenRLHF query keeps the response that
follows its last assistant marker even when the query no longer starts with its (left-truncated) prompt. A string
that cannot be split is tokenised whole and cut from its start, and the result says so.

A text far longer than the model reads is cut before it is tokenised (bounded_parts): each prompt message keeps
its last characters and the response its first, just enough of them to hold more tokens than max_length (the
window is grown until its tokens do), so the tokens kept are the ones tokenising the whole text would keep, at
a cost bounded by max_length rather than by the text's size.

An item of a scoring file is a single response ({prompt, response}) or a pair ({prompt, chosen, rejected}); its
result holds `reward`, or `reward_chosen`, `reward_rejected` and `p_chosen` (the preference probability on the
model's own scale: sigmoid of the reward margin, or an in-context model's posterior mean), plus the confidences of
an in-context model and, for a pair, its posterior's spread `p_chosen_sd` (posterior_sd), or an ensemble's
uncertainty `reward_sd` (`reward_sd_chosen`, `reward_sd_rejected`: the sd of its standardised members).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rewardsmith.data.adapters._common import BadRow, iter_jsonl
from rewardsmith.data.adapters.generic import FILE_SUFFIXES, iter_records, parse_score_record
from rewardsmith.data.collate import EncodedText
from rewardsmith.data.schema import PreferencePair, Turn, sanitise_pair
from rewardsmith.data.templates import HHEncoder, TextEncoder
from rewardsmith.errors import DataError
from rewardsmith.stats import sigmoid


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


def read_score_rows(path: Path) -> tuple[list[dict[str, Any]], list[PreferencePair], list[bool], int]:
    """The rows of a scoring file, one PreferencePair per row (a single response sits on both sides), whether
    each row is a single response, and the number of rows whose text had unpaired UTF-16 surrogates replaced.
    A stream (/dev/stdin, a pipe, a character device) is read once, as JSONL unless its name says otherwise."""
    if path.is_dir():
        raise DataError("is a folder; --input names a file", path=path)
    if not path.exists():
        raise DataError("file not found", path=path)
    stream = not path.is_file() and not path.name.lower().endswith(FILE_SUFFIXES)
    rows: list[dict[str, Any]] = []
    pairs: list[PreferencePair] = []
    singles: list[bool] = []
    repaired = 0
    for row_no, record in iter_jsonl(path) if stream else iter_records(path):
        try:
            if isinstance(record, BadRow):
                raise record
            pair, single = parse_score_record(record)
        except BadRow as bad:
            raise DataError(bad.message, path=path, row=row_no, field=bad.field) from None
        pair, replaced = sanitise_pair(pair)
        repaired += bool(replaced)
        rows.append(record)
        pairs.append(pair)
        singles.append(single)
    if not rows:
        raise DataError("no rows to score", path=path)
    return rows, pairs, singles, repaired


def item_texts(pairs: Sequence[PreferencePair], singles: Sequence[bool]) -> list[tuple[Any, str]]:
    """The texts of scored items in order: one per single response, chosen then rejected per pair."""
    texts: list[tuple[Any, str]] = []
    for pair, single in zip(pairs, singles, strict=True):
        texts.append((pair.prompt, pair.chosen))
        if not single:
            texts.append((pair.prompt, pair.rejected))
    return texts


def text_row(singles: Sequence[bool], position: int) -> tuple[int, str]:
    """(row index, field) of the text at `position` of item_texts(pairs, singles): "response" for a single
    response, "chosen" or "rejected" for a pair."""
    k = 0
    for row, single in enumerate(singles):
        width = 1 if single else 2
        if position < k + width:
            return row, "response" if single else ("chosen", "rejected")[position - k]
        k += width
    raise IndexError(position)


def item_results(
    singles: Sequence[bool], scores: Any, maps: Any = None, rater: str | None = None
) -> list[dict[str, float]]:
    """One result per item (see the module docstring) from the scores of item_texts. maps + rater: rewards
    mapped to that rater's scale; p_chosen stays on the model's own scale (an in-context model's posterior
    mean)."""
    rewards, confidence, sd = scores.rewards, scores.confidence, scores.uncertainty
    posterior = pair_posteriors(singles, scores)
    shown = rewards if maps is None else maps.apply(str(rater), rewards)[0]
    out: list[dict[str, float]] = []
    k = pair_no = 0
    for single in singles:
        if single:
            result = {"reward": float(shown[k])}
            if confidence is not None:
                result["confidence"] = float(confidence[k])
            if sd is not None:
                result["reward_sd"] = float(sd[k])
            k += 1
        else:
            p = posterior.mu[pair_no] if posterior is not None else sigmoid(rewards[k] - rewards[k + 1])
            result = {"reward_chosen": float(shown[k]), "reward_rejected": float(shown[k + 1]), "p_chosen": float(p)}
            if posterior is not None:
                result["p_chosen_sd"] = float(posterior_sd(posterior.mu[pair_no], posterior.tau[pair_no]))
            if confidence is not None:
                result["confidence_chosen"], result["confidence_rejected"] = (
                    float(confidence[k]),
                    float(confidence[k + 1]),
                )
            if sd is not None:
                result["reward_sd_chosen"], result["reward_sd_rejected"] = float(sd[k]), float(sd[k + 1])
            k += 2
            pair_no += 1
        out.append(result)
    return out


def posterior_sd(mu: Any, tau: Any) -> Any:
    """The standard deviation of an in-context model's Beta posterior over P(chosen preferred), mean mu and
    concentration tau (Beta(mu tau, (1 - mu) tau)): sqrt(mu (1 - mu) / (tau + 1)). Its spread: few or
    contradicting cues leave tau small and the sd wide (tau >= 1 here, so at most sqrt(1/8), about 0.35)."""
    return np.sqrt(mu * (1.0 - mu) / (tau + 1.0))


def pair_posteriors(singles: Sequence[bool], scores: Any) -> Any:
    """An in-context model's Beta posterior per pair item (icrm.scoring.PairScores: mean mu = P(chosen
    preferred), concentration tau); None for a scalar model (p_chosen is then the sigmoid of the margin)."""
    if scores.confidence is None:
        return None
    from rewardsmith.icrm.scoring import pair_scores

    first, second = [], []
    k = 0
    for single in singles:
        if not single:
            first.append(k)
            second.append(k + 1)
        k += 1 if single else 2
    u, s = scores.rewards, scores.confidence
    return pair_scores(u[first], u[second], s[first], s[second])


def texts_digest(texts: Sequence[tuple[Sequence[Turn], str]]) -> str:
    """sha256 of the distinct texts in order (roles, contents and responses): a saved result is reused only for
    exactly these texts."""
    digest = hashlib.sha256()
    for prompt, response in texts:
        digest.update(json.dumps([[t.role, t.content] for t in prompt] + [response]).encode("utf-8"))
    return digest.hexdigest()[:16]
