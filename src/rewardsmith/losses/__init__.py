"""Loss functions: pure, tensor in, LossResult (total plus named terms for logging) out."""

from rewardsmith.losses.base import LossResult
from rewardsmith.losses.bt import bradley_terry_loss

__all__ = ["LossResult", "bradley_terry_loss"]
