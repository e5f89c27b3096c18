"""Evaluation: pure metrics on numpy arrays (metrics.py: accuracy with CIs, length controls, calibration,
Pareto hypervolume; transfer.py: weak-to-strong transfer metrics with hierarchical CIs; rmbench.py: the
RM-Bench style matrix), the batched inference loop (scoring.py) and the standard evaluation protocols of a
scalar reward model (protocols.py). Import from the submodules."""
