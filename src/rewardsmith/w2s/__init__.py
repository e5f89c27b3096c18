"""Weak-to-strong reward models under preference shift (METHODS.md section 1): configuration (config.py),
objectives (objectives/, one module each, found by name), label refiners
(refiners.py), reference hidden states for anchoring (reference.py), the pipeline (pipeline.py) and its
metrics (metrics.py). Import from the submodules."""
