"""The code blocks of README.md and docs/*.md hold what the code accepts: every `rewardsmith ...` command line of a
bash block parses (each option known, each value of its type) without running; every python block compiles, its
rewardsmith imports resolve, and every call of an imported rewardsmith name passes keywords its signature takes.
(The README's quick-start lines are also run as written: tests/integration/test_readme.py.)"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import shlex
from pathlib import Path

import pytest
import typer
from typer._click import core as click_core  # typer bundles its own click
from typer._click import exceptions as click_errors

from rewardsmith.cli import app

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```(bash|python)\n(.*?)```", re.S)


def blocks(kind: str) -> list[tuple[str, str]]:
    out = []
    for path in DOCS:
        for found in BLOCK.finditer(path.read_text(encoding="utf-8")):
            if found.group(1) == kind:
                out.append((path.name, found.group(2)))
    return out


def command_lines() -> list[tuple[str, list[str]]]:
    """Every `rewardsmith ...` command of the bash blocks, continuation lines joined, comments dropped."""
    out = []
    for name, text in blocks("bash"):
        for line in text.replace("\\\n", " ").splitlines():
            line = line.split(" #")[0].strip()
            words = shlex.split(line) if line else []
            for k, word in enumerate(words):
                if word.endswith("rewardsmith") and k + 1 < len(words):
                    rest = []
                    for w in words[k + 1 :]:
                        if w in ("&&", ";", "|", ">", "2>"):
                            break
                        rest.append(w)
                    out.append((name, rest))
                    break
    return out


COMMANDS = command_lines()


def test_the_docs_hold_commands_and_python_blocks() -> None:
    assert len(COMMANDS) > 20 and len(blocks("python")) >= 5


@pytest.mark.parametrize(("doc", "args"), COMMANDS, ids=[f"{d}: {' '.join(a)[:60]}" for d, a in COMMANDS])
def test_every_documented_command_line_parses(doc: str, args: list[str]) -> None:
    group = typer.main.get_command(app)
    ctx = group.make_context("rewardsmith", ["--help"], resilient_parsing=True)
    command: click_core.Command = group
    words = list(args)
    while hasattr(command, "get_command") and words and not words[0].startswith("-"):
        found = command.get_command(ctx, words[0])  # type: ignore[attr-defined]
        assert found is not None, f"{doc}: no command {words[0]!r} in `rewardsmith {' '.join(args)}`"
        command, words = found, words[1:]
    if "--help" in words or any(w.startswith(("$", "[")) or w.endswith("...") for w in words):
        return  # a synopsis (`[--rule ...]`, `...`) or a shell variable, not a command line
    try:
        command.make_context(command.name or "", words)
    except click_errors.UsageError as err:  # an unknown option, a bad value
        if "Missing option" not in err.format_message():  # a documented line may leave required options to the text
            pytest.fail(f"{doc}: `rewardsmith {' '.join(args)}`: {err.format_message()}")


@pytest.mark.parametrize(
    ("doc", "code"), blocks("python"), ids=lambda v: v if isinstance(v, str) and v.endswith(".md") else ""
)
def test_every_python_block_compiles_imports_and_calls_what_exists(doc: str, code: str) -> None:
    tree = ast.parse(code, filename=doc)
    names: dict[str, object] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rewardsmith"):
            module = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(module, alias.name), f"{doc}: {node.module} has no {alias.name}"
                names[alias.asname or alias.name] = getattr(module, alias.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names:
            target = names[node.func.id]
            if not callable(target):
                continue
            keywords = {k.arg for k in node.keywords if k.arg}
            params = inspect.signature(target).parameters  # type: ignore[arg-type]
            takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
            unknown = sorted(keywords - set(params)) if not takes_any else []
            assert not unknown, f"{doc}: {node.func.id}() takes no {unknown}"


def test_a_wrong_option_or_keyword_is_caught() -> None:
    """The two checks above can fail: an unknown option and an unknown keyword are caught."""
    with pytest.raises(pytest.fail.Exception, match="No such option"):
        test_every_documented_command_line_parses("x.md", ["train", "--no-such-option", "1"])
    with pytest.raises(AssertionError, match="takes no"):
        test_every_python_block_compiles_imports_and_calls_what_exists(
            "x.md", "from rewardsmith.client import RewardClient\nRewardClient('http://h:1', no_such=1)"
        )
