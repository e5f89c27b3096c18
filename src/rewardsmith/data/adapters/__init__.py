"""Importing this package registers every dataset adapter in rewardsmith.data.registry.DATASETS.

One module per source family; importing them reads no file (adapters read only when called).
"""

from rewardsmith.data.adapters import (  # noqa: F401  (imported for their registrations)
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

__all__ = ["rmbench_difficulty", "rmbench_matrix_pairs"]
