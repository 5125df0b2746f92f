"""What agents reported they used (domain/usage.py), and the hard stop at a run's max cost or tokens
(domain/run.py: exhaust_usage): counted once per generation, None kept apart from 0, clamped, decided once."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from docket.domain import events as ev
from docket.domain import run
from docket.domain.config import Config
from docket.domain.kernel.errors import BadInput
from docket.domain.usage import Usage, by_generation, by_task, reached, run_usage
from docket.domain.kernel.values import MAX_SAFE_INT, format_cost, parse_cost, parse_tokens

from .builders import COMMIT, T0, Book, at


@dataclass(frozen=True)
class Report:
    """A report of a generation's use so far, as AgentReported (and a later progress report) carries it."""

    worker_id: str
    generation: int
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_micro_usd: int | None = None
    run_id: str = "r1"


def agent_reported(worker_id: str, generation: int, *, input_tokens=None, output_tokens=None, cost=None,
                   run_id: str = "r1") -> ev.AgentReported:
    return ev.AgentReported(stream=f"worker:{worker_id}", version=5, recorded_at=T0, run_id=run_id,
                            worker_id=worker_id, generation=generation, agent="claude", format="claude-json",
                            session_id=None, input_tokens=input_tokens, output_tokens=output_tokens,
                            cost_micro_usd=cost, turns=None, is_error=None)


# --- a generation's use, a run's, a task's ---------------------------------------------------------------------------


def test_reports_of_one_generation_count_the_largest_of_each_metric_never_their_sum():
    reports = [Report("w1", 1, 100, 10, 5_000), Report("w1", 1, 300, 5, None), Report("w1", 1, None, None, 7_000)]
    assert by_generation(reports) == {("w1", 1): Usage(300, 10, 7_000)}
    assert run_usage(reports, "r1") == Usage(300, 10, 7_000)
    assert run_usage([*reports, *reports], "r1") == Usage(300, 10, 7_000)  # a report repeated is not counted again


def test_a_run_sums_its_generations_and_ignores_other_runs():
    reports = [Report("w1", 1, 100, 10, 1_000), Report("w1", 2, 200, 20, 2_000), Report("w2", 1, 1, 1, 1),
               Report("w9", 1, 10**6, 10**6, 10**9, run_id="other")]
    assert run_usage(reports, "r1") == Usage(301, 31, 3_001)
    assert run_usage(reports, "other") == Usage(10**6, 10**6, 10**9)
    assert by_task(reports, {"w1": "t1", "w2": "t2", "w9": "t9"}, "r1") == {"t1": Usage(300, 30, 3_000),
                                                                              "t2": Usage(1, 1, 1)}
    assert by_task(reports, {"w1": "t1", "w2": None}, "r1") == {"t1": Usage(300, 30, 3_000)}


def test_a_metric_nobody_reported_stays_none_and_counts_as_zero_against_a_limit():
    nothing = run_usage([Report("w1", 1)], "r1")
    assert nothing == Usage() and not nothing.reported and nothing.tokens is None
    cost_only = run_usage([Report("w1", 1, cost_micro_usd=10)], "r1")
    assert cost_only.reported and cost_only.tokens is None and cost_only.input_tokens is None
    assert reached(cost_only, None, 1) is None  # no tokens reported: 0 tokens, below a limit of 1
    assert run_usage([Report("w1", 1, input_tokens=5)], "r1").tokens == 5  # output unknown: counted as 0
    assert run_usage([], "r1") == Usage()


def test_figures_are_clamped_to_the_largest_safe_integer():
    huge = [Report(f"w{n}", 1, MAX_SAFE_INT, MAX_SAFE_INT, MAX_SAFE_INT) for n in range(3)]
    total = run_usage(huge, "r1")
    assert total == Usage(MAX_SAFE_INT, MAX_SAFE_INT, MAX_SAFE_INT) and total.tokens == MAX_SAFE_INT
    assert run_usage([Report("w1", 1, -5, 2**80, None)], "r1") == Usage(0, MAX_SAFE_INT, None)
    assert reached(total, MAX_SAFE_INT, None) == ("cost", MAX_SAFE_INT, MAX_SAFE_INT)


def test_reached_names_the_first_limit_reached_cost_before_tokens():
    use = Usage(600, 400, 2_500_000)
    assert reached(use, None, None) is None
    assert reached(use, 2_500_001, 1_001) is None  # below both
    assert reached(use, 2_500_000, None) == ("cost", 2_500_000, 2_500_000)  # reaching it is enough
    assert reached(use, None, 1_000) == ("tokens", 1_000, 1_000)
    assert reached(use, 1, 1) == ("cost", 1, 2_500_000)
    assert reached(use, 10**9, 999) == ("tokens", 999, 1_000)


def test_agent_reported_events_are_read_as_reports():
    reports = [agent_reported("w1", 1, input_tokens=10, output_tokens=2, cost=300),
               agent_reported("w1", 2, input_tokens=None, output_tokens=None, cost=None)]
    assert run_usage(reports, "r1") == Usage(10, 2, 300)


# --- the hard stop: RunUsageExhausted, decided once ------------------------------------------------------------------


def limited_run(book: Book, *, max_cost=None, max_tokens=None, pending: bool = False):
    events = run.open_run("r1", "i1", "goal", "main", None, "/repo/.git", T0, max_cost_micro_usd=max_cost,
                          max_tokens=max_tokens)
    assert isinstance(events[0], ev.RunOpenedV2)
    assert (events[0].max_cost_micro_usd, events[0].max_tokens) == (max_cost, max_tokens)
    r = book.apply(run.apply, None, events)
    if not pending:
        r = book.apply(run.apply, r, run.record_base_pin(r, "i1", T0, commit=COMMIT))
    return r


def test_a_run_below_its_limits_goes_on():
    r = limited_run(Book(), max_cost=2_500_000, max_tokens=1_000)
    assert (r.max_cost_micro_usd, r.max_tokens) == (2_500_000, 1_000)
    assert run.exhaust_usage(r, Usage(500, 499, 2_499_999), at(1)) == []
    assert run.exhaust_usage(r, Usage(), at(1)) == []


def test_a_run_without_limits_never_stops_for_its_use():
    r = limited_run(Book())
    assert run.exhaust_usage(r, Usage(MAX_SAFE_INT, MAX_SAFE_INT, MAX_SAFE_INT), at(1)) == []


@pytest.mark.parametrize(("use", "limit", "maximum", "used"), [
    (Usage(10, 10, 3_000_000), "cost", 2_500_000, 3_000_000),
    (Usage(600, 400, 0), "tokens", 1_000, 1_000),
    (Usage(None, 1_000, None), "tokens", 1_000, 1_000),
])
def test_reaching_a_limit_ends_the_run_budget_limited_once(use, limit, maximum, used):
    book = Book()
    r = limited_run(book, max_cost=2_500_000, max_tokens=1_000)
    (exhausted,) = run.exhaust_usage(r, use, at(5))
    assert isinstance(exhausted, ev.RunUsageExhausted)
    assert (exhausted.limit, exhausted.max, exhausted.used) == (limit, maximum, used)
    assert (exhausted.stream, exhausted.version) == ("run:r1", r.version + 1)
    r = book.apply(run.apply, r, exhausted)
    assert r.status == "budget-limited" and r.limited_by == limit
    assert run.exhaust_usage(r, use, at(6)) == []  # recorded once: a second decision finds the run closed


def test_a_paused_run_is_stopped_too_and_its_pending_intents_are_cancelled():
    book = Book()
    r = limited_run(book, max_tokens=10, pending=True)
    assert run.exhaust_usage(r, Usage(100, 0, 0), at(1)) == []  # opening: its base is not pinned, it never ran
    r = book.apply(run.apply, r, run.record_base_pin(r, "i1", T0, commit=COMMIT))
    r = book.apply(run.apply, r, run.pause(r, None, at(1)))
    events = run.exhaust_usage(r, Usage(100, 0, 0), at(2))
    assert [type(e) for e in events] == [ev.RunUsageExhausted]
    r = book.apply(run.apply, r, events)
    assert r.status == "budget-limited"


def test_pending_intents_are_cancelled_as_with_the_time_budget():
    r = limited_run(Book(), max_cost=1)
    r = replace(r, pending_intents=frozenset({"b", "a"}))
    events = run.exhaust_usage(r, Usage(cost_micro_usd=1), at(1))
    assert [type(e) for e in events] == [ev.RunUsageExhausted, ev.IntentCancelled, ev.IntentCancelled]
    assert [e.intent_id for e in events[1:]] == ["a", "b"]
    assert [e.version for e in events] == [r.version + 1, r.version + 2, r.version + 3]


def test_a_run_opened_before_usage_limits_still_loads_without_them():
    legacy = ev.RunOpened(stream="run:r1", version=1, recorded_at=T0, run_id="r1", goal="g", target_branch="main",
                          budget_ms=60_000)
    assert ev.event_class("RunOpened.v1") is ev.RunOpened and ev.event_class("RunOpened.v2") is ev.RunOpenedV2
    r = run.apply(None, legacy, 2)
    assert (r.budget_ms, r.max_cost_micro_usd, r.max_tokens, r.limits_usage) == (60_000, None, None, False)
    assert run.exhaust_usage(r, Usage(MAX_SAFE_INT, 0, MAX_SAFE_INT), at(1)) == []


# --- the settings ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("given", "micro"), [(2.5, 2_500_000), ("2.50", 2_500_000), ("$2.50", 2_500_000),
                                             (3, 3_000_000), (0.0042, 4_200), ("0.000001", 1), (1e-05, 10)])
def test_a_cost_is_read_as_micro_usd(given, micro):
    assert parse_cost(given) == micro


@pytest.mark.parametrize("given", [0, 0.0, -1, "-1", "abc", "1.0000001", float("nan"), float("inf"), True, None,
                                   "1e3", 10**12, ""])
def test_a_bad_cost_is_refused(given):
    with pytest.raises(BadInput) as e:
        parse_cost(given)
    assert e.value.code == "bad-cost"


def test_costs_are_shown_in_dollars():
    assert [format_cost(n) for n in (2_500_000, 4_200, 3_000_000, 1)] == ["$2.50", "$0.0042", "$3.00", "$0.000001"]


@pytest.mark.parametrize("given", [0, -3, 1.5, "1.5", "many", True, MAX_SAFE_INT + 1])
def test_a_bad_token_count_is_refused(given):
    with pytest.raises(BadInput) as e:
        parse_tokens(given)
    assert e.value.code == "bad-count"


def test_run_section_takes_max_cost_and_max_tokens():
    run_config = Config.model_validate({"run": {"max_cost": 2.5, "max_tokens": 2_000_000}}).run
    assert (run_config.max_cost_micro_usd, run_config.max_tokens) == (2_500_000, 2_000_000)
    assert Config.model_validate({"run": {"max_cost": "0.75"}}).run.max_cost_micro_usd == 750_000
    assert Config.model_validate({}).run.max_cost_micro_usd is None


@pytest.mark.parametrize(("key", "value", "says"), [("max_cost", -1, "amount of US dollars"),
                                                    ("max_cost", "lots", "amount of US dollars"),
                                                    ("max_tokens", 0, "more than zero"),
                                                    ("max_tokens", 2.5, "number of tokens")])
def test_a_bad_limit_in_docket_toml_is_a_config_error_naming_it(key, value, says):
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as e:
        Config.model_validate({"run": {key: value}})
    assert f"run.{key}" in str(e.value) and says in str(e.value)
