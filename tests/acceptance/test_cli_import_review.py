"""``office import``: a hostile config directory shows its hand in the plan, and
``${env:NAME}`` does not read the office's own variables unless allowed."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from cli_harness import CLEAN_ENV
from office_scheduler.cli import office
from office_scheduler.store.facade import Store

HOSTILE = """\
workspace: {name: Evil}
settings: {default_executor: x}
executors:
  x:
    argv: ["/bin/sh", "-c", "env > /tmp/loot"]
    env: {KEY: "${env:CLOUD_SECRET}", PLAIN: "visible-only-by-name"}
    pass_env: [PATH, AWS_PROFILE]
    cwd: /srv/elsewhere
"""


def run(home: Path, *args: str, **env: str) -> Result:
    return CliRunner().invoke(
        office, list(args), env={**CLEAN_ENV, "OFFICE_HOME": str(home), **env}
    )


def hostile(tmp_path: Path, office_yml: str = HOSTILE) -> Path:
    config = tmp_path / "office"
    (config / "projects").mkdir(parents=True)
    (config / "office.yml").write_text(office_yml)
    (config / "projects" / "p.yml").write_text(f"directory: {tmp_path / 'outside'}\n")
    (config / "projects" / "inside.yml").write_text("directory: work\n")
    return config


def test_the_plan_shows_every_value_and_flags_the_dangers(tmp_path: Path) -> None:
    home, config = tmp_path / "home", hostile(tmp_path)
    result = run(home, "import", str(config), "--dry-run", CLOUD_SECRET="s3cr3t")
    assert result.exit_code == 0, result.output
    out = result.stdout
    for shown in (
        'executors.x.argv: ["/bin/sh", "-c", "env > /tmp/loot"]',
        'executors.x.env: ["KEY=${env:CLOUD_SECRET}", "PLAIN"]',
        'executors.x.pass_env: ["PATH", "AWS_PROFILE"]',
        "executors.x.cwd: /srv/elsewhere",
        f"directory: {tmp_path / 'outside'}",
        f"directory: {config / 'work'}",
    ):
        assert shown in out, shown
    warnings = [line.strip() for line in out.splitlines() if line.startswith("  ! ")]
    assert any("starts a shell" in line for line in warnings)
    assert any("/bin/sh is outside the config folder" in line for line in warnings)
    assert any("/srv/elsewhere is outside the config folder" in line for line in warnings)
    assert any("${env:CLOUD_SECRET}" in line for line in warnings)
    assert any("AWS_PROFILE" in line for line in warnings)
    assert any(str(tmp_path / "outside") in line for line in warnings)
    assert not any(str(config / "work") in line for line in warnings), "inside is fine"
    assert "s3cr3t" not in out, "values stay secret"
    assert "visible-only-by-name" not in out
    listed = run(home, "--json", "import", str(config), "--dry-run", CLOUD_SECRET="s3cr3t")
    rows = {row["name"]: row for row in json.loads(listed.stdout)["changes"]}
    assert len(rows["Evil"]["warnings"]) == 5
    assert rows["p"]["details"] == [
        "description: ",
        f"directory: {tmp_path / 'outside'}",
        "executor: null",
        "repos: []",
    ]


def test_a_value_cannot_forge_plan_lines(tmp_path: Path) -> None:
    forged = HOSTILE.replace("cwd: /srv/elsewhere", 'cwd: "rel\\n  create nothing\\u001b[2K"')
    config = hostile(tmp_path, forged)
    result = run(tmp_path / "home", "import", str(config), "--dry-run", CLOUD_SECRET="x")
    assert result.exit_code == 0, result.output
    assert 'executors.x.cwd: "rel\\n  create nothing\\u001b[2K"' in result.stdout
    assert "\x1b" not in result.stdout


def test_env_references_to_office_variables_need_allow_env(tmp_path: Path) -> None:
    home = tmp_path / "home"
    config = hostile(tmp_path, HOSTILE.replace("${env:CLOUD_SECRET}", "${env:OFFICE_TOKEN}"))
    refused = run(home, "import", str(config), "--yes", OFFICE_TOKEN="osa_importer")
    assert refused.exit_code == 2
    assert refused.stderr.strip().splitlines() == [
        "office: office.yml: executors.x.env.KEY: refers to ${env:OFFICE_TOKEN}, one of the"
        " office's own variables: add --allow-env OFFICE_TOKEN to import it"
    ]
    assert not (home / "office.db").exists() or _executor_env(home) is None
    allowed = run(
        home, "import", str(config), "--yes", "--allow-env", "OFFICE_TOKEN",
        OFFICE_TOKEN="osa_importer",
    )  # fmt: skip
    assert allowed.exit_code == 0, allowed.output
    assert _executor_env(home) == {"KEY": "osa_importer", "PLAIN": "visible-only-by-name"}


def _executor_env(home: Path) -> dict[str, str] | None:
    store = Store.open(f"sqlite:///{home / 'office.db'}")
    try:
        found = store.office.find_workspace_by_name("Evil")
        return None if found is None else dict(found.settings.executors["x"].env)
    finally:
        store.close()
