"""The TaskStore contract, the same tests for every store: owners, transitions, terminal
immutability, TTL, leases, pagination, input, watches and waits."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.redis_server import RedisServer, running_redis
from support.task_stores import NEEDS_REDIS, FakeClock, StoreMaker
from support.waiting import WAIT, wait_event

from mcp_sync.tasks import TaskAlreadyTerminal, TaskNotFound, TaskRecord, TaskStore
from mcp_sync.tasks._common import LEASE_EXPIRED_MESSAGE, MAX_PAGE_SIZE, MAX_TTL_MS

StoreFactory = Callable[..., TaskStore]

KINDS = ["memory", "sqlite", pytest.param("redis", marks=NEEDS_REDIS)]


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    with running_redis() as server:
        yield server


@pytest.fixture(params=KINDS)
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreMaker]:
    url = request.getfixturevalue("redis_server").url if request.param == "redis" else None
    maker = StoreMaker(request.param, tmp_path, url)
    yield maker
    maker.close_all()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(store_factory: StoreFactory, clock: FakeClock) -> TaskStore:
    return store_factory(clock=clock)


def test_create_then_get_shows_the_same_working_task(store: TaskStore, clock: FakeClock) -> None:
    made = store.create(owner="alice", ttl_ms=60_000, poll_interval_ms=500, meta={"tool": "t"})
    assert made.status == "working" and made.version == 1 and not made.terminal
    assert made.created_at == made.updated_at == clock()
    assert (made.ttl_ms, made.poll_interval_ms, dict(made.meta)) == (60_000, 500, {"tool": "t"})
    assert len(made.task_id) >= 22  # 128 bits or more, url-safe base64
    assert store.get(made.task_id, owner="alice") == made


def test_ids_are_unique(store: TaskStore) -> None:
    ids = {store.create(owner="a", ttl_ms=1000).task_id for _ in range(200)}
    assert len(ids) == 200


def test_another_owners_task_looks_unknown(store: TaskStore) -> None:
    task = store.create(owner="alice", ttl_ms=60_000)
    with pytest.raises(TaskNotFound):
        store.get(task.task_id, owner="bob")
    with pytest.raises(TaskNotFound):
        store.cancel(task.task_id, owner="bob")
    with pytest.raises(TaskNotFound):
        store.answer_input(task.task_id, owner="bob", responses={"x": 1})
    with pytest.raises(TaskNotFound):
        store.wait_changed(task.task_id, owner="bob", after_version=0, timeout=0)
    assert store.list(owner="bob") == ([], None)
    with pytest.raises(TaskNotFound):
        store.get("no-such-task", owner="alice")
    assert store.get(task.task_id, owner="alice").status == "working"  # untouched by bob


def test_ttl_is_capped_and_none_means_the_maximum(store: TaskStore) -> None:
    assert store.create(owner="a", ttl_ms=None).ttl_ms == MAX_TTL_MS
    assert store.create(owner="a", ttl_ms=MAX_TTL_MS * 10).ttl_ms == MAX_TTL_MS


def test_a_task_past_its_ttl_is_gone(store: TaskStore, clock: FakeClock) -> None:
    # TTLs of a minute and more on the injected clock: Redis also expires the key in real
    # time, which a busy machine must not reach during the test
    short = store.create(owner="a", ttl_ms=60_000)
    long = store.create(owner="a", ttl_ms=600_000)
    clock.advance(59.999)
    assert store.get(short.task_id, owner="a").task_id == short.task_id
    clock.advance(0.002)
    with pytest.raises(TaskNotFound):
        store.get(short.task_id, owner="a")
    with pytest.raises(TaskNotFound):
        store.cancel(short.task_id, owner="a")
    with pytest.raises(TaskNotFound):
        store.finish(short.task_id, "completed", {"result": {}})
    assert [r.task_id for r in store.list(owner="a")[0]] == [long.task_id]
    clock.advance(600)
    assert store.purge_expired() >= 1
    assert store.list(owner="a") == ([], None)


def test_purge_expired_counts_what_went(store: TaskStore, clock: FakeClock) -> None:
    for _ in range(3):
        store.create(owner="a", ttl_ms=60_000)
    keep = store.create(owner="a", ttl_ms=600_000)
    assert store.purge_expired() == 0
    clock.advance(61)
    assert store.purge_expired() == 3
    assert store.purge_expired() == 0
    assert store.get(keep.task_id, owner="a").status == "working"


def test_cancel_makes_it_cancelled_once_and_for_all(store: TaskStore) -> None:
    task = store.create(owner="a", ttl_ms=60_000)
    cancelled = store.cancel(task.task_id, owner="a", message="no longer needed")
    assert (cancelled.status, cancelled.status_message) == ("cancelled", "no longer needed")
    assert cancelled.terminal and cancelled.version == task.version + 1
    with pytest.raises(TaskAlreadyTerminal) as info:
        store.cancel(task.task_id, owner="a")
    assert info.value.record == cancelled
    assert store.finish(task.task_id, "completed", {"result": {"content": []}}) is False
    after = store.set_status(task.task_id, "working", message="resumed")
    assert after == cancelled
    assert store.answer_input(task.task_id, owner="a", responses={"k": 1}) == cancelled
    assert store.get(task.task_id, owner="a") == cancelled


@pytest.mark.parametrize("status", ["completed", "failed"])
def test_finish_wins_once_and_the_outcome_stays(store: TaskStore, status: Any) -> None:
    task = store.create(owner="a", ttl_ms=60_000, worker="w1", lease_seconds=30)
    outcome = {"result": {"content": [{"type": "text", "text": "ok"}]}}
    assert store.finish(task.task_id, status, outcome, message="done") is True
    done = store.get(task.task_id, owner="a")
    assert (done.status, dict(done.outcome or {}), done.status_message) == (status, outcome, "done")
    assert done.worker is None and done.lease_expires_at is None
    assert store.finish(task.task_id, "failed", {"error": {"code": 1, "message": "x"}}) is False
    with pytest.raises(TaskAlreadyTerminal):
        store.cancel(task.task_id, owner="a")
    assert store.get(task.task_id, owner="a") == done


def test_records_are_snapshots_that_share_nothing_with_the_store(store: TaskStore) -> None:
    meta: dict[str, Any] = {"tool": "t", "args": {"n": 1}}
    task = store.create(owner="a", ttl_ms=60_000, meta=meta)
    meta["args"]["n"] = 2  # the caller's dict, changed after the call
    asked = store.set_status(task.task_id, "input_required", input_requests={"q": {"m": [1]}})
    asked.input_requests["q"]["m"].append(2)  # type: ignore[index]
    outcome: dict[str, Any] = {"result": {"content": [{"type": "text", "text": "ok"}]}}
    assert store.finish(task.task_id, "completed", outcome) is True
    outcome["result"]["content"].clear()
    got = store.get(task.task_id, owner="a")
    got.outcome["result"]["extra"] = True  # type: ignore[index]
    got.meta["args"]["n"] = 3
    again = store.get(task.task_id, owner="a")
    assert dict(again.meta) == {"tool": "t", "args": {"n": 1}}
    assert dict(again.outcome or {}) == {"result": {"content": [{"type": "text", "text": "ok"}]}}


def test_values_that_are_not_json_are_refused_and_change_nothing(store: TaskStore) -> None:
    with pytest.raises(TypeError):
        store.create(owner="a", ttl_ms=60_000, meta={"x": object()})
    assert store.list(owner="a") == ([], None)
    task = store.create(owner="a", ttl_ms=60_000)
    with pytest.raises(TypeError):
        store.finish(task.task_id, "completed", {"result": {"value": object()}})
    with pytest.raises(TypeError):
        store.set_status(task.task_id, "input_required", input_requests={"q": {1, 2}})
    assert store.get(task.task_id, owner="a") == task  # still working, version 1


def test_server_side_methods_raise_for_an_unknown_task(store: TaskStore) -> None:
    with pytest.raises(TaskNotFound):
        store.set_status("nope", "working")
    with pytest.raises(TaskNotFound):
        store.finish("nope", "completed", {"result": {}})
    assert store.renew_lease("nope", worker="w", lease_seconds=1) is False


def test_bad_transitions_are_refused(store: TaskStore) -> None:
    task = store.create(owner="a", ttl_ms=60_000)
    with pytest.raises(ValueError):
        store.set_status(task.task_id, "completed")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        store.finish(task.task_id, "cancelled", {})  # type: ignore[arg-type]
    assert store.get(task.task_id, owner="a").version == 1


def test_input_round_trip(store: TaskStore) -> None:
    task = store.create(owner="a", ttl_ms=60_000)
    asking = store.set_status(
        task.task_id,
        "input_required",
        message="need a name",
        input_requests={"q1": {"m": 1}, "q2": {}},
    )
    assert asking.status == "input_required" and dict(asking.input_requests or {}).keys() == {
        "q1",
        "q2",
    }
    answered = store.answer_input(task.task_id, owner="a", responses={"q1": "yes", "zz": "ignored"})
    assert dict(answered.input_responses or {}) == {"q1": "yes"}
    again = store.answer_input(task.task_id, owner="a", responses={"q1": "changed my mind"})
    assert dict(again.input_responses or {}) == {"q1": "yes"}  # an answered key stays answered
    both = store.answer_input(task.task_id, owner="a", responses={"q2": 2})
    assert dict(both.input_responses or {}) == {"q1": "yes", "q2": 2}
    resumed = store.set_status(task.task_id, "working", taken_responses=["q1", "q2"])
    assert resumed.status == "working"
    assert resumed.input_responses is None and resumed.input_requests is None
    kept = store.set_status(task.task_id, "working", message="still going")
    assert kept.status_message == "still going" and kept.version == resumed.version + 1


def test_responses_stay_until_taken(store: TaskStore) -> None:
    task = store.create(owner="a", ttl_ms=60_000)
    store.set_status(task.task_id, "input_required", input_requests={"q": {}})
    store.answer_input(task.task_id, owner="a", responses={"q": 1})
    still = store.set_status(task.task_id, "input_required", input_requests={"q": {}})
    assert dict(still.input_responses or {}) == {"q": 1}


def test_taking_some_answers_keeps_the_others(store: TaskStore) -> None:
    task = store.create(owner="a", ttl_ms=60_000)
    store.set_status(task.task_id, "input_required", input_requests={"q1": {}, "q2": {}})
    store.answer_input(task.task_id, owner="a", responses={"q1": 1})
    store.answer_input(task.task_id, owner="a", responses={"q2": 2})  # after q1 was read
    left = store.set_status(
        task.task_id, "input_required", input_requests={"q2": {}}, taken_responses=["q1"]
    )
    assert dict(left.input_responses or {}) == {"q2": 2}
    assert dict(left.input_requests or {}) == {"q2": {}}
    done = store.set_status(task.task_id, "working", taken_responses=["q2"])
    assert done.input_responses is None and done.input_requests is None


def test_list_is_newest_first_in_pages(store: TaskStore, clock: FakeClock) -> None:
    made = []
    for _ in range(7):
        made.append(store.create(owner="a", ttl_ms=60_000).task_id)
        clock.advance(0.5)
    store.create(owner="b", ttl_ms=60_000)
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        page, cursor = store.list(owner="a", cursor=cursor, limit=3)
        pages += 1
        assert len(page) <= 3
        seen += [r.task_id for r in page]
        if cursor is None:
            break
    assert seen == made[::-1] and pages == 3


def test_list_of_tasks_created_at_the_same_instant_misses_none(store: TaskStore) -> None:
    made = [store.create(owner="a", ttl_ms=60_000).task_id for _ in range(5)]  # clock stands still
    first, cursor = store.list(owner="a", limit=2)
    second, cursor2 = store.list(owner="a", cursor=cursor, limit=10)
    assert [r.task_id for r in first + second] == made[::-1] and cursor2 is None


def test_list_page_size_is_bounded(store: TaskStore) -> None:
    for _ in range(MAX_PAGE_SIZE + 5):
        store.create(owner="a", ttl_ms=60_000)
    page, cursor = store.list(owner="a", limit=10_000)
    assert len(page) == MAX_PAGE_SIZE and cursor is not None
    rest, end = store.list(owner="a", cursor=cursor, limit=10_000)
    assert len(rest) == 5 and end is None


@pytest.mark.parametrize("cursor", ["", "garbage", "bm90IGpzb24", "WyJ4IiwxXQ", "!!!"])
def test_a_cursor_the_store_did_not_give_is_refused(store: TaskStore, cursor: str) -> None:
    store.create(owner="a", ttl_ms=60_000)
    with pytest.raises(ValueError):
        store.list(owner="a", cursor=cursor)


def test_a_lease_that_runs_out_fails_the_task(store: TaskStore, clock: FakeClock) -> None:
    task = store.create(owner="a", ttl_ms=600_000, worker="w1", lease_seconds=10)
    assert task.worker == "w1" and task.lease_expires_at == clock() + 10
    clock.advance(9)
    assert store.renew_lease(task.task_id, worker="w1", lease_seconds=10) is True
    assert store.renew_lease(task.task_id, worker="someone-else", lease_seconds=10) is False
    clock.advance(9)
    assert store.get(task.task_id, owner="a").status == "working"  # renewed: 19 < 9 + 10
    clock.advance(1.5)
    failed = store.get(task.task_id, owner="a")
    assert failed.status == "failed" and failed.status_message == LEASE_EXPIRED_MESSAGE
    assert dict(failed.outcome or {})["error"]["message"] == LEASE_EXPIRED_MESSAGE
    assert store.renew_lease(task.task_id, worker="w1", lease_seconds=10) is False
    assert store.finish(task.task_id, "completed", {"result": {}}) is False  # too late
    with pytest.raises(TaskAlreadyTerminal):
        store.cancel(task.task_id, owner="a")


@pytest.mark.parametrize("first", ["cancel", "list", "set_status", "answer_input"])
def test_every_access_notices_a_dead_lease(store: TaskStore, clock: FakeClock, first: str) -> None:
    task = store.create(owner="a", ttl_ms=600_000, worker="w1", lease_seconds=1)
    clock.advance(2)
    if first == "cancel":
        with pytest.raises(TaskAlreadyTerminal) as info:
            store.cancel(task.task_id, owner="a")
        assert info.value.record.status == "failed"
    elif first == "list":
        assert [r.status for r in store.list(owner="a")[0]] == ["failed"]
    elif first == "set_status":
        assert store.set_status(task.task_id, "working").status == "failed"
    else:
        assert store.answer_input(task.task_id, owner="a", responses={}).status == "failed"
    assert store.get(task.task_id, owner="a").status == "failed"


def test_a_task_without_a_lease_never_fails_by_itself(store: TaskStore, clock: FakeClock) -> None:
    task = store.create(owner="a", ttl_ms=None)
    clock.advance(86_400)
    assert store.get(task.task_id, owner="a").status == "working"


class Seen:
    def __init__(self) -> None:
        self.records: list[TaskRecord] = []
        self.lock = threading.Lock()
        self.event = threading.Event()

    def __call__(self, record: TaskRecord) -> None:
        with self.lock:
            self.records.append(record)
        self.event.set()

    def wait_for(self, predicate: Callable[[TaskRecord], bool], what: str) -> TaskRecord:
        while True:
            with self.lock:
                for record in self.records:
                    if predicate(record):
                        return record
                self.event.clear()
            wait_event(self.event, what)


def test_watch_sees_each_change_until_stopped(store: TaskStore) -> None:
    task = store.create(owner="a", ttl_ms=60_000)
    seen = Seen()
    stop = store.watch(task.task_id, seen)
    store.set_status(task.task_id, "input_required", input_requests={"q": {}})
    store.answer_input(task.task_id, owner="a", responses={"q": 1})
    store.cancel(task.task_id, owner="a")
    last = seen.wait_for(lambda r: r.status == "cancelled", "the cancel")
    assert last.version == 4
    with seen.lock:
        assert [r.version for r in seen.records] == [2, 3, 4]
    stop()
    stop()  # idempotent
    other = store.create(owner="a", ttl_ms=60_000)
    seen2 = Seen()
    stop2 = store.watch(other.task_id, seen2)
    store.finish(other.task_id, "completed", {"result": {}})
    seen2.wait_for(lambda r: r.status == "completed", "the completion")
    stop2()
    with seen.lock:
        assert [r.version for r in seen.records] == [2, 3, 4]  # nothing after stop()


def test_a_change_made_while_watch_registers_is_still_reported(
    store: TaskStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A change landing between watch()'s read of the version and the registration of the
    callback (another thread's or process's cancel) is reported, not lost. (White box: the
    change is made from inside the read.)"""
    other = store.create(owner="a", ttl_ms=60_000)
    stop_other = store.watch(other.task_id, Seen())  # the poll thread or listener is running
    task = store.create(owner="a", ttl_ms=60_000)
    read = store._read  # type: ignore[attr-defined]
    fired: list[TaskRecord | None] = []

    def read_then_cancel(task_id: str) -> TaskRecord | None:
        record: TaskRecord | None = read(task_id)
        if not fired:
            fired.append(None)  # first: cancel() reads the task too
            fired[0] = store.cancel(task_id, owner="a")
        return record

    monkeypatch.setattr(store, "_read", read_then_cancel)
    seen = Seen()
    stop = store.watch(task.task_id, seen)
    monkeypatch.undo()
    assert fired and fired[0] is not None and fired[0].status == "cancelled"
    seen.wait_for(lambda r: r.status == "cancelled", "the cancel made during watch()")
    stop()
    stop_other()
    with seen.lock:
        assert [r.version for r in seen.records] == [2]  # reported once


def test_a_watch_callback_may_call_the_store(store: TaskStore) -> None:
    task = store.create(owner="a", ttl_ms=60_000)
    got: list[TaskRecord] = []
    done = threading.Event()

    def callback(record: TaskRecord) -> None:  # runs outside the store's lock
        got.append(store.get(record.task_id, owner="a"))
        done.set()

    stop = store.watch(task.task_id, callback)
    store.cancel(task.task_id, owner="a")
    wait_event(done, "the callback")
    stop()
    assert got[0].status == "cancelled"


def test_a_raising_callback_does_not_stop_the_others(store: TaskStore) -> None:
    task = store.create(owner="a", ttl_ms=60_000)

    def broken(record: TaskRecord) -> None:
        raise RuntimeError("boom")

    seen = Seen()
    stops = [store.watch(task.task_id, broken), store.watch(task.task_id, seen)]
    assert store.cancel(task.task_id, owner="a").status == "cancelled"
    seen.wait_for(lambda r: r.status == "cancelled", "the cancel")
    for stop in stops:
        stop()


def test_wait_changed_returns_at_once_when_already_newer(store: TaskStore) -> None:
    task = store.create(owner="a", ttl_ms=60_000)
    store.set_status(task.task_id, "working", message="m")
    assert store.wait_changed(task.task_id, owner="a", after_version=1, timeout=None).version == 2


def test_wait_changed_times_out_with_the_record_as_it_is(store: TaskStore) -> None:
    task = store.create(owner="a", ttl_ms=60_000)
    assert store.wait_changed(task.task_id, owner="a", after_version=1, timeout=0) == task
    assert store.wait_changed(task.task_id, owner="a", after_version=1, timeout=0.05) == task


def test_wait_changed_wakes_on_a_change_from_another_thread(store: TaskStore) -> None:
    task = store.create(owner="a", ttl_ms=60_000)
    result: list[TaskRecord] = []
    waiting = threading.Thread(
        target=lambda: result.append(
            store.wait_changed(task.task_id, owner="a", after_version=1, timeout=WAIT)
        )
    )
    waiting.start()
    store.cancel(task.task_id, owner="a")
    waiting.join(WAIT + 1)
    assert not waiting.is_alive()
    assert result[0].status == "cancelled"


def test_wait_changed_on_a_terminal_task_returns_at_once(store: TaskStore) -> None:
    task = store.create(owner="a", ttl_ms=60_000)
    store.finish(task.task_id, "completed", {"result": {}})
    got = store.wait_changed(task.task_id, owner="a", after_version=99, timeout=None)
    assert got.status == "completed"


def test_wait_changed_notices_a_dead_lease(store: TaskStore, clock: FakeClock) -> None:
    task = store.create(owner="a", ttl_ms=600_000, worker="w", lease_seconds=5)
    clock.advance(6)  # nobody reads: the waiter's own re-read finds it
    got = store.wait_changed(task.task_id, owner="a", after_version=1, timeout=WAIT)
    assert got.status == "failed"


def test_a_closed_store_refuses_work(store_factory: StoreFactory) -> None:
    store = store_factory()
    task = store.create(owner="a", ttl_ms=60_000)
    store.close()
    store.close()  # idempotent
    with pytest.raises(RuntimeError):
        store.get(task.task_id, owner="a")
