"""How a conversation becomes token ids: the three text formats ("templates") every model reads.

- `chat`: the conversation (user / assistant messages, the response as the last assistant message) through the
  tokenizer's chat template, as TRL's RewardTrainer tokenises conversational pairs
  (`apply_chat_template(messages, tokenize=True)`): the template places every special token, none is doubled.
- `plain`: prompt + response as one text with the EOS token appended when missing, tokenised with the
  tokenizer's own special tokens, as TRL's RewardTrainer tokenises standard pairs. A prompt of one user turn is
  its text; a longer conversation is written in HH framing.
- `hh`: "\\n\\nHuman: ...\\n\\nAssistant:" framing of the prompt and the tokenizer's pair template around
  (prompt, response), the format rewardsmith's MiniLM models were trained with (rewardsmith.data.collate).
- `auto` resolves to `chat` when the tokenizer has a chat template, else `plain` (a saved model records the
  template it was trained with, and loading follows that record).

Every format truncates the same way: the end of the prompt is kept (chat: whole leading messages are dropped
first, a system message kept; then the earliest remaining message is cut from its start), and the response is cut
from its end only when it alone would leave fewer than `min_prompt_tokens` for the prompt.

A conversation that arrives already rendered as one string (a vLLM `input`, a TEI text, an OpenRLHF query) is
split back into turns by the template's own markers (learned by rendering a probe conversation) or the HH
markers, then encoded as above, so the response is never the part that gets cut. A chat-templated string is
read back only when rendering its turns gives the same string (`read_back`; a BOS the sender stripped is put
back first). A string that cannot be read back is tokenised whole and, when too long, cut from its start (the
end is kept, as vLLM does); its EncodedText says so (`unsplit`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rewardsmith.config import TEMPLATES
from rewardsmith.data.adapters._common import HH_ASSISTANT, HH_HUMAN, parse_hh_transcript
from rewardsmith.data.collate import EncodedText, PairEncoder
from rewardsmith.data.schema import Turn, render_turns, user_prompt
from rewardsmith.errors import ConfigError, DataError, first_line

Prompt = Sequence[Turn] | str


def has_chat_template(tokenizer: Any) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def resolve_template(template: str, tokenizer: Any) -> str:
    """The concrete template (chat | plain | hh) that `template` means for this tokenizer."""
    if template not in TEMPLATES:
        raise ConfigError(f"template must be one of {', '.join(TEMPLATES)}, got {template!r}")
    if template == "auto":
        return "chat" if has_chat_template(tokenizer) else "plain"
    if template == "chat" and not has_chat_template(tokenizer):
        raise ConfigError("template chat: this tokenizer has no chat template; use --template plain (or hh)")
    return template


@dataclass(frozen=True)
class Split:
    """A rendered conversation read back: the turns before the response, the response, and whether rendering
    them again gives the string that arrived (exact: the scores equal those of the same conversation)."""

    prompt: tuple[Turn, ...]
    response: str
    exact: bool


def _empty_counts() -> dict[str, int]:
    return {"texts": 0, "prompt_truncated": 0, "response_truncated": 0, "unsplit": 0}


def _raw_encode(tokenizer: Any, text: str, max_length: int) -> tuple[list[int], bool]:
    """The whole string tokenised with the tokenizer's special tokens; its last max_length tokens when longer."""
    ids = list(tokenizer(text)["input_ids"])
    return (ids[-max_length:], True) if len(ids) > max_length else (ids, False)


class TextEncoder:
    """Encodes (prompt, response) into an EncodedText under a token budget; `counts` feeds run summaries.

    Subclasses implement `_encode(turns, response)`; `split(text)` reads a rendered conversation back (None when
    the format has no markers to read). source: the model folder or id the tokenizer came from, named in errors."""

    template = ""

    def __init__(self, tokenizer: Any, max_length: int = 256, min_prompt_tokens: int = 64, source: str = ""):
        if max_length <= 8:
            raise ValueError(f"max_length must be > 8, got {max_length}")
        self.tokenizer = tokenizer
        self.source = source
        self.max_length = max_length
        self.min_prompt_tokens = min_prompt_tokens
        self.counts = _empty_counts()

    def encode(self, prompt: Prompt, response: str) -> EncodedText:
        """prompt: the turns before the response, or a prompt string (parsed by parse_prompt)."""
        turns = self.parse_prompt(prompt) if isinstance(prompt, str) else tuple(prompt)
        encoded = self._encode(turns, response)
        self._count(encoded)
        return encoded

    def encode_unsplit(self, text: str) -> EncodedText:
        """A conversation that arrives as one string: read back into turns and encoded, or tokenised whole (cut
        from the start when too long, `unsplit` set) when it cannot be read back exactly (read_back)."""
        split = self.read_back(text)
        if split is not None:
            return self.encode(split.prompt, split.response)
        ids, cut = _raw_encode(self.tokenizer, text, self.max_length)
        encoded = EncodedText(ids, [0] * len(ids), [1] * len(ids), cut, False, unsplit=True)
        self._count(encoded)
        return encoded

    def split(self, text: str) -> Split | None:
        """The turns and response of a rendered conversation; None when it holds no marker of this format."""
        return _split_hh(text)

    def read_back(self, text: str) -> Split | None:
        """The split of a whole conversation that arrived as one string, when scoring its turns gives what scoring
        the same conversation gives (`score`); None when it must be tokenised as it came. HH framing is rewritten
        from the turns exactly as it was read, so every split this format finds will do."""
        return self.split(text)

    def strip_closing(self, response: str) -> str:
        """A response cut from a rendered string (prompt + response + the policy's end-of-turn token, as OpenRLHF
        decodes its queries) without the markers that close it, which this format writes itself."""
        return response

    def parse_prompt(self, text: str) -> tuple[Turn, ...]:
        """A prompt string as turns: a rendered conversation ending with the assistant's cue (this format's
        markers or HH's), else one user turn holding the text."""
        split = self.split(text)
        if split is not None and not split.response.strip():
            return split.prompt
        if text.lstrip("\n").startswith("Human:"):
            turns = parse_hh_transcript("\n\n" + text.lstrip("\n"))
            if turns:
                return turns
        return user_prompt(text)

    def _encode(self, turns: tuple[Turn, ...], response: str) -> EncodedText:
        raise NotImplementedError

    def _count(self, encoded: EncodedText) -> None:
        self.counts["texts"] += 1
        self.counts["prompt_truncated"] += int(encoded.prompt_truncated)
        self.counts["response_truncated"] += int(encoded.response_truncated)
        self.counts["unsplit"] += int(encoded.unsplit)


def _split_hh(text: str) -> Split | None:
    """An HH transcript "\\n\\nHuman: ...\\n\\nAssistant: <response>" read back."""
    if HH_HUMAN not in text and HH_ASSISTANT not in text:
        return None
    turns = parse_hh_transcript(text if text.startswith("\n\n") else "\n\n" + text.lstrip("\n"))
    if not turns:
        return None
    if text.rstrip().endswith("Assistant:"):
        return Split(turns, "", True)
    if turns[-1].role != "assistant":
        return None
    return Split(turns[:-1], turns[-1].content, text.lstrip("\n").startswith("Human:"))


# ----------------------------------------------------------------------------------------------------------
# hh: the pair template of rewardsmith.data.collate.PairEncoder


class HHEncoder(TextEncoder):
    """The HH framing of the prompt and the tokenizer's pair template around (prompt, response)."""

    template = "hh"

    def __init__(self, tokenizer: Any, max_length: int = 256, min_prompt_tokens: int = 64, source: str = ""):
        super().__init__(tokenizer, max_length, min_prompt_tokens, source)
        self._pair = PairEncoder(tokenizer, max_length, min_prompt_tokens)

    def encode(self, prompt: Prompt, response: str) -> EncodedText:
        # A prompt string is taken as already rendered (an HH transcript, or a context built around one).
        text = prompt if isinstance(prompt, str) else render_turns(tuple(prompt))
        encoded = self._pair.encode(text, response)
        self._count(encoded)
        return encoded

    def encode_unsplit(self, text: str) -> EncodedText:
        split = self.split(text)
        if split is not None:
            return self.encode(split.prompt, split.response)
        return self.encode("", text)  # no markers: a response to no prompt (the pair template keeps its start)


# ----------------------------------------------------------------------------------------------------------
# plain: prompt + response + EOS as one text


class PlainEncoder(TextEncoder):
    """prompt text + response (+ EOS when missing) tokenised as one text with the tokenizer's special tokens."""

    template = "plain"

    def __init__(self, tokenizer: Any, max_length: int = 256, min_prompt_tokens: int = 64, source: str = ""):
        super().__init__(tokenizer, max_length, min_prompt_tokens, source)
        probe = list(tokenizer("hello")["input_ids"])
        bare = list(tokenizer("hello", add_special_tokens=False)["input_ids"])
        start = next((k for k in range(len(probe) - len(bare) + 1) if probe[k : k + len(bare)] == bare), 0)
        self.prefix, self.suffix = probe[:start], probe[start + len(bare) :]

    def text_of(self, turns: tuple[Turn, ...], response: str) -> tuple[str, str]:
        """(prompt text, response text with EOS) as TRL writes a standard pair."""
        if not turns:
            prompt = ""
        elif len(turns) == 1 and turns[0].role == "user":
            prompt = turns[0].content
        else:
            prompt = render_turns(turns) + " "
        eos = getattr(self.tokenizer, "eos_token", None)
        if eos and not response.endswith(eos):
            response = response + eos
        return prompt, response

    def _encode(self, turns: tuple[Turn, ...], response: str) -> EncodedText:
        prompt, response = self.text_of(turns, response)
        content, n_prompt = self._content(prompt, response)
        prompt_ids, response_ids = content[:n_prompt], content[n_prompt:]
        budget = self.max_length - len(self.prefix) - len(self.suffix)
        keep_prompt = min(len(prompt_ids), self.min_prompt_tokens if self.min_prompt_tokens < budget else budget // 2)
        response_cut = len(response_ids) > budget - keep_prompt
        if response_cut:
            response_ids = response_ids[: budget - keep_prompt]
        room = budget - len(response_ids)
        prompt_cut = len(prompt_ids) > room
        if prompt_cut:
            prompt_ids = prompt_ids[len(prompt_ids) - room :] if room > 0 else []
        ids = self.prefix + prompt_ids + response_ids + self.suffix
        n_first = len(self.prefix) + len(prompt_ids)
        mask = [0] * n_first + [1] * len(response_ids) + [0] * len(self.suffix)
        if not response_ids:
            mask[min(n_first, len(ids) - 1)] = 1
        return EncodedText(ids, [0] * len(ids), mask, prompt_cut, response_cut)

    def _content(self, prompt: str, response: str) -> tuple[list[int], int]:
        """Token ids of prompt + response tokenised together (no special tokens) and how many belong to the
        prompt (a token that starts inside the prompt's characters)."""
        text = prompt + response
        if getattr(self.tokenizer, "is_fast", False):
            enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
            ids = list(enc["input_ids"])
            n_prompt = sum(1 for start, _ in enc["offset_mapping"] if start < len(prompt))
            return ids, n_prompt
        ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        alone = list(self.tokenizer(prompt, add_special_tokens=False)["input_ids"]) if prompt else []
        return ids, _common_prefix(ids, alone)


# ----------------------------------------------------------------------------------------------------------
# chat: the tokenizer's chat template


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _message(turn: Turn) -> dict[str, str]:
    return {"role": turn.role, "content": turn.content}


_SENTINELS = ("qzxsysqzx", "qzxuserqzx", "qzxassistantqzx", "qzxsecondqzx", "qzxreplyqzx")


@dataclass(frozen=True)
class ChatMarkers:
    """The strings a chat template writes between messages, read off a rendered probe conversation:
    user_to_assistant sits between a user message and the next assistant message (it ends with the assistant's
    header), assistant_to_user the other way; head / system_head open a conversation without / with a system
    message (system_to_user follows the system message); tail closes the last assistant message."""

    head: str
    system_head: str | None
    system_to_user: str | None
    user_to_assistant: str
    assistant_to_user: str
    tail: str


def learn_markers(tokenizer: Any) -> ChatMarkers | None:
    """The template's markers (None when a probe conversation cannot be rendered or read)."""
    sys_, u1, a1, u2, a2 = _SENTINELS

    def render(messages: list[dict[str, str]]) -> str | None:
        try:
            text = tokenizer.apply_chat_template(messages, tokenize=False)
        except Exception:  # templates raise on roles they do not take (a system message, for one)
            return None
        return text if isinstance(text, str) else None

    plain = render(
        [
            {"role": "user", "content": u1},
            {"role": "assistant", "content": a1},
            {"role": "user", "content": u2},
            {"role": "assistant", "content": a2},
        ]
    )
    if plain is None or any(s not in plain for s in (u1, a1, u2, a2)):
        return None
    i1, j1, i2, j2 = (plain.index(s) for s in (u1, a1, u2, a2))
    user_to_assistant = plain[i1 + len(u1) : j1]
    if plain[i2 + len(u2) : j2] != user_to_assistant:
        return None  # the separator depends on the position: no fixed markers to split on
    markers = {
        "head": plain[:i1],
        "user_to_assistant": user_to_assistant,
        "assistant_to_user": plain[j1 + len(a1) : i2],
        "tail": plain[j2 + len(a2) :],
    }
    with_system = render(
        [{"role": "system", "content": sys_}, {"role": "user", "content": u1}, {"role": "assistant", "content": a1}]
    )
    system_head = system_to_user = None
    if with_system is not None and sys_ in with_system and u1 in with_system:
        s, u = with_system.index(sys_), with_system.index(u1)
        system_head, system_to_user = with_system[:s], with_system[s + len(sys_) : u]
    if not markers["user_to_assistant"] or not markers["assistant_to_user"]:
        return None
    return ChatMarkers(
        markers["head"],
        system_head,
        system_to_user,
        markers["user_to_assistant"],
        markers["assistant_to_user"],
        markers["tail"],
    )


class ChatEncoder(TextEncoder):
    """The conversation through the tokenizer's chat template (see the module docstring)."""

    template = "chat"

    def __init__(self, tokenizer: Any, max_length: int = 256, min_prompt_tokens: int = 64, source: str = ""):
        super().__init__(tokenizer, max_length, min_prompt_tokens, source)
        if not has_chat_template(tokenizer):
            raise ConfigError("template chat: this tokenizer has no chat template; use --template plain (or hh)")
        self._prompt_ids: dict[tuple[tuple[str, str], ...], list[int]] = {}
        self._markers: ChatMarkers | bool | None = False  # False: not learnt yet

    # -- rendering ---------------------------------------------------------------------------------------
    def _ids(self, messages: list[dict[str, str]], generation: bool = False) -> list[int]:
        from jinja2 import TemplateError

        try:
            out = self.tokenizer.apply_chat_template(
                messages, tokenize=True, add_generation_prompt=generation, return_dict=True
            )
        except TemplateError as exc:  # the template's raise_exception (a role it refuses), or its own bug
            roles = ", ".join(dict.fromkeys(m["role"] for m in messages))
            raise DataError(
                f"its chat template refused a conversation with roles {roles} ({first_line(exc, with_type=True)})",
                path=self.source or "the tokenizer",
            ) from None
        return list(out["input_ids"])

    def _render(self, turns: Sequence[Turn], response: str) -> list[int]:
        return self._ids([*map(_message, turns), {"role": "assistant", "content": response}])

    def _boundary(self, turns: tuple[Turn, ...], full: list[int]) -> int:
        """How many leading tokens of `full` are the prompt (with the assistant's header)."""
        key = tuple((t.role, t.content) for t in turns)
        prompt = self._prompt_ids.get(key)
        if prompt is None:
            try:
                prompt = self._ids([_message(t) for t in turns], generation=True) if turns else []
            except Exception:  # a template that cannot render the prompt alone: the response starts at 0
                prompt = []
            if len(self._prompt_ids) < 100_000:
                self._prompt_ids[key] = prompt
        return _common_prefix(full, prompt)

    # -- encoding ----------------------------------------------------------------------------------------
    def _encode(self, turns: tuple[Turn, ...], response: str) -> EncodedText:
        full = self._render(turns, response)
        prompt_cut = response_cut = False
        if len(full) > self.max_length:
            turns, response, full, prompt_cut, response_cut = self._truncate(turns, response, full)
        boundary = self._boundary(turns, full)
        mask = [0] * boundary + [1] * (len(full) - boundary)
        if boundary >= len(full):
            mask[-1] = 1
        return EncodedText(full, [0] * len(full), mask, prompt_cut, response_cut)

    def _truncate(
        self, turns: tuple[Turn, ...], response: str, full: list[int]
    ) -> tuple[tuple[Turn, ...], str, list[int], bool, bool]:
        budget = self.max_length
        boundary = self._boundary(turns, full)
        keep_prompt = min(boundary, self.min_prompt_tokens if self.min_prompt_tokens < budget else budget // 2)
        response_cut = False
        if len(full) - boundary > budget - keep_prompt:
            response, full = self._cut_response(turns, response, boundary, budget - keep_prompt)
            response_cut = True
        prompt_cut = False
        # Whole leading messages go first (a system message stays), then the earliest one left is cut.
        while len(full) > budget and sum(t.role != "system" for t in turns) > 1:
            drop = next(k for k, t in enumerate(turns) if t.role != "system")
            turns = turns[:drop] + turns[drop + 1 :]
            full, prompt_cut = self._render(turns, response), True
        if len(full) > budget:
            turns, full = self._cut_prompt(turns, response, full, budget)
            prompt_cut = True
        return turns, response, full, prompt_cut, response_cut

    def _tokens(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _decode(self, ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=False))

    def _cut_response(self, turns: tuple[Turn, ...], response: str, boundary: int, room: int) -> tuple[str, list[int]]:
        """The response cut from its end so that its rendered tokens (header after the boundary, end-of-turn
        tokens included) fit in `room`."""
        ids = self._tokens(response)
        overhead = len(self._render(turns, "")) - boundary
        keep = max(0, min(len(ids), room - overhead))
        while True:
            text = self._decode(ids[:keep])
            full = self._render(turns, text)
            if len(full) - boundary <= room or keep == 0:
                return text, full
            keep = max(0, keep - max(1, len(full) - boundary - room))

    def _cut_prompt(
        self, turns: tuple[Turn, ...], response: str, full: list[int], budget: int
    ) -> tuple[tuple[Turn, ...], list[int]]:
        """The earliest prompt message cut from its start (then the next one, a system message last) until the
        rendered conversation fits the budget."""
        order = [k for k, t in enumerate(turns) if t.role != "system"] + [
            k for k, t in enumerate(turns) if t.role == "system"
        ]
        for k in order:
            ids = self._tokens(turns[k].content)
            drop = min(len(ids), len(full) - budget)
            while True:
                cut = (*turns[:k], Turn(turns[k].role, self._decode(ids[drop:])), *turns[k + 1 :])
                full = self._render(cut, response)
                if len(full) <= budget or drop >= len(ids):
                    break
                drop = min(len(ids), drop + max(1, len(full) - budget))
            turns = cut
            if len(full) <= budget:
                return turns, full
        return turns, full[-budget:]  # only template tokens left to cut: keep the end

    # -- reading rendered strings ------------------------------------------------------------------------
    def markers(self) -> ChatMarkers | None:
        if self._markers is False:
            self._markers = learn_markers(self.tokenizer)
        return self._markers if isinstance(self._markers, ChatMarkers) else None

    def split(self, text: str) -> Split | None:
        marks = self.markers()
        if marks is not None:
            text = self._restore_bos(text, marks)
        found = _split_chat(text, marks) if marks is not None else None
        if found is None:
            return _split_hh(text)
        turns, response = found
        try:
            rendered = self.tokenizer.apply_chat_template(
                [*map(_message, turns), {"role": "assistant", "content": response}], tokenize=False
            )
        except Exception:
            return Split(turns, response, False)
        exact = _same_conversation(str(rendered), text, marks.tail if marks else "")
        return Split(turns, response, exact)

    def read_back(self, text: str) -> Split | None:
        """A chat-templated string is read back only when rendering its turns gives the same string (closing
        markers aside): a split that does not (markers inside a message, a string cut from the left, another
        template) would score another text than the one that arrived."""
        split = self.split(text)
        return split if split is not None and split.exact else None

    def strip_closing(self, response: str) -> str:
        """Without a trailing end-of-turn: the template's closing markers (whole, or as the policy's EOS ends
        them), else the tokenizer's EOS token, once."""
        marks = self.markers()
        tail = marks.tail if marks is not None else ""
        eos = getattr(self.tokenizer, "eos_token", None) or ""
        for end in (tail, tail.rstrip(), tail.strip(), eos):
            if end and response.endswith(end) and response[: -len(end)].strip():
                return response[: -len(end)]
        return response

    def _restore_bos(self, text: str, marks: ChatMarkers) -> str:
        """`text` with the BOS token put back when the template writes it first and the string arrived without it
        (verl strips the reward tokenizer's BOS from the rendered conversation: a ChatML template whose BOS is
        `<|im_start|>` then arrives as "system\n...")."""
        bos = getattr(self.tokenizer, "bos_token", None)
        if not bos or text.startswith(bos):
            return text
        for head in (marks.system_head, marks.head):
            if head and head.startswith(bos) and len(head) > len(bos) and text.startswith(head[len(bos) :]):
                return bos + text
        return text


def _same_conversation(rendered: str, received: str, tail: str) -> bool:
    """True when two renderings differ at most by the closing markers after the response."""

    def strip(s: str) -> str:
        s = s.rstrip()
        for end in (tail.rstrip(), tail.strip()):
            if end and s.endswith(end):
                s = s[: -len(end)].rstrip()
        return s

    return strip(rendered) == strip(received)


def _split_chat(text: str, marks: ChatMarkers) -> tuple[tuple[Turn, ...], str] | None:
    """Turns and response of a chat-templated string; None when it holds no user-to-assistant marker."""
    if marks.user_to_assistant not in text:
        return None
    turns: list[Turn] = []
    rest = text
    first_role = None
    if (
        marks.system_head
        and marks.system_to_user
        and rest.startswith(marks.system_head)
        and marks.system_to_user in rest[len(marks.system_head) :]
    ):
        body = rest[len(marks.system_head) :]
        content, _, rest = body.partition(marks.system_to_user)
        turns.append(Turn("system", content))
        first_role = "user"
    elif marks.head and rest.startswith(marks.head):
        rest, first_role = rest[len(marks.head) :], "user"
    pattern = re.compile(
        "|".join(
            re.escape(m) for m in sorted({marks.user_to_assistant, marks.assistant_to_user}, key=len, reverse=True)
        )
    )
    pieces: list[str] = []
    roles: list[str] = []
    pos = 0
    for match in pattern.finditer(rest):
        pieces.append(rest[pos : match.start()])
        roles.append("user" if match.group(0) == marks.user_to_assistant else "assistant")
        pos = match.end()
    pieces.append(rest[pos:])
    if first_role is not None and roles and roles[0] != first_role:
        return None
    # roles[k] is the role of pieces[k]; the last piece follows the last marker.
    last_role = "assistant" if roles[-1] == "user" else "user"
    for content, role in zip(pieces[:-1], roles, strict=True):
        turns.append(Turn(role, content))  # type: ignore[arg-type]
    if last_role != "assistant":
        return None  # the string ends with a user message: there is no response to score
    response = pieces[-1]
    tail = marks.tail
    for end in (tail, tail.rstrip(), tail.strip()):
        if end and response.endswith(end):
            response = response[: -len(end)]
            break
    if turns and turns[0].role == "user" and not turns[0].content and first_role is None:
        turns = turns[1:]
    return tuple(turns), response


def encoder_for(tokenizer: Any, cfg: Any) -> TextEncoder:
    """The encoder a ModelConfig describes (its template, max_length and min_prompt_tokens)."""
    return make_encoder(tokenizer, cfg.template, cfg.max_length, cfg.min_prompt_tokens)


def make_encoder(
    tokenizer: Any, template: str, max_length: int = 256, min_prompt_tokens: int = 64, source: str = ""
) -> TextEncoder:
    """The encoder of `template` (auto resolved for this tokenizer); source: the model it belongs to, for errors."""
    concrete = resolve_template(template, tokenizer)
    cls = {"chat": ChatEncoder, "plain": PlainEncoder, "hh": HHEncoder}[concrete]
    return cls(tokenizer, max_length, min_prompt_tokens, source)
