"""Best-of-n against a gold: a policy's own samples, chosen by proxy reward models, scored by a gold the proxies
never saw (docs/bon.md). The prompts, the policy and the golds it uses are rewardsmith.rollouts'."""
