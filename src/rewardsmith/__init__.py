"""rewardsmith: train, stress-test, steer and calibrate reward models for RLHF."""

__version__ = "0.1.0"
