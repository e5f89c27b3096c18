"""The questions the ensemble experiment answers (claims.py) and their results from its committed metrics
(claim_results.py). Ensembles themselves are models.ensemble (the folder and the rules) and jobs.ensemble (their
inference and `rewardsmith ensemble`)."""
