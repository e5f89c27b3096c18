"""What every command shares: one-line errors with exit code 2, options declared once, `--help` texts that
show each default (read from the config dataclasses, so they are written once), and the printing of a job's
result (its table, then what was read, dropped, truncated and written)."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import types
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rewardsmith.config import default_of, help_of
from rewardsmith.errors import RewardsmithError

if TYPE_CHECKING:
    pass


@contextmanager
def handle_errors() -> Iterator[None]:
    """Turns a RewardsmithError (or an operating-system error such as a read-only folder or a full disk) into
    `error: <message>` on stderr and exit code 2, without a traceback."""
    try:
        yield
    except RewardsmithError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from None
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        typer.echo(f"error: {where}{exc.strerror or exc}", err=True)
        raise typer.Exit(code=2) from None
    except KeyboardInterrupt:
        typer.echo("interrupted; run the same command again to resume from the last checkpoint", err=True)
        raise typer.Exit(code=130) from None


def int_list(
    text: str | None, option: str, minimum: int | None = None, maximum: int | None = None, allow_empty: bool = False
) -> list[int] | None:
    """A comma-separated option ("0,1,2") as integers; None when not given. ConfigError (one line) for a value that
    is not an integer or out of range, and for an empty list unless allow_empty."""
    from rewardsmith.errors import ConfigError

    if text is None:
        return None
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"{option} must be comma-separated integers, got {text!r}") from None
    if not values and not allow_empty:
        raise ConfigError(f"{option} is empty; give at least one value, e.g. {option} 0")
    for v in values:
        if (minimum is not None and v < minimum) or (maximum is not None and v > maximum):
            bounds = f"in {minimum}..{maximum}" if maximum is not None else f"at least {minimum}"
            raise ConfigError(f"{option} values must be {bounds}, got {v}")
    return values


def _shown(value: Any) -> str:
    """A default as --help shows it: as it would be typed (a list comma-separated, a config section by its name),
    never a Python repr."""
    if value is None or value == "":
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Path):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return str(getattr(value, "name", None) or type(value).__name__)
    if isinstance(value, list | tuple | set | frozenset):
        return ",".join(_shown(v) for v in value) or "none"
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_shown(v)}" for k, v in value.items()) or "none"
    if callable(value):
        return str(getattr(value, "__name__", type(value).__name__))
    return str(value)


def config_option(owner: Any, name: str, *flags: str, help: str | None = None, **kwargs: Any) -> Any:
    """A typer option that overrides config field `name` of `owner` (a config class or an instance holding
    the defaults): its help is the field's help plus the default the config gives it."""
    if dataclasses.is_dataclass(owner) and not isinstance(owner, type):
        default = getattr(owner, name)
        text = help or help_of(type(owner), name)
    else:
        default = default_of(owner, name)
        text = help or help_of(owner, name)
    shown = _shown(default)
    pair = next((f for f in flags if "/" in f), None)
    if isinstance(default, bool) and pair is not None:  # a --on/--off pair shows the flag that is the default
        shown = pair.split("/")[0 if default else 1]
    return typer.Option(*flags, help=f"{text}  [default: {shown}]", show_default=False, **kwargs)


@dataclass(frozen=True)
class Flag:
    """How one config key appears on the command line: its flags (a "--on/--off" pair for a boolean), help that
    replaces the field's own (None: the field's), and a conversion of the parsed value (e.g. Path -> str)."""

    flags: tuple[str, ...]
    help: str | None = None
    convert: Callable[[Any], Any] | None = None
    cli_type: Any = None  # the option's type when it is not the field's (e.g. str for a comma-separated list)
    shown_default: str | None = None  # what [default: ...] says when it is not the field's default
    metavar: str | None = None  # what --help shows for the value (None: from its type)


def _field_of(owner: type, dotted: str) -> tuple[Any, Any, str]:
    """(type hint, default, help) of a dotted config key of `owner` (a nested config dataclass)."""
    import typing

    cls: Any = owner
    *parents, leaf = dotted.split(".")
    default_owner: Any = owner()
    for name in parents:
        cls = typing.get_type_hints(cls)[name]
        default_owner = getattr(default_owner, name)
    hint = typing.get_type_hints(cls)[leaf]
    return hint, getattr(default_owner, leaf), help_of(cls, leaf)


def config_options(owner: type, flags: Mapping[str, str | Flag]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Adds one command-line option per config key of `owner` to a command, declared once: the key's flags, and the
    help and default its dataclass field carries. The command receives `overrides` ({dotted key: value or None}) for
    config.apply_overrides instead of one parameter per option."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(fn, eval_str=True)
        params = [p for p in signature.parameters.values() if p.name != "overrides"]
        taken = {p.name for p in params}
        names: dict[str, tuple[str, Flag]] = {}
        generated = []
        for dotted, spec in flags.items():
            spec = spec if isinstance(spec, Flag) else Flag((spec,))
            hint_of_field, default, text = _field_of(owner, dotted)
            hint = spec.cli_type if spec.cli_type is not None else hint_of_field
            name = spec.flags[0].split("/")[0].lstrip("-").replace("-", "_")
            if name in taken or name in names:
                raise ValueError(f"option {spec.flags[0]} of {fn.__name__} clashes with another parameter")
            names[name] = (dotted, spec)
            shown = spec.shown_default or _shown(default)
            pair = next((f for f in spec.flags if "/" in f), None)
            if isinstance(default, bool) and pair is not None:
                shown = pair.split("/")[0 if default else 1]
            metavar = spec.metavar
            if metavar is None and typing.get_origin(_unoptional(hint_of_field)) is list and hint is str:
                metavar = "TEXT,..."  # a list field given comma-separated
            option = typer.Option(
                *spec.flags, help=f"{spec.help or text}  [default: {shown}]", show_default=False, metavar=metavar
            )
            annotation = Annotated[hint | None, option]  # type: ignore[valid-type]
            generated.append(
                inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation)
            )

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            overrides = {}
            for name, (dotted, spec) in names.items():
                value = kwargs.pop(name, None)
                overrides[dotted] = spec.convert(value) if value is not None and spec.convert else value
            return fn(*args, overrides=overrides, **kwargs)

        positional = [p for p in params if p.kind is not inspect.Parameter.KEYWORD_ONLY]
        keyword = [p for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY]
        new_params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in positional + keyword] + generated
        wrapper.__signature__ = signature.replace(parameters=new_params)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in new_params}
        return wrapper

    return decorate


def config_command(owner: type, flags: Mapping[str, str | Flag]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """config_options for a command that reads no config file: it receives `cfg`, a default `owner()` with the
    options applied (config.apply_overrides, inside handle_errors()), instead of `overrides`."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(fn, eval_str=True)
        if "cfg" not in signature.parameters:
            raise ValueError(f"{fn.__name__} takes no `cfg` parameter for its {owner.__name__}")
        params = [
            p.replace(name="overrides", annotation=dict[str, Any]) if p.name == "cfg" else p
            for p in signature.parameters.values()
        ]

        @functools.wraps(fn)
        def wrapper(*args: Any, overrides: dict[str, Any], **kwargs: Any) -> Any:
            from rewardsmith.config import apply_overrides

            with handle_errors():
                cfg = owner()
                apply_overrides(cfg, overrides)
            return fn(*args, cfg=cfg, **kwargs)

        wrapper.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in params}
        return config_options(owner, flags)(wrapper)

    return decorate


def _unoptional(hint: Any) -> Any:
    """X of `X | None`; any other hint as it is."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1 else hint


# What --help shows for an option's value, by the type typer names ("<int range>", "<list[str]>"): the range goes
# in the help text ([x>=1]), a repeatable option says so in its help.
METAVARS = {"str": "TEXT", "int": "INTEGER", "float": "NUMBER", "path": "PATH", "bool": "BOOLEAN"}


def readable_metavars(command: Any, ctx: Any) -> None:
    """Gives every option of a click command (and of a group's commands, recursively) that has no metavar of its
    own the readable one METAVARS names for its type: TEXT, INTEGER, NUMBER, PATH."""
    for param in getattr(command, "params", []):
        if getattr(param, "metavar", "") is None and hasattr(param, "display_type"):
            label = param.display_type(ctx).strip("<>").removesuffix(" range")
            if label.startswith("list[") and label.endswith("]"):
                label = label[5:-1]
            param.metavar = METAVARS.get(label)
    for sub in (getattr(command, "commands", None) or {}).values():
        readable_metavars(sub, ctx)


def comma_list(text: str) -> list[str]:
    """ "a, b,c" -> ["a", "b", "c"] (an empty text gives an empty list, which the config then refuses or allows)."""
    return [part.strip() for part in text.split(",") if part.strip()]


def flag(*names: str, help: str) -> Any:
    """A boolean flag (no value, no metavar in --help)."""
    return typer.Option(*names, help=help, metavar="")


OutDir = Annotated[
    Path,
    typer.Option(
        "--out",
        "-o",
        help="run folder to write: created when missing; an interrupted run in it resumes when the "
        "settings match; a folder holding other files is refused",
    ),
]
ConfigFile = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help="YAML config filling the same fields as the flags (flags win)  [default: none]",
        show_default=False,
    ),
]
DataDir = Annotated[
    Path | None,
    typer.Option(
        "--data-dir", help="folder with the real datasets  [default: $REWARDSMITH_DATA_DIR, else ../shared/data]"
    ),
]
Quiet = Annotated[bool, flag("--quiet", "-q", help="no progress output")]
InferenceBf16 = Annotated[
    bool | None,
    typer.Option(
        "--bf16/--fp32",
        help="bf16 autocast of the backbone (pooling and heads stay fp32; fp32 on a CPU without native bf16)  "
        "[default: as the model was trained]",
        show_default=False,
    ),
]
BatchSize = Annotated[
    int, typer.Option("--batch-size", min=1, help="texts per inference batch  [default: 64]", show_default=False)
]
Overwrite = Annotated[
    bool,
    flag(
        "--overwrite",
        help="start the run in --out again (deleting only the files an "
        "earlier rewardsmith run wrote there), or write beside "
        "foreign files, which are never replaced",
    ),
]


ModelPath = Annotated[
    str,
    typer.Option(
        "--model",
        "-m",
        help="the reward model: a rewardsmith model folder, a Hugging Face *ForSequenceClassification "
        "folder (TRL, LLaMA-Factory, ...), an OpenRLHF reward checkpoint, a LoRA adapter folder "
        "over one of those, or a hub id where the network allows",
    ),
]
TemplateOpt = Annotated[
    str,
    typer.Option(
        "--template",
        help="how texts become tokens: auto (what the model was trained with when its folder says so, "
        "else chat when its tokenizer has a chat template, else plain) | chat | plain | hh  "
        "[default: auto]",
        show_default=False,
    ),
]
MaxLengthOpt = Annotated[
    int | None,
    typer.Option(
        "--max-length",
        min=16,
        help="tokens per text  [default: the model's own; 1024 capped at its positions for a model from elsewhere]",
        show_default=False,
    ),
]
TrustRemoteCodeOpt = Annotated[
    bool,
    flag("--trust-remote-code", help="run the model's own code (auto_map in its config); only for models you trust"),
]


def inference_flags(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Adds the inference options every scoring command takes (--bf16/--fp32, --batch-size, --template,
    --max-length, --trust-remote-code), declared once, where the command's `options` parameter stands; the command
    receives them as one `options: inference.InferenceOptions` (made on call, inside handle_errors(): it loads
    torch, and a bad batch size is a ConfigError)."""
    # The command imports InferenceOptions only for type checking (rewardsmith.inference loads torch): its
    # annotation resolves to a stand-in here, and the parameter is replaced anyway.
    signature = inspect.signature(fn, eval_str=True, locals={"InferenceOptions": object})
    params = list(signature.parameters.values())
    at = next((i for i, p in enumerate(params) if p.name == "options"), None)
    if at is None:
        raise ValueError(f"{fn.__name__} takes no `options` parameter for the inference options")
    rest = [p for p in params if p.name != "options"]
    generated = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
        for name, annotation, default in _INFERENCE_PARAMETERS
    ]
    taken = {p.name for p in rest} & {p.name for p in generated}
    if taken:
        raise ValueError(f"parameters {sorted(taken)} of {fn.__name__} clash with the inference options")

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from rewardsmith.inference import InferenceOptions

        values = {p.name: kwargs.pop(p.name, p.default) for p in generated}
        with handle_errors():
            options = InferenceOptions(**values)
        return fn(*args, options=options, **kwargs)

    new_params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in rest[:at] + generated + rest[at:]]
    wrapper.__signature__ = signature.replace(parameters=new_params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in new_params}
    return wrapper


# (parameter, annotated type, default) of the inference options, in --help order; the parameter names are the
# fields of inference.InferenceOptions.
_INFERENCE_PARAMETERS: tuple[tuple[str, Any, Any], ...] = (
    ("bf16", InferenceBf16, None),
    ("batch_size", BatchSize, 64),
    ("template", TemplateOpt, "auto"),
    ("max_length", MaxLengthOpt, None),
    ("trust_remote_code", TrustRemoteCodeOpt, False),
)


def set_option(example: str) -> Any:
    """The --set option of a command whose config has the key of `example` ("KEY=VALUE", shown in its help)."""
    return Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            metavar="KEY=VALUE",
            help=f"set any config key by its YAML name (repeatable), e.g. --set {example}; a list as "
            "comma-separated values; the keys are listed below  [default: none]",
            show_default=False,
        ),
    ]


SetOption = set_option("train.grad_accum=4")


def shown_defaults(flags: Mapping[str, str | Flag]) -> dict[str, str]:
    """{dotted key: what [default: ...] says} of the flags whose shown default is not the field's: the config keys
    listing (keys_epilog) says the same as the option."""
    return {k: spec.shown_default for k, spec in flags.items() if isinstance(spec, Flag) and spec.shown_default}


def keys_epilog(
    cls: type, sections: Sequence[str] | None = None, note: str = "", shown: Mapping[str, str] | None = None
) -> str:
    """The --help section listing the config keys of `cls` by their YAML names, with help and default (the defaults
    of `cls()`, which a section's default factory may set apart from its class's own; `shown`: what to say instead
    for some keys, as their options do); `sections`: only the keys under these top-level names (those the command
    reads), `note` a last line. Click keeps the lines of a paragraph that starts with a backspace as they are."""
    from rewardsmith.config import config_keys

    lines = ["Config keys (YAML names, for --config FILE or --set KEY=VALUE):"]
    for key, text, default in config_keys(cls):
        if sections is None or key.split(".", 1)[0] in sections:
            lines.append(f"  {key}: {text}  [default: {(shown or {}).get(key, _shown(default))}]")
    return "\b\n" + "\n".join([*lines, *([note] if note else [])])


TABLE_WIDTH = 120  # the widest a results table is printed: wider ones wrap their cells


def print_table(rows: Sequence[Mapping[str, Any]], title: str) -> None:
    """The rows as a table on stdout, at most TABLE_WIDTH characters wide (a narrower terminal's width), its cells
    wrapped to fit; piped or logged, TABLE_WIDTH (not an 80-column default)."""
    from rich.console import Console
    from rich.table import Table

    rows = list(rows)
    console = Console()
    console = Console(width=min(console.width, TABLE_WIDTH) if console.is_terminal else TABLE_WIDTH)
    if not rows:
        console.print(title, highlight=False)
        return
    columns = list(dict.fromkeys(k for row in rows for k in row))
    table = Table(title=title)
    for col in columns:
        table.add_column(str(col))
    for row in rows:
        table.add_row(*[str(row.get(c, "")) for c in columns])
    console.print(table)


def print_result(result: Any) -> None:
    """A job's results table (or title), then its summary lines; under a launcher, from the main process only."""
    from rewardsmith.io.processes import processes

    if not processes().main:
        return
    print_table(result.rows, result.title)
    for line in result.summary:
        typer.echo(line)
