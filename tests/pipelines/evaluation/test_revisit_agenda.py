"""The simulated crawl's agenda: earliest due first, rescheduling replaces, probes by value."""

from __future__ import annotations

from frontierflow.pipelines.evaluation.revisit_agenda import RevisitAgenda


def test_scheduled_pages_come_earliest_due_first_and_a_new_due_time_replaces_the_old() -> None:
    agenda = RevisitAgenda()
    agenda.schedule_due("a", 30)
    agenda.schedule_due("b", 10)
    agenda.schedule_due("a", 5)  # a is now due at 5, not 30
    assert agenda.pop_due() == "a"
    assert agenda.pop_due() == "b"
    assert agenda.pop_due() is None  # a's stale entry at 30 is dropped


def test_a_page_is_either_scheduled_or_waiting_for_a_probe() -> None:
    agenda = RevisitAgenda()
    agenda.schedule_due("a", 10)
    agenda.schedule_probe("a", 20)
    assert agenda.pop_due() is None
    assert agenda.next_probe(19, lambda url: 1.0) is None  # not yet due
    assert agenda.next_probe(20, lambda url: 1.0) == "a"
    assert agenda.next_probe(20, lambda url: 1.0) is None


def test_of_the_probes_due_the_most_valuable_goes_first_then_the_earliest() -> None:
    agenda = RevisitAgenda()
    value = {"a": 0.5, "b": 2.0, "c": 0.5, "d": 9.0}
    agenda.schedule_probe("a", 1)
    agenda.schedule_probe("b", 3)
    agenda.schedule_probe("c", 2)
    agenda.schedule_probe("d", 100)  # the most valuable, but not due by 50
    order = [agenda.next_probe(50, value.__getitem__) for _ in range(4)]
    assert order == ["b", "a", "c", None]


def test_clear_forgets_every_due_time() -> None:
    agenda = RevisitAgenda()
    agenda.schedule_due("a", 1)
    agenda.schedule_probe("b", 1)
    agenda.clear()
    assert agenda.pop_due() is None
    assert agenda.next_probe(10, lambda url: 1.0) is None
