"""Importing this package registers every dataset adapter in rewardkit.data.registry.DATASETS."""
