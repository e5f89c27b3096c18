"""A policy in the loop: RL against rewards served by rewardsmith, with the gold tracked as the policy moves away from
its reference (tracker.py)."""
