"""The `uac` command line: thin commands that call the pure core and the wiring."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from projections.gate import GateContext
from rules.batch import Submitted, replay_batch
from rules.engine import default_rules
from rules.knowledge.bundled import load_bundled_knowledge
from streams.event_files import read_ndjson_file
from streams.replay_report import print_human, print_json, print_line_errors
from streams.settings import Settings
from streams.tenants import load_gate_policy

app = typer.Typer(no_args_is_help=True, add_completion=False, help="UaC: User as Code.")
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


@app.callback()
def uac() -> None:
    """UaC keeps each person's memory as an event log, folds it into typed state, raises
    alerts and keeps the history for analysts."""


@app.command()
def replay(
    file: Annotated[
        Path, typer.Option("--file", exists=True, dir_okay=False, help="Events, one JSON per line.")
    ],
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object per subject per line.")
    ] = False,
) -> None:
    """Fold a file of events through gate + fold + rules; print state, hash and alerts per subject."""
    settings = Settings()
    policy = load_gate_policy(
        settings.tenants_file,
        max_future_skew_seconds=settings.max_future_skew_seconds,
        max_event_bytes=settings.max_event_bytes,
    )
    now = datetime.now(UTC)

    def context_for(item: Submitted, owners: dict[str, str]) -> GateContext:
        return GateContext(
            now=now, policy=policy, encoded_size=item.encoded_size, claim_owners=owners
        )

    submitted, errors = read_ndjson_file(file)
    results = replay_batch(submitted, context_for, default_rules(load_bundled_knowledge()))
    print_line_errors(errors, err)
    (print_json if as_json else print_human)(results, out)
    rejected = sum(len(result.rejections) for result in results.values())
    if errors or rejected:
        err.print(f"{len(errors)} unreadable line(s), {rejected} rejected event(s)")
        raise typer.Exit(code=1)


def main() -> None:
    app()
