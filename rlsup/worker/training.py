"""The job process: a run directory in, training with pause, live edits and an exit contract out."""
from __future__ import annotations

import errno
import logging
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import NoReturn

from rlsup import formatting, locks, own_files, paths
from rlsup.run import foreground, import_trust, metrics
from rlsup.run.log import setup_logging
from rlsup.run import files as runfiles
from rlsup.worker import gpu_memory
from rlsup.worker import tensorboard as tensorboard_log
from rlsup import spec as specs
from rlsup.spec import registry
from rlsup.algos.contract import Trainer
from rlsup.algos.device import UsageError, configure_torch, make_cuda_deterministic, select_device
from rlsup.checkpoint.manifest import BEST, CheckpointProblem, NoSpace
from rlsup.checkpoint.trajectory import Trajectory
from rlsup.run.holds import Hold, Standing, read_hold
from rlsup.run.exit import (EXIT_ABORTED, EXIT_DONE, EXIT_ERROR, EXIT_HELD, EXIT_NO_SPACE, EXIT_PAUSED, EXIT_SPEC,
                            EXIT_WALL_TIME, NOT_RETRIED_AGAIN, ExitRecord, clear_exit, leave_now, read_exit,
                            write_exit)
from rlsup.worker.progress import FILE_ONLY, LoopClock, ProgressLine, TrainingTime, tell_outcome
from rlsup.run.spec_watch import RunSpecWatch
from rlsup.run.status import Phase, WorkerStatus, write_worker_status
from rlsup.run.signals import Aborted, Signals

log = logging.getLogger("rlsup.worker")


def build_trainer(spec: specs.JobSpec, device) -> Trainer:
    """The trainer of [job] algo at step 0, built by its registry entry."""
    try:
        algorithm = registry.get(spec.job.algo)
    except registry.UnknownAlgorithm as error:
        raise UsageError(f"[job] algo {error}") from None
    return algorithm.build_trainer(spec, device)


class TrainingRun:
    """One run of one job in this process, from its newest verified checkpoint to budget or pause."""

    def __init__(self, run_dir: Path, *, foreground: bool = False, from_scratch: bool = False,
                 trust_imports: bool = False):
        # The process: what it was asked, what it holds, and what it listens to.
        self.run_dir = Path(run_dir)
        self.foreground = foreground
        self.from_scratch = from_scratch
        self.trust_imports = trust_imports  # `rlsup run --resume --trust-imports`: the user vouches for the run
        self.signals = Signals(kill_marker=self.run_dir / paths.KILL_MARKER)
        # Live edits without a signal: the daemon rewrites job.toml, the status tick notices (SIGHUP or not).
        self.spec_watch = RunSpecWatch(self.run_dir)
        self.spec: specs.JobSpec | None = None
        self.trainer: Trainer | None = None
        self.run_lock: int | None = None  # held until the process ends: one worker per run
        self.registration: Path | None = None  # a foreground run's entry in RLSUP_HOME, for `rlsup list`
        self.previous_exit: ExitRecord | None = None  # exit.json of the run's previous worker, read before clearing it
        # The trajectory: its bookkeeping as of the checkpoint it resumed from (each checkpoint writes it on, in
        # its manifest's extra), the wall time trained, and the checkpoints this process started from and wrote.
        self.trajectory = Trajectory()
        self.training_time = TrainingTime()  # a resume starts from its checkpoint's figure
        self.choice = None   # the checkpoint to resume from, and the newer ones refused
        self.resumed_at: int | None = None      # the step training started from (a checkpoint's, or 0)
        self.last_checkpoint: str | None = None
        self.last_checkpoint_step: int | None = None
        # The outputs: metrics.jsonl, TensorBoard, the terminal's progress line, and what status.json tells.
        self.metrics: runfiles.MetricsWriter | None = None
        self.tensorboard = tensorboard_log.TensorBoardLog(self.run_dir)
        self.progress = ProgressLine(enabled=foreground and sys.stderr.isatty())
        self.notice: str | None = None  # what a user must hear about the resume (status.json carries it)
        # Each requested feature this worker had to switch off, in a sentence: the daemon makes each an event.
        self.switched_off: list[str] = []
        self.held = False  # a pause that waits for a client (a CUDA out of memory), not for the daemon
        self.last_evaluation: tuple[int, float] | None = None  # (step, mean) of this process's latest
        self.standing: Standing | None = None  # measured at the experiment scheduler's hold (hold.json)

    # -- lifecycle ---------------------------------------------------------------------------

    def run(self) -> int:
        self.signals.install()
        try:
            self.run_lock = locks.acquire(self.run_dir / paths.WORKER_LOCK)
        except (locks.LockHeld, OSError) as error:
            # Not a word into the run's files: they belong to the worker that holds the lock.
            print(f"rlsup: {busy_message(self.run_dir, error)}", file=sys.stderr)
            return EXIT_SPEC
        try:
            code, reason = self._work()
            self.signals.abort_raises = False  # inside the try: an abort arriving just before is caught
        except Aborted as error:
            code, reason = EXIT_ABORTED, f"aborted by a {error}; the last complete checkpoint is kept"
        return self._finish(code, reason)

    def _work(self) -> tuple[int, str]:
        """Set up and train; every way it can end becomes an exit code and one sentence."""
        try:
            setup_logging(self.run_dir, self.foreground)
            runfiles.check_own_files(self.run_dir)
            self.previous_exit = read_exit(self.run_dir)
            clear_exit(self.run_dir)
            self.spec = runfiles.read_run_spec(self.run_dir)
            self._use_imports()  # before anything imports the env's modules
            if self.foreground:
                self._register()
            if self.from_scratch:  # under the run's lock, so no other worker sees its checkpoints vanish
                for moved in runfiles.discard_history(self.run_dir):
                    log.info("starting from scratch: moved %s aside (nothing deleted)", moved.name)
            configure_torch(self.spec)
            self.trainer = self._start()
            return self._train()
        except NoSpace as error:
            return EXIT_NO_SPACE, str(error)
        except (specs.SpecError, UsageError, CheckpointProblem, own_files.NotOwnFile) as error:
            return EXIT_SPEC, str(error)
        except OSError as error:
            if error.errno in (errno.ENOSPC, errno.EDQUOT):
                return EXIT_NO_SPACE, f"no space left on device: cannot write {error.filename or self.run_dir}"
            return self._crashed(error)
        except Exception as error:
            return self._out_of_memory() if gpu_memory.is_out_of_memory(error) else self._crashed(error)

    def _use_imports(self) -> None:
        """The run's import paths, by the trust rule (run/import_trust.py), here and in the processes it starts."""
        added, left_out = import_trust.use_import_paths(self.run_dir, trust=self.trust_imports)
        import_trust.hand_down(self.run_dir, added)
        if left_out:
            log.warning("%s", left_out)
        if import_trust.leave_run(self.run_dir):
            log.info("working in %s, not in the run: its children would import from their cwd", os.getcwd())

    def _out_of_memory(self) -> tuple[int, str]:
        """A CUDA out of memory: a pause held until a client resumes, since another start beside the same jobs
        would hit it again. Not a checkpoint of this state, which may be half an update: the newest one stays."""
        log.exception("CUDA out of memory", extra=FILE_ONLY)
        self.held = True
        sentence = gpu_memory.out_of_memory_sentence(self.trainer, self.trainer and self.trainer.device)
        return EXIT_PAUSED, f"{sentence}; it resumes from its checkpoint at step {self.last_checkpoint_step or 0:,}"

    def _crashed(self, error: Exception) -> tuple[int, str]:
        """A crash: logged with its traceback; the daemon restarts from the newest checkpoint."""
        log.exception("worker crashed", extra=FILE_ONLY)
        # An env's fault is a sentence of its own (EnvFault says where its traceback is), and so is a child's
        # death by a fault signal.
        if isinstance(error, formatting.Sentence):
            reason = formatting.one_line(str(error))
        else:
            reason = f"{type(error).__name__}: {formatting.one_line(str(error))} (its traceback is in worker.log)"
        return self._repeated(reason) or (EXIT_ERROR, reason)

    def _repeated(self, reason: str) -> tuple[int, str] | None:
        """A crash the previous worker of this run had too, at the same step and in the same words: it resumed
        bit for bit to the same fault, which every restart would repeat, so it stops as a job that cannot run
        as it is (exit 2, never retried)."""
        previous = self.previous_exit
        if self.trainer is None or self.resumed_at is None or self.trainer.step <= self.resumed_at:
            return None  # no step trained since the start: a resource that is short now may not be later
        step = self.trainer.step
        if previous is None or (previous.code, previous.step, previous.reason) != (EXIT_ERROR, step, reason):
            return None
        return EXIT_SPEC, (f"{reason}; the same fault at step {step:,} as the run's previous worker, which a "
                           "restart from the same checkpoint would repeat: " + NOT_RETRIED_AGAIN)

    def _start(self) -> Trainer:
        from rlsup.algos.envs.training import EnvError
        from rlsup.algos.memory import check_replays_fit
        from rlsup.checkpoint.choose import NoUsableCheckpoint, require_usable

        # Refuse a run that cannot resume before anything is built: nothing of it may change.
        try:
            self.choice = require_usable(self.run_dir)
        except NoUsableCheckpoint as error:
            raise UsageError(f"{error}. Nothing was changed; to train this run again from step 0, with these "
                             f"checkpoints moved aside: rlsup run --resume {self.run_dir} --from-scratch") from None
        device = select_device(self.spec.job.device)
        if device.type == "cpu" and self.spec.job.device == "auto" and self.spec.job.gpus:
            self._switch_off(f"[job] gpus = {self.spec.job.gpus} but torch sees no GPU (CUDA_VISIBLE_DEVICES="
                             f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r}): training on the CPU")
        make_cuda_deterministic(device)
        try:
            check_replays_fit(self.spec)
            trainer = build_trainer(self.spec, device)
            # An env whose state cannot be captured must fail now, not at the first checkpoint hours in.
            trainer.state_dict(include_replay=False)
        except (EnvError, MemoryError) as error:
            raise UsageError(str(error) or "out of memory while building the trainer") from None
        self._restore(trainer)
        self.resumed_at = trainer.step
        self.metrics = runfiles.MetricsWriter(self.run_dir)
        log.info("training %s on %s from step %d to %d (pid %d%s)", self.spec.job.name, device,
                 trainer.step, self.spec.job.total_steps, os.getpid(), gpus_given())
        return trainer

    def _restore(self, trainer: Trainer) -> None:
        """Continue from the newest checkpoint that verifies, or a fork's parent's (worker/resume.py)."""
        from rlsup.worker.resume import restore

        self.notice = self.choice.skipped_message()  # status.json says so even if the older one fails to load
        start = restore(self.run_dir, self.choice, trainer)
        self.notice, self.trajectory = start.notice, start.trajectory
        self.last_checkpoint, self.last_checkpoint_step = start.checkpoint, start.checkpoint_step
        self.training_time = TrainingTime(start.trajectory.training_wall_s)
        self.tensorboard.resume_at(start.trajectory.tensorboard_events)

    def _finish(self, code: int, reason: str) -> int:
        """Say how the run ended, record it (exit.json last) and let go of what it holds; returns the code."""
        self.progress.clear()
        tell_outcome(code, reason, self.run_dir, foreground=self.foreground)
        step = self.trainer.step if self.trainer is not None else 0
        try:
            phases = {EXIT_DONE: Phase.DONE, EXIT_PAUSED: Phase.PAUSED, EXIT_WALL_TIME: Phase.PAUSED,
                      EXIT_HELD: Phase.PAUSED}
            self._write_status(phases.get(code, Phase.FAILED))
            # Checked at the last moment: a second interrupt up to here still makes the record say so.
            if self.signals.abort_requested and code != EXIT_ABORTED:
                code, reason = EXIT_ABORTED, f"{reason}; then a second interrupt: stopped at once"
                tell_outcome(code, reason, self.run_dir, foreground=self.foreground)
            write_exit(self.run_dir, ExitRecord(code=code, reason=reason, step=step, checkpoint=self.last_checkpoint,
                                                held=self.held and code == EXIT_PAUSED,
                                                standing=self.standing if code == EXIT_HELD else None))
        except OSError as error:  # a full disk: the exit code still tells the daemon
            log.error("cannot record the exit in %s: %s", self.run_dir, error)
        self._close()
        return code

    def _register(self) -> None:
        """Let `rlsup list` and the TUI see this foreground run; a run that cannot say so still trains."""
        try:
            self.registration = foreground.register(self.run_dir, self.spec)
        except OSError as error:
            log.warning("`rlsup list` will not show this run: cannot register it in RLSUP_HOME: %s", error)

    def _switch_off(self, sentence: str) -> None:
        """Say that a requested feature is off: in worker.log now, and as an event through status.json."""
        log.warning(sentence)
        if sentence not in self.switched_off:
            self.switched_off.append(sentence)

    def _close(self) -> None:
        foreground.unregister(self.registration)  # after exit.json: a listed run has its outcome when it goes
        for part in (self.metrics, self.tensorboard, self.trainer):
            if part is None:
                continue
            try:
                part.close()
            except Exception:  # the outcome is recorded; a failing close must not turn it into a traceback
                log.exception("closing %s failed", type(part).__name__)

    # -- the loop ----------------------------------------------------------------------------

    def _train(self) -> tuple[int, str]:
        trainer = self.trainer
        if trainer.step >= self.spec.job.total_steps:
            return EXIT_DONE, (f"the budget of {self.spec.job.total_steps} steps was already reached at step "
                               f"{trainer.step}; raise [job].total_steps to train further")
        self.training_time.start()
        wall_time, limit = self.training_time, self.spec.job.max_wall_s
        if wall_time.used_up(limit):
            return EXIT_WALL_TIME, wall_time.used_up_sentence(limit, trainer.step, already=True)
        clock = LoopClock(trainer.step)
        self._write_status(Phase.RUNNING, clock)
        # Only the daemon's members are compared. A start at the hold's step (a restart from the pause checkpoint
        # it wrote there) holds again; the daemon removes the hold of a member it stops, which then trains on.
        hold = None if self.foreground else read_hold(self.run_dir)
        hold = hold if hold is not None and hold.step >= trainer.step else None
        while True:
            if self.signals.reload_requested:
                self._reload()
            if trainer.step >= self.spec.job.total_steps:
                self._checkpoint("final")
                return EXIT_DONE, f"reached the budget of {self.spec.job.total_steps} steps"
            if hold is not None and trainer.step >= hold.step:
                return self._stop_at_hold(hold)
            if self.signals.pause_requested:
                self._checkpoint("pause")
                return EXIT_PAUSED, f"paused at step {trainer.step} with a checkpoint"
            limit = self.spec.job.max_wall_s  # a live edit may have raised it
            if wall_time.used_up(limit):  # here, at a step boundary, as a pause: the resume is exact
                self._checkpoint("pause")
                return EXIT_WALL_TIME, wall_time.used_up_sentence(limit, trainer.step, already=False)
            previous_step = trainer.step
            for record in trainer.iterate():
                self._write_metric(record)
            self._after_iteration(previous_step, clock)

    def _stop_at_hold(self, hold: Hold) -> tuple[int, str]:
        """Pause where the experiment's scheduler compares members, with what it compares them by."""
        step = self.trainer.step
        if hold.evaluate and (self.last_evaluation is None or self.last_evaluation[0] != step):
            self._evaluate()  # on its own envs and random streams: the training trajectory stays the same
        evaluation = self.last_evaluation[1] if hold.evaluate and self.last_evaluation else None
        self.standing = Standing(hold.step, {"eval_return": evaluation, "return": self.trainer.mean_return()})
        self._checkpoint("pause")
        return EXIT_HELD, f"reached {hold.label} at step {step:,}: paused there with a checkpoint"

    def _after_iteration(self, previous_step: int, clock: "LoopClock") -> None:
        from rlsup.algos.schedules import crossed

        step, spec = self.trainer.step, self.spec
        if crossed(previous_step, step, spec.log.every_steps):
            self._write_metric({metrics.KIND: metrics.TRAIN, metrics.STEP: step,
                                metrics.STEPS_PER_SECOND: clock.window_rate(step),
                                **self.trainer.train_metrics()})
        if crossed(previous_step, step, spec.eval.every_steps):
            self._evaluate()
        # Skip an interval checkpoint that the final one is about to replace.
        if crossed(previous_step, step, spec.checkpoint.every_steps) and step < spec.job.total_steps:
            self._checkpoint("interval")
        if clock.due_for_status(step):
            self.signals.reload_requested |= self.spec_watch.changed()
            self._write_status(Phase.RUNNING, clock)
        if self.progress.enabled and clock.due_for_progress():
            self.progress.show(step, spec.job.total_steps, clock.rate, self.trainer.mean_return())

    def _evaluate(self) -> None:
        from rlsup.algos.evaluate import evaluation_seed, play_episodes

        step, settings = self.trainer.step, self.spec.eval
        returns = play_episodes(self.trainer.greedy_policy(), self.spec.env,
                                seed=evaluation_seed(self.spec.job.seed, step),
                                episodes=settings.episodes, epsilon=settings.epsilon)
        mean = sum(returns) / len(returns)
        self.last_evaluation = (step, mean)
        self._write_metric({metrics.KIND: metrics.EVAL, metrics.STEP: step, metrics.EVAL_MEAN: mean,
                            metrics.EVAL_RETURNS: returns})
        log.info("evaluation at step %d: mean return %.2f over %s", step, mean,
                 formatting.counted(len(returns), "episode"))
        if self.trajectory.best_evaluation is None or mean > self.trajectory.best_evaluation:
            self.trajectory.best_evaluation = mean
            self._checkpoint(BEST, evaluation_mean=mean)

    def _checkpoint(self, reason: str, evaluation_mean: float | None = None) -> None:
        from rlsup.checkpoint.rng import global_rng_state
        from rlsup.checkpoint.store import write_checkpoint

        trainer, spec = self.trainer, self.spec
        self._write_status(Phase.CHECKPOINTING)
        fingerprint = trainer.fingerprint()
        # The line goes in before the length is recorded, so a resume keeps it with its checkpoint.
        self._write_metric({metrics.KIND: metrics.CHECKPOINT, metrics.STEP: trainer.step,
                            metrics.CHECKPOINT_REASON: reason, metrics.CHECKPOINT_FINGERPRINT: fingerprint})
        self.metrics.sync()
        events = self.tensorboard.sync()  # a resume continues the event file from here (worker/tensorboard.py)
        best = reason == BEST
        # A best checkpoint is for playing, never for resuming: the replay would only make it slow.
        state = {"trainer": trainer.state_dict(include_replay=spec.checkpoint.replay and not best),
                 "rng": global_rng_state()}
        extra = replace(self.trajectory, algo=spec.job.algo, training_wall_s=round(self.training_time.total(), 3),
                        tensorboard_events=events, evaluation_mean=evaluation_mean if best else None,
                        gpu_memory=gpu_memory.measure(trainer)).to_extra()
        with self.signals.held():
            entry = write_checkpoint(self.run_dir, state, step=trainer.step, episodes=trainer.episodes,
                                     reason=reason, fingerprint=fingerprint, spec_sha256=spec.sha256(),
                                     metrics_bytes=self.metrics.byte_length(), keep=spec.checkpoint.keep,
                                     extra=extra)
            if not best:
                self.last_checkpoint, self.last_checkpoint_step = str(entry.path), entry.step
        log.info("checkpoint %s (%s, %s, fingerprint %s)", entry.path.name, reason, formatting.byte_size(entry.bytes),
                 fingerprint[:12])

    def _reload(self) -> None:
        """SIGHUP or a rewritten job.toml: take its live fields as it is now; anything else waits for a resume."""
        self.signals.reload_requested = False
        self.spec_watch.changed()  # what this read sees needs no second reload
        try:
            edited = runfiles.read_run_spec(self.run_dir)
        except specs.SpecError as error:
            log.warning("reload ignored, job.toml does not parse:\n%s", error)
            return
        changes = specs.diff(self.spec, edited)
        for change in changes:
            applied = "applied" if change.edit == specs.LIVE else f"needs a {change.edit} restart, not applied"
            log.info("reload: %s (%s)", change, applied)
        self.spec = specs.merge_live(self.spec, edited)

    # -- outputs -----------------------------------------------------------------------------

    def _write_metric(self, record: dict) -> None:
        record = {metrics.TIME: round(time.time(), 3), **record}
        self.metrics.write(record)
        try:
            self.tensorboard.follow(record, enabled=self.spec.log.tensorboard)
        except tensorboard_log.Unavailable as error:
            self._switch_off(str(error))
            self.spec = self.spec.replace("log", tensorboard=False)

    def _write_status(self, phase: Phase, clock: "LoopClock | None" = None) -> None:
        trainer = self.trainer
        write_worker_status(self.run_dir, WorkerStatus(
            pid=os.getpid(), phase=phase, time=time.time(), step=trainer.step if trainer else 0,
            total_steps=self.spec.job.total_steps if self.spec else None,
            steps_per_second=clock.rate if clock else None, episodes=trainer.episodes if trainer else 0,
            mean_return=trainer.mean_return() if trainer else None, last_checkpoint_step=self.last_checkpoint_step,
            device=str(trainer.device) if trainer else None, notice=self.notice,
            switched_off=tuple(self.switched_off), gpu_memory=gpu_memory.measure(trainer) if trainer else None))


def busy_message(run_dir: Path, error: Exception) -> str:
    if isinstance(error, locks.LockHeld):
        return (f"{run_dir} is already being trained by pid {error.pid if error.pid is not None else '?'}; "
                "two workers would write one run, so this one leaves it alone")
    if isinstance(error, own_files.NotOwnFile):
        return str(error)
    return f"cannot lock {run_dir / paths.WORKER_LOCK}: {error}"


def gpus_given() -> str:
    """The GPUs its runner gave this worker. Here, as a forked worker's /proc/PID/environ still shows the
    environment of the fork server it came from, not its own (which CUDA and its children read)."""
    given = os.environ.get("CUDA_VISIBLE_DEVICES")
    return "" if given is None else f"; CUDA_VISIBLE_DEVICES={given!r}"


def run(run_dir: Path, *, foreground: bool = False, from_scratch: bool = False, trust_imports: bool = False) -> int:
    return TrainingRun(run_dir, foreground=foreground, from_scratch=from_scratch, trust_imports=trust_imports).run()


def exit_now(code: int) -> NoReturn:
    """Leave at once: every file is written and fsynced by now, and torch's interpreter teardown
    takes over a second, which would be most of a pause's latency."""
    logging.shutdown()
    release_multiprocessing_resources()
    leave_now(code)


def release_multiprocessing_resources() -> None:
    """Unlink the named semaphores of multiprocessing's locks, queues and events (V-trace's actors), as
    interpreter exit would: os._exit skips that, and Python's resource tracker then printed a "leaked
    semaphore objects" warning after the pause sentence whenever one of them was still referenced."""
    util = sys.modules.get("multiprocessing.util")
    if util is not None:
        util._run_finalizers(0)  # the at-exit finalizers first run by multiprocessing's own exit handler


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or not (Path(argv[0]) / paths.JOB_FILE).is_file():
        print("usage: python -m rlsup.worker RUN_DIR  (a directory holding job.toml)", file=sys.stderr)
        return EXIT_SPEC
    exit_now(run(Path(argv[0])))

