"""Reward models: backbone resolution, the scalar-head RewardModel, building, saving and loading."""

from rewardsmith.models.factory import build_reward_model, load_reward_model, save_reward_model
from rewardsmith.models.reward_model import RewardModel, RewardOutput

__all__ = ["RewardModel", "RewardOutput", "build_reward_model", "load_reward_model", "save_reward_model"]
