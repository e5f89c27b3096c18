"""Shared pieces of the dataset adapters: file readers, split checks, row validation and the collector
that applies `limit` / `on_bad_row` and counts dropped rows the same way in every adapter.

Readers are generators, so an adapter with a `limit` stops reading once it has enough pairs. Heavy
libraries (pyarrow) are imported inside the functions that need them: importing an adapter module reads
no file and loads nothing large.
"""

from __future__ import annotations

import csv
import gzip
import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeAlias

from rewardsmith.data.dataset import LoadOptions, PairDataset
from rewardsmith.data.schema import PreferencePair, Role, Turn, sanitise_pair
from rewardsmith.data.sources import resolve_data_dir
from rewardsmith.errors import DataError, one_line

HH_ASSISTANT = "\n\nAssistant:"
HH_HUMAN = "\n\nHuman:"

# What a row converter returns: a pair to keep, a reason to drop the row (a key of PairDataset.dropped),
# or a list of those when one row gives several pairs.
RowOutcome: TypeAlias = PreferencePair | str | list[PreferencePair | str]
# (0-based index of the row among those the collector has read, row as a mapping) -> outcome; raises
# BadRow for a malformed row.
RowConverter: TypeAlias = Callable[[int, Mapping[str, Any]], RowOutcome]


class PairCollector:
    """Accumulates one PairDataset while an adapter reads rows.

    `full()` says when `opts.limit` pairs have been kept, so the reader can stop early; `bad_row()` raises
    a one-line DataError (on_bad_row="error") or counts the row under dropped["malformed"] ("skip").
    """

    def __init__(self, name: str, source: Path | str, opts: LoadOptions):
        if opts.limit is not None and opts.limit < 0:
            raise DataError(f"limit must be >= 0, got {opts.limit}")
        self.opts = opts
        self.dataset = PairDataset(name=name, pairs=[], source=str(source))

    def full(self) -> bool:
        """True once `limit` pairs are kept."""
        return self.opts.limit is not None and len(self.dataset.pairs) >= self.opts.limit

    def row_read(self, count: int = 1) -> None:
        self.dataset.n_rows += count

    def add(self, pair: PreferencePair) -> None:
        if not self.full():
            pair, replaced = sanitise_pair(pair)
            if replaced:
                self.dataset.repair("unpaired_surrogates_replaced")
            self.dataset.pairs.append(pair)

    def drop(self, reason: str, count: int = 1) -> None:
        self.dataset.drop(reason, count)

    def bad_row(self, message: str, row: int | None, field: str | None = None, path: Path | str | None = None) -> None:
        """Raises DataError naming file, 1-based row and field, or counts the row as "malformed"."""
        if self.opts.on_bad_row == "error":
            where = path or self.dataset.source
            raise DataError(one_line(message), path=where, row=row, field=field) from None
        self.drop("malformed")

    def collect(
        self,
        rows: Iterable[tuple[int, Any]],
        convert: RowConverter,
        path: Path | str | None = None,
        expected: str = "a JSON object",
    ) -> PairDataset:
        """Reads (1-based row number, record) items until `limit` pairs are kept; returns the dataset.

        Each record is passed to `convert` with its 0-based index among all rows this collector has read
        (so indices continue across files). A record that is a BadRow (e.g. invalid JSON), is not a
        mapping ("expected <expected>, got <type>") or makes `convert` raise BadRow goes to bad_row with
        its row number and `path` (default: the dataset source).
        """
        for row_no, record in rows:
            if self.full():
                break
            index = self.dataset.n_rows
            self.row_read()
            try:
                if isinstance(record, BadRow):
                    raise record
                if not isinstance(record, Mapping):
                    raise BadRow(f"expected {expected}, got {type(record).__name__}")
                outcome = convert(index, record)
            except BadRow as bad:
                self.bad_row(bad.message, row_no, bad.field, path=path)
                continue
            for item in outcome if isinstance(outcome, list) else [outcome]:
                if isinstance(item, str):
                    self.drop(item)
                else:
                    self.add(item)
        return self.dataset


class BadRow(Exception):
    """Raised inside a row parser; the adapter hands it to PairCollector.bad_row."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.message, self.field = message, field


class EmptyResponse(BadRow):
    """A response that is empty or whitespace: dropped and counted as "empty_response" by the dataset adapters
    (as the built-in ones do for HH-RLHF and UltraFeedback), an error where a text must be scored."""

    def __init__(self, field: str | None = None):
        super().__init__("empty response", field)


def check_split(name: str, split: str | None, available: Sequence[str], default: str) -> str:
    """The split to read: `split` or the default; a DataError listing the available ones otherwise."""
    chosen = split or default
    if chosen not in available:
        raise DataError(f"dataset {name!r} has no split {chosen!r}; available: {', '.join(available)}")
    return chosen


def data_file(opts: LoadOptions, *parts: str) -> Path:
    """Path of a file in the data directory; a one-line DataError naming it when it is missing."""
    path = resolve_data_dir(opts.data_dir).joinpath(*parts)
    if not path.is_file():
        raise DataError("file not found (check --data-dir)", path=path)
    return path


# ---------------------------------------------------------------------------------------------- readers


def iter_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """Yields (1-based line number, parsed value or a BadRow) for each non-blank line of a .jsonl(.gz)."""
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8-sig") as handle:
            for line_no, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    yield line_no, json.loads(line)
                except json.JSONDecodeError as err:
                    yield line_no, BadRow(f"invalid JSON ({err.msg} at column {err.colno})")
                except RecursionError:
                    yield line_no, BadRow("invalid JSON (nested too deeply)")
    except (OSError, UnicodeDecodeError, EOFError) as err:
        raise DataError(f"cannot read file ({one_line(str(err))})", path=path) from None


def read_json_array(path: Path) -> list[Any]:
    """The top-level JSON array of a .json file."""
    try:
        with open(path, encoding="utf-8-sig") as handle:
            data = json.load(handle)
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as err:
        raise DataError(f"cannot read JSON ({one_line(str(err))})", path=path) from None
    except RecursionError:
        raise DataError("cannot read JSON (nested too deeply)", path=path) from None
    if not isinstance(data, list):
        raise DataError(f"expected a JSON array of rows, got {type(data).__name__}", path=path)
    return data


def parquet_columns(path: Path) -> list[str]:
    """Column names of a Parquet file (reads only the footer)."""
    import pyarrow.parquet as pq

    try:
        return list(pq.read_schema(path).names)
    except Exception as err:  # pyarrow raises several unrelated types for unreadable files
        raise DataError(f"cannot read Parquet ({one_line(str(err))})", path=path) from None


def iter_parquet(
    path: Path,
    columns: Sequence[str] | None = None,
    batch_rows: int = 1024,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yields (1-based row number, row as plain Python dict) in file order, one record batch at a time."""
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
        batches = parquet.iter_batches(batch_size=batch_rows, columns=list(columns) if columns else None)
        row_no = 0
        for batch in batches:
            for record in batch.to_pylist():
                row_no += 1
                yield row_no, record
    except DataError:
        raise
    except Exception as err:
        raise DataError(f"cannot read Parquet ({one_line(str(err))})", path=path) from None


def iter_csv(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yields (1-based data row number, row dict of strings); the header line is not counted."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as handle:  # -sig: a byte-order mark is not a column
            reader = csv.DictReader(handle)
            for row_no, record in enumerate(reader, start=1):
                yield row_no, dict(record)
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise DataError(f"cannot read CSV ({one_line(str(err))})", path=path) from None


def csv_columns(path: Path) -> list[str]:
    """Header of a CSV file."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as handle:
            return next(csv.reader(handle), [])
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise DataError(f"cannot read CSV ({one_line(str(err))})", path=path) from None


# ------------------------------------------------------------------------------------------ validation


def require_text(record: Mapping[str, Any], key: str, field: str | None = None, allow_empty: bool = False) -> str:
    """record[key] as a string; BadRow naming `field` (default: key) when missing, not a string or empty."""
    name = field or key
    if key not in record or record[key] is None:
        raise BadRow("missing value", name)
    value = record[key]
    if not isinstance(value, str):
        raise BadRow(f"expected a string, got {type(value).__name__}", name)
    if not allow_empty and not value.strip():
        raise BadRow("empty text", name)
    return value


def require_int(record: Mapping[str, Any], key: str, allowed: Sequence[int] | None = None) -> int:
    """record[key] as an int (bools refused); BadRow when missing, not integral or not in `allowed`."""
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise BadRow(f"expected an integer, got {value!r}"[:120], key)
    if allowed is not None and int(value) not in allowed:
        raise BadRow(f"expected one of {list(allowed)}, got {value!r}", key)
    return int(value)


def parse_label(value: Any, field: str = "label") -> float:
    """A probability label in [0, 1] from a number or numeric string; BadRow otherwise."""
    if isinstance(value, bool):
        raise BadRow(f"expected a number in [0, 1], got {value!r}", field)
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise BadRow(f"expected a number in [0, 1], got {value!r}"[:120], field) from None
    if not isinstance(value, int | float) or math.isnan(value) or not 0.0 <= value <= 1.0:
        raise BadRow(f"expected a number in [0, 1], got {value!r}"[:120], field)
    return float(value)


_ROLE_ALIASES: dict[str, Role] = {
    "user": "user",
    "human": "user",
    "prompter": "user",
    "assistant": "assistant",
    "gpt": "assistant",
    "bot": "assistant",
    "model": "assistant",
    "system": "system",
}


def chat_turns(messages: Any, field: str = "prompt") -> tuple[Turn, ...]:
    """Turns from a chat list [{role, content}, ...]; BadRow when the list or a role is not understood."""
    if not isinstance(messages, list | tuple) or not messages:
        raise BadRow("expected a non-empty list of {role, content} messages", field)
    turns = []
    for message in messages:
        if not isinstance(message, Mapping):
            raise BadRow("expected a list of {role, content} messages", field)
        role = _ROLE_ALIASES.get(str(message.get("role", "")).lower())
        content = message.get("content")
        if role is None or not isinstance(content, str):
            raise BadRow(
                f"message with role {message.get('role')!r} and content of type "
                f"{type(content).__name__} is not understood",
                field,
            )
        turns.append(Turn(role, content))
    return tuple(turns)


# ------------------------------------------------------------------------------------------ HH format


def longest_common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of two strings."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def split_hh_pair(chosen: str, rejected: str) -> tuple[str, str, str]:
    """(prompt transcript, chosen response, rejected response) of an HH-RLHF pair.

    The cut is the last "\\n\\nAssistant:" inside the SHARED prefix of the two transcripts, not each
    side's own last marker: a few responses invent further "\\n\\nHuman: ...\\n\\nAssistant:" turns, and
    cutting each side separately would give the two sides different prompts. The prompt keeps the final
    "\\n\\nAssistant:" cue; responses are stripped of surrounding whitespace.
    Raises BadRow when the shared prefix has no assistant marker.
    """
    shared = longest_common_prefix(chosen, rejected)
    cut = chosen.rfind(HH_ASSISTANT, 0, shared)
    # rfind(sub, 0, end) only matches a marker lying wholly inside chosen[:shared].
    if cut < 0:
        raise BadRow('no "\\n\\nAssistant:" turn in the prefix shared by chosen and rejected', "chosen")
    end = cut + len(HH_ASSISTANT)
    return chosen[:end], chosen[end:].strip(), rejected[end:].strip()


def parse_hh_transcript(text: str) -> tuple[Turn, ...]:
    """Turns of an HH transcript "\\n\\nHuman: ...\\n\\nAssistant: ...", without the final empty cue.

    Only the full markers ("\\n\\nHuman:", "\\n\\nAssistant:") separate turns, so a literal "Human:"
    inside a turn stays part of its text. Text before the first marker (none in the released files)
    is kept as a user turn.
    """
    turns: list[Turn] = []
    pos = 0
    role: Role | None = None
    while True:
        next_human = text.find(HH_HUMAN, pos)
        next_assistant = text.find(HH_ASSISTANT, pos)
        candidates = [
            (i, r, m)
            for i, r, m in ((next_human, "user", HH_HUMAN), (next_assistant, "assistant", HH_ASSISTANT))
            if i >= 0
        ]
        nxt = min(candidates) if candidates else None
        end = nxt[0] if nxt else len(text)
        segment = text[pos:end].strip()
        if role is not None:
            turns.append(Turn(role, segment))
        elif segment:
            turns.append(Turn("user", segment))
        if nxt is None:
            break
        role = nxt[1]  # type: ignore[assignment]
        pos = nxt[0] + len(nxt[2])
    if turns and turns[-1].role == "assistant" and not turns[-1].content:
        turns.pop()  # the trailing "\n\nAssistant:" cue is not a turn
    return tuple(turns)
