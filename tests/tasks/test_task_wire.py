"""The 2026-07-28 detailed task as tasks/get shows it, from one store record (no threads)."""

from __future__ import annotations

from mcp_sync.server.tasks_wire import detailed_task
from mcp_sync.tasks import TaskRecord


def record(**changes: object) -> TaskRecord:
    fields: dict[str, object] = {
        "task_id": "t1",
        "owner": "o",
        "status": "input_required",
        "created_at": 1.0,
        "updated_at": 2.0,
        "ttl_ms": 60_000,
    }
    fields.update(changes)
    return TaskRecord(**fields)  # type: ignore[arg-type]


def test_an_answered_key_is_no_longer_shown_before_the_handler_takes_it() -> None:
    """tasks/update with a subset of the keys: the task stays input_required and shows only
    the unanswered one at once, while the answer waits for the handler in the store."""
    asked = {
        "elicit-1": {"method": "elicitation/create", "params": {"message": "a?"}},
        "elicit-2": {"method": "elicitation/create", "params": {"message": "b?"}},
    }
    answered = {"elicit-1": {"action": "accept", "content": {"a": 1}}}
    task = detailed_task(record(input_requests=asked, input_responses=answered))
    assert task["status"] == "input_required"
    assert task["inputRequests"] == {"elicit-2": asked["elicit-2"]}


def test_every_key_is_shown_while_none_is_answered() -> None:
    asked = {"elicit-1": {"method": "elicitation/create", "params": {"message": "a?"}}}
    assert detailed_task(record(input_requests=asked))["inputRequests"] == asked
