"""Routines in a config directory: loading, validation, import plans, webhooks and export."""

from __future__ import annotations

import textwrap
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import yaml

from office_scheduler.cron import parse_schedule
from office_scheduler.domain.errors import InvalidInputError
from office_scheduler.domain.routines import (
    HEARTBEAT_CRON,
    HEARTBEAT_NAME,
    CatchUpPolicy,
    ConcurrencyPolicy,
    Routine,
    RoutineStatus,
    RoutineTrigger,
    RoutineVariable,
    SigningMode,
    TaskTemplate,
    TriggerKind,
    VariableType,
)
from office_scheduler.domain.status import AgentRole
from office_scheduler.files import (
    Action,
    ImportPlan,
    RoutineSpec,
    TriggerSpec,
    export_config,
    load_config,
    plan_import,
    run_import,
)
from office_scheduler.store.engine import Database
from office_scheduler.store.facade import Store

NIGHTLY_YML = """\
name: Nightly report
description: Summarise the day's work
assignee: coder
status: active
concurrency_policy: coalesce_if_active
catch_up_policy: enqueue_missed_with_cap
catch_up_max: 25
task_template:
  title: "Nightly report for {{date}}"
  description: "Write the report for {{date}} about {{topic}} in {{tone}}"
variables:
  - {name: topic, type: select, options: [sales, support], default: sales}
triggers:
  - {kind: manual}
  - {kind: webhook, signing_mode: hmac_sha256}
  - {kind: schedule, cron: "0  2 * * *", timezone: Europe/Berlin, enabled: true}
"""


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


@pytest.fixture
def config_dir(tmp_path: Path) -> Path:
    return write(
        tmp_path / "office",
        {
            "office.yml": "workspace: {name: Routine Office}\n",
            "agents/coder.yml": "role: worker\n",
            "agents/lead.yml": "role: coordinator\n",
            "routines/nightly.yml": NIGHTLY_YML,
        },
    )


@pytest.fixture
def store(database: Database) -> Store:
    return Store.from_database(database)


def routine_named(store: Store, workspace_id: str, name: str) -> Routine:
    (routine,) = [r for r in store.routines.list_routines(workspace_id) if r.name == name]
    return routine


def triggers_of(store: Store, routine: Routine) -> dict[TriggerKind, RoutineTrigger]:
    triggers = store.routines.list_triggers(routine.id)
    by_kind = {trigger.kind: trigger for trigger in triggers}
    assert len(by_kind) == len(triggers)
    return by_kind


def actions(plan: ImportPlan) -> dict[tuple[str, str], tuple[Action, tuple[str, ...]]]:
    return {(c.kind, c.name): (c.action, c.fields) for c in plan.changes}


# -- loading ------------------------------------------------------------------------------


def test_load_a_routine_file(config_dir: Path) -> None:
    (nightly,) = load_config(config_dir).routines

    assert nightly == RoutineSpec(
        name="Nightly report",
        description="Summarise the day's work",
        assignee="coder",
        status=RoutineStatus.ACTIVE,
        concurrency_policy=ConcurrencyPolicy.COALESCE_IF_ACTIVE,
        catch_up_policy=CatchUpPolicy.ENQUEUE_MISSED_WITH_CAP,
        catch_up_max=25,
        task_template=TaskTemplate(
            title="Nightly report for {{date}}",
            description="Write the report for {{date}} about {{topic}} in {{tone}}",
        ),
        variables=(
            RoutineVariable(
                name="topic",
                type=VariableType.SELECT,
                default="sales",
                options=("sales", "support"),
            ),
            RoutineVariable(name="tone"),  # used by the template: declared as text
        ),
        triggers=(  # canonical order; the cron expression normalised
            TriggerSpec(kind=TriggerKind.SCHEDULE, cron="0 2 * * *", timezone="Europe/Berlin"),
            TriggerSpec(kind=TriggerKind.WEBHOOK, signing_mode=SigningMode.HMAC_SHA256),
            TriggerSpec(kind=TriggerKind.MANUAL),
        ),
    )


def test_always_create_is_read_as_always_enqueue(config_dir: Path) -> None:
    write(config_dir, {"routines/nightly.yml": "concurrency_policy: always_create\n"})

    (nightly,) = load_config(config_dir).routines

    assert nightly.concurrency_policy is ConcurrencyPolicy.ALWAYS_ENQUEUE


def test_routine_defaults(config_dir: Path) -> None:
    write(
        config_dir,
        {
            "routines/nightly.yml": "",
            "routines/ping.yml": """\
                triggers:
                  - {kind: schedule, cron: "*/5 * * * *"}
                  - {kind: webhook, enabled: false}
            """,
        },
    )

    nightly, ping = load_config(config_dir).routines

    assert nightly == RoutineSpec(name="nightly")  # the file's stem; lightweight
    assert ping.name == "ping"
    assert ping.assignee is None
    assert ping.triggers == (
        TriggerSpec(kind=TriggerKind.SCHEDULE, cron="*/5 * * * *", timezone="UTC"),
        TriggerSpec(kind=TriggerKind.WEBHOOK, enabled=False, signing_mode=SigningMode.HMAC_SHA256),
    )


NIGHTLY = "routines/nightly.yml"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "triggers: [{kind: schedule, cron: '0 2 * *'}]",
            "triggers[0].cron: '0 2 * *' has 4 fields; expected 5: "
            "minute hour day-of-month month day-of-week",
        ),
        (
            "triggers: [{kind: manual}, {kind: schedule, cron: '61 * * * *'}]",
            "triggers[1].cron: '61 * * * *': minute 61 is out of range 0-59",
        ),
        (
            "triggers: [{kind: schedule, cron: '@daily'}]",
            "triggers[0].cron: '@daily': descriptors such as @daily are not supported; "
            "write five fields, e.g. '0 0 * * *'",
        ),
        (
            "triggers: [{kind: schedule, cron: '0 2 * * *', timezone: Mars/Base}]",
            "triggers[0].timezone: 'Mars/Base' is not a known IANA time zone",
        ),
        (
            "triggers: [{kind: schedule}]",
            "triggers[0].cron: a schedule trigger needs a cron expression (a string)",
        ),
        (
            "triggers: [{kind: cron}]",
            "triggers[0].kind: must be one of schedule, webhook, manual",
        ),
        (
            "triggers: [{kind: schedule, cron: '* * * * *', signing_mode: none}]",
            "triggers[0].signing_mode: does not apply to a schedule trigger",
        ),
        (
            "triggers: [{kind: webhook, cron: '* * * * *'}]",
            "triggers[0].cron: does not apply to a webhook trigger",
        ),
        (
            "triggers: [{kind: webhook, signing_mode: md5}]",
            "triggers[0].signing_mode: must be one of none, bearer, hmac_sha256, github, slack",
        ),
        (
            "triggers: [{kind: manual, enabled: yes please}]",
            "triggers[0].enabled: must be true or false",
        ),
        ("triggers: [{kind: manual, colour: red}]", "triggers[0].colour: unknown key"),
        ("triggers: [manual]", "triggers[0]: must be a mapping"),
        ("triggers: {kind: manual}", "triggers: must be a list of triggers"),
        ("name: ''", "name: must not be empty"),
        ("name: 7", "name: must be a string"),
        ("status: asleep", "status: must be one of active, paused, archived"),
        (
            "concurrency_policy: queue",
            "concurrency_policy: must be one of coalesce_if_active, skip_if_active, always_enqueue",
        ),
        ("catch_up_max: 0", "catch_up_max: must be an integer in 1..1000"),
        ("task_template: {description: x}", "task_template.title: must be a string"),
        ("task_template: {title: '  '}", "task_template.title: must not be empty"),
        ("task_template: {title: t, owner: me}", "task_template: has unknown keys: ['owner']"),
        ("task_template: [t]", "task_template: must be an object or null"),
        ("variables: {topic: text}", "variables: must be a list of variable declarations"),
        (
            "variables: [{name: 1x}]",
            "variables[0].name: must be an identifier (letters, digits, _; at most 64)",
        ),
        ("variables: [{name: date}]", "variables[0].name: 'date' is a built-in variable"),
        (
            "variables: [{name: a}, {name: a}]",
            "variables[1].name: variable 'a' is declared twice",
        ),
        (
            "variables: [{name: topic, type: select}]",
            "variables[0].options: must list the choices of a select",
        ),
        (
            "variables: [{name: topic, type: select, options: [a, b], default: c}]",
            "variables[0].default: must be one of: a, b",
        ),
        (
            "variables: [{name: n, type: number, default: lots}]",
            "variables[0].default: must be a number",
        ),
        ("assignee: nobody", "assignee: agent 'nobody' is not defined in agents/"),
        ("owner: me", "owner: unknown key"),
        ("- a list", "must be a mapping"),
    ],
)
def test_invalid_routine_files_name_file_and_field(
    config_dir: Path, text: str, message: str
) -> None:
    write(config_dir, {NIGHTLY: text + "\n"})

    with pytest.raises(InvalidInputError) as caught:
        load_config(config_dir)

    assert str(caught.value) == f"{NIGHTLY}: {message}"
    field = message.split(": ")[0] if message != "must be a mapping" else ""
    assert caught.value.field == (f"{NIGHTLY}: {field}" if field else NIGHTLY)


def test_routine_names_are_unique_per_assignee(config_dir: Path) -> None:
    write(config_dir, {"routines/copy.yml": "name: Nightly report\nassignee: coder\n"})
    with pytest.raises(InvalidInputError) as caught:
        load_config(config_dir)
    assert str(caught.value) == (
        "routines/nightly.yml: name: routine 'Nightly report' for 'coder' is also defined in "
        "routines/copy.yml"
    )

    write(config_dir, {"routines/copy.yml": "name: Nightly report\nassignee: lead\n"})
    assert [r.assignee for r in load_config(config_dir).routines] == ["coder", "lead"]


# -- import -------------------------------------------------------------------------------


def test_plan_apply_reimport_and_update(store: Store, config_dir: Path, now: datetime) -> None:
    config = load_config(config_dir)

    plan = plan_import(store, config)
    assert actions(plan)[("routine", "Nightly report")] == (Action.CREATE, ())
    result = run_import(store, plan, now)
    workspace_id = result.workspace_id

    nightly = routine_named(store, workspace_id, "Nightly report")
    coder = store.office.find_agent_by_name(workspace_id, "coder")
    assert coder is not None
    assert nightly.assignee_agent_id == coder.id
    assert nightly.task_template == config.routines[0].task_template
    assert nightly.variables == config.routines[0].variables
    triggers = triggers_of(store, nightly)
    schedule = triggers[TriggerKind.SCHEDULE]
    assert (schedule.cron_expression, schedule.timezone) == ("0 2 * * *", "Europe/Berlin")
    assert schedule.next_run_at == parse_schedule("0 2 * * *", "Europe/Berlin").next_fire(now)
    webhook = triggers[TriggerKind.WEBHOOK]
    (hook,) = result.new_webhooks
    assert (hook.routine, hook.public_id) == ("Nightly report", webhook.public_id)
    assert hook.signing_mode is SigningMode.HMAC_SHA256
    assert hook.secret
    assert hook.path == f"/api/routine-triggers/{webhook.public_id}/fire"
    assert store.routines.webhook_trigger(hook.public_id) == (webhook, hook.secret)

    again = plan_import(store, config)
    assert not again.has_changes
    assert actions(again)[("routine", "Nightly report")] == (Action.UNCHANGED, ())
    assert run_import(store, again, now + timedelta(minutes=1)).new_webhooks == ()

    (spec,) = config.routines
    changed = replace(
        spec,
        description="Summarise the week",
        catch_up_policy=CatchUpPolicy.SKIP_MISSED,
        variables=(*spec.variables, RoutineVariable(name="pages", type=VariableType.NUMBER)),
        triggers=(
            TriggerSpec(kind=TriggerKind.SCHEDULE, cron="30 3 * * 1", timezone="UTC"),
            replace(spec.triggers[1], enabled=False),
            spec.triggers[2],
        ),
    )
    plan = plan_import(store, replace(config, routines=(changed,)))
    assert actions(plan)[("routine", "Nightly report")] == (
        Action.UPDATE,
        ("description", "catch_up_policy", "variables", "triggers"),
    )
    later = now + timedelta(hours=1)
    assert run_import(store, plan, later).new_webhooks == ()

    updated = store.routines.get_routine(nightly.id)
    assert updated.description == "Summarise the week"
    assert updated.catch_up_policy is CatchUpPolicy.SKIP_MISSED
    assert [v.name for v in updated.variables] == ["topic", "tone", "pages"]
    after = triggers_of(store, updated)
    assert after[TriggerKind.SCHEDULE].id != schedule.id  # replaced
    assert after[TriggerKind.SCHEDULE].cron_expression == "30 3 * * 1"
    assert after[TriggerKind.SCHEDULE].next_run_at == parse_schedule("30 3 * * 1").next_fire(later)
    assert after[TriggerKind.WEBHOOK].id == webhook.id  # kept, with its URL and secret
    assert after[TriggerKind.WEBHOOK].enabled is False
    assert store.routines.webhook_trigger(hook.public_id) == (
        after[TriggerKind.WEBHOOK],
        hook.secret,
    )
    assert after[TriggerKind.MANUAL].id == triggers[TriggerKind.MANUAL].id
    assert not plan_import(store, replace(config, routines=(changed,))).has_changes


def test_webhook_secret_survives_reimport_and_signing_changes_replace_it(
    store: Store, config_dir: Path, now: datetime
) -> None:
    first = run_import(store, plan_import(store, load_config(config_dir)), now)
    (hook,) = first.new_webhooks

    # The file read back from disk again (as a second `office import` would).
    second = run_import(store, plan_import(store, load_config(config_dir)), now)
    assert second.new_webhooks == ()
    found = store.routines.webhook_trigger(hook.public_id)
    assert found is not None
    assert found[1] == hook.secret

    write(
        config_dir,
        {NIGHTLY: NIGHTLY_YML.replace("signing_mode: hmac_sha256", "signing_mode: none")},
    )
    plan = plan_import(store, load_config(config_dir))
    assert actions(plan)[("routine", "Nightly report")] == (Action.UPDATE, ("triggers",))
    (unsigned,) = run_import(store, plan, now).new_webhooks
    assert unsigned.signing_mode is SigningMode.NONE
    assert unsigned.secret is None
    assert unsigned.public_id != hook.public_id
    assert store.routines.webhook_trigger(hook.public_id) is None


def test_the_coordinator_heartbeat_file_updates_the_installed_routine(
    store: Store, config_dir: Path, now: datetime
) -> None:
    write(
        config_dir,
        {
            "routines/heartbeat.yml": f"""\
                name: {HEARTBEAT_NAME}
                assignee: lead
                description: Check in every ten minutes.
                triggers: [{{kind: schedule, cron: "*/10 * * * *", timezone: UTC}}]
            """
        },
    )
    config = load_config(config_dir)

    plan = plan_import(store, config)
    assert actions(plan)[("routine", HEARTBEAT_NAME)] == (Action.CREATE, ())
    workspace_id = run_import(store, plan, now).workspace_id

    heartbeat = routine_named(store, workspace_id, HEARTBEAT_NAME)  # exactly one
    assert heartbeat.description == "Check in every ten minutes."
    (trigger,) = store.routines.list_triggers(heartbeat.id)
    assert trigger.cron_expression == "*/10 * * * *"
    assert not plan_import(store, config).has_changes


@pytest.mark.parametrize(
    ("agent", "role", "status"),
    [("lead", AgentRole.WORKER, "active"), ("coder", AgentRole.COORDINATOR, "paused")],
    ids=["demotion", "promotion"],
)
def test_an_import_changing_a_role_converges_with_the_heartbeat_file(
    store: Store, config_dir: Path, now: datetime, agent: str, role: AgentRole, status: str
) -> None:
    """Break-it: the role change paused (or resumed) the heartbeat the file lists, and every
    later plan flipped it back."""
    write(
        config_dir,
        {
            "routines/heartbeat.yml": f"""                name: {HEARTBEAT_NAME}
                assignee: {agent}
                status: {status}
                triggers: [{{kind: schedule, cron: "*/5 * * * *", timezone: UTC}}]
            """
        },
    )
    config = load_config(config_dir)
    workspace_id = run_import(store, plan_import(store, config), now).workspace_id
    changed = replace(
        config,
        agents=tuple(replace(a, role=role) if a.name == agent else a for a in config.agents),
    )

    run_import(store, plan_import(store, changed), now + timedelta(hours=1))

    heartbeats = [
        r
        for r in store.routines.list_routines(workspace_id)
        if r.name == HEARTBEAT_NAME and r.assignee_agent_id == _agent_id(store, workspace_id, agent)
    ]
    assert [r.status.value for r in heartbeats] == [status]
    assert not plan_import(store, changed).has_changes


def _agent_id(store: Store, workspace_id: str, name: str) -> str:
    [found] = [a.id for a in store.office.list_agents(workspace_id) if a.name == name]
    return found


def test_a_coordinator_without_a_heartbeat_file_keeps_the_installed_one(
    store: Store, config_dir: Path, now: datetime
) -> None:
    workspace_id = run_import(store, plan_import(store, load_config(config_dir)), now).workspace_id

    heartbeat = routine_named(store, workspace_id, HEARTBEAT_NAME)
    (trigger,) = store.routines.list_triggers(heartbeat.id)
    assert trigger.cron_expression == HEARTBEAT_CRON
    assert not plan_import(store, load_config(config_dir)).has_changes


def test_reactivating_or_enabling_reschedules_from_now(
    store: Store, config_dir: Path, now: datetime
) -> None:
    config = load_config(config_dir)
    (spec,) = config.routines
    paused = replace(
        spec,
        status=RoutineStatus.PAUSED,
        triggers=(replace(spec.triggers[0], enabled=False),),
    )
    workspace_id = run_import(
        store, plan_import(store, replace(config, routines=(paused,))), now
    ).workspace_id
    routine = routine_named(store, workspace_id, spec.name)
    (trigger,) = store.routines.list_triggers(routine.id)
    assert trigger.enabled is False

    later = now + timedelta(days=3)
    plan = plan_import(
        store, replace(config, routines=(replace(spec, triggers=spec.triggers[:1]),))
    )
    assert actions(plan)[("routine", spec.name)] == (Action.UPDATE, ("status", "triggers"))
    run_import(store, plan, later)

    assert store.routines.get_routine(routine.id).status is RoutineStatus.ACTIVE
    (trigger,) = store.routines.list_triggers(routine.id)
    assert trigger.enabled is True
    # No catch-up of the three nights it was paused: the next tick is after ``later``.
    assert trigger.next_run_at == parse_schedule("0 2 * * *", "Europe/Berlin").next_fire(later)


def test_import_leaves_routines_the_config_does_not_name(
    store: Store, config_dir: Path, now: datetime
) -> None:
    workspace_id = run_import(store, plan_import(store, load_config(config_dir)), now).workspace_id
    (config_dir / NIGHTLY).unlink()

    plan = plan_import(store, load_config(config_dir))

    assert not plan.has_changes
    run_import(store, plan, now)
    assert routine_named(store, workspace_id, "Nightly report").name == "Nightly report"


# -- export -------------------------------------------------------------------------------


def test_export_round_trip(store: Store, config_dir: Path, tmp_path: Path, now: datetime) -> None:
    original = load_config(config_dir)
    result = run_import(store, plan_import(store, original), now)
    (hook,) = result.new_webhooks

    exported = export_config(store, result.workspace_id, tmp_path / "exported")

    files = sorted(p.name for p in (exported / "routines").iterdir())
    assert files == ["coordinator-heartbeat.yml", "nightly-report.yml"]
    text = (exported / "routines" / "nightly-report.yml").read_text()
    assert hook.secret is not None
    assert hook.secret not in text
    assert f"#   triggers[1]: POST /api/routine-triggers/{hook.public_id}/fire" in text
    data = yaml.safe_load(text)
    assert data["assignee"] == "coder"
    assert data["triggers"][1] == {
        "kind": "webhook",
        "signing_mode": "hmac_sha256",
        "enabled": True,
    }
    reloaded = load_config(exported)
    heartbeat, nightly = reloaded.routines
    assert nightly == original.routines[0]
    assert (heartbeat.name, heartbeat.assignee) == (HEARTBEAT_NAME, "lead")
    plan = plan_import(store, reloaded)
    assert not plan.has_changes
    assert {action for action, _ in actions(plan).values()} == {Action.UNCHANGED}
    assert run_import(store, plan, now).new_webhooks == ()


def test_two_coordinators_each_keep_their_heartbeat(
    store: Store, config_dir: Path, tmp_path: Path, now: datetime
) -> None:
    write(config_dir, {"agents/boss.yml": "role: ceo\n"})
    workspace_id = run_import(store, plan_import(store, load_config(config_dir)), now).workspace_id

    exported = export_config(store, workspace_id, tmp_path / "exported")
    reloaded = load_config(exported)

    heartbeats = [r for r in reloaded.routines if r.name == HEARTBEAT_NAME]
    assert sorted(r.assignee or "" for r in heartbeats) == ["boss", "lead"]
    plan = plan_import(store, reloaded)
    assert not plan.has_changes
    assert {change.name for change in plan.changes if change.kind == "routine"} == {
        f"{HEARTBEAT_NAME} (boss)",
        f"{HEARTBEAT_NAME} (lead)",
        "Nightly report",
    }

    # Pausing one of them in its file updates that one only.
    boss_file = next(
        path
        for path in (exported / "routines").iterdir()
        if yaml.safe_load(path.read_text())["assignee"] == "boss"
    )
    boss_file.write_text(boss_file.read_text().replace("status: active", "status: paused"))
    plan = plan_import(store, load_config(exported))
    assert actions(plan)[("routine", f"{HEARTBEAT_NAME} (boss)")] == (Action.UPDATE, ("status",))
    assert actions(plan)[("routine", f"{HEARTBEAT_NAME} (lead)")] == (Action.UNCHANGED, ())
    run_import(store, plan, now)
    statuses = {
        r.assignee_agent_id: r.status
        for r in store.routines.list_routines(workspace_id)
        if r.name == HEARTBEAT_NAME
    }
    assert sorted(statuses.values()) == [RoutineStatus.ACTIVE, RoutineStatus.PAUSED]


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ('description: "nightly\\0report"', "description"),
        ('task_template: {title: "a\\0b"}', "task_template.title"),
        (
            'variables: [{name: topic, type: select, options: [a, "b\\0"]}]',
            "variables[0].options[1]",
        ),
    ],
)
def test_a_nul_character_is_refused_before_anything_is_written(
    config_dir: Path, text: str, path: str
) -> None:
    """Regression: a NUL in a routine file made a PostgreSQL import fail half-applied."""
    write(config_dir, {NIGHTLY: text + "\n"})

    with pytest.raises(InvalidInputError) as caught:
        load_config(config_dir)

    assert str(caught.value) == f"{NIGHTLY}: {path}: NUL characters are not allowed"


def test_the_import_plan_shows_triggers_as_fields_not_python_objects() -> None:
    from office_scheduler.files.review import _shown

    shown = _shown([TriggerSpec(kind=TriggerKind.SCHEDULE, cron="0 2 * * *", timezone="UTC")])
    assert (
        shown == '[{"kind": "schedule", "enabled": true, "cron": "0 2 * * *", "timezone": "UTC"}]'
    )
