"""Generic adapters: `file` (a local jsonl / jsonl.gz / json / parquet / csv file) and `hub` (a Hugging Face
Hub dataset id), both with a column mapping.

opts.columns maps our fields to the file's columns; unmapped fields default to the same name:
  prompt   str (plain user text, or an HH transcript "\\n\\nHuman: ...\\n\\nAssistant:") or a chat list
           [{role, content}, ...]. Without a prompt column, the prompt is derived from chosen/rejected when
           they are full HH transcripts (cut at the last shared "\\n\\nAssistant:") or chat lists ending
           with the assistant's reply (the prompt is every message before it).
  chosen, rejected   str, or a chat list whose last message is the assistant's reply.
  label    optional; P(chosen preferred) in [0, 1] (default 1.0).
  domain   optional (default "file:<file stem>" or "hub:<id>").
  id       optional pair id (default "<file stem or id>:<split>:<0-based row>").

A row that breaks these rules (missing field, wrong type, label outside [0, 1], invalid JSON) raises
DataError(path, row, field) with on_bad_row="error" and is counted in dropped["malformed"] with "skip". Rows
with an empty response are dropped and counted as "empty_response", and rows whose two responses are identical
as "identical", as the built-in adapters do; unpaired UTF-16 surrogates in any text are replaced by U+FFFD and
counted in repaired["unpaired_surrogates_replaced"]. Rows are numbered from 1: the line number in jsonl files,
the record number (header not counted) in csv and parquet files. A mapped column absent from the file (for
jsonl: from its first row) is a DataError naming the file and the column.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from rewardsmith.data.adapters._common import (
    HH_ASSISTANT,
    BadRow,
    EmptyResponse,
    PairCollector,
    chat_turns,
    csv_columns,
    iter_csv,
    iter_jsonl,
    iter_parquet,
    one_line,
    parquet_columns,
    parse_hh_transcript,
    parse_label,
    read_json_array,
    split_hh_pair,
)
from rewardsmith.data.dataset import LoadOptions, PairDataset
from rewardsmith.data.schema import PreferencePair, Turn, user_prompt
from rewardsmith.errors import ConfigError, DataError

PAIR_FIELDS = ("prompt", "chosen", "rejected", "label", "domain", "id")
REQUIRED_FIELDS = ("chosen", "rejected")
FILE_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".parquet", ".csv")


def column_mapping(columns: Mapping[str, str]) -> dict[str, str]:
    """Our field -> source column for every field; ConfigError for a key that is not one of PAIR_FIELDS."""
    unknown = sorted(set(columns) - set(PAIR_FIELDS))
    if unknown:
        raise ConfigError(
            f"unknown field(s) in the column mapping: {', '.join(unknown)}; fields are {', '.join(PAIR_FIELDS)}"
        )
    return {f: columns.get(f, f) for f in PAIR_FIELDS}


def _file_format(path: Path) -> str:
    name = path.name.lower()
    for suffix in FILE_SUFFIXES:
        if name.endswith(suffix):
            return suffix
    raise DataError(f"unsupported file type; use one of {', '.join(FILE_SUFFIXES)}", path=path)


def _is_chat_list(value: Any) -> bool:
    return isinstance(value, list | tuple) and bool(value) and all(isinstance(m, Mapping) for m in value)


def parse_response(value: Any, field: str) -> tuple[str, tuple[Turn, ...]]:
    """(response text, conversation before it) from a string or a chat list ending with the assistant.
    Raises BadRow naming `field` when it is empty or of another type."""
    if isinstance(value, str):
        if not value.strip():
            raise EmptyResponse(field)
        return value, ()
    if _is_chat_list(value):
        turns = chat_turns(value, field)
        if turns[-1].role != "assistant":
            raise BadRow("the last message of a chat-list response must be the assistant's", field)
        if not turns[-1].content.strip():
            raise EmptyResponse(field)
        return turns[-1].content, turns[:-1]
    if value is None:
        raise BadRow("missing value", field)
    raise BadRow(f"expected a string or a chat list, got {type(value).__name__}", field)


def parse_prompt(value: Any, field: str) -> tuple[Turn, ...]:
    """Turns of a prompt given as plain user text, an HH transcript ("Human: ... Assistant: ...") or a chat
    list. Raises BadRow naming `field` when it is empty or of another type."""
    if isinstance(value, str):
        if not value.strip():
            raise BadRow("empty prompt", field)
        if value.lstrip("\n").startswith("Human:"):
            turns = parse_hh_transcript("\n\n" + value.lstrip("\n"))
            if turns:
                return turns
        return user_prompt(value)
    if _is_chat_list(value):
        return chat_turns(value, field)
    if value is None:
        raise BadRow("missing value", field)
    raise BadRow(f"expected a string or a chat list, got {type(value).__name__}", field)


def parse_score_record(record: Any) -> tuple[PreferencePair, bool]:
    """A record to score, as `rewardsmith score` and the reward server read it: `prompt` with `response` (one
    text, set on both sides of the pair; returns single=True) or `prompt`, `chosen` and `rejected`. Returns
    (pair, single); raises BadRow naming the field."""
    if not isinstance(record, Mapping):
        raise BadRow(f"expected a JSON object, got {type(record).__name__}")
    if "prompt" not in record:
        raise BadRow("missing field", "prompt")
    prompt = parse_prompt(record["prompt"], "prompt")
    if "response" in record and "chosen" not in record:
        text, _ = parse_response(record["response"], "response")
        return PreferencePair(prompt, text, text), True
    if "chosen" in record and "rejected" in record:
        return PreferencePair(
            prompt, parse_response(record["chosen"], "chosen")[0], parse_response(record["rejected"], "rejected")[0]
        ), False
    raise BadRow("needs `response`, or `chosen` and `rejected`")


class _RowConverter:
    """Turns one source row (a dict) into a PreferencePair under a column mapping."""

    def __init__(
        self,
        mapping: dict[str, str],
        columns: set[str],
        explicit: set[str],
        default_domain: str,
        id_prefix: str,
        source: Path | str,
    ):
        self.mapping, self.default_domain, self.id_prefix = mapping, default_domain, id_prefix
        for field in (*REQUIRED_FIELDS, *(f for f in explicit if f not in REQUIRED_FIELDS)):
            if mapping[field] not in columns:
                raise DataError(
                    f"column {mapping[field]!r} (field {field!r}) not found; columns: "
                    f"{one_line(', '.join(sorted(columns)) or '(none)')}",
                    path=source,
                )
        self.has = {f: mapping[f] in columns for f in PAIR_FIELDS}

    def derive_prompt_ok(self, first_row: Mapping[str, Any] | None, source: Path | str) -> None:
        """Without a prompt column, chosen must be an HH transcript or a chat list (checked on row 1)."""
        if self.has["prompt"] or first_row is None:
            return
        chosen = first_row.get(self.mapping["chosen"])
        transcript = isinstance(chosen, str) and HH_ASSISTANT in chosen
        conversation = isinstance(chosen, list | tuple) and _is_chat_list(chosen) and len(chosen) > 1
        if not (transcript or conversation):
            raise DataError(
                f"column {self.mapping['prompt']!r} (field 'prompt') not found, and "
                "chosen/rejected are neither HH transcripts nor chat lists",
                path=source,
            )

    def convert(self, record: Mapping[str, Any], index: int) -> PreferencePair:
        m = self.mapping
        for field in REQUIRED_FIELDS:
            if m[field] not in record:
                raise BadRow("missing field", m[field])
        raw_chosen, raw_rejected = record[m["chosen"]], record[m["rejected"]]
        if self.has["prompt"]:
            if m["prompt"] not in record:
                raise BadRow("missing field", m["prompt"])
            prompt = parse_prompt(record[m["prompt"]], m["prompt"])
            chosen, _ = parse_response(raw_chosen, m["chosen"])
            rejected, _ = parse_response(raw_rejected, m["rejected"])
        elif isinstance(raw_chosen, str) and isinstance(raw_rejected, str):
            prompt_text, chosen, rejected = split_hh_pair(raw_chosen, raw_rejected)
            prompt = parse_hh_transcript(prompt_text)
            for field, text in ((m["chosen"], chosen), (m["rejected"], rejected)):
                if not text.strip():
                    raise EmptyResponse(field)
        else:
            chosen, prompt = parse_response(raw_chosen, m["chosen"])
            rejected, _ = parse_response(raw_rejected, m["rejected"])
            if not prompt:
                raise BadRow("no prompt column and the chat list holds no prompt", m["chosen"])
        label = 1.0
        if self.has["label"]:
            label = parse_label(record.get(m["label"]), m["label"])
        domain = self.default_domain
        if self.has["domain"] and isinstance(record.get(m["domain"]), str) and record[m["domain"]].strip():
            domain = record[m["domain"]]
        pair_id = f"{self.id_prefix}:{index}"
        if self.has["id"] and record.get(m["id"]) not in (None, ""):
            pair_id = str(record[m["id"]])
        return PreferencePair(
            prompt=prompt, chosen=chosen, rejected=rejected, label=label, domain=domain, pair_id=pair_id
        )


def _collect(
    rows: Iterable[tuple[int, Any]], converter: _RowConverter, out: PairCollector, path: Path | str
) -> PairDataset:
    def convert(index: int, record: Mapping[str, Any]) -> PreferencePair | str:
        try:
            pair = converter.convert(record, index)
        except EmptyResponse:
            return "empty_response"
        return "identical" if pair.chosen == pair.rejected else pair

    return out.collect(rows, convert, path=path, expected="an object")


def _peek(rows: Iterator[tuple[int, Any]]) -> tuple[Mapping[str, Any] | None, Iterator[tuple[int, Any]]]:
    """The first row that is an object (or None), and an iterator that still yields every row."""
    seen: list[tuple[int, Any]] = []
    first: Mapping[str, Any] | None = None
    for item in rows:
        seen.append(item)
        if isinstance(item[1], Mapping):
            first = item[1]
            break

    def chained() -> Iterator[tuple[int, Any]]:
        yield from seen
        yield from rows

    return first, chained()


def iter_records(path: Path) -> Iterator[tuple[int, Any]]:
    """(1-based row number, record or BadRow) of every row of a jsonl / jsonl.gz / json / parquet / csv file,
    the format chosen by its suffix (a DataError names an unsupported one)."""
    fmt = _file_format(path)
    if fmt == ".parquet":
        return iter_parquet(path)
    if fmt == ".csv":
        return iter_csv(path)
    if fmt == ".json":
        return iter(enumerate(read_json_array(path), start=1))
    return iter_jsonl(path)


def load_file(opts: LoadOptions) -> PairDataset:
    """PairDataset of a local preference file (format chosen by suffix) under opts.columns.

    `opts.split` only names the split in default pair ids; the whole file is read.
    """
    if opts.path is None:
        raise ConfigError("the 'file' dataset needs a path to a jsonl, json, parquet or csv file")
    path = Path(opts.path).expanduser()
    if not path.is_file():
        raise DataError("file not found", path=path)
    mapping = column_mapping(opts.columns)
    stem = path.name.split(".")[0]
    fmt = _file_format(path)
    rows: Iterator[tuple[int, Any]]
    first: Mapping[str, Any] | None
    if fmt == ".parquet":
        columns = set(parquet_columns(path))
        first = None
        rows = iter_parquet(path, columns=[c for c in mapping.values() if c in columns])
    elif fmt == ".csv":
        columns = set(csv_columns(path))
        first = None
        rows = iter_csv(path)
    else:
        source = iter(enumerate(read_json_array(path), start=1)) if fmt == ".json" else iter_jsonl(path)
        first, rows = _peek(source)
        columns = set(first or {})
    converter = _RowConverter(
        mapping, columns, set(opts.columns), f"file:{stem}", f"{stem}:{opts.split or 'all'}", path
    )
    if first is None and not converter.has["prompt"]:
        first, rows = _peek(rows)
    converter.derive_prompt_ok(first, path)
    return _collect(rows, converter, PairCollector("file", path, opts), path)


def load_hub(opts: LoadOptions) -> PairDataset:
    """PairDataset of a Hugging Face Hub dataset: datasets.load_dataset(<id>, split=<split or "train">)
    under opts.columns. An unreachable hub or unknown id is a one-line DataError."""
    if opts.path is None:
        raise ConfigError("the 'hub' dataset needs a Hugging Face dataset id as its path")
    dataset_id = str(opts.path)
    split = opts.split or "train"
    mapping = column_mapping(opts.columns)
    try:
        import datasets

        hub_data = datasets.load_dataset(dataset_id, split=split)
    except Exception as err:  # network, auth, missing id or split: all mean "cannot read it from here"
        cause = f"{type(err).__name__}: {one_line(str(err), 120)}"
        raise DataError(
            f"cannot load {dataset_id!r} (split {split!r}) from the Hugging Face Hub: hub "
            f"unreachable or dataset not found ({cause}); use a dataset from --data-dir, or "
            "download this one and read it with the `file` dataset"
        ) from None
    source = f"hub:{dataset_id}"
    columns = set(hub_data.column_names)
    converter = _RowConverter(mapping, columns, set(opts.columns), source, f"{dataset_id}:{split}", source)
    rows: Iterator[tuple[int, Any]] = iter(enumerate(hub_data, start=1))
    first, rows = _peek(rows)
    converter.derive_prompt_ok(first, source)
    return _collect(rows, converter, PairCollector("hub", source, opts), source)
