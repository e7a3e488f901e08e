"""Command lines of known agent CLIs for the ``command`` executor (``preset: claude|codex|gemini``).

A preset builds the argv of a new or resumed session, the extra environment, what goes on
stdin, and the wiring of our MCP server (``office mcp``) into the CLI. Only documented flags
are used:

* Claude Code (https://docs.anthropic.com/en/docs/claude-code/cli-reference,
  https://docs.anthropic.com/en/docs/claude-code/mcp,
  https://docs.anthropic.com/en/docs/claude-code/iam):
  ``claude -p --output-format stream-json --verbose --mcp-config <file> --allowedTools
  mcp__office [--resume=<session id>]``, prompt on stdin. The MCP config is a JSON file
  ``{"mcpServers": {"office": {"command": ..., "args": [...]}}}`` in the run's temp dir.
* Codex (https://github.com/openai/codex/blob/main/docs/exec.md,
  https://github.com/openai/codex/blob/main/docs/config.md):
  ``codex exec --json --skip-git-repo-check -c mcp_servers.office.command=... -c
  mcp_servers.office.args=[...] [resume <session id>] -``, prompt on stdin (``-``). The
  ``-c key=value`` overrides take TOML values and touch no config file.
* Gemini CLI (https://geminicli.com/docs/cli/headless/,
  https://geminicli.com/docs/cli/session-management,
  https://geminicli.com/docs/cli/configuration,
  https://github.com/google-gemini/gemini-cli/blob/main/docs/tools/mcp-server.md):
  ``gemini --skip-trust --output-format stream-json [--resume=<session id>] --prompt
  <prompt>``, stdin empty; a prompt over :data:`ARGV_PROMPT_LIMIT` bytes goes on stdin
  (which Gemini reads as context) with a short ``--prompt`` pointing at it. Headless Gemini
  refuses an untrusted folder (exit 55), hence ``--skip-trust`` and
  ``GEMINI_CLI_TRUST_WORKSPACE=true`` (the latter also for its subcommands). The MCP server
  is declared in the *user* settings of a per-run Gemini home: Gemini ignores system
  settings files (``GEMINI_CLI_SYSTEM_DEFAULTS_PATH``) unless the file and every parent
  folder are root-owned and not group/other writable, which a service's temp folder never
  is, while user settings have no such check. ``GEMINI_CLI_HOME`` names a folder in the
  run's temp dir whose ``.gemini/settings.json`` is the user's own settings (read from
  ``$HOME/.gemini/settings.json``) plus our ``mcpServers.office`` with ``trust: true``;
  every other entry of ``$HOME/.gemini`` (login, sessions under ``tmp``, history) is a
  symlink to the real one, so logins and ``--resume`` keep working.

The MCP server runs as ``<python> -m office_scheduler --api-url <url> mcp --token-file <file>
--workspace ... --agent ... [--task ...] --run ...``: the run-scoped token is written to a
0600 file in the run's temp dir instead of being put on a command line or relying on the
CLI to pass ``OFFICE_TOKEN`` through to its MCP servers (Codex and Gemini filter the
environment of MCP servers).
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from office_scheduler.domain.execution import Launch
from office_scheduler.executors.session_ids import resume_args

PRESET_NAMES: Final = ("claude", "codex", "gemini")
#: The name our MCP server has inside each CLI (Claude tools are ``mcp__office__<tool>``).
MCP_SERVER_NAME: Final = "office"
#: Longest prompt (bytes) passed to Gemini as an argument; Linux caps one argument at 128 KiB.
ARGV_PROMPT_LIMIT: Final = 100_000
#: Gemini's ``--prompt`` when the prompt itself goes on stdin.
GEMINI_STDIN_PROMPT: Final = (
    "Your complete instructions for this session are the text given above on standard input. "
    "Follow them."
)
TOKEN_FILE: Final = "office-token"  # noqa: S105 - a file name, not a secret
CLAUDE_MCP_FILE: Final = "claude-mcp.json"
#: The per-run Gemini home (``GEMINI_CLI_HOME``), inside the run's temp dir.
GEMINI_HOME_DIR: Final = "gemini-home"
#: Entries of ``$HOME/.gemini`` created when missing so sessions outlive the run's home.
GEMINI_SHARED_DIRS: Final = ("tmp", "history")


#: What each CLI prints when the session named by its resume argument does not exist (or no
#: longer exists) - the one table :func:`is_lost_session` matches, case-insensitively:
#: Claude Code ``No conversation found with session ID: <id>`` (exit 1); Codex ``No saved
#: session found with ID <id>`` and ``thread/resume failed: no rollout found for thread id
#: <id>``; Gemini CLI ``Error resuming session: Invalid session identifier "<id>"`` and ``No
#: previous sessions found``; and the generic ``session not found``.
LOST_SESSION_TEXTS: Final[dict[str, tuple[str, ...]]] = {
    "claude": ("No conversation found with session ID",),
    "codex": ("No saved session found with ID", "no rollout found for thread id"),
    "gemini": ("Invalid session identifier", "No previous sessions found"),
    "any": ("session not found",),
}
_LOST_SESSION = re.compile(
    "|".join(re.escape(text) for texts in LOST_SESSION_TEXTS.values() for text in texts),
    re.IGNORECASE,
)


def is_lost_session(text: str) -> bool:
    """Whether a failure text says the resumed session is unknown to the agent CLI.

    Args:
        text: the failure message and/or stderr of a resumed session; only the last 64 KiB
            are scanned.

    Returns:
        True when one of :data:`LOST_SESSION_TEXTS` occurs in it.
    """
    return _LOST_SESSION.search(text[-65536:]) is not None


class PresetError(ValueError):
    """The executor names a preset that does not exist."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Invocation:
    """How to start one agent CLI session.

    Attributes:
        argv: the complete command line.
        env: variables added to the launch's environment.
        stdin: bytes written to the CLI's stdin (then closed).
    """

    argv: tuple[str, ...]
    env: dict[str, str]
    stdin: bytes


def mcp_server_command(launch: Launch, tmpdir: Path) -> tuple[str, ...]:
    """The command line of ``office mcp`` for this run; writes the token file when needed.

    Args:
        launch: the session; ``OFFICE_API_URL`` and ``OFFICE_TOKEN`` come from its env.
        tmpdir: the run's private temp dir (removed when the session ends).

    Returns:
        ``(python, "-m", "office_scheduler", ..., "mcp", ...)`` with the run's identity.
    """
    token = launch.env.get("OFFICE_TOKEN")
    token_args: tuple[str, ...] = ()
    if token:
        path = tmpdir / TOKEN_FILE
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(token)
        token_args = ("--token-file", str(path))
    return mcp_server_argv(launch, token_args)


def mcp_server_argv(launch: Launch, token_args: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The command line of ``office mcp`` for this run, without writing anything.

    Args:
        launch: the session; ``OFFICE_API_URL`` comes from its env.
        token_args: how the server gets the run token (``--token-file PATH``); empty when
            the caller passes ``OFFICE_TOKEN`` in the server's environment instead.

    Returns:
        ``(python, "-m", "office_scheduler", ..., "mcp", ...)`` with the run's identity.
    """
    command = [sys.executable, "-m", "office_scheduler"]
    api_url = launch.env.get("OFFICE_API_URL")
    if api_url:
        command += ["--api-url", api_url]
    command += ["mcp", *token_args, "--workspace", launch.workspace_id, "--agent", launch.agent_id]
    if launch.task_id:
        command += ["--task", launch.task_id]
    command += ["--run", str(launch.run_id)]
    return tuple(command)


def _write_json(path: Path, data: object) -> str:
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return str(path)


def _toml(value: str | list[str]) -> str:
    """A TOML basic string or array of them (JSON strings are valid TOML basic strings)."""
    return json.dumps(value)


def _claude(launch: Launch, tmpdir: Path) -> Invocation:
    server = mcp_server_command(launch, tmpdir)
    config = {"mcpServers": {MCP_SERVER_NAME: {"command": server[0], "args": list(server[1:])}}}
    argv = [
        "claude",
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--mcp-config",
        _write_json(tmpdir / CLAUDE_MCP_FILE, config),
        "--allowedTools",
        f"mcp__{MCP_SERVER_NAME}",
        *launch.config.preset_args,
    ]
    if launch.resume_session_id:
        argv += resume_args("claude", launch.resume_session_id)
    return Invocation(argv=tuple(argv), env={}, stdin=launch.prompt.encode("utf-8", "replace"))


def _codex(launch: Launch, tmpdir: Path) -> Invocation:
    server = mcp_server_command(launch, tmpdir)
    key = f"mcp_servers.{MCP_SERVER_NAME}"
    argv = [
        "codex",
        "exec",
        "--json",
        "--skip-git-repo-check",
        "-c",
        f"{key}.command={_toml(server[0])}",
        "-c",
        f"{key}.args={_toml(list(server[1:]))}",
        *launch.config.preset_args,
    ]
    if launch.resume_session_id:
        argv += resume_args("codex", launch.resume_session_id)
    argv.append("-")
    return Invocation(argv=tuple(argv), env={}, stdin=launch.prompt.encode("utf-8", "replace"))


def _user_settings(path: Path) -> dict[str, object]:
    """The user's Gemini settings (JSON with ``//`` comment lines), ``{}`` when unreadable."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
        data = json.loads("\n".join(ln for ln in lines if not ln.lstrip().startswith("//")))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def gemini_home(launch: Launch, tmpdir: Path, server: tuple[str, ...]) -> Path:
    """Build the run's Gemini home (``GEMINI_CLI_HOME``); see the module docstring.

    Args:
        launch: the session; ``HOME`` in its env is the user's real home, if any.
        tmpdir: the run's private temp dir.
        server: the ``office mcp`` command line.

    Returns:
        The folder to pass as ``GEMINI_CLI_HOME`` (mode 0700; ``settings.json`` 0600).
    """
    overlay = tmpdir / GEMINI_HOME_DIR
    gemini_dir = overlay / ".gemini"
    gemini_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    overlay.chmod(0o700)
    settings: dict[str, object] = {}
    home = launch.env.get("HOME")
    real = Path(home) / ".gemini" if home else None
    if real is not None and real.parent.is_dir():
        try:
            for name in GEMINI_SHARED_DIRS:
                (real / name).mkdir(mode=0o700, parents=True, exist_ok=True)
            for entry in real.iterdir():
                link = gemini_dir / entry.name
                if entry.name != "settings.json" and not link.exists():
                    link.symlink_to(entry)
        except OSError:
            pass  # an unwritable home: the run's sessions then stay in the overlay
        settings = _user_settings(real / "settings.json")
    servers = settings.get("mcpServers")
    servers = dict(servers) if isinstance(servers, dict) else {}
    servers[MCP_SERVER_NAME] = {"command": server[0], "args": list(server[1:]), "trust": True}
    settings["mcpServers"] = servers
    path = gemini_dir / "settings.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(settings, handle, indent=2)
    return overlay


def _gemini(launch: Launch, tmpdir: Path) -> Invocation:
    server = mcp_server_command(launch, tmpdir)
    env = {
        "GEMINI_CLI_HOME": str(gemini_home(launch, tmpdir, server)),
        "GEMINI_CLI_TRUST_WORKSPACE": "true",
    }
    argv = ["gemini", "--skip-trust", "--output-format", "stream-json"]
    argv += launch.config.preset_args
    if launch.resume_session_id:
        argv += resume_args("gemini", launch.resume_session_id)
    prompt = launch.prompt.encode("utf-8", "replace")
    if len(prompt) <= ARGV_PROMPT_LIMIT:
        return Invocation(argv=(*argv, "--prompt", launch.prompt), env=env, stdin=b"")
    return Invocation(argv=(*argv, "--prompt", GEMINI_STDIN_PROMPT), env=env, stdin=prompt)


_BUILDERS = {"claude": _claude, "codex": _codex, "gemini": _gemini}


def build_invocation(launch: Launch, tmpdir: Path) -> Invocation | None:
    """The preset's invocation for ``launch``, or None when the executor has its own argv.

    An explicit ``argv`` wins over a preset. A resumed run (``launch.resume_session_id``)
    gets the CLI's resume argument; taskless runs never carry one (the pipeline decides).

    Args:
        launch: the session to start.
        tmpdir: the run's private temp dir, for the token and MCP config files.

    Returns:
        The invocation, or None when ``launch.config.argv`` is set or no preset is named.

    Raises:
        PresetError: the preset name is not one of :data:`PRESET_NAMES`.
    """
    config = launch.config
    if config.argv or config.preset is None:
        return None
    builder = _BUILDERS.get(config.preset)
    if builder is None:
        raise PresetError(
            f"executor {config.name!r} names preset {config.preset!r}; "
            f"known presets: {', '.join(PRESET_NAMES)}"
        )
    return builder(launch, tmpdir)
