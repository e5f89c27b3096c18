"""Reward models: backbone resolution, the scalar-head RewardModel, building, saving and loading."""

from rewardkit.models.factory import build_reward_model, load_reward_model, save_reward_model
from rewardkit.models.reward_model import RewardModel, RewardOutput

__all__ = ["RewardModel", "RewardOutput", "build_reward_model", "load_reward_model", "save_reward_model"]
