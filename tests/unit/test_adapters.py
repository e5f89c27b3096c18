"""Dataset adapters on small files written by the tests: parsing, drop accounting, limits, error messages."""

from __future__ import annotations

import csv
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rewardsmith.data.adapters import rmbench_difficulty, rmbench_matrix_pairs
from rewardsmith.data.adapters._common import parse_hh_transcript, split_hh_pair
from rewardsmith.data.adapters.helpsteer import split_extra_id_turns
from rewardsmith.data.adapters.math500 import corrupt_final_answer, corrupt_wrong_step, last_boxed_span
from rewardsmith.data.registry import DATASETS, load_dataset
from rewardsmith.data.schema import PreferencePair, Turn, user_prompt
from rewardsmith.errors import ConfigError, DataError, UnknownNameError

EXPECTED_NAMES = {
    "hh-rlhf/harmless-base",
    "hh-rlhf/helpful-base",
    "hh-rlhf/helpful-rejection-sampled",
    "pku-saferlhf/harmless",
    "pku-saferlhf/helpful",
    "helpsteer2",
    "helpsteer3",
    "ultrafeedback",
    "rm-bench/chat",
    "rm-bench/code",
    "rm-bench/safety-refuse",
    "rm-bench/safety-response",
    "rm-bench/safety",
    "moralchoice/low",
    "moralchoice/high",
    "math-500",
    "file",
    "hub",
    "synthetic/source",
    "synthetic/target-clean",
    "synthetic/target-reversed",
}


def write_jsonl(path: Path, rows: list[Any], raw_lines: dict[int, str] | None = None) -> Path:
    """Writes rows as JSON lines (gzip when the name ends in .gz); raw_lines replaces line i (0-based)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(r) for r in rows]
    for i, text in (raw_lines or {}).items():
        lines[i] = text
    data = "\n".join(lines) + "\n"
    if path.name.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as handle:
            handle.write(data)
    else:
        path.write_text(data, encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------- registry


def test_every_adapter_is_registered() -> None:
    import rewardsmith.data.adapters  # noqa: F401

    assert set(DATASETS.names()) >= EXPECTED_NAMES


def test_unknown_dataset_lists_known_names() -> None:
    with pytest.raises(UnknownNameError, match="hh-rlhf/harmless-base"):
        load_dataset("hh-rlhf/harmless")


def test_importing_adapters_loads_no_heavy_library_and_reads_no_file(tmp_path: Path) -> None:
    code = (
        "import builtins, io, sys\n"
        "opened = []\n"
        "real_open = builtins.open\n"
        "def spy(file, *a, **k):\n"
        "    opened.append(str(file))\n"
        "    return real_open(file, *a, **k)\n"
        "builtins.open = spy\n"
        "io.open = spy\n"
        "import rewardsmith.data.adapters\n"
        "suffixes = ('.jsonl', '.gz', '.parquet', '.csv')\n"
        "data = [f for f in opened if 'shared' in f or f.endswith(suffixes)]\n"
        "heavy = [m for m in ('pyarrow', 'pandas', 'datasets', 'torch') if m in sys.modules]\n"
        "print(data, heavy)\n"
        "sys.exit(1 if data or heavy else 0)\n"
    )
    env = dict(os.environ, REWARDSMITH_DATA_DIR=str(tmp_path / "absent"))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


# ----------------------------------------------------------------------------------------- HH-RLHF

PROMPT = "\n\nHuman: How do I boil an egg?\n\nAssistant: Put it in boiling water.\n\nHuman: For how long?"


def test_hh_split_uses_the_shared_prefix_when_a_response_invents_a_turn() -> None:
    # The chosen response contains an invented "\n\nHuman: ...\n\nAssistant:" exchange and a literal
    # "Human:"; cutting it at its own last marker would give it a different prompt from rejected.
    chosen = (
        PROMPT + "\n\nAssistant: About nine minutes. Human: thanks"
        "\n\nHuman: And soft boiled?\n\nAssistant: Six minutes."
    )
    rejected = PROMPT + "\n\nAssistant: Until it is done."
    prompt, chosen_response, rejected_response = split_hh_pair(chosen, rejected)
    assert prompt == PROMPT + "\n\nAssistant:"
    assert chosen_response == (
        "About nine minutes. Human: thanks\n\nHuman: And soft boiled?\n\nAssistant: Six minutes."
    )
    assert rejected_response == "Until it is done."
    assert chosen.rfind("\n\nAssistant:") != rejected.rfind("\n\nAssistant:")  # the naive cut would differ
    assert parse_hh_transcript(prompt) == (
        Turn("user", "How do I boil an egg?"),
        Turn("assistant", "Put it in boiling water."),
        Turn("user", "For how long?"),
    )


def test_hh_split_when_both_responses_start_alike_or_one_is_empty() -> None:
    prompt, c, r = split_hh_pair(PROMPT + "\n\nAssistant: Ten minutes.", PROMPT + "\n\nAssistant: Ten or so.")
    assert (prompt, c, r) == (PROMPT + "\n\nAssistant:", "Ten minutes.", "Ten or so.")
    prompt, c, r = split_hh_pair(PROMPT + "\n\nAssistant: ", PROMPT + "\n\nAssistant: Ten.")
    assert (prompt, c, r) == (PROMPT + "\n\nAssistant:", "", "Ten.")


def test_parse_hh_transcript_keeps_literal_human_text_and_empty_turns() -> None:
    turns = parse_hh_transcript("\n\nHuman: Say 'Human: hi'\n\nAssistant: \n\nHuman: again\n\nAssistant:")
    assert turns == (Turn("user", "Say 'Human: hi'"), Turn("assistant", ""), Turn("user", "again"))


def _hh_dir(tmp_path: Path) -> Path:
    rows = [
        {"chosen": PROMPT + "\n\nAssistant: Nine minutes.", "rejected": PROMPT + "\n\nAssistant: No idea."},
        {"chosen": PROMPT + "\n\nAssistant: Same.", "rejected": PROMPT + "\n\nAssistant: Same."},
        {"chosen": PROMPT + "\n\nAssistant: ", "rejected": PROMPT + "\n\nAssistant: Ten."},
        {
            "chosen": "\n\nHuman: Hi\n\nAssistant: Hello! Human: fake\n\nAssistant: x",
            "rejected": "\n\nHuman: Hi\n\nAssistant: Go away.",
        },
    ]
    write_jsonl(tmp_path / "hh-rlhf" / "helpful-base" / "test.jsonl.gz", rows)
    return tmp_path


def test_hh_adapter_counts_drops_and_keeps_stable_ids(tmp_path: Path) -> None:
    ds = load_dataset("hh-rlhf/helpful-base", data_dir=_hh_dir(tmp_path))
    assert ds.n_rows == 4
    assert ds.dropped == {"identical": 1, "empty_response": 1}
    assert [p.pair_id for p in ds.pairs] == ["hh-rlhf/helpful-base:test:0", "hh-rlhf/helpful-base:test:3"]
    first, last = ds.pairs
    assert first.prompt_text() == PROMPT + "\n\nAssistant:"
    assert (first.chosen, first.rejected, first.label, first.domain) == (
        "Nine minutes.",
        "No idea.",
        1.0,
        "hh-rlhf/helpful-base",
    )
    assert last.prompt == (Turn("user", "Hi"),)
    assert last.chosen == "Hello! Human: fake\n\nAssistant: x"


def test_hh_adapter_limit_and_unknown_split(tmp_path: Path) -> None:
    data = _hh_dir(tmp_path)
    assert len(load_dataset("hh-rlhf/helpful-base", data_dir=data, limit=1).pairs) == 1
    with pytest.raises(DataError, match=r"no split 'train'.*available: test"):
        load_dataset("hh-rlhf/helpful-base", data_dir=data, split="train")
    with pytest.raises(DataError, match=r"harmless-base.*file not found"):
        load_dataset("hh-rlhf/harmless-base", data_dir=data)


def test_hh_adapter_bad_row_error_and_skip(tmp_path: Path) -> None:
    path = tmp_path / "hh-rlhf" / "harmless-base" / "test.jsonl.gz"
    write_jsonl(
        path,
        [
            {"chosen": PROMPT + "\n\nAssistant: a", "rejected": PROMPT + "\n\nAssistant: b"},
            {"chosen": "no markers", "rejected": "at all"},
            {},
        ],
        raw_lines={2: "{not json"},
    )
    with pytest.raises(DataError) as err:
        load_dataset("hh-rlhf/harmless-base", data_dir=tmp_path)
    assert "test.jsonl.gz" in str(err.value) and "row 2" in str(err.value) and "\n" not in str(err.value)
    ds = load_dataset("hh-rlhf/harmless-base", data_dir=tmp_path, on_bad_row="skip")
    assert len(ds.pairs) == 1 and ds.dropped == {"malformed": 2}


# ------------------------------------------------------------------------------------- generic file


def _file_rows() -> list[dict[str, Any]]:
    return [
        {"q": "What is 2+2?", "good": "4", "bad": "5", "p": 0.9, "uid": "a"},
        {"q": "Capital of France?", "good": "Paris", "bad": "Rome", "p": 1, "uid": "b"},
        {"q": "Colour of the sky?", "good": "Blue", "bad": "", "p": 1.0, "uid": "c"},  # empty response
        {"q": "Largest ocean?", "good": "Pacific", "bad": "Atlantic", "p": 1.5, "uid": "d"},  # bad label
        {"q": "Fastest animal?", "good": "Cheetah", "uid": "e"},  # missing field
        {"q": "Boiling point?", "good": 100, "bad": "90", "uid": "f"},  # non-string
    ]


MAPPING = {"prompt": "q", "chosen": "good", "rejected": "bad", "label": "p", "id": "uid"}


@pytest.mark.parametrize(("row", "field", "fragment"), [(4, "p", "[0, 1]"), (5, "bad", "missing"), (6, "good", "int")])
def test_file_adapter_names_file_row_and_field_on_one_line(tmp_path: Path, row: int, field: str, fragment: str) -> None:
    rows = _file_rows()
    rows = [*rows[:2], rows[row - 1]]  # the bad row becomes line 3
    path = write_jsonl(tmp_path / "prefs.jsonl", rows)
    with pytest.raises(DataError) as err:
        load_dataset("file", path=path, columns=MAPPING)
    message = str(err.value)
    assert "prefs.jsonl" in message and "row 3" in message and f"field {field!r}" in message
    assert fragment in message and "\n" not in message
    assert (err.value.row, err.value.field) == (3, field)


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz", ".json", ".parquet", ".csv"])
def test_file_adapter_skips_and_counts_malformed_rows_in_every_format(tmp_path: Path, suffix: str) -> None:
    rows = _file_rows()
    path = tmp_path / f"prefs{suffix}"
    if suffix == ".parquet":
        table_rows = [dict(r, good=str(r.get("good")) if r["uid"] != "f" else None) for r in rows]
        pq.write_table(pa.Table.from_pylist(table_rows), path)
    elif suffix == ".csv":
        with open(path, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=["q", "good", "bad", "p", "uid"])
            writer.writeheader()
            writer.writerows(rows)
    elif suffix == ".json":
        path.write_text(json.dumps(rows), encoding="utf-8")
    else:
        write_jsonl(path, rows)
    ds = load_dataset("file", path=path, columns=MAPPING, on_bad_row="skip")
    kept = [(p.pair_id, p.chosen, p.rejected, p.label) for p in ds.pairs]
    assert kept == [("a", "4", "5", 0.9), ("b", "Paris", "Rome", 1.0)]
    # c: empty response (dropped as the built-in adapters do), d: label 1.5, e: missing "bad" (in csv an empty
    # cell, so an empty response there), f: "good" is an int (in csv it is text, but its label cell is blank,
    # which is malformed there too)
    expected = {"empty_response": 2, "malformed": 2} if suffix == ".csv" else {"empty_response": 1, "malformed": 3}
    assert ds.dropped == expected and ds.n_rows == 6
    assert ds.pairs[0].prompt == user_prompt("What is 2+2?") and ds.pairs[0].domain == "file:prefs"


def test_file_adapter_drops_empty_responses_and_repairs_lone_surrogates(tmp_path: Path) -> None:
    """An HH-style file with empty responses reads like the built-in hh-rlhf adapter (rows dropped and counted,
    on_bad_row="error" included); a lone UTF-16 surrogate is replaced and counted, not a crash later."""
    rows = [{"prompt": f"q{i}", "chosen": "fine", "rejected": "" if i % 3 == 0 else "bad"} for i in range(9)]
    rows.append({"prompt": "broken \ud800 text", "chosen": "ok", "rejected": "no"})
    path = tmp_path / "hh.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    ds = load_dataset("file", path=path)
    assert ds.dropped == {"empty_response": 3} and len(ds.pairs) == 7
    assert ds.repaired == {"unpaired_surrogates_replaced": 1}
    assert ds.pairs[-1].prompt[0].content == "broken \ufffd text"
    ds.pairs[-1].prompt_text().encode("utf-8")  # writable now


def test_file_adapter_missing_file_and_missing_column(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"nope\.jsonl: file not found"):
        load_dataset("file", path=tmp_path / "nope.jsonl")
    path = write_jsonl(tmp_path / "prefs.jsonl", _file_rows()[:2])
    with pytest.raises(DataError) as err:
        load_dataset("file", path=path, columns={"prompt": "question", "chosen": "good", "rejected": "bad"})
    assert "prefs.jsonl" in str(err.value) and "'question'" in str(err.value)
    with pytest.raises(DataError, match="'chosen'"):
        load_dataset("file", path=path)  # default names: no chosen column
    with pytest.raises(ConfigError, match="unknown field"):
        load_dataset("file", path=path, columns={"answer": "good"})
    csv_path = tmp_path / "prefs.csv"
    csv_path.write_text("prompt,chosen\nq,a\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"prefs\.csv.*'rejected'"):
        load_dataset("file", path=csv_path)
    text_path = tmp_path / "prefs.txt"
    text_path.write_text("x", encoding="utf-8")
    with pytest.raises(DataError, match="unsupported file type"):
        load_dataset("file", path=text_path)


def test_file_adapter_limit_and_default_ids(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "prefs.jsonl", [{"prompt": f"q{i}", "chosen": "a", "rejected": "b"} for i in range(5)]
    )
    ds = load_dataset("file", path=path, limit=3)
    assert [p.pair_id for p in ds.pairs] == ["prefs:all:0", "prefs:all:1", "prefs:all:2"]
    assert ds.n_rows == 3 and all(p.label == 1.0 for p in ds.pairs)


def test_file_adapter_derives_prompts_from_transcripts_and_chat_lists(tmp_path: Path) -> None:
    hh = write_jsonl(
        tmp_path / "hh.jsonl", [{"chosen": PROMPT + "\n\nAssistant: Nine.", "rejected": PROMPT + "\n\nAssistant: Two."}]
    )
    pair = load_dataset("file", path=hh).pairs[0]
    assert pair.prompt_text() == PROMPT + "\n\nAssistant:"
    assert (pair.chosen, pair.rejected) == ("Nine.", "Two.")
    chat = [{"role": "user", "content": "Hi"}]
    rows = [
        {
            "chosen": [*chat, {"role": "assistant", "content": "Hello"}],
            "rejected": [*chat, {"role": "assistant", "content": "Go"}],
        }
    ]
    pair = load_dataset("file", path=write_jsonl(tmp_path / "chat.jsonl", rows)).pairs[0]
    assert pair.prompt == (Turn("user", "Hi"),) and (pair.chosen, pair.rejected) == ("Hello", "Go")
    plain = write_jsonl(tmp_path / "plain.jsonl", [{"chosen": "a", "rejected": "b"}])
    with pytest.raises(DataError, match="'prompt'"):
        load_dataset("file", path=plain)


def test_hub_adapter_offline_fails_with_one_clean_line() -> None:
    code = (
        "from rewardsmith.data.registry import load_dataset\n"
        "from rewardsmith.errors import DataError\n"
        "try:\n"
        "    load_dataset('hub', path='rewardsmith-tests/no-such-dataset', split='train')\n"
        "except DataError as err:\n"
        "    print(str(err))\n"
    )
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    message = result.stdout.strip()
    assert result.returncode == 0, result.stderr[-2000:]
    assert "\n" not in message and "rewardsmith-tests/no-such-dataset" in message
    assert "Hugging Face Hub" in message and "--data-dir" in message


# ------------------------------------------------------------------------------------------ HelpSteer


def test_split_extra_id_turns() -> None:
    text = "write a poem\n<extra_id_1>Assistant\nRoses are red.\n<extra_id_1>User\nshorter please"
    assert split_extra_id_turns(text) == (
        Turn("user", "write a poem"),
        Turn("assistant", "Roses are red."),
        Turn("user", "shorter please"),
    )
    assert split_extra_id_turns("plain question") == (Turn("user", "plain question"),)
    odd = "a\n<extra_id_1>Assistant\nb"  # ends with the assistant: not a prompt, kept whole
    assert split_extra_id_turns(odd) == (Turn("user", odd),)


def _helpsteer3_rows() -> list[dict[str, Any]]:
    context = [
        {"role": "user", "content": "Fix my code"},
        {"role": "assistant", "content": "Show it"},
        {"role": "user", "content": "print(x"},
    ]
    base = {"domain": "code", "language": "python", "context": context}
    return [
        dict(
            base,
            response1="Add a ')'",
            response2="Looks fine",
            overall_preference=-2,
            individual_preference=[
                {"score": -2, "reasoning": "r", "feedback1": "", "feedback2": ""},
                {"score": -3, "reasoning": "r", "feedback1": "", "feedback2": ""},
            ],
        ),
        dict(
            base,
            response1="Delete it",
            response2="Close the parenthesis",
            overall_preference=3,
            individual_preference=[{"score": 3}],
        ),
        dict(base, response1="A", response2="B", overall_preference=0, individual_preference=[]),
        dict(base, response1="A", response2="B", overall_preference=5, individual_preference=[]),
    ]


def test_helpsteer3_reads_written_rows_in_jsonl_gz_and_parquet(tmp_path: Path) -> None:
    rows = _helpsteer3_rows()
    write_jsonl(tmp_path / "helpsteer3" / "preference" / "validation.jsonl.gz", rows)
    with pytest.raises(DataError) as err:
        load_dataset("helpsteer3", data_dir=tmp_path)
    assert "validation.jsonl.gz" in str(err.value) and "row 4" in str(err.value)
    assert "overall_preference" in str(err.value)
    ds = load_dataset("helpsteer3", data_dir=tmp_path, on_bad_row="skip")
    assert ds.dropped == {"tie": 1, "malformed": 1} and ds.n_rows == 4
    first, second = ds.pairs
    assert (first.chosen, first.rejected) == ("Add a ')'", "Looks fine")  # negative: response1 better
    assert (second.chosen, second.rejected) == ("Close the parenthesis", "Delete it")
    assert [t.role for t in first.prompt] == ["user", "assistant", "user"]
    assert first.metadata["individual_scores"] == [-2, -3] and first.metadata["preference_strength"] == 2
    assert first.metadata["task_domain"] == "code" and second.metadata["chosen_response"] == 2

    parquet_dir = tmp_path / "helpsteer3" / "preference" / "train"
    parquet_dir.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows[:3]), parquet_dir / "0.parquet")
    train = load_dataset("helpsteer3", data_dir=tmp_path, split="train")
    assert [p.chosen for p in train.pairs] == ["Add a ')'", "Close the parenthesis"]
    with pytest.raises(DataError, match="no split 'test'"):
        load_dataset("helpsteer3", data_dir=tmp_path, split="test")


def test_helpsteer3_missing_data_names_the_places_looked_at(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"helpsteer3.*preference/validation\.jsonl\.gz"):
        load_dataset("helpsteer3", data_dir=tmp_path)


# ------------------------------------------------------------------------- PKU, UltraFeedback, MoralChoice


def test_pku_picks_chosen_by_label_and_keeps_both_labels(tmp_path: Path) -> None:
    rows = [
        {
            "prompt": [{"role": "user", "content": "chat form"}],
            "extra_info": {"question": "How to X?"},
            "response_0": "unsafe but useful",
            "response_1": "safe refusal",
            "is_response_0_safe": False,
            "is_response_1_safe": True,
            "response_0_severity_level": 2,
            "response_1_severity_level": 0,
            "better_response_id": 0,
            "safer_response_id": 1,
        },
        {
            "prompt": [{"role": "user", "content": "fallback question"}],
            "extra_info": {"index": 1},
            "response_0": "a",
            "response_1": "b",
            "is_response_0_safe": True,
            "is_response_1_safe": True,
            "response_0_severity_level": 0,
            "response_1_severity_level": 0,
            "better_response_id": 1,
            "safer_response_id": 1,
        },
    ]
    (tmp_path / "pku-saferlhf").mkdir()
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "pku-saferlhf" / "test.parquet")
    harmless = load_dataset("pku-saferlhf/harmless", data_dir=tmp_path).pairs
    helpful = load_dataset("pku-saferlhf/helpful", data_dir=tmp_path).pairs
    assert (harmless[0].chosen, helpful[0].chosen) == ("safe refusal", "unsafe but useful")
    assert harmless[0].prompt == user_prompt("How to X?")
    assert harmless[1].prompt == user_prompt("fallback question")
    meta = harmless[0].metadata
    assert (meta["better_response_id"], meta["safer_response_id"], meta["labels_agree"]) == (0, 1, False)
    assert (meta["chosen_is_safe"], meta["rejected_severity_level"]) == (True, 2)
    assert helpful[0].metadata["chosen_severity_level"] == 2


def test_ultrafeedback_drops_ties_by_default(tmp_path: Path) -> None:
    from rewardsmith.data.adapters.ultrafeedback import load_ultrafeedback
    from rewardsmith.data.registry import LoadOptions

    rows = [
        {
            "prompt": "p",
            "chosen": "a",
            "rejected": "b",
            "source_index": 7,
            "metadata": {"score_chosen": 8.0, "score_rejected": 6.5},
        },
        {
            "prompt": "p",
            "chosen": "c",
            "rejected": "d",
            "source_index": 8,
            "metadata": {"score_chosen": 7.0, "score_rejected": 7.0},
        },
    ]
    write_jsonl(tmp_path / "ultrafeedback" / "eval_clean.jsonl", rows)
    ds = load_dataset("ultrafeedback", data_dir=tmp_path, split="eval")
    assert len(ds.pairs) == 1 and ds.dropped == {"tie": 1}
    assert ds.pairs[0].metadata["score_margin"] == 1.5
    kept = load_ultrafeedback(LoadOptions(data_dir=tmp_path, split="eval"), keep_ties=True)
    assert [p.label for p in kept.pairs] == [1.0, 0.5]


def test_moralchoice_framing_and_labels(tmp_path: Path) -> None:
    folder = tmp_path / "moralchoice"
    folder.mkdir()
    for level in ("low", "high"):
        with open(folder / f"moralchoice_{level}_ambiguity.csv", "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(
                ["scenario_id", "ambiguity", "generation_rule", "context", "action1", "action2", "a1_death", "a2_death"]
            )
            writer.writerow(
                [f"{level}_0", level, "Do not kill", "You are a driver.", "I brake.", "I speed up.", "No", "Yes"]
            )
    low = load_dataset("moralchoice/low", data_dir=tmp_path).pairs[0]
    high = load_dataset("moralchoice/high", data_dir=tmp_path).pairs[0]
    assert low.prompt == user_prompt("You are a driver. What do you do?")
    assert (low.chosen, low.rejected, low.label) == ("I brake.", "I speed up.", 1.0)
    assert low.metadata["ground_truth"] is True
    assert high.label == 0.5 and high.metadata["ground_truth"] is False
    assert "no ground truth" in high.metadata["note"] and low.metadata["action2_rules"] == {"death": "Yes"}


# ---------------------------------------------------------------------------------------- RM-Bench


def _rmbench_pair() -> PreferencePair:
    chosen = ["c0", "c1 longer", "c2 **markdown**"]
    rejected = ["r0", "r1 longer", "r2 **markdown**"]
    return PreferencePair(
        user_prompt("q"),
        chosen[0],
        rejected[0],
        1.0,
        "rm-bench/chat",
        "rm-bench/chat:1",
        {"rmbench_id": 1, "chosen_variants": chosen, "rejected_variants": rejected},
    )


def test_rmbench_difficulty_follows_the_reference_matrix_layout() -> None:
    # rows = chosen style, columns = rejected style; hard = upper-right (i < j), easy = lower-left
    assert rmbench_difficulty(0, 2) == "hard" and rmbench_difficulty(2, 0) == "easy"
    assert [rmbench_difficulty(i, i) for i in range(3)] == ["normal"] * 3
    grid = [[rmbench_difficulty(i, j) for j in range(3)] for i in range(3)]
    assert sum(row.count("hard") for row in grid) == sum(row.count("easy") for row in grid) == 3


def test_rmbench_matrix_pairs_expands_each_row_into_nine() -> None:
    expanded = rmbench_matrix_pairs([_rmbench_pair()])
    assert len(expanded) == 9
    cell = {(p.metadata["chosen_style"], p.metadata["rejected_style"]): p for p in expanded}
    assert (cell[0, 2].chosen, cell[0, 2].rejected, cell[0, 2].metadata["difficulty"]) == (
        "c0",
        "r2 **markdown**",
        "hard",
    )
    assert cell[2, 1].metadata["difficulty"] == "easy" and cell[1, 1].pair_id == "rm-bench/chat:1:11"
    with pytest.raises(ValueError, match="no RM-Bench style variants"):
        rmbench_matrix_pairs([PreferencePair(user_prompt("q"), "a", "b")])


def test_rm_bench_adapter_on_written_rows(tmp_path: Path) -> None:
    folder = tmp_path / "rm-bench"
    folder.mkdir()
    for stem, ids in (("safety-refuse", (1, 2)), ("safety-response", (3,))):
        rows = [
            {"id": i, "subset": stem, "prompt": f"p{i}", "chosen": ["a", "aa", "aaa"], "rejected": ["b", "bb", "bbb"]}
            for i in ids
        ]
        (folder / f"{stem}_filtered.json").write_text(json.dumps(rows), encoding="utf-8")
    ds = load_dataset("rm-bench/safety", data_dir=tmp_path)
    assert [p.pair_id for p in ds.pairs] == [
        "rm-bench/safety-refuse:1",
        "rm-bench/safety-refuse:2",
        "rm-bench/safety-response:3",
    ]
    assert (ds.pairs[0].chosen, ds.pairs[0].rejected) == ("a", "b")
    assert ds.pairs[2].metadata["chosen_variants"] == ["a", "aa", "aaa"]
    assert len(load_dataset("rm-bench/safety", data_dir=tmp_path, limit=2).pairs) == 2


# ---------------------------------------------------------------------------------------- MATH-500

SOLUTION = "We have $2 + 3 = 5$ apples.\n[asy]\ndraw((0,0)--(7,7));\n[/asy]\nSo the answer is $\\boxed{\\frac{15}{4}}$."


def test_math_corruptions_change_the_intended_part_only() -> None:
    span = last_boxed_span(SOLUTION)
    assert span is not None and SOLUTION[span[0] : span[1]] == "\\frac{15}{4}"
    final = corrupt_final_answer(SOLUTION, "id-1")
    step = corrupt_wrong_step(SOLUTION, "id-1")
    assert final is not None and step is not None
    final_text, final_info = final
    step_text, step_info = step
    prefix = SOLUTION[: SOLUTION.rfind("\\boxed{")]
    assert final_text.startswith(prefix) and final_text != SOLUTION
    assert final_info["corrupted_answer"] != "\\frac{15}{4}"
    assert step_text.endswith("\\boxed{\\frac{15}{4}}$.") and step_text != SOLUTION
    assert "draw((0,0)--(7,7))" in step_text and step_info["line"] == 1  # never inside [asy] code
    assert corrupt_final_answer(SOLUTION, "id-1") == final  # deterministic
    assert corrupt_final_answer("The answer is $\\boxed{\\text{Evelyn}}$.", "x") is None
