"""Job states: every allowed and forbidden transition, exit outcomes, intents and edit actions."""
from __future__ import annotations

import itertools
import signal

import pytest

from rlsup.jobs import state as jobstate
from rlsup.run.exit import EXIT_ABORTED, EXIT_DONE, EXIT_ERROR, EXIT_NO_SPACE, EXIT_PAUSED, EXIT_SPEC, EXIT_WALL_TIME
from rlsup.jobs.state import Desired, Exit, State
from rlsup.views.colour import STATE_STYLES, paint_state

Q, ST, R, PG, SP = State.QUEUED, State.STARTING, State.RUNNING, State.PAUSING, State.STOPPING
P, D, F, K = State.PAUSED, State.DONE, State.FAILED, State.KILLED

# Written out independently of jobstate.TRANSITIONS, from DESIGN.md section 4.
EXPECTED = {
    Q: {ST, P, K},
    ST: {R, PG, SP, D, P, Q, F, K},
    R: {PG, SP, D, P, Q, F, K},
    SP: {PG, D, P, Q, F, K},
    PG: {D, P, Q, F, K},
    P: {Q, K},
    D: {Q, K},
    F: {Q, K},
    K: {Q},
}


@pytest.mark.parametrize("old,new", list(itertools.product(State, State)))
def test_every_pair_is_allowed_exactly_when_the_lifecycle_says(old, new):
    assert jobstate.allowed(old, new) == (new in EXPECTED[old])
    if new in EXPECTED[old]:
        jobstate.check(old, new)
    else:
        with pytest.raises(jobstate.TransitionError):
            jobstate.check(old, new)


def test_the_table_covers_every_state():
    assert set(jobstate.TRANSITIONS) == set(State)


def test_no_state_moves_to_itself():
    assert not any(jobstate.allowed(state, state) for state in State)


def reachable(start: State) -> set[State]:
    seen, frontier = {start}, [start]
    while frontier:
        for following in jobstate.TRANSITIONS[frontier.pop()]:
            if following not in seen:
                seen.add(following)
                frontier.append(following)
    return seen


def test_every_state_is_reachable_from_queued_and_leads_back_to_queued():
    assert reachable(Q) == set(State)
    for state in State:
        assert Q in reachable(state)


def test_any_state_can_be_killed():
    for state in set(State) - {K}:
        assert jobstate.allowed(state, K), state


def test_active_states_are_exactly_those_with_a_worker():
    assert jobstate.ACTIVE == {ST, R, PG, SP}
    assert not jobstate.ACTIVE & jobstate.RESTING


def test_the_designed_paths_are_allowed():
    for path in ([Q, ST, R, SP, D], [R, PG, P, Q], [D, Q], [R, Q, ST], [R, F], [Q, K], [K, Q]):
        for old, new in zip(path, path[1:]):
            assert jobstate.allowed(old, new), (old, new)


def test_forbidden_shortcuts():
    for old, new in ((Q, R), (P, R), (D, R), (P, ST), (K, P), (F, R), (Q, D), (D, P)):
        assert not jobstate.allowed(old, new), (old, new)


# ---------------------------------------------------------------------------------------------
# Worker exits


def outcome(ended: Exit, desired=Desired.RUNNING, *, total=1000, restarts=0, max_restarts=3, stopped=False):
    return jobstate.exit_outcome(ended, desired=desired, total_steps=total, restarts=restarts,
                                 max_restarts=max_restarts, stopped_by_daemon=stopped)


def test_exit_codes_are_the_worker_contract():
    # Written out from DESIGN.md section 6: every other module and test takes them from jobstate.
    assert (EXIT_DONE, EXIT_ERROR, EXIT_SPEC, EXIT_NO_SPACE, EXIT_PAUSED, EXIT_WALL_TIME, EXIT_ABORTED) == (
        0, 1, 2, 74, 75, 76, 130)


def test_exit_zero_at_the_budget_is_done():
    result = outcome(Exit(code=0, step=1000))
    assert result.state is D and not result.restart


def test_exit_zero_below_a_raised_budget_requeues():
    assert outcome(Exit(code=0, step=800), total=1000).state is Q


def test_exit_paused_follows_the_intent():
    assert outcome(Exit(code=EXIT_PAUSED, step=10), Desired.PAUSED).state is P
    # Paused by someone else (an edit needing a restart, a shutdown's SIGTERM): resume it.
    assert outcome(Exit(code=EXIT_PAUSED, step=10), Desired.RUNNING).state is Q


def test_a_pause_the_worker_holds_waits_for_a_client_and_is_never_resumed_by_the_daemon():
    ended = Exit(code=EXIT_PAUSED, step=500, reason="CUDA out of memory at 2 GiB on GPU 0", held=True)
    result = outcome(ended, Desired.RUNNING)
    assert (result.state, result.desired, result.restart) == (P, Desired.PAUSED, False)
    assert result.reason == "CUDA out of memory at 2 GiB on GPU 0; held until a client resumes it"
    assert outcome(ended, Desired.KILLED).state is K


def test_a_worker_that_died_of_our_pause_signal_counts_as_paused():
    result = outcome(Exit(signal=signal.SIGKILL), Desired.PAUSED, stopped=True)
    assert result.state is P and not result.restart
    assert outcome(Exit(signal=signal.SIGINT), Desired.RUNNING, stopped=True).state is Q


def test_kill_intent_wins_over_everything():
    for ended in (Exit(code=0, step=1000), Exit(code=EXIT_PAUSED), Exit(code=1), Exit(signal=9), Exit()):
        assert outcome(ended, Desired.KILLED).state is K


def test_crash_restarts_until_the_budget_then_fails():
    first = outcome(Exit(code=1), restarts=0, max_restarts=2)
    assert first.state is Q and first.restart and "restart 1 of 2" in first.reason
    last = outcome(Exit(signal=signal.SIGKILL), restarts=2, max_restarts=2)
    assert last.state is F and not last.restart
    assert "SIGKILL" in last.reason


def test_a_crash_says_the_workers_own_sentence_whether_it_restarts_or_not():
    sentence = "env 'my_envs/Walk-v0' raised in step: RuntimeError: no licence (its traceback is in worker.log)"
    for restarts in (0, 3):
        result = outcome(Exit(code=1, step=40, reason=sentence), restarts=restarts, max_restarts=3)
        assert result.reason.startswith(f"exit code 1: {sentence}; "), result.reason


def test_no_restarts_allowed_fails_at_once():
    result = outcome(Exit(signal=signal.SIGSEGV), max_restarts=0)
    assert result.state is F and "SIGSEGV" in result.reason


def test_a_worker_killed_by_a_fault_signal_says_where_its_stack_is_and_one_killed_by_hand_does_not():
    """The worker's faulthandler writes the Python stack at a segfault into worker.log (a user's native env)."""
    faulted = outcome(Exit(signal=signal.SIGSEGV), max_restarts=3).reason
    assert "killed by signal 11 (SIGSEGV); the Python stack at the fault is in worker.log" in faulted, faulted
    assert "worker.log" not in outcome(Exit(signal=signal.SIGKILL), max_restarts=3).reason


def test_spec_error_is_never_retried():
    result = outcome(Exit(code=2), restarts=0, max_restarts=10)
    assert result.state is F and not result.restart and "never retried" in result.reason


def test_a_refused_resume_fails_with_the_workers_own_reason_and_is_never_retried():
    reason = "run has 2 checkpoint(s) and none can be used: step-000000000010 (checksum mismatch in tensors.pt)"
    result = outcome(Exit(code=jobstate.EXIT_SPEC, reason=reason), restarts=0, max_restarts=10)
    assert result.state is F and not result.restart and reason in result.reason


def test_a_full_disk_pauses_with_its_reason_instead_of_burning_restarts():
    reason = "no space left on device: needed about 12.5 MB in /runs/x/checkpoints"
    for desired in (Desired.RUNNING, Desired.PAUSED):
        result = outcome(Exit(code=jobstate.EXIT_NO_SPACE, reason=reason), desired, restarts=0, max_restarts=3)
        assert result.state is P and not result.restart and reason in result.reason
        assert result.desired is Desired.PAUSED  # rests paused until a client resumes it


def test_a_used_up_wall_time_rests_paused_with_the_workers_sentence():
    reason = "paused at step 6973 with a checkpoint: the [job] max_wall_s of 2 s of training is used up (2.0 s)"
    for desired in (Desired.RUNNING, Desired.PAUSED):
        result = outcome(Exit(code=EXIT_WALL_TIME, step=6973, reason=reason), desired, stopped=True)
        assert result.state is P and not result.restart and result.reason == reason
        assert result.desired is Desired.PAUSED  # a standing "running" intent would start it only to pause again
    assert outcome(Exit(code=EXIT_WALL_TIME), Desired.KILLED).state is K


def test_unknown_exit_of_an_adopted_worker_is_a_crash():
    result = outcome(Exit(), restarts=0, max_restarts=1)
    assert result.state is Q and result.restart and "exit.json" in result.reason


def test_a_crash_while_pausing_rests_paused():
    assert outcome(Exit(code=1), Desired.PAUSED).state is P


def test_every_outcome_is_an_allowed_transition_from_every_active_state():
    exits = [Exit(code=code, step=step) for code in (EXIT_DONE, EXIT_ERROR, EXIT_SPEC, EXIT_NO_SPACE, EXIT_PAUSED, EXIT_WALL_TIME, EXIT_ABORTED, None) for step in (None, 10, 1000)]
    exits += [Exit(signal=number) for number in (2, 9, 15)]
    for ended, desired, stopped, active in itertools.product(exits, Desired, (False, True), jobstate.ACTIVE):
        result = outcome(ended, desired, stopped=stopped)
        assert jobstate.allowed(active, result.state), (ended, desired, active, result)


def test_backoff_doubles_and_is_capped():
    assert [jobstate.restart_backoff(n, 2.0) for n in range(4)] == [2.0, 4.0, 8.0, 16.0]
    assert jobstate.restart_backoff(20, 2.0, cap_s=60.0) == 60.0


# ---------------------------------------------------------------------------------------------
# Intents on jobs without a worker


@pytest.mark.parametrize("state,desired,new_intent,target", [
    (Q, Desired.PAUSED, True, P),
    (Q, Desired.KILLED, True, K),
    (Q, Desired.RUNNING, True, None),
    (P, Desired.RUNNING, True, Q),
    (P, Desired.RUNNING, False, Q),   # a pause nobody asked for still resumes
    (P, Desired.KILLED, True, K),
    (P, Desired.PAUSED, True, None),
    (F, Desired.RUNNING, True, Q),
    (F, Desired.RUNNING, False, None),  # the intent it failed with does not restart it
    (K, Desired.RUNNING, True, Q),
    (K, Desired.KILLED, False, None),
    (D, Desired.RUNNING, True, None),   # a done job runs again only when its budget is raised
    (D, Desired.KILLED, True, K),
    (D, Desired.PAUSED, True, None),
])
def test_intent_targets(state, desired, new_intent, target):
    assert jobstate.intent_target(state, desired, new_intent=new_intent) == target
    if target is not None:
        assert jobstate.allowed(state, target)


# Written out independently of jobstate, as the TUI refused intents before it asked jobstate.
INTENT_STATES = {
    Desired.PAUSED: {Q, ST, R, SP},
    Desired.RUNNING: {P, F, K},
    Desired.KILLED: set(State) - {K},
}


@pytest.mark.parametrize("state,desired", list(itertools.product(State, Desired)))
def test_an_intent_applies_exactly_in_its_states(state, desired):
    assert jobstate.intent_applies(state, desired) == (state in INTENT_STATES[desired])


def test_each_intent_has_one_verb_and_one_refusal():
    assert {desired.verb for desired in Desired} == {"pause", "resume", "kill"}
    for desired in Desired:
        assert jobstate.NOTHING_TO_DO[desired]


# ---------------------------------------------------------------------------------------------
# Edits


@pytest.mark.parametrize("state,live_only,total,reached,action", [
    (R, True, 2000, 500, jobstate.EditAction.RELOAD),
    (ST, True, 2000, 0, jobstate.EditAction.RELOAD),
    (SP, True, 2000, 1000, jobstate.EditAction.RELOAD),
    (R, False, 2000, 500, jobstate.EditAction.RESTART),
    (D, True, 2000, 1000, jobstate.EditAction.REQUEUE),
    (D, True, 1000, 1000, jobstate.EditAction.NOTHING),
    (D, True, 800, 1000, jobstate.EditAction.NOTHING),
    (P, False, 2000, 500, jobstate.EditAction.NOTHING),
    (Q, True, 2000, 0, jobstate.EditAction.NOTHING),
    (PG, True, 2000, 500, jobstate.EditAction.NOTHING),
    (F, True, 2000, 500, jobstate.EditAction.NOTHING),
])
def test_edit_actions(state, live_only, total, reached, action):
    assert jobstate.edit_action(state, live_only=live_only, total_steps=total, step_reached=reached) == action


def test_a_repeated_fault_says_once_that_it_is_not_retried():
    """It read "...would repeat: not retried again (never retried)"; and it was retried, once."""
    reason = "ValueError: x; the same fault at step 40 as the run's previous worker, which a restart from the " \
             f"same checkpoint would repeat: {jobstate.NOT_RETRIED_AGAIN}"
    result = outcome(Exit(code=jobstate.EXIT_SPEC, reason=reason), restarts=1, max_restarts=10)
    assert result.state is F and result.reason.endswith("would repeat: not retried again"), result.reason
    assert "never retried" not in result.reason


def test_a_state_says_what_is_wanted_only_when_it_differs():
    """`done (wants running)` read as if the done job were still to run."""
    assert jobstate.unmet_desire(State.DONE, jobstate.Desired.RUNNING) is None
    assert jobstate.unmet_desire(State.RUNNING, jobstate.Desired.RUNNING) is None
    assert jobstate.unmet_desire(State.PAUSED, jobstate.Desired.PAUSED) is None
    assert jobstate.unmet_desire(State.KILLED, jobstate.Desired.KILLED) is None
    assert jobstate.unmet_desire(State.RUNNING, jobstate.Desired.PAUSED) is jobstate.Desired.PAUSED
    assert jobstate.unmet_desire(State.PAUSED, jobstate.Desired.RUNNING) is jobstate.Desired.RUNNING
    assert jobstate.unmet_desire(State.DONE, jobstate.Desired.KILLED) is None  # nothing left to kill


def test_each_of_the_nine_states_has_one_colour_keyed_by_the_state_itself():
    # Keyed by strings, a tenth state or a renamed one went uncoloured without a word (issue 25, fact 10).
    assert len(STATE_STYLES) == len(State) == 9 and all(type(key) is State for key in STATE_STYLES)
    assert paint_state("failed", State.FAILED, True) == "\x1b[1;31mfailed\x1b[0m"
