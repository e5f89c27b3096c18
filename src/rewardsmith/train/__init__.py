"""Training: the Accelerate Trainer, objectives, atomic checkpoints and the `rewardsmith train` run."""
