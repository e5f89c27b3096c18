"""What the Trainer needs to run under a sharding engine that accelerate drives (FSDP, FSDP2, DeepSpeed ZeRO): which
engine the launcher asked for and whether accelerate runs it (FSDP2 on CPU processes included, see
run_fsdp2_on_cpu_processes), the DeepSpeed settings the Trainer fills, whole (unsharded) state for checkpoints, and
a plain model after the run.

Whole state: a checkpoint holds the full model state dict (the names of the unwrapped module's state_dict) and
the full optimiser state in torch.distributed.checkpoint's full form ({"state": {name: {"step", "exp_avg",
"exp_avg_sq"}}, "param_groups": [{..., "params": [names]}]}), whatever the engine, so a checkpoint written under
one engine or number of processes resumes under another. The engines' own APIs gather and scatter it:
torch.distributed.checkpoint.state_dict (DDP, FSDP1, FSDP2, one process) and DeepSpeed's tensor-fragment API
(safe_get_full_fp32_param, safe_get_full_optimizer_state and their setters; ZeRO-1/2/3). Nothing here moves
tensors between processes itself.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from typing import Any

import torch

from rewardsmith.errors import ConfigError
from rewardsmith.io.processes import launched_processes, no_deepspeed_probe

# The optimiser state of torch's AdamW per parameter (what DeepSpeed's tensor-fragment API reads, bar "step").
_ADAM_KEYS = ("exp_avg", "exp_avg_sq")


def requested_engine() -> str | None:
    """The sharding engine `accelerate launch` was configured with: "fsdp", "deepspeed" or None (DDP, one
    process). accelerate's launcher passes it to the processes as ACCELERATE_USE_FSDP / ACCELERATE_USE_DEEPSPEED."""
    if os.environ.get("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true":
        return "deepspeed"
    if os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true":
        return "fsdp"
    return None


def engine_of(accelerator: Any) -> str | None:
    """The engine accelerate runs: "fsdp", "deepspeed" or None."""
    from accelerate.utils import DistributedType

    kind = accelerator.distributed_type
    return {DistributedType.FSDP: "fsdp", DistributedType.DEEPSPEED: "deepspeed"}.get(kind)


def unwrapped(accelerator: Any, model: Any) -> Any:
    """accelerator.unwrap_model(model) (the module inside accelerate's DDP, FSDP or DeepSpeed container), without
    importing DeepSpeed in a process that has not (io.processes.no_deepspeed_probe)."""
    with no_deepspeed_probe():
        return accelerator.unwrap_model(model)


_GPU_ONLY = (
    "accelerate runs FSDP1, and DeepSpeed with several processes, only on GPUs (and other accelerators). On CPU "
    "processes use FSDP2 (configs/accelerate/fsdp.yaml) or DDP (`accelerate launch --multi_gpu --num_processes N` "
    "on a machine without GPUs)"
)


def requested_fsdp_version() -> int:
    """The FSDP version the launch asked for: FSDP_VERSION, which accelerate's launcher sets from the config's
    fsdp_config.fsdp_version (1 when unset, as accelerate's FullyShardedDataParallelPlugin reads it)."""
    return int(os.environ.get("FSDP_VERSION", "1"))


def check_requested_engine(requested: str | None) -> None:
    """ConfigError, before any Accelerator exists, for FSDP1 on a machine without an accelerator: accelerate's FSDP1
    plugin fails there with a device error. (FSDP2 runs on CPU processes: run_fsdp2_on_cpu_processes. DeepSpeed on
    its CPU accelerator is allowed here; check_engine refuses it with more than one process.)"""
    if requested == "fsdp" and requested_fsdp_version() != 2 and not _has_accelerator():
        raise ConfigError(f"the launcher asked for FSDP1 on a machine without GPUs: {_GPU_ONLY}")


def run_fsdp2_on_cpu_processes(accelerator: Any, requested: str | None) -> bool:
    """Has accelerate run the FSDP2 the launch asked for on CPU processes joined over gloo; True when it did so.

    accelerate 1.15 chooses DistributedType.FSDP only for accelerator process groups (MULTI_GPU, MULTI_NPU, ...,
    in AcceleratorState.__init__), never for MULTI_CPU, so on CPU processes it drops the FSDP plugin and prepare()
    wraps the model in DDP. torch's fully_shard runs on CPU over gloo, so this makes the one choice accelerate
    makes on GPUs (the FSDP distributed type and the plugin read from the launcher's FSDP_* settings, with the
    run's mixed precision); everything after it is accelerate's own FSDP2 path (prepare() -> fsdp2_prepare_model
    -> fully_shard, no_sync, clip_grad_norm_) and torch.distributed.checkpoint, as on GPUs. Call it right after
    the Accelerator is made and before anything is prepared."""
    from accelerate.state import PartialState
    from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin

    state = accelerator.state
    if (
        requested != "fsdp"
        or requested_fsdp_version() != 2
        or state.distributed_type != DistributedType.MULTI_CPU
        or state.backend != "gloo"
    ):
        return False
    plugin = FullyShardedDataParallelPlugin()
    if state.mixed_precision != "no":
        plugin.set_mixed_precision(state.mixed_precision)
    # What AcceleratorState.__init__ sets for FSDP on accelerators (AcceleratorState and PartialState share state
    # across instances: every later Accelerator or PartialState of this process sees FSDP).
    state.fsdp_plugin = plugin
    state.distributed_type = DistributedType.FSDP
    PartialState._shared_state["distributed_type"] = DistributedType.FSDP
    return True


def _has_accelerator() -> bool:
    accelerator = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else None
    return accelerator is not None and accelerator.type != "mps"


def check_engine(accelerator: Any, requested: str | None) -> None:
    """ConfigError when accelerate does not run what was launched: an engine asked for that it set aside (e.g. FSDP2
    on CPU processes joined over another backend than gloo, which run_fsdp2_on_cpu_processes leaves alone: it
    would silently train as DDP), or a process count other than the launcher's (DeepSpeed on CPU processes: each
    would take itself for the only one)."""
    running = engine_of(accelerator)
    if requested is not None and running != requested:
        raise ConfigError(
            f"the launcher asked for {requested.upper()} but accelerate runs "
            f"{accelerator.distributed_type} on {accelerator.device.type} processes: {_GPU_ONLY}"
        )
    launched = launched_processes()
    if accelerator.num_processes != launched:
        raise ConfigError(
            f"the launcher started {launched} processes but accelerate counts "
            f"{accelerator.num_processes} ({accelerator.distributed_type} on "
            f"{accelerator.device.type}); every process would take itself for the only one. "
            "DeepSpeed on CPU processes (DS_ACCELERATOR=cpu) runs one process only; use GPUs"
        )


def fill_deepspeed_config(accelerator: Any, micro_batch: int, max_grad_norm: float) -> None:
    """Fills the DeepSpeed settings that accelerate takes from data loaders (the Trainer has none: its batch plan
    serves each process `micro_batch` items) and gradient clipping (DeepSpeed clips inside its step: the
    Trainer's max_grad_norm, 0 for none). Values set in the config file other than "auto" are kept."""
    plugin = accelerator.state.deepspeed_plugin
    if plugin is None:
        return
    config = plugin.deepspeed_config
    if config.get("train_micro_batch_size_per_gpu", "auto") == "auto":
        config["train_micro_batch_size_per_gpu"] = max(1, micro_batch)
    if config.get("gradient_clipping", "auto") == "auto":
        config["gradient_clipping"] = float(max_grad_norm)
    zero = config.setdefault("zero_optimization", {})
    if zero.get("stage3_gather_16bit_weights_on_model_save", "auto") == "auto":
        zero["stage3_gather_16bit_weights_on_model_save"] = True


def shards_in_place(accelerator: Any) -> bool:
    """Whether prepare() changes the module itself (FSDP shards its parameters; DeepSpeed flattens them, ZeRO-3
    partitions them, bf16 casts them), so that the run must end by building a plain module again."""
    return engine_of(accelerator) is not None


def end_of_run(accelerator: Any) -> None:
    """Leaves the process as a run without a sharding engine would: under DeepSpeed ZeRO-3, accelerate's plugin
    registers its config with transformers, and while it is registered every later from_pretrained builds its
    model partitioned for ZeRO-3 (a saved model loaded for scoring after training would hold empty weights)."""
    if engine_of(accelerator) == "deepspeed":
        from transformers.integrations import unset_hf_deepspeed_config

        unset_hf_deepspeed_config()


# ----------------------------------------------------------------------------------------------------------
# A plain module again after a sharded run


class Skeleton:
    """The structure of a module without its weights (parameters and persistent buffers on the meta device),
    taken before prepare(), and its non-persistent buffers (small, e.g. position ids), which no state dict holds.
    build(state_dict, device) -> a plain module of the same classes holding those weights."""

    def __init__(self, module: torch.nn.Module):
        persistent = set(module.state_dict())
        self.extra_buffers = {name: b.detach().clone() for name, b in module.named_buffers() if name not in persistent}
        memo: dict[int, Any] = {}
        for p in module.parameters():
            memo[id(p)] = torch.nn.Parameter(torch.empty_like(p, device="meta"), requires_grad=p.requires_grad)
        for b in module.buffers():
            memo[id(b)] = torch.empty_like(b, device="meta")
        self.module = copy.deepcopy(module, memo)

    def build(self, state_dict: dict[str, torch.Tensor], device: torch.device) -> torch.nn.Module:
        """The module with `state_dict` (every parameter and persistent buffer) loaded, on `device`, each tensor
        in the dtype it had before prepare()."""
        module = self.module.to_empty(device=device)
        dtypes = {k: v.dtype for k, v in module.state_dict().items()}
        missing, unexpected = module.load_state_dict(
            {k: v.to(dtypes.get(k, v.dtype)) for k, v in state_dict.items()}, strict=False
        )
        if missing or unexpected:
            raise RuntimeError(
                f"whole state does not fit the module: missing {missing[:3]}, unexpected {unexpected[:3]}"
            )
        for name, value in self.extra_buffers.items():
            owner, _, leaf = name.rpartition(".")
            module.get_submodule(owner).register_buffer(leaf, value.to(device), persistent=False)
        self.module = None  # type: ignore[assignment]  # built once
        return module


# ----------------------------------------------------------------------------------------------------------
# Whole state


def whole_model_state(accelerator: Any, model: Any, everywhere: bool) -> dict[str, torch.Tensor]:
    """The full model state dict, keyed as the unwrapped module's state_dict, as CPU tensors. everywhere: on
    every process (a plain module after the run); else at least on the main process (a checkpoint: FSDP then
    gathers to the main process only). Every process must call it. Under DeepSpeed the trainable parameters
    are its fp32 master weights (the module may hold bf16 copies)."""
    engine = engine_of(accelerator)
    if engine == "deepspeed":
        return _deepspeed_model_state(accelerator, model)
    if engine == "fsdp":
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        options = StateDictOptions(full_state_dict=True, cpu_offload=not everywhere)
        state: dict[str, Any] = dict(get_model_state_dict(model, options=options))
    else:
        state = unwrapped(accelerator, model).state_dict()
    return {k: v.detach().cpu().clone() for k, v in state.items()}


def _deepspeed_model_state(accelerator: Any, model: Any) -> dict[str, torch.Tensor]:
    import deepspeed
    from deepspeed.utils import safe_get_full_fp32_param

    module = accelerator.unwrap_model(model)
    zero3 = accelerator.deepspeed_config["zero_optimization"].get("stage", 0) == 3
    gathered: Any = (
        deepspeed.zero.GatheredParameters(list(module.parameters()), modifier_rank=None) if zero3 else _nothing()
    )
    with gathered:
        state = {k: v.detach().cpu().clone() for k, v in module.state_dict().items()}
    for name, p in module.named_parameters():
        if p.requires_grad:
            master = safe_get_full_fp32_param(p)
            if master is not None:
                state[name] = master.detach().cpu().clone().reshape(state[name].shape)
    return state


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *_: Any) -> None:
        return None


def whole_optimizer_state(
    accelerator: Any, model: Any, optimizer: Any, group_names: Sequence[Sequence[str]]
) -> dict[str, Any]:
    """The full optimiser state (the module docstring's form) as CPU tensors, at least on the main process.
    group_names: the parameter names of each param group, as the Trainer built them. Every process must call it."""
    if engine_of(accelerator) == "deepspeed":
        return _deepspeed_optimizer_state(accelerator, model, optimizer, group_names)
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

    state = get_optimizer_state_dict(
        model, optimizer.optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
    )
    return _to_cpu(state)


def load_whole_optimizer_state(
    accelerator: Any,
    model: Any,
    optimizer: Any,
    state: dict[str, Any],
    model_state: dict[str, torch.Tensor],
    group_names: Sequence[Sequence[str]],
) -> None:
    """Loads whole optimiser state (and, under DeepSpeed, the fp32 master weights of model_state) into a
    prepared optimiser, each process keeping its shard. Every process must call it with the same state."""
    if engine_of(accelerator) == "deepspeed":
        _load_deepspeed_optimizer_state(accelerator, model, optimizer, state, model_state, group_names)
        return
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    set_optimizer_state_dict(
        model, optimizer.optimizer, optim_state_dict=state, options=StateDictOptions(full_state_dict=True)
    )


def _base_optimizer(optimizer: Any) -> Any:
    """The torch optimiser DeepSpeed's ZeRO optimiser steps (its param groups hold the flat fp32 partitions)."""
    return optimizer.optimizer.optimizer


def _link_fragments(optimizer: Any) -> None:
    """Has every parameter's optimiser-state fragments found by DeepSpeed's tensor-fragment API. ZeRO-1/2 links
    them once, right after the first param group's first step, when the later groups hold no state yet
    (deepspeed 0.19, stage_1_and_2._lazy_init_hp_params_optimizer_state), so with the Trainer's several groups
    (backbone, heads) the later ones would read as unstepped; linking again is idempotent."""
    zero = optimizer.optimizer
    if hasattr(zero, "_hp_optimizer_states_linked") and hasattr(zero, "_lazy_init_hp_params_optimizer_state"):
        zero._hp_optimizer_states_linked = False
        zero._lazy_init_hp_params_optimizer_state()


def _ensure_adam_state(optimizer: Any) -> None:
    """Creates AdamW's state (step 0, zero moments: what its first step would create) for every flat fp32
    partition of a DeepSpeed optimiser that has not stepped yet, so that saved moments can be written into it
    (ZeRO-3 keys the state by its sub-group partitions, ZeRO-1/2 by the partitions in the param groups)."""
    zero, base = optimizer.optimizer, _base_optimizer(optimizer)
    flats = getattr(zero, "fp32_partitioned_groups_flat", None) or [p for g in base.param_groups for p in g["params"]]
    for flat in flats:
        if not base.state.get(flat):
            base.state[flat] = {
                "step": torch.zeros((), dtype=torch.float32, device=flat.device),
                **{key: torch.zeros_like(flat, memory_format=torch.preserve_format) for key in _ADAM_KEYS},
            }


def _deepspeed_optimizer_state(
    accelerator: Any, model: Any, optimizer: Any, group_names: Sequence[Sequence[str]]
) -> dict[str, Any]:
    from deepspeed.utils import safe_get_full_optimizer_state

    params = dict(unwrapped(accelerator, model).named_parameters())
    base = _base_optimizer(optimizer)
    _link_fragments(optimizer)
    steps = [s["step"] for s in base.state.values() if "step" in s]
    state: dict[str, Any] = {}
    for names in group_names:
        for name in names:
            entry = {key: safe_get_full_optimizer_state(params[name], key) for key in _ADAM_KEYS}
            if any(v is None for v in entry.values()) or not steps:
                continue  # not stepped yet
            shape = tuple(getattr(params[name], "ds_shape", params[name].shape))  # ZeRO-3: the unpartitioned shape
            state[name] = {"step": steps[0], **{k: v.reshape(shape) for k, v in entry.items()}}
    groups = [
        {**{k: v for k, v in g.items() if k != "params"}, "params": list(names)}
        for g, names in zip(base.param_groups, group_names, strict=True)
    ]
    return _to_cpu({"state": state, "param_groups": groups})


def _load_deepspeed_optimizer_state(
    accelerator: Any,
    model: Any,
    optimizer: Any,
    state: dict[str, Any],
    model_state: dict[str, torch.Tensor],
    group_names: Sequence[Sequence[str]],
) -> None:
    from deepspeed.utils import safe_set_full_fp32_param, safe_set_full_optimizer_state

    params = dict(unwrapped(accelerator, model).named_parameters())
    base = _base_optimizer(optimizer)
    saved = state["state"]
    if saved:
        _ensure_adam_state(optimizer)
        _link_fragments(optimizer)
    for names in group_names:
        for name in names:
            p = params[name]
            safe_set_full_fp32_param(p, model_state[name].to(accelerator.device, torch.float32))
            if name in saved:
                for key in _ADAM_KEYS:
                    safe_set_full_optimizer_state(p, saved[name][key].to(accelerator.device, torch.float32), key)
    step = next((entry["step"] for entry in saved.values()), None)
    for flat_state in base.state.values():
        if step is not None and "step" in flat_state:
            flat_state["step"].copy_(step) if torch.is_tensor(flat_state["step"]) else flat_state.update(step=step)
    for group, saved_group in zip(base.param_groups, state["param_groups"], strict=True):
        group.update({k: v for k, v in saved_group.items() if k != "params"})


def _to_cpu(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().clone()
    if isinstance(value, dict):
        return {k: _to_cpu(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_to_cpu(v) for v in value)
    return value
