"""Training: the Accelerate Trainer, objectives, atomic checkpoints and the `rewardkit train` run."""
