"""The synthetic-gold testbed (METHODS.md section 5): its questions (claims.py), Gao et al.'s fitted forms
(fits.py) and their results from docs/results/testbed.json (claim_results.py). The testbed itself is
experiments/testbed.py: rewardsmith's own commands in order."""
