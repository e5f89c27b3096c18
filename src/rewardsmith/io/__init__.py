"""Reading and writing what rewardsmith owns: atomic files and folders, JSON-safe values, the environment a
run recorded, pickle-free state files and the run-folder contract every command follows.

Nothing here imports torch at module level except `state` (state files are tensors by nature).
"""

from rewardsmith.io.atomic import atomic_folder, atomic_write_bytes, atomic_write_json, atomic_write_text
from rewardsmith.io.jsonsafe import json_ready, to_json

__all__ = [
    "atomic_folder",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_text",
    "json_ready",
    "to_json",
]
