"""Command lines the presets build for new and resumed sessions, and their MCP wiring."""

from __future__ import annotations

import json
import stat
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.domain.execution import Launch
from office_scheduler.domain.models import ExecutorConfig
from office_scheduler.executors.presets import (
    ARGV_PROMPT_LIMIT,
    GEMINI_STDIN_PROMPT,
    PresetError,
    build_invocation,
    mcp_server_command,
)
from office_scheduler.files.load import load_config
from office_scheduler.store.rows import executor_from_json, executor_to_json

TOKEN = "osr_run_secret"


def launch(
    preset: str | None, *, resume: str | None = None, prompt: str = "Fix it.", **config: object
) -> Launch:
    return Launch(
        run_id=42,
        agent_id="ag_1",
        task_id="tk_1",
        workspace_id="ws_1",
        prompt=prompt,
        config=ExecutorConfig(name="agent", preset=preset, **config),  # type: ignore[arg-type]
        env={"OFFICE_API_URL": "http://127.0.0.1:8700", "OFFICE_TOKEN": TOKEN, "PATH": "/usr/bin"},
        cwd="/srv/project",
        resume_session_id=resume,
    )


def server_args(tmp_path: Path) -> list[str]:
    return [
        "-m",
        "office_scheduler",
        "--api-url",
        "http://127.0.0.1:8700",
        "mcp",
        "--token-file",
        str(tmp_path / "office-token"),
        "--workspace",
        "ws_1",
        "--agent",
        "ag_1",
        "--task",
        "tk_1",
        "--run",
        "42",
    ]


def test_claude_new_session(tmp_path: Path) -> None:
    invocation = build_invocation(launch("claude"), tmp_path)

    assert invocation is not None
    config_file = str(tmp_path / "claude-mcp.json")
    assert invocation.argv == (
        "claude",
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--mcp-config",
        config_file,
        "--allowedTools",
        "mcp__office",
    )
    assert invocation.stdin == b"Fix it."
    assert invocation.env == {}
    config = json.loads(Path(config_file).read_text())
    assert config == {
        "mcpServers": {"office": {"command": sys.executable, "args": server_args(tmp_path)}}
    }


def test_claude_resumed_session_with_extra_args(tmp_path: Path) -> None:
    invocation = build_invocation(
        launch(
            "claude", resume="5d3a1f0e-8c2b-4b7e-9a61-0f4c2d9e7b10", preset_args=("--model", "opus")
        ),
        tmp_path,
    )

    assert invocation is not None
    assert invocation.argv[-3:] == (
        "--model",
        "opus",
        "--resume=5d3a1f0e-8c2b-4b7e-9a61-0f4c2d9e7b10",
    )


def test_codex_new_and_resumed(tmp_path: Path) -> None:
    fresh = build_invocation(launch("codex"), tmp_path)
    resumed = build_invocation(
        launch("codex", resume="0199a213-81c0-7800-8aa1-bbab2a035a50"), tmp_path
    )

    assert fresh is not None
    assert resumed is not None
    assert fresh.argv[:4] == ("codex", "exec", "--json", "--skip-git-repo-check")
    assert fresh.argv[4:8] == (
        "-c",
        f"mcp_servers.office.command={json.dumps(sys.executable)}",
        "-c",
        f"mcp_servers.office.args={json.dumps(server_args(tmp_path))}",
    )
    assert fresh.argv[8:] == ("-",)
    assert resumed.argv[8:] == ("resume", "0199a213-81c0-7800-8aa1-bbab2a035a50", "-")
    assert fresh.stdin == resumed.stdin == b"Fix it."


def test_gemini_prompt_as_argument_trusted_and_mcp_settings(tmp_path: Path) -> None:
    fresh = build_invocation(launch("gemini"), tmp_path)
    resumed = build_invocation(
        launch("gemini", resume="c0ffee00-1234-4cde-8f00-5a5a5a5a5a50"), tmp_path
    )

    assert fresh is not None
    assert resumed is not None
    head = ("gemini", "--skip-trust", "--output-format", "stream-json")
    assert fresh.argv == (*head, "--prompt", "Fix it.")
    assert resumed.argv == (
        *head,
        "--resume=c0ffee00-1234-4cde-8f00-5a5a5a5a5a50",
        "--prompt",
        "Fix it.",
    )
    assert fresh.stdin == b""
    assert fresh.env["GEMINI_CLI_TRUST_WORKSPACE"] == "true"
    home = Path(fresh.env["GEMINI_CLI_HOME"])
    assert home == tmp_path / "gemini-home"
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    settings_file = home / ".gemini" / "settings.json"
    assert stat.S_IMODE(settings_file.stat().st_mode) == 0o600
    settings = json.loads(settings_file.read_text())
    assert settings == {
        "mcpServers": {
            "office": {"command": sys.executable, "args": server_args(tmp_path), "trust": True}
        }
    }


def test_gemini_home_keeps_the_users_settings_login_and_sessions(tmp_path: Path) -> None:
    user = tmp_path / "user"
    (user / ".gemini").mkdir(parents=True)
    (user / ".gemini" / "settings.json").write_text(
        '// my settings\n{"security": {"auth": {"selectedType": "oauth-personal"}},'
        ' "mcpServers": {"mine": {"command": "x"}}}'
    )
    (user / ".gemini" / "oauth_creds.json").write_text("{}")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    base = launch("gemini")
    with_home = replace(base, env={**base.env, "HOME": str(user)})

    invocation = build_invocation(with_home, run_dir)

    assert invocation is not None
    gemini_dir = Path(invocation.env["GEMINI_CLI_HOME"]) / ".gemini"
    settings = json.loads((gemini_dir / "settings.json").read_text())
    assert settings["security"] == {"auth": {"selectedType": "oauth-personal"}}
    assert sorted(settings["mcpServers"]) == ["mine", "office"]
    assert (gemini_dir / "oauth_creds.json").resolve() == user / ".gemini" / "oauth_creds.json"
    # Sessions are written through to the real home, so --resume finds them next run.
    assert (gemini_dir / "tmp").resolve() == user / ".gemini" / "tmp"
    assert (user / ".gemini" / "tmp").is_dir()
    assert (
        "office"
        not in json.loads((user / ".gemini" / "settings.json").read_text().split("\n", 1)[1])[
            "mcpServers"
        ]
    )


def test_gemini_long_prompt_goes_on_stdin(tmp_path: Path) -> None:
    prompt = "x" * (ARGV_PROMPT_LIMIT + 1)

    invocation = build_invocation(launch("gemini", prompt=prompt), tmp_path)

    assert invocation is not None
    assert invocation.argv[-2:] == ("--prompt", GEMINI_STDIN_PROMPT)
    assert invocation.stdin == prompt.encode()


def test_token_file_is_private(tmp_path: Path) -> None:
    command = mcp_server_command(launch("claude"), tmp_path)

    token_file = Path(command[command.index("--token-file") + 1])
    assert token_file.read_text() == TOKEN
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert TOKEN not in " ".join(command)


def test_taskless_run_names_no_task(tmp_path: Path) -> None:
    taskless = replace(launch("claude"), task_id=None)

    command = mcp_server_command(taskless, tmp_path)

    assert "--task" not in command


def test_explicit_argv_wins_and_no_preset_means_none(tmp_path: Path) -> None:
    assert build_invocation(launch("claude", argv=("my-agent",)), tmp_path) is None
    assert build_invocation(launch(None, argv=("my-agent",)), tmp_path) is None


def test_unknown_preset_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(PresetError, match="known presets: claude, codex, gemini"):
        build_invocation(launch("copilot"), tmp_path)


def write_office(root: Path, executor: str) -> Path:
    root.mkdir()
    (root / "office.yml").write_text(f"workspace: {{name: acme}}\nexecutors:\n  cli: {executor}\n")
    return root


def test_config_files_accept_a_preset_without_argv(tmp_path: Path) -> None:
    root = write_office(tmp_path / "o", "{preset: codex, preset_args: [--model, o4-mini]}")

    config = load_config(root).settings.executors["cli"]

    assert config.preset == "codex"
    assert config.preset_args == ("--model", "o4-mini")
    assert config.argv == ()
    assert config.stall_timeout_s == 300.0
    assert executor_from_json(executor_to_json(config)) == config


def test_config_files_and_stored_executors_keep_stall_timeout(tmp_path: Path) -> None:
    root = write_office(tmp_path / "o", "{preset: codex, stall_timeout_s: 45}")

    config = load_config(root).settings.executors["cli"]

    assert config.stall_timeout_s == 45.0
    assert executor_from_json(executor_to_json(config)) == config
    stored = executor_to_json(config)
    del stored["stall_timeout_s"]  # written before the key existed
    assert executor_from_json(stored).stall_timeout_s == 300.0


@pytest.mark.parametrize(
    ("executor", "field"),
    [
        ("{preset: copilot}", "executors.cli.preset"),
        ("{kind: command}", "executors.cli.argv"),
        ("{preset: codex, stall_timeout_s: 0}", "executors.cli.stall_timeout_s"),
    ],
)
def test_config_files_reject_unknown_presets_and_empty_commands(
    tmp_path: Path, executor: str, field: str
) -> None:
    root = write_office(tmp_path / "o", executor)

    with pytest.raises(InvalidInputError) as caught:
        load_config(root)

    assert field in str(caught.value.field)
