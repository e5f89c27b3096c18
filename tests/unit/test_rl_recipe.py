"""The GRPO recipe's TrainingArguments (rl/recipe.py)."""

from __future__ import annotations


def test_grpo_recomputes_no_activations_and_says_nothing_of_it() -> None:
    """TRL's GRPO recomputes activations unless told not to; the option is asked by the name this transformers
    reads, so the run neither recomputes nor prints a deprecation warning."""
    import warnings

    from trl import GRPOConfig

    from rewardsmith.rl.recipe import no_activation_recompute

    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        args = GRPOConfig(
            output_dir="unused", use_cpu=True, bf16=False, report_to=[], **no_activation_recompute(GRPOConfig)
        )
    assert getattr(args, "activation_checkpointing", args.gradient_checkpointing) is False
    assert args.gradient_checkpointing is False
