"""How the CLI prints one record's fields (``office runs show`` and the like)."""

from __future__ import annotations

from office_scheduler.cli.state import details, table


def test_objects_print_as_json_not_as_python_reprs() -> None:
    """README walk: ``runs show`` printed ``{'status': 'ok'}`` for a result."""
    record = {
        "result": {"status": "ok", "summary": "done", "n": None},
        "labels": ["a", {"b": True}],
        "exit_code": 0,
        "error": None,
    }
    assert details(record, ["result", "labels", "exit_code", "error"]).splitlines() == [
        'result     {"n": null, "status": "ok", "summary": "done"}',
        'labels     a,{"b": true}',
        "exit_code  0",
        "error      -",
    ]


def test_a_table_cell_holding_an_object_is_json_too() -> None:
    text = table([{"payload": {"k": "v"}}], [("PAYLOAD", "payload")])
    assert '{"k": "v"}' in text
    assert "'k'" not in text
