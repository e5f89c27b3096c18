"""Below best-of-n and RL: what a policy answers and how its answers are judged. A prompt record (prompt.py), the
prompt sources (prompts.py), verifiable instructions attached to prompts (instructions.py), the policy and its
seeded sampling (policy.py), and the golds (gold.py + golds/, one module per gold)."""
