"""rewardsmith: train, stress-test, steer, calibrate and serve reward models for RLHF."""

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("rewardsmith")  # one version: the package metadata (pyproject.toml)
except _metadata.PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"
