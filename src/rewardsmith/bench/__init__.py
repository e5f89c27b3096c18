"""Benchmark suites practitioners report (RewardBench 1 and 2, PPE, RM-Bench, the local sets): loaders from each
release's published schema and the metrics of each, as pure functions of rewards.

- `schema`: BenchRow (a conversation as turns, its responses as strings), SuiteData, Missing, the ScoreFn contract.
- `release`: reading a release's data files (Parquet / JSONL / JSON) or hub id, with one-line schema errors.
- `metrics`: the metrics (best-of-4 credit, the Ties formula, RewardBench sections, best-of-K, conflict pairs,
  ROC AUC, reward-length correlation); `measures`: per-unit values, bootstrap CIs, paired differences.
- `suite`: what a suite is; `suites/`: one module per suite, each with a module-level SUITE; `registry`: finds them.
- `runner`: load_suites, run_suites (one scoring call for every distinct text), bench_metrics; `compare`: paired
  comparisons of models with verdicts.

docs/benchmarks.md defines every number and cites the official code it follows.
"""
