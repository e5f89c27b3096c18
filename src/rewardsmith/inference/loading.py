"""The one loader: which kind of model a source is, told from its folder, and the Inference of that kind.

- a folder holding ensemble.json: an ensemble (ensemble.py), each member loaded by this same function;
- any other model rewardsmith reads (models.loading.load_reward_model: rewardsmith folders, Hugging Face sequence
  classifiers, OpenRLHF checkpoints, LoRA adapters): in-context when its model type says so (in_context.py), else
  scalar (scalar.py).

Everything else in the code reads a model's kind off the Inference this returns; nothing outside this package
branches on it.
"""

from __future__ import annotations

from pathlib import Path

from rewardsmith.evaluate.scoring import default_device
from rewardsmith.inference.base import Inference, InferenceOptions
from rewardsmith.inference.ensemble import EnsembleInference
from rewardsmith.inference.in_context import InContextInference
from rewardsmith.inference.scalar import ScalarInference
from rewardsmith.models.ensemble import is_ensemble, read_ensemble
from rewardsmith.models.loading import load_reward_model


def load_inference(
    source: str | Path,
    options: InferenceOptions | None = None,
    max_tokens: int | None = None,
    max_padding: float | None = None,
    max_standards: int = 1024,
) -> Inference:
    """The Inference of `source` (see the module docstring), on the first CUDA device (else the CPU), read as
    `options` say. max_tokens / max_padding: cap each forward pass (the server's rounds); max_standards: the
    ad-hoc standards an in-context model keeps the context of."""
    if is_ensemble(source):
        spec = read_ensemble(source)
        members = [load_inference(m, options, max_tokens, max_padding) for m in spec.members]
        return EnsembleInference(str(source), spec, members)
    options = options or InferenceOptions()
    loaded = load_reward_model(
        source, options.template, options.max_length, trust_remote_code=options.trust_remote_code
    )
    loaded.to(default_device())
    if loaded.in_context:
        return InContextInference(loaded, options, max_tokens, max_standards)
    return ScalarInference(loaded, options, max_tokens, max_padding)
