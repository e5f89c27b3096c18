"""`rewardsmith serve`: a batched HTTP reward server for a saved model (rewardsmith.serve).

rewardsmith serve --model runs/example/model --port 8000
rewardsmith serve --model runs/example/model --calibration maps.json --api-key-file key.txt
"""

from __future__ import annotations

import gc
import os
from pathlib import Path
from typing import Annotated

import typer

from rewardsmith.cli.common import ModelPath, TrustRemoteCodeOpt, config_option, handle_errors
from rewardsmith.config import apply_overrides
from rewardsmith.serve.config import ServeConfig

app = typer.Typer()

_S = ServeConfig


@app.command()
def serve(
    model: ModelPath,
    calibration: Annotated[
        Path | None,
        typer.Option(
            help="per-rater maps from `rewardsmith calibrate fit`: /v1/score then takes a `rater`  [default: none]",
            show_default=False,
        ),
    ] = None,
    host: Annotated[str | None, config_option(_S, "host", "--host")] = None,
    port: Annotated[int | None, config_option(_S, "port", "--port")] = None,
    max_batch_tokens: Annotated[int | None, config_option(_S, "max_batch_tokens", "--max-batch-tokens")] = None,
    max_padding: Annotated[float | None, config_option(_S, "max_padding", "--max-padding")] = None,
    max_wait_ms: Annotated[float | None, config_option(_S, "max_wait_ms", "--max-wait-ms")] = None,
    max_items: Annotated[int | None, config_option(_S, "max_items", "--max-items")] = None,
    max_queue: Annotated[int | None, config_option(_S, "max_queue", "--max-queue")] = None,
    max_body_bytes: Annotated[int | None, config_option(_S, "max_body_bytes", "--max-body-bytes")] = None,
    request_timeout_s: Annotated[float | None, config_option(_S, "request_timeout_s", "--request-timeout-s")] = None,
    header_timeout_s: Annotated[float | None, config_option(_S, "header_timeout_s", "--header-timeout-s")] = None,
    body_timeout_s: Annotated[float | None, config_option(_S, "body_timeout_s", "--body-timeout-s")] = None,
    shutdown_timeout_s: Annotated[float | None, config_option(_S, "shutdown_timeout_s", "--shutdown-timeout-s")] = None,
    precision: Annotated[str | None, config_option(_S, "precision", "--precision")] = None,
    api_key_file: Annotated[Path | None, config_option(_S, "api_key_file", "--api-key-file")] = None,
    max_standards: Annotated[int | None, config_option(_S, "max_standards", "--max-standards")] = None,
    template: Annotated[str | None, config_option(_S, "template", "--template")] = None,
    max_length: Annotated[int | None, config_option(_S, "max_length", "--max-length")] = None,
    monitor_window: Annotated[int | None, config_option(_S, "monitor_window", "--monitor-window")] = None,
    trust_remote_code: TrustRemoteCodeOpt = False,
) -> None:
    """Serve a reward model over HTTP with dynamic batching (OpenRLHF, vLLM, TEI and native endpoints)."""
    # Before torch loads (a value already set is kept): OpenMP threads that spin between a forward pass's
    # operations starve the server's own threads (HTTP, tokenizer) on a machine with few cores; with 2 torch
    # threads the model ran about 10x slower inside the server than alone (benchmarks/bench_serve.py), and a
    # passive wait costs the forward pass little.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    from rewardsmith.serve.app import run_server

    with handle_errors():
        settings = ServeConfig()
        apply_overrides(
            settings,
            {
                "host": host,
                "port": port,
                "max_batch_tokens": max_batch_tokens,
                "max_padding": max_padding,
                "max_wait_ms": max_wait_ms,
                "max_items": max_items,
                "max_queue": max_queue,
                "max_body_bytes": max_body_bytes,
                "request_timeout_s": request_timeout_s,
                "header_timeout_s": header_timeout_s,
                "body_timeout_s": body_timeout_s,
                "shutdown_timeout_s": shutdown_timeout_s,
                "precision": precision,
                "api_key_file": str(api_key_file) if api_key_file else None,
                "max_standards": max_standards,
                "template": template,
                "max_length": max_length,
                "monitor_window": monitor_window,
                "trust_remote_code": trust_remote_code or None,
            },
        )

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
