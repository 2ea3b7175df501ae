"""Job states, the transitions between them, and what a worker's exit means (pure, no I/O)."""
from __future__ import annotations

import enum
from dataclasses import dataclass

from rlsup.run.exit import (EXIT_DONE, EXIT_HELD, EXIT_NO_SPACE, EXIT_PAUSED, EXIT_SPEC, EXIT_WALL_TIME,
                            NOT_RETRIED_AGAIN)
from rlsup.run.fault_stacks import signal_name, stack_note


class State(str, enum.Enum):
    """What the daemon knows a job to be doing; only the daemon writes it."""

    QUEUED = "queued"        # waiting for a slot (or for its restart backoff to pass)
    STARTING = "starting"    # worker spawned, not yet reporting
    RUNNING = "running"      # worker reports status
    PAUSING = "pausing"      # SIGINT sent, waiting for the pause checkpoint
    STOPPING = "stopping"    # budget reached, worker writing its final checkpoint
    PAUSED = "paused"        # stopped after a checkpoint; resume re-queues it
    DONE = "done"            # budget reached, final checkpoint written
    FAILED = "failed"        # crashed past max_restarts, or a spec error
    KILLED = "killed"        # stopped on request without a checkpoint

    def __str__(self) -> str:
        return self.value


class Desired(str, enum.Enum):
    """What a client asked for; only clients write it."""

    RUNNING = "running"
    PAUSED = "paused"
    KILLED = "killed"

    def __str__(self) -> str:
        return self.value

    @property
    def verb(self) -> str:
        """The word a user says for this intent: `rlsup pause|resume|kill`, the TUI's actions, the events."""
        return INTENT_VERBS[self]

    @property
    def request(self) -> str:
        """The event a client's intent is recorded by ("kill requested"): what tells a user's pause from a hold's."""
        return f"{self.verb} requested"


INTENT_VERBS = {Desired.PAUSED: "pause", Desired.RUNNING: "resume", Desired.KILLED: "kill"}


# States in which a worker process may exist.
ACTIVE = frozenset({State.STARTING, State.RUNNING, State.PAUSING, State.STOPPING})
# States a job rests in until a client or an edit moves it.
RESTING = frozenset({State.PAUSED, State.DONE, State.FAILED, State.KILLED})

# How a worker's exit may end an active state (crash restarts go back to QUEUED).
_EXIT_TARGETS = frozenset({State.DONE, State.PAUSED, State.QUEUED, State.FAILED, State.KILLED})

TRANSITIONS: dict[State, frozenset[State]] = {
    State.QUEUED: frozenset({State.STARTING, State.PAUSED, State.KILLED}),
    State.STARTING: frozenset({State.RUNNING, State.PAUSING, State.STOPPING}) | _EXIT_TARGETS,
    State.RUNNING: frozenset({State.PAUSING, State.STOPPING}) | _EXIT_TARGETS,
    State.STOPPING: frozenset({State.PAUSING}) | _EXIT_TARGETS,
    State.PAUSING: _EXIT_TARGETS,
    State.PAUSED: frozenset({State.QUEUED, State.KILLED}),
    # done -> queued when an edit raises total_steps above the step reached
    State.DONE: frozenset({State.QUEUED, State.KILLED}),
    # failed / killed -> queued when a client asks to resume
    State.FAILED: frozenset({State.QUEUED, State.KILLED}),
    State.KILLED: frozenset({State.QUEUED}),
}


class TransitionError(ValueError):
    """A state change the lifecycle does not allow."""


def allowed(old: State, new: State) -> bool:
    return State(new) in TRANSITIONS[State(old)]


def check(old: State, new: State) -> None:
    if not allowed(old, new):
        raise TransitionError(f"a job cannot go from {State(old)} to {State(new)}")


# ---------------------------------------------------------------------------------------------
# What a worker's exit means (its codes are the worker contract's: run/exit.py)


@dataclass(frozen=True)
class Exit:
    """How a worker ended: an exit code, a signal, or unknown (an adopted process left no exit.json)."""

    code: int | None = None
    signal: int | None = None
    step: int | None = None
    reason: str | None = None  # the worker's own sentence, from exit.json
    held: bool = False         # exit.json's: a pause the worker decided, held until a client resumes it

    def describe(self) -> str:
        if self.signal is not None:
            return f"killed by signal {self.signal} ({signal_name(self.signal)}){stack_note(self.signal)}"
        if self.code is None:  # a runner that lost the worker says why in reason
            return self.reason or "exited without an exit status (no exit.json)"
        return f"exit code {self.code}"


@dataclass(frozen=True)
class Outcome:
    """Where a job goes after its worker ended, and why."""

    state: State
    reason: str
    restart: bool = False  # a crash restart: count it and wait for the backoff
    # The intent the job must now rest with: a pause the daemon decided (a full disk) holds until a
    # client resumes it, instead of the standing "running" intent re-queueing it at once.
    desired: Desired | None = None


def exit_outcome(ended: Exit, *, desired: Desired, total_steps: int, restarts: int,
                 max_restarts: int, stopped_by_daemon: bool = False) -> Outcome:
    """Decide the next state from a worker's exit, the client's intent and the restart budget."""
    desired = Desired(desired)
    if desired is Desired.KILLED:
        return Outcome(State.KILLED, "killed on request")
    if ended.code == EXIT_NO_SPACE:
        return Outcome(State.PAUSED, f"{ended.reason or 'no space left on device'}; free some space, then resume",
                       desired=Desired.PAUSED)
    if ended.code == EXIT_PAUSED and ended.held:
        return Outcome(State.PAUSED, f"{ended.reason or 'paused by its worker'}; held until a client resumes it",
                       desired=Desired.PAUSED)
    if ended.code == EXIT_WALL_TIME:
        return Outcome(State.PAUSED, ended.reason or "paused: [job] max_wall_s used up", desired=Desired.PAUSED)
    if ended.code == EXIT_HELD:  # its experiment's scheduler resumes it, or a client does
        return Outcome(State.PAUSED, f"{ended.reason or 'reached its hold'}; waits for the scheduler's decision",
                       desired=Desired.PAUSED)
    if ended.code == EXIT_DONE:
        if ended.step is not None and ended.step < total_steps:
            # total_steps was raised while the worker was finishing: carry on.
            return Outcome(State.QUEUED, f"total_steps raised to {total_steps} at step {ended.step}")
        return Outcome(State.DONE, f"budget reached at step {ended.step if ended.step is not None else '?'}")
    if ended.code == EXIT_PAUSED or stopped_by_daemon:
        # stopped_by_daemon: it was told to pause, then died of that signal or of the SIGKILL
        # sent after stop_grace_s; it resumes from its previous checkpoint.
        how = ("paused with a checkpoint" if ended.code == EXIT_PAUSED else
               f"stopped before its pause checkpoint ({ended.describe()}); resumes from the previous one")
        if desired is Desired.PAUSED:
            return Outcome(State.PAUSED, how)
        # A pause nobody asked for (an edit needing a restart, a shutdown's SIGTERM): resume it.
        return Outcome(State.QUEUED, f"{how}; resuming")
    if desired is Desired.PAUSED:
        return Outcome(State.PAUSED, f"{ended.describe()} while pausing; resumes from the previous checkpoint")
    if ended.code == EXIT_SPEC:
        reason = ended.reason or "spec or usage error"
        # A fault repeated after a restart says itself that it is not retried again: once is enough.
        return Outcome(State.FAILED, f"{ended.describe()}: {reason}"
                                     + ("" if reason.endswith(NOT_RETRIED_AGAIN) else " (never retried)"))
    crash = f"{ended.describe()}: {ended.reason}" if ended.reason and ended.code is not None else ended.describe()
    if restarts < max_restarts:
        return Outcome(State.QUEUED, f"{crash}; restart {restarts + 1} of {max_restarts} "
                                     "from the newest verified checkpoint", restart=True)
    return Outcome(State.FAILED, f"{crash}; no restarts left (max_restarts = {max_restarts})")


def restart_backoff(restarts: int, base_s: float, cap_s: float = 60.0) -> float:
    """Seconds to wait before restart number restarts + 1: base, 2 base, 4 base ... capped."""
    return min(cap_s, base_s * (2 ** max(0, restarts)))


# ---------------------------------------------------------------------------------------------
# What a client's intent asks of a job that is not running a worker


def intent_target(state: State, desired: Desired, *, new_intent: bool) -> State | None:
    """The state a resting or queued job moves to for an intent, or None to leave it.

    new_intent is True when the client wrote this intent after the job reached its state: a
    failed or killed job is re-queued only by a fresh resume, not by the intent it died with.
    """
    state, desired = State(state), Desired(desired)
    if desired is Desired.KILLED:
        return State.KILLED if state in (State.QUEUED, State.PAUSED) or (
            state in (State.DONE, State.FAILED) and new_intent) else None
    if desired is Desired.PAUSED:
        return State.PAUSED if state is State.QUEUED else None
    if state is State.PAUSED:
        return State.QUEUED
    if state in (State.FAILED, State.KILLED) and new_intent:
        return State.QUEUED
    return None


# The states in which each intent has nothing left to ask: a done job wanting "running" has run.
_MET_BY = {Desired.RUNNING: ACTIVE | {State.QUEUED, State.DONE, State.FAILED},
           Desired.PAUSED: {State.PAUSED, State.PAUSING, State.DONE, State.FAILED, State.KILLED},
           Desired.KILLED: {State.KILLED, State.DONE, State.FAILED}}


def unmet_desire(state: State, desired: Desired) -> Desired | None:
    """What a client asked that the job's state does not show yet (status says "(wants paused)"); None when met.

    Printed always, it read "done (wants running)", as if the done job were still to run."""
    return None if State(state) in _MET_BY[Desired(desired)] else Desired(desired)


# What each intent tells a user who asks it of a job it cannot act on.
NOTHING_TO_DO = {Desired.PAUSED: "nothing to pause", Desired.RUNNING: "nothing to resume",
                 Desired.KILLED: "already killed"}

# The state an intent moves a live worker's job toward; resuming a job whose worker lives asks nothing.
_ACTIVE_TARGETS = {Desired.PAUSED: State.PAUSING, Desired.KILLED: State.KILLED, Desired.RUNNING: None}


def intent_applies(state: State, desired: Desired) -> bool:
    """Whether a fresh intent has anything to do for a job in this state (clients refuse the others).

    Pause: queued or a live worker not already pausing; resume: paused, failed or killed (a done job
    runs again when an edit raises its budget); kill: anything not killed yet.
    """
    state, desired = State(state), Desired(desired)
    if state in ACTIVE:
        target = _ACTIVE_TARGETS[desired]
        return target is not None and allowed(state, target)
    return intent_target(state, desired, new_intent=True) is not None


# ---------------------------------------------------------------------------------------------
# What an accepted edit of the job file asks of the job (DESIGN.md section 5)

class EditAction(str, enum.Enum):
    """What an accepted edit needs besides the new job.toml."""

    NOTHING = "nothing"    # job.toml is updated; the next start reads it
    RELOAD = "reload"      # SIGHUP: the worker applies live fields at its next step
    RESTART = "restart"    # pause then resume, so the worker starts with the new spec
    REQUEUE = "requeue"    # a done job whose budget was raised runs again

    def __str__(self) -> str:
        return self.value


def edit_action(state: State, *, live_only: bool, total_steps: int, step_reached: int) -> EditAction:
    """The action an accepted edit needs, given the job's state."""
    state = State(state)
    if state in (State.STARTING, State.RUNNING, State.STOPPING):
        return EditAction.RELOAD if live_only else EditAction.RESTART
    if state is State.DONE and total_steps > step_reached:
        return EditAction.REQUEUE
    return EditAction.NOTHING
