"""What a command may do while a mock runs is one table (grader/mock.py's COMMAND_POLICY),
applied where the app wires its commands: every registered command has an entry and runs
under it, a command without one cannot be wired, and every command the table refuses is
refused during a mock of its kata (and of no other kata)."""

from __future__ import annotations

from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from grader.cli.app import COMMANDS, app, wired
from grader.mock import COMMAND_POLICY, DuringMock, command_policy

runner = CliRunner()


def registered_commands() -> dict[str, Any]:
    """Every leaf command of `kata` as click sees it, by its path after `kata` ("homework
    review"). Typer vendors click, so a group is known by its subcommands."""
    found: dict[str, Any] = {}
    todo: list[tuple[str, Any]] = [("", get_command(app))]
    while todo:
        prefix, command = todo.pop()
        if hasattr(command, "commands"):
            todo += [(f"{prefix} {name}".strip(), sub) for name, sub in command.commands.items()]
        else:
            found[prefix] = command
    return found


def test_every_registered_command_has_a_policy_and_every_policy_a_command():
    assert set(registered_commands()) == set(COMMAND_POLICY) == set(COMMANDS)


def test_every_registered_command_runs_under_its_policy():
    """The callback Typer registered is the wired one, carrying the table's entry."""
    infos = [(info.name, info.callback) for info in app.registered_commands]
    infos += [(f"{group.name} {info.name}", info.callback) for group in app.registered_groups
              for info in group.typer_instance.registered_commands]
    assert {name for name, _ in infos} == set(COMMAND_POLICY)
    for name, callback in infos:
        assert getattr(callback, "mock_policy", None) is COMMAND_POLICY[name], name


def test_a_command_without_a_policy_cannot_be_wired():
    def fresh(slug: str) -> None:
        """A command nobody gave a policy."""

    with pytest.raises(LookupError, match="COMMAND_POLICY"):
        wired("fresh", fresh)
    with pytest.raises(LookupError, match="COMMAND_POLICY"):
        command_policy("homework fresh")


def test_a_refused_command_must_name_its_kata():
    """The refusal needs the kata: a refused command without a required slug is a wiring bug."""
    COMMAND_POLICY["kataless"] = COMMAND_POLICY["reveal"]
    try:
        with pytest.raises(TypeError, match="slug"):
            wired("kataless", lambda force=False: None)
    finally:
        del COMMAND_POLICY["kataless"]


def test_refused_commands_say_what_they_would_show():
    refused = {name: p for name, p in COMMAND_POLICY.items() if p.during_mock is DuringMock.REFUSED}
    assert set(refused) == {"reveal", "notebook", "bench"}
    assert all(p.would_show for p in refused.values())


REFUSED_RUNS = {"reveal": ["reveal", "paged-kv", "--force"], "notebook": ["notebook", "paged-kv"],
                "bench": ["bench", "paged-kv"]}


def test_every_refused_command_is_refused_during_a_mock_of_its_kata_only(isolated_home):
    assert set(REFUSED_RUNS) == {n for n, p in COMMAND_POLICY.items() if p.during_mock is DuringMock.REFUSED}
    assert runner.invoke(app, ["mock", "paged-kv", "--json"]).exit_code == 0
    for name, args in REFUSED_RUNS.items():
        refused = runner.invoke(app, args)
        said = " ".join(refused.output.split())
        assert refused.exit_code == 2, (name, refused.output)
        assert f"a mock of paged-kv is running: {COMMAND_POLICY[name].would_show} would show" in said, said
        assert "kata mock --stop" in said
    # Another kata's reference is not the mock's: not refused (recorded as a reveal).
    other = runner.invoke(app, ["reveal", "rope"])
    assert other.exit_code == 0 and "later levels" not in other.output


def test_an_unknown_kata_during_a_mock_is_the_usual_error(isolated_home):
    assert runner.invoke(app, ["mock", "paged-kv", "--json"]).exit_code == 0
    result = runner.invoke(app, ["notebook", "no-such-kata"])
    assert result.exit_code == 2 and "no-such-kata" in result.output and "later levels" not in result.output


def test_help_is_the_commands_own():
    """Wiring keeps each command's signature and docstring (Typer reads them through the wrappers)."""
    result = runner.invoke(app, ["reveal", "--help"], env={"COLUMNS": "120"})
    assert result.exit_code == 0 and "Show the reference implementation" in result.output
    assert "--force" in result.output
