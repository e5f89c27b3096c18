"""Loss functions: pure, tensor in, LossResult (total plus named terms for logging) out."""

from rewardkit.losses.base import LossResult
from rewardkit.losses.bt import bradley_terry_loss

__all__ = ["LossResult", "bradley_terry_loss"]
