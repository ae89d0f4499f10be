"""kata warm: start, show or end the warm grader of this KATA_HOME (grader/engine/warm.py)."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from grader.cli import output
from grader.cli.common import JsonOpt
from grader.errors import KataError

StatusOpt = Annotated[bool, typer.Option("--status", help="Show whether it runs, since when, and how often it graded.")]
StopOpt = Annotated[bool, typer.Option("--stop", help="End it (the next grading starts a new one).")]


def warm(show_status: StatusOpt = False, stop: StopOpt = False, as_json: JsonOpt = False) -> None:
    """Keep a grader warm for your session: check, grade and watch fork their judges from a
    process that has imported pytest, hypothesis and torch already.

    The first check or grade that finds none starts it in the background; this command
    starts it now and waits until it is ready. It ends after 15 idle minutes, at `kata stop`,
    with --stop, or when kata's code changes. KATA_WARM=0 turns it off."""
    from grader.engine import runner, warm as service

    if show_status and stop:
        raise KataError("--status and --stop are two questions", hint="`kata warm --status`, or `kata warm --stop`")
    if stop:
        was = service.stop()
        if as_json:
            output.print_json({"stopped": was})
        else:
            output.console.print("the warm grader stopped" if was else "no warm grader was running")
        return
    found = service.status()
    if not show_status and found is None:
        env = runner._judge_env()
        if service.start(env, service.code_key(env)) is None:
            raise KataError("the warm grader could not start", hint="gradings run cold, as before; check /tmp is writable")
        found = service.wait_ready()
        if found is None:
            raise KataError("the warm grader did not answer within 60 s", hint="gradings run cold; `kata warm --stop` and retry")
    if as_json:
        output.print_json({"running": found is not None, **(found or {})})
        return
    if found is None:
        output.console.print("no warm grader runs for this KATA_HOME; `kata warm` starts one (the first "
                             "check or grade does too)")
        return
    up = output.fmt_duration(time.time() - float(found.get("started", time.time())))
    output.console.print(f"warm grader: pid {found.get('pid')}, up {up}, {found.get('gradings', 0)} grading"
                         f"{'s' if found.get('gradings') != 1 else ''}, idle {output.fmt_duration(float(found.get('idle_s', 0)))} "
                         f"(ends after 15 idle minutes, or `kata warm --stop`)")
