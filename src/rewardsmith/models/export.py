"""`rewardsmith export`: a reward model written as a plain Hugging Face folder that
`AutoModelForSequenceClassification.from_pretrained` loads with the same scores, so vLLM (`--runner pooling`),
TRL's GRPO (`reward_funcs="path"`) and OpenRLHF load it directly.

- A rewardsmith decoder with last-token pooling becomes its *ForSequenceClassification model (the reward head as
  the `score` layer, a LoRA adapter merged); a Hugging Face reward model (a LoRA adapter merged into it) is
  written again as it is. The pad token id in config.json is the one rewardsmith's pooling skips.
- The tokenizer files carry a chat template that writes conversations the way the model was trained: the
  tokenizer's own for `chat`; for `hh` the "\\n\\nHuman: ...\\n\\nAssistant: ..." framing; for `plain` the prompt
  followed by the response and the EOS token. config.json keeps the template choice and the token budget in a
  `rewardsmith` section, which `rewardsmith` reads back (`--template auto`).
- What the format cannot express is refused in one line: an encoder with mean pooling (transformers' reward
  models read one token), an in-context model (it scores with demonstrations), an OpenRLHF checkpoint (its
  reward normalisation and pooling have no *ForSequenceClassification equivalent; OpenRLHF loads it as it is).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rewardsmith.errors import ConfigError
from rewardsmith.models.gguf import without_gguf_marker
from rewardsmith.models.loading import EXPORT_KEY, LoadedModel, SequenceClassifierReward
from rewardsmith.models.reward_model import RewardModel

# HH framing, as data.schema.render_turns writes a prompt and the hh encoder appends " " + the response.
HH_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '\\n\\n' + {'user': 'Human', 'assistant': 'Assistant', 'system': 'System'}[message['role']] + ': ' "
    "+ message['content'] }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '\\n\\nAssistant:' }}{% endif %}"
)
# TRL's standard pairs: prompt + response + EOS; a longer conversation in HH framing before the last reply.
PLAIN_CHAT_TEMPLATE = (
    "{% if messages|length == 2 and messages[0]['role'] == 'user' %}"
    "{{ messages[0]['content'] + messages[1]['content'] }}"
    "{% else %}"
    "{% for message in messages[:-1] %}"
    "{{ '\\n\\n' + {'user': 'Human', 'assistant': 'Assistant', 'system': 'System'}[message['role']] + ': ' "
    "+ message['content'] }}"
    "{% endfor %}{{ '\\n\\nAssistant: ' + messages[-1]['content'] }}"
    "{% endif %}"
    "{% if not add_generation_prompt %}{{ eos_token }}{% endif %}"
)
CHAT_TEMPLATES = {"hh": HH_CHAT_TEMPLATE, "plain": PLAIN_CHAT_TEMPLATE}


def sequence_classifier_of(loaded: LoadedModel) -> Any:
    """The transformers *ForSequenceClassification model that gives `loaded`'s rewards; ConfigError (one line)
    when the format cannot express it (see the module docstring)."""
    if loaded.in_context:
        raise ConfigError(
            f"{loaded.source}: an in-context (ICRM) model scores with demonstrations; a "
            "*ForSequenceClassification folder cannot carry them"
        )
    if isinstance(loaded.model, SequenceClassifierReward):
        return loaded.model.hf_model
    if isinstance(loaded.model, RewardModel):
        from rewardsmith.models.factory import as_sequence_classifier

        try:
            return as_sequence_classifier(loaded.model)
        except ConfigError as exc:
            raise ConfigError(f"{loaded.source}: {exc}") from None
    raise ConfigError(
        f"{loaded.source}: an OpenRLHF checkpoint (its reward normalisation and last-attended pooling "
        "have no *ForSequenceClassification equivalent); OpenRLHF and rewardsmith load it as it is"
    )


def write_export(loaded: LoadedModel, folder: Path) -> dict[str, Any]:
    """Writes the exported model and tokenizer into `folder` (an empty folder). Returns what was written."""
    model = without_gguf_marker(sequence_classifier_of(loaded))  # a plain fp32 model: trainers fine-tune it
    config = model.config
    setattr(
        config,
        EXPORT_KEY,
        {
            "template": loaded.template,
            "max_length": loaded.max_length,
            "min_prompt_tokens": loaded.min_prompt_tokens,
            "exported_from": loaded.source,
        },
    )
    config.pad_token_id = loaded.pad_id
    model.save_pretrained(str(folder), safe_serialization=True)
    tokenizer = loaded.tokenizer
    if loaded.template in CHAT_TEMPLATES:
        tokenizer.chat_template = CHAT_TEMPLATES[loaded.template]
    tokenizer.save_pretrained(str(folder))
    return {
        "architecture": type(model).__name__,
        "template": loaded.template,
        "max_length": loaded.max_length,
        "pad_token_id": loaded.pad_id,
    }
