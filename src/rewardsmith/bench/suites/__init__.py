"""One module per benchmark suite, each holding a module-level `SUITE` (rewardsmith.bench.suite.Suite); the
registry (rewardsmith.bench.registry) imports them when asked, so importing this package does nothing."""
