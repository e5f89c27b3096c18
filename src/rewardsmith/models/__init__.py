"""Models: backbone resolution, the pooled backbone every model shares, the scalar RewardModel, the in-context
BetaRewardModel, and one build / save / load for both."""

from rewardsmith.models.beta import BetaRewardModel, BetaScores
from rewardsmith.models.factory import build_model, build_reward_model, load_model, save_model
from rewardsmith.models.reward_model import PooledBackbone, RewardModel, RewardOutput

__all__ = [
    "BetaRewardModel",
    "BetaScores",
    "PooledBackbone",
    "RewardModel",
    "RewardOutput",
    "build_model",
    "build_reward_model",
    "load_model",
    "save_model",
]
