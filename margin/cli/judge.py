"""`margin judge validate`: how often a judge agrees with people, on labelled completions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from margin.cli import options as o
from margin.cli.app import app, console, err
from margin.cli.common import fail, interrupted, resume_command
from margin.engine import settings
from margin.errors import EndpointDown, InputError

judge_app = typer.Typer(no_args_is_help=False, help="Judges of paired studies, measured against people.")
app.add_typer(judge_app, name="judge")


@judge_app.command()
def validate(
    judge: Annotated[str, typer.Option("--judge", help="refusal-rules, or a YAML file (or inline mapping) "
                                                       "holding what a study's `judge:` takes")],
    labels: Annotated[list[Path], typer.Option("--labels", help="a labels CSV (XSTest's completion files); repeat")],
    out: Annotated[Path | None, typer.Option(help="folder for validation.json, report.md and the receipts "
                                                  "(needed for an LLM judge)")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="continue the killed validation in --out")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the record as one JSON object")] = False,
    engine: o.Engine = settings.ENGINE.flag_default,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="neither read nor write the response cache")] = False,
) -> None:
    """Accuracy and Cohen's kappa of a judge against labelled completions, beside the annotators' own."""
    from margin.datasets.completions import read_all
    from margin.serving.calls import CallSettings
    from margin.studies.validate import load_judge
    from margin.studies.validate import validate as run_validation

    settings.ENGINE.check_choice(engine, "--engine")
    if resume and out is None:
        raise InputError("needs --out, the folder of the validation to continue", field="--resume")
    spec = load_judge(judge)
    files = read_all(labels)
    answered = [0]
    try:
        with err.status("judging") as status:
            def on_batch(requests: int) -> None:
                answered[0] += requests
                status.update(f"judging: {answered[0]:,} cases answered")

            result = run_validation(spec, files, out, settings=CallSettings(engine=engine),  # type: ignore[arg-type]
                                    resume=resume, cache=not no_cache, on_batch=on_batch)
    except KeyboardInterrupt:
        if out is not None and (out / "validate.json").is_file():
            interrupted(out, f"continue with\n  {resume_command('judge', out)}")
        interrupted(None, None)
    except EndpointDown as exc:
        fail(f"{exc}. What it recorded is kept in {out}/; continue with: {resume_command('judge', out)}"
             if out is not None else str(exc))
    except RuntimeError as exc:  # a judge model that answers nothing, or cannot start
        fail(f"{exc}. What it recorded is kept in {out}/; continue with: {resume_command('judge', out)}"
             if out is not None and (out / "validate.json").is_file() else str(exc))
    if as_json:
        print(json.dumps(result.record, sort_keys=True))
        return
    print(result.report, end="")  # markdown, not wrapped to the terminal
    if out is not None:
        console.print(f"wrote {out}/ (validation.json, report.md, receipts)")
