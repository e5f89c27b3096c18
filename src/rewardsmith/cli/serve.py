"""`rewardsmith serve`: a batched HTTP reward server for a saved model (rewardsmith.serve).

rewardsmith serve --model runs/example/model --port 8000
rewardsmith serve --model runs/example/model --calibration maps.json --api-key-file key.txt
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Annotated, Any

import typer

from rewardsmith.cli.common import Flag, ModelPath, TrustRemoteCodeOpt, config_options, handle_errors
from rewardsmith.config import apply_overrides, config_keys
from rewardsmith.serve.config import ServeConfig

app = typer.Typer()

# One flag per ServeConfig key, named after it (monitor.length_growth: --monitor-length-growth); the shared
# --trust-remote-code is declared once for every command.
FLAGS: dict[str, str | Flag] = {
    key: "--" + key.replace(".", "-").replace("_", "-")
    for key, _, _ in config_keys(ServeConfig)
    if key != "trust_remote_code"
}
FLAGS["api_key_file"] = Flag(("--api-key-file",), convert=str, cli_type=Path)


@app.command()
@config_options(ServeConfig, FLAGS)
def serve(
    model: ModelPath,
    overrides: dict[str, Any],
    calibration: Annotated[
        Path | None,
        typer.Option(
            help="per-rater maps from `rewardsmith calibrate fit`: /v1/score then takes a `rater`  [default: none]",
            show_default=False,
        ),
    ] = None,
    trust_remote_code: TrustRemoteCodeOpt = False,
) -> None:
    """Serve a reward model over HTTP with dynamic batching (OpenRLHF, vLLM, TEI and native endpoints)."""
    # OpenMP threads that spin between a forward pass's operations starve the server's own threads (HTTP,
    # tokenizer) on a machine with few cores: the `rewardsmith` command sets OMP_WAIT_POLICY=PASSIVE before torch
    # loads (rewardsmith/launch.py; with 2 torch threads the model ran about 10x slower inside the server than alone
    # without it, benchmarks/bench_serve.py).
    from rewardsmith.serve.app import run_server

    with handle_errors():
        settings = ServeConfig()
        apply_overrides(settings, {**overrides, "trust_remote_code": trust_remote_code or None})

        def ready(url: str) -> None:
            typer.echo(f"serving {model} on {url} (Ctrl-C or SIGTERM stops it within --shutdown-timeout-s)")

        def stopping() -> None:
            typer.echo(
                f"stopping: new requests are refused (503); those under way finish within "
                f"{settings.shutdown_timeout_s:g} s",
                err=True,
            )

        run_server(model, settings, calibration, on_ready=ready, on_stop=stopping)
        typer.echo("stopped")
        # What is alive now is left to the process exit: collecting it object by object (torch, transformers and
        # the model) takes seconds on a busy machine, past --shutdown-timeout-s.
        gc.freeze()
