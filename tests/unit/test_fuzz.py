"""Property-based fuzzing of what reads user input: the config loader and the file dataset adapter. Whatever
they are given, they return a value or raise the tool's own one-line error, never anything else."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rewardsmith.calibrate.config import CalibrateRunConfig
from rewardsmith.config import RunConfig, from_dict
from rewardsmith.data.registry import load_dataset
from rewardsmith.errors import ConfigError, DataError, RewardsmithError
from rewardsmith.icrm.config import ICRMRunConfig
from rewardsmith.w2s.config import ShiftConfig

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**6), 10**6), st.floats(allow_nan=True), st.text(max_size=12)
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=8,
)
KEYS = {
    RunConfig: ["data", "model", "train", "eval", "save_model"],
    ShiftConfig: ["name", "source", "targets", "split", "teacher", "student", "train", "methods", "seeds", "eval"],
    ICRMRunConfig: ["model", "episodes", "train", "elbo", "eval", "embed_batch_size"],
    CalibrateRunConfig: ["source", "evaluation", "fit_sizes"],
}
SECTION_KEYS = [
    "name",
    "lr",
    "epochs",
    "batch_size",
    "train_pairs",
    "max_length",
    "backbone",
    "seed",
    "weight",
    "objective",
    "holdout",
    "seeds",
    "methods",
    "ratings",
    "kl_base",
    "mode",
    "bf16",
    "limit",
]


def _config_doc(cls: type) -> st.SearchStrategy[dict[str, Any]]:
    section = st.dictionaries(st.sampled_from(SECTION_KEYS), values, max_size=4)
    top = st.sampled_from(KEYS[cls] + ["bogus"])
    return st.dictionaries(top, st.one_of(values, section), max_size=4)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_config_loader_returns_a_config_or_a_config_error(data: st.DataObject) -> None:
    cls = data.draw(st.sampled_from(list(KEYS)))
    doc = data.draw(_config_doc(cls))
    try:
        cfg = from_dict(cls, doc)
    except ConfigError as exc:
        assert "\n" not in str(exc)
        return
    assert isinstance(cfg, cls)


row_values = st.one_of(
    scalars, st.lists(st.dictionaries(st.sampled_from(["role", "content"]), scalars, max_size=2), max_size=3)
)
rows = st.lists(
    st.one_of(
        st.dictionaries(st.sampled_from(["prompt", "chosen", "rejected", "label", "id"]), row_values, max_size=5),
        scalars,
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=rows, skip=st.booleans(), raw_tail=st.sampled_from(["", "{not json\n", "\n\n", "[1, 2]\n"]))
def test_file_adapter_returns_pairs_or_a_data_error(records: list[Any], skip: bool, raw_tail: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records) + raw_tail, encoding="utf-8")
        try:
            ds = load_dataset("file", path=path, on_bad_row="skip" if skip else "error")
        except (DataError, ConfigError) as exc:
            assert "\n" not in str(exc) and isinstance(exc, RewardsmithError)
            return
        for pair in ds.pairs:
            assert pair.chosen.strip() and pair.rejected.strip() and 0.0 <= pair.label <= 1.0
            pair.prompt_text().encode("utf-8")  # every kept text can be written
        assert len(ds.pairs) + sum(ds.dropped.values()) <= ds.n_rows
