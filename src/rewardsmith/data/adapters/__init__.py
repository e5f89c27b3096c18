"""Every preference-dataset adapter, by name: DATASETS maps the name configs and the CLI use to the reader
`(LoadOptions) -> PairDataset` (data/dataset.py) that loads it.

One module per source family defines its readers and names none of them: this table is the one place a name is
given (rewardsmith.data.registry.load_dataset reads it). Importing reads no file: adapters read only when called.
"""

from __future__ import annotations

from functools import partial

from rewardsmith.data.adapters import (
    generic,
    helpsteer,
    hh_rlhf,
    math500,
    moralchoice,
    pku_saferlhf,
    rm_bench,
    synthetic,
    ultrafeedback,
)
from rewardsmith.data.adapters.rm_bench import rmbench_difficulty, rmbench_matrix_pairs
from rewardsmith.data.dataset import Adapter
from rewardsmith.data.synthetic import DOMAINS
from rewardsmith.registry import Registry

__all__ = ["DATASETS", "rmbench_difficulty", "rmbench_matrix_pairs"]


def _datasets() -> Registry[Adapter]:
    """The table of DATASETS: a name for each reader, and for each subset of a family that one reader serves."""
    datasets: Registry[Adapter] = Registry("dataset")
    datasets.add("file", generic.load_file)
    datasets.add("hub", generic.load_hub)
    datasets.add("helpsteer2", helpsteer.load_helpsteer2)
    datasets.add("helpsteer3", helpsteer.load_helpsteer3)
    for subset in hh_rlhf.HH_SUBSETS:
        datasets.add(f"hh-rlhf/{subset}", partial(hh_rlhf.load_hh_rlhf, subset=subset))
    datasets.add("math-500", math500.load_math500)
    for ambiguity in moralchoice.MORALCHOICE_AMBIGUITIES:
        datasets.add(f"moralchoice/{ambiguity}", partial(moralchoice.load_moralchoice, ambiguity=ambiguity))
    for preference in pku_saferlhf.PKU_LABEL_COLUMNS:
        datasets.add(f"pku-saferlhf/{preference}", partial(pku_saferlhf.load_pku_saferlhf, preference=preference))
    for subset in rm_bench.RMBENCH_FILES:
        datasets.add(f"rm-bench/{subset}", partial(rm_bench.load_rm_bench, subset=subset))
    for domain in DOMAINS:
        datasets.add(f"synthetic/{domain}", partial(synthetic.load_synthetic, domain=domain))
    datasets.add("ultrafeedback", ultrafeedback.load_ultrafeedback)
    return datasets


DATASETS = _datasets()
