"""ICRM evaluation protocols, one module each, found by name. A protocol module exports
`PROTOCOL = ICRMProtocol(name, run, rows, charts)` (base.py): run(EvalContext) -> a JSON-ready metrics dict, and
from those metrics its console rows and its charts as data; it computes, and the report layer draws. A new protocol
is one new module of this package: `load_protocols` finds every module's PROTOCOL with the project's one discovery
function (rewardsmith.registry.discover); base.py and context.py are the protocols' shared code, not protocols.

Targets are data no training saw (context.py: a training source's test part or a source outside training, without
any conversation of a training pair; `overlap_removed` counts those dropped). A `per_pair` entry, when present,
holds per-target figures for summaries over seeds; the job writes it to per_pair.json beside metrics.json.

- steerability: accuracy against flipped and helpful standards as N grows (pku-saferlhf), against BT;
- calibration: ECE and mean absolute error of mu against demonstrated mixture rates (moralchoice);
- rmbench: RM-Bench easy / normal / hard per subset and overall;
- pareto: respond-versus-refuse frontier hypervolume per N (RM-Bench safety subsets);
- math500: reference above corrupted solutions.
"""

from __future__ import annotations

from rewardsmith.errors import ConfigError
from rewardsmith.icrm.protocols.base import ICRMProtocol
from rewardsmith.icrm.protocols.context import UNSEEN_SOURCES, EvalContext, check_training_sources, load_context
from rewardsmith.registry import Registry, discover

SHARED_MODULES = ("base", "context")  # the protocols' shared code: modules of this package that are not protocols


def load_protocols() -> Registry[ICRMProtocol]:
    """Every protocol of this package (each module's `PROTOCOL`) in a registry by name. TypeError for a module
    without a PROTOCOL of type ICRMProtocol, ValueError for two of one name (bugs in the package)."""
    registry: Registry[ICRMProtocol] = Registry("icrm protocol")
    for name, protocol in discover(__name__, "PROTOCOL", ICRMProtocol, shared=SHARED_MODULES).items():
        registry.add(name, protocol)
    return registry


PROTOCOLS = load_protocols()


def protocol_names(name: str) -> list[str]:
    """The protocols `name` stands for ("all" = every one); unknown names fail before any work."""
    names = PROTOCOLS.names() if name == "all" else [name]
    for n in names:
        PROTOCOLS.get(n)
    return names


def check_eval_settings(n_values: list[int]) -> None:
    if not n_values or any(v < 0 for v in n_values):
        raise ConfigError("eval.n_values must be a non-empty list of N >= 0")


__all__ = [
    "PROTOCOLS",
    "UNSEEN_SOURCES",
    "EvalContext",
    "ICRMProtocol",
    "check_eval_settings",
    "check_training_sources",
    "load_context",
    "load_protocols",
    "protocol_names",
]
