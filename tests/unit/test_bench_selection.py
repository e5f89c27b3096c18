"""What `rewardsmith bench` is asked for: --suite names mapped onto the registry's suites, the models' display
names, and the identities (texts digest, model fingerprint) that decide whether a saved result may be reused."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from rewardsmith.bench.registry import discover_suites, select_suites, suite_selectors
from rewardsmith.bench.schema import BenchRow, SuiteData
from rewardsmith.data.schema import Turn
from rewardsmith.errors import ConfigError, UnknownNameError
from rewardsmith.jobs.bench import model_labels, result_file, texts_digest, training_sets
from rewardsmith.models.identity import model_fingerprint

EVERY = ["reward-bench", "reward-bench-2", "ppe-human-preference", "ppe-correctness", "rm-bench", "local"]


def test_the_issue_suite_names_select_registry_suites() -> None:
    assert select_suites(None) == select_suites(["all"]) == EVERY
    assert select_suites(["rewardbench"]) == ["reward-bench"]
    assert select_suites(["rewardbench2"]) == ["reward-bench-2"]
    assert select_suites(["ppe"]) == ["ppe-human-preference", "ppe-correctness"]
    assert select_suites(["local", "rm-bench"]) == ["rm-bench", "local"]  # report order, whatever the order given
    assert select_suites(["ppe", "ppe-correctness", "all"]) == EVERY  # each once
    assert select_suites(["ppe-correctness"]) == ["ppe-correctness"]  # a suite by its own name


def test_every_suite_is_selected_by_its_group() -> None:
    selectors = suite_selectors()
    for name, suite in discover_suites().items():
        assert name in selectors[suite.selector]
    assert {"all", "rewardbench", "rewardbench2", "ppe", "rm-bench", "local"} <= set(selectors)


def test_an_unknown_suite_names_the_choices() -> None:
    with pytest.raises(UnknownNameError, match="unknown benchmark suite 'rewardbench3'; known: all, local, ppe"):
        select_suites(["rm-bench", "rewardbench3"])


def test_model_labels() -> None:
    assert model_labels(["runs/harmless/model", "runs/helpful/model/", "org/reward-7b", "plain"]) == [
        "harmless",
        "helpful",
        "reward-7b",
        "plain",
    ]
    # Two folders with one name keep the paths they were given.
    assert model_labels(["x/rm", "y/rm", "z/other"]) == ["x/rm", "y/rm", "other"]
    with pytest.raises(ConfigError, match="--model runs/a given twice"):
        model_labels(["runs/a", "runs/a"])
    assert result_file("harmless", "runs/harmless/model") != result_file("harmless", "elsewhere/harmless/model")
    assert result_file("a b/c", "s").startswith("models/a_b_c-")


def test_texts_digest_tells_texts_apart() -> None:
    base = [((Turn("user", "hi"),), "hello"), ((Turn("user", "hi"),), "bye")]
    assert texts_digest(base) == texts_digest(list(base))
    assert texts_digest(base) != texts_digest(base[::-1])  # order matters: rewards are stored in order
    assert texts_digest(base) != texts_digest([((Turn("system", "hi"),), "hello"), base[1]])
    assert texts_digest(base) != texts_digest([((Turn("user", "hi!"),), "hello"), base[1]])
    # Turn boundaries count: one turn "ab" is not two turns "a", "b".
    assert texts_digest([((Turn("user", "ab"),), "r")]) != texts_digest([((Turn("user", "a"), Turn("user", "b")), "r")])


def test_model_fingerprint_follows_the_content_not_the_name_or_time(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "heads.safetensors").write_bytes(b"1234")
    first = model_fingerprint(str(folder))
    assert model_fingerprint(str(folder)) == first
    stat = (folder / "heads.safetensors").stat()
    os.utime(folder / "heads.safetensors", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert model_fingerprint(str(folder)) == first  # touched, same bytes: the same model
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    assert model_fingerprint(str(copy)) == first  # a copy under another name is the same model
    (folder / "heads.safetensors").write_bytes(b"1235")  # retrained in place, same size
    os.utime(folder / "heads.safetensors", ns=(stat.st_atime_ns, stat.st_mtime_ns))  # and the old time
    second = model_fingerprint(str(folder))
    assert second != first
    (folder / "extra.json").write_text("{}")
    assert model_fingerprint(str(folder)) not in (first, second)
    assert model_fingerprint("org/not-a-local-folder") == "hub:org/not-a-local-folder"


def test_training_sets_are_the_benchmark_sets_named_like_the_training_data() -> None:
    rows = [
        BenchRow("1", "hh-rlhf/harmless-base", (Turn("user", "q"),), ("a", "b")),
        BenchRow("2", "helpsteer2", (Turn("user", "q"),), ("a", "b")),
    ]
    data = [SuiteData("local", rows), SuiteData("rm-bench", [BenchRow("3", "chat", (Turn("user", "q"),), ("a",) * 6)])]
    assert training_sets("hh-rlhf/harmless-base", data) == [{"suite": "local", "subset": "hh-rlhf/harmless-base"}]
    assert training_sets("synthetic/source", data) == [] and training_sets(None, data) == []
