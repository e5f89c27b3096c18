"""Benchmark suites practitioners report (RewardBench 1 and 2, PPE, RM-Bench, the local sets): loaders from each
release's published schema and the metrics of each, as pure functions of rewards."""
