"""``office agent preview``: what a run of an agent would launch, with nothing launched."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from cli_harness import CLEAN_ENV
from office_scheduler.agent_tools.server import TOOL_NAMES
from office_scheduler.cli import office
from office_scheduler.store.facade import Store

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo-office"
SECRET = "sk-secret-value-never-shown"
EXECUTORS = """
  claude:
    kind: command
    preset: claude
    preset_args: ["--permission-mode", "acceptEdits"]
    pass_env: [PATH, HOME, LANG, ANTHROPIC_API_KEY]
  codex:
    kind: command
    preset: codex
    preset_args: ["--sandbox", "workspace-write"]
    pass_env: [PATH, HOME, LANG, CODEX_API_KEY]
  gemini:
    kind: command
    preset: gemini
    preset_args: ["--approval-mode", "auto_edit"]
    pass_env: [PATH, HOME, LANG, GEMINI_API_KEY]
"""


class Office:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path / "tmp"
        self.tmp.mkdir()
        self.env: dict[str, str | None] = {
            **CLEAN_ENV,
            "OFFICE_HOME": str(tmp_path / "home"),
            "GEMINI_API_KEY": SECRET,
            "CODEX_API_KEY": SECRET,
            "TMPDIR": str(self.tmp),
        }

    def run(self, *args: str) -> Result:
        tempfile.tempdir = None  # TMPDIR is read again by the command
        try:
            return CliRunner().invoke(office, list(args), env=self.env)
        finally:
            tempfile.tempdir = None

    def preview(self, *args: str) -> dict[str, Any]:
        result = self.run("agent", "preview", *args, "--json")
        assert result.exit_code == 0, result.output
        assert SECRET not in result.output
        data: dict[str, Any] = json.loads(result.output)
        return data


@pytest.fixture
def demo(tmp_path: Path) -> Office:
    source = tmp_path / "office"
    shutil.copytree(DEMO, source)
    config = source / "office.yml"
    config.write_text(
        config.read_text().replace("  sample: *stdin\n", "  sample: *stdin\n" + EXECUTORS)
    )
    for agent, executor in (("writer", "codex"), ("reviewer", "gemini")):
        path = source / "agents" / f"{agent}.yml"
        path.write_text(path.read_text().replace("executor: sample", f"executor: {executor}"))
    found = Office(tmp_path)
    result = found.run("import", "--yes", str(source))
    assert result.exit_code == 0, result.output
    return found


def test_gemini_preview_is_trusted_with_an_accepted_mcp_settings_file(demo: Office) -> None:
    seen = demo.preview("reviewer")

    assert seen["executor"] == "gemini"
    assert seen["preset"] == "gemini"
    assert seen["argv"][:2] == ["gemini", "--skip-trust"]
    assert seen["argv"][-2:] == ["--prompt", "<prompt>"]
    assert "GEMINI_CLI_TRUST_WORKSPACE" in seen["env"]
    assert "GEMINI_CLI_HOME" in seen["env"]
    assert "GEMINI_API_KEY" in seen["env"]
    assert "GEMINI_CLI_SYSTEM_DEFAULTS_PATH" not in seen["env"]
    files = {f["path"]: f["mode"] for f in seen["files"]}
    # User settings of a per-run Gemini home: no root-ownership check applies to them.
    assert files["<run tmp>/gemini-home/.gemini/settings.json"] == "0600"
    assert files["<run tmp>/gemini-home"] == "0700"
    assert files["<run tmp>/office-token"] == "0600"
    assert seen["prompt_kind"] == "full"
    assert seen["act_via"] == "mcp"
    # Nothing is left behind, nothing was started.
    assert not list(demo.tmp.iterdir())


def test_codex_preview_wires_mcp_and_its_prompt_names_the_tools(demo: Office) -> None:
    seen = demo.preview("writer")

    assert seen["argv"][:4] == ["codex", "exec", "--json", "--skip-git-repo-check"]
    assert any(arg.startswith("mcp_servers.office.command=") for arg in seen["argv"])
    assert seen["argv"][-3:] == ["--sandbox", "workspace-write", "-"]
    assert seen["stdin"] == "prompt"
    assert "CODEX_API_KEY" in seen["env"]
    assert seen["act_via"] == "mcp"
    section = "\n".join(seen["how_to_act"])
    assert all(f"`{name}`" in section for name in TOOL_NAMES)
    assert "office comment add" not in section


def test_sample_preview_acts_through_the_office_command(demo: Office) -> None:
    result = demo.run("agent", "preview", "coordinator")

    assert result.exit_code == 0, result.output
    assert "executor:     sample (from the agent), kind command" in result.output
    assert "acts via cli" in result.output
    assert "office comment add" in result.output


def test_preview_of_a_task_uses_the_task_executor(demo: Office, tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'home' / 'office.db'}")
    try:
        space = store.office.list_workspaces()[0]
        task = store.office.create_task(
            workspace_id=space.id, title="Write the page", now=datetime.now(UTC)
        )
        store.office.update_task(task.id, now=datetime.now(UTC), changes={"executor": "claude"})
    finally:
        store.close()

    seen = demo.preview("writer", "--task", task.id)

    assert seen["task_id"] == task.id
    assert (seen["executor"], seen["origin"]) == ("claude", "task")
    assert seen["argv"][:3] == ["claude", "-p", "--output-format"]
    assert seen["argv"][seen["argv"].index("--allowedTools") + 1] == "mcp__office"
    assert {f["path"] for f in seen["files"]} == {
        "<run tmp>/claude-mcp.json",
        "<run tmp>/office-token",
    }
    assert seen["argv"][seen["argv"].index("--mcp-config") + 1] == "<run tmp>/claude-mcp.json"


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["nobody"], 1, "no agent 'nobody'"),
        (["writer", "--task", "tk_missing"], 2, "no task 'tk_missing'"),
    ],
)
def test_preview_errors_are_one_line(demo: Office, args: list[str], code: int, words: str) -> None:
    result = demo.run("agent", "preview", *args)

    assert result.exit_code == code
    assert words in result.output
    assert "Traceback" not in result.output
    assert os.linesep not in result.output.strip()
