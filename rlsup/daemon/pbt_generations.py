"""PBT in the daemon: once every live member reports at an interval's step, the bottom forks the top, then all go on."""
from __future__ import annotations

import shutil
import time
import typing
from dataclasses import dataclass
from pathlib import Path

from rlsup import paths, spec as specs
from rlsup.decisions import pbt
from rlsup.decisions.pbt import Fork, PbtSettings
from rlsup.decisions.ranking import Report, figure
from rlsup.jobs import standings
from rlsup.jobs.record import Job, spec_columns
from rlsup.jobs.state import Desired
from rlsup.jobs.store import Store
from rlsup.run import files as runfiles, import_trust, lineage
from rlsup.run.holds import Hold, Standing, clear_hold, write_hold
from rlsup.spec.fields import TABLES, section_field



@dataclass(frozen=True)
class PreparedFork:
    """A fork's run directory, filled and verified, waiting for its job row (in the generation's transaction)."""

    fork: Fork
    parent: Job
    name: str
    run_dir: Path
    spec: specs.JobSpec
    overrides: dict
    step: int  # where the fork's run starts: its parent.json's step, known here, not read back in the transaction


def field_values_of(spec: specs.JobSpec, names: typing.Iterable[str]) -> dict[str, float]:
    """The spec's value of each perturbed field ("dqn.lr" -> 3e-4)."""
    return {name: float(getattr(getattr(spec, name.split(".", 1)[0]), name.split(".", 1)[1])) for name in names}


def prepare(store: Store, fork: Fork, parent: Job, parent_spec: specs.JobSpec, generation: int) -> PreparedFork:
    """The fork's run directory: the parent's checkpoint at the generation's step, linked and verified, its
    metrics up to there, parent.json, its job.toml (the parent's spec, as its generation read it) with the
    perturbed values. Raises lineage.ForkRefused."""
    parent_run = Path(parent.run_dir)
    entry = lineage.resolve_checkpoint(parent_run, "latest")  # the pause checkpoint at its hold: it waits there
    if entry.step < fork.step:
        raise lineage.ForkRefused(f"job {parent.id}'s newest checkpoint is at step {entry.step:,}, before the "
                                  f"generation's step {fork.step:,}")
    # The fork that replaces member 5 at generation 2 of pbt: pbt-g2-m5 (parent.json and the events say whose).
    name = store.free_name(specs.sanitize_name(f"{parent.experiment}-g{generation}-m{fork.member}"))
    loaded = fork_spec(parent_spec, name, fork.values)
    pinned = {"job.name": name, **field_values_of(loaded, fork.values)}
    overrides = {**parent.override_values, **specs.pin_overrides(loaded, pinned)}
    run_dir = paths.run_dir_name(name, root=parent_run.parent)
    standings.note_unfinished_fork(store, parent.experiment, str(run_dir))  # recorded first: see orphaned_forks
    run_dir.mkdir(mode=0o700)
    try:
        runfiles.write_run_spec(run_dir, loaded)
        import_trust.hand_on(parent_run, run_dir)
        request = lineage.ForkRequest(parent_run, parent.name, parent.id, entry)
        made = lineage.prepare_fork(run_dir, request, loaded)
    except BaseException:
        discard_directory(store, run_dir)
        raise
    return PreparedFork(fork, parent, name, run_dir, loaded, overrides, made.step)


def fork_spec(parent_spec: specs.JobSpec, name: str, values: typing.Mapping[str, float]) -> specs.JobSpec:
    """The fork's spec: its parent's, named, with each perturbed value kept inside its field's declared range."""
    spec = parent_spec.replace("job", name=name)
    for field, value in values.items():
        section, key = field.split(".", 1)
        spec = spec.replace(section, **{key: within_bounds(section, key, value)})
    return specs.apply_overrides(spec, {})  # the name sanitised as every job's is


def fork_refusal(parent_spec: specs.JobSpec, values: typing.Mapping[str, float]) -> str | None:
    """Why the fork's job.toml would not load, in the loader's words, or None. The loader itself judges, as the
    fork's worker will: a range clamp alone let epsilon_end pass epsilon_start, and lr reach its excluded 0."""
    try:
        specs.loads(fork_spec(parent_spec, parent_spec.job.name, values).to_toml())
    except specs.SpecError as error:
        return "; ".join(f"{problem.field}: {problem.message}" for problem in error.problems)
    return None


def queue(store: Store, prepared: PreparedFork) -> Job:
    """The fork's job, following the experiment's file as its parent does (inside the generation's transaction)."""
    parent = prepared.parent
    return store.submit(**spec_columns(prepared.spec), spec_path=Path(parent.spec_path), run_dir=prepared.run_dir,
                        spec_seen=parent.spec_seen, overrides=prepared.overrides, experiment=parent.experiment,
                        step=prepared.step)


def discard(store: Store, prepared: list[PreparedFork]) -> None:
    """Run directories made for a generation whose transaction did not commit: nothing refers to them."""
    for fork in prepared:
        discard_directory(store, fork.run_dir)


def discard_orphans(store: Store, experiment: str) -> None:
    """Fork directories a daemon killed before its generation committed left behind: that generation is decided
    again now, with directories of its own."""
    for run_dir in standings.orphaned_forks(store, experiment):
        discard_directory(store, Path(run_dir))


def discard_directory(store: Store, run_dir: Path) -> None:
    """A fork directory no job holds, then its record. rmtree follows no link: one put in its place by someone
    else is left, and so is what it points to."""
    shutil.rmtree(run_dir, ignore_errors=True)
    standings.forget_unfinished_forks(store, [str(run_dir)])


def within_bounds(section: str, key: str, value: float) -> float:
    """A perturbed value kept inside the field's declared range: PBT multiplies, generation after generation."""
    metadata = section_field(TABLES[section], key).metadata
    low, high = metadata["minimum"], metadata["maximum"]
    if high is not None and value > high:
        return float(high)
    if low is not None and value < low:
        return float(low)
    return value


def generation_hold(settings: PbtSettings, step: int, total_steps: int,
                    taken: typing.Collection[int] = ()) -> Hold | None:
    """Where a member pauses for the generation after `step`, past those already `taken` (a late member would only
    go on from each: a pause checkpoint and a restart for nothing), or None when its budget ends first."""
    following = step + settings.interval
    while following in taken:
        following += settings.interval
    if following >= total_steps:
        return None
    return Hold(following, f"generation {following // settings.interval} of PBT",
                evaluate=settings.metric == "eval_return")


def decide_pbt(store: Store, settings: PbtSettings, seed: int, members: list[Job]) -> None:
    """Let members that came late to a generation go on, then run the first generation whose every live member has
    reported and that is not taken yet."""
    if members:
        discard_orphans(store, members[0].experiment)
    ids = [job.id for job in members]
    by_id = {job.id: job for job in members}
    decided = standings.decisions(store, ids)
    born = {decision.job_id: decision.step for decision in decided if decision.verdict == standings.FORKED}
    replaced = {decision.job_id: decision.step for decision in decided if decision.verdict == standings.REPLACED}
    taken = {decision.step for decision in decided if decision.verdict in (standings.CONTINUED, standings.REPLACED)}
    gone = {job.id for job in members if job.state in standings.GONE}
    held = {(job_id, standing.step): standing for job_id, found in standings.standings(store, ids).items()
            for standing in found}
    reports = [Report(job_id, step, standings.metric_value(standing.values.get(settings.metric)))
               for (job_id, step), standing in held.items()]
    for late in pbt.late_arrivals(settings, reports, taken, {(d.job_id, d.step) for d in decided}, gone):
        place_hold(Path(by_id[late.member].run_dir), generation_hold(settings, late.step,
                                                                     by_id[late.member].total_steps, taken))
        go_on(store, late, time.time())
    for step in sorted({step for _, step in held} - taken):
        expected = pbt.live_at(step, ids, gone, born, replaced)
        if expected and all((member, step) in held for member in expected):
            run_generation(store, settings, seed, step, [by_id[member] for member in expected],
                           {member: held[(member, step)] for member in expected})
            return  # its forks are queued only now: a later generation is taken at the next reconcile


def run_generation(store: Store, settings: PbtSettings, seed: int, step: int, expected: list[Job],
                   reported: dict[int, Standing]) -> None:
    """The generation's forks made, then in one transaction queued with every member's decision: the weak
    replaced (they keep their pause), the rest resumed to the next generation. Each fork's spec is judged by
    the job loader before anyone is replaced (pbt.decide draws again, or keeps the weak member)."""
    generation = step // settings.interval
    values = {job.id: standings.metric_value(reported[job.id].values.get(settings.metric)) for job in expected}
    reports = [Report(job.id, step, values[job.id]) for job in expected]
    member_specs = {job.id: runfiles.read_run_spec(Path(job.run_dir)) for job in expected}
    fields = {job.id: field_values_of(member_specs[job.id], settings.perturb) for job in expected}
    decided = pbt.decide(settings, seed, reports, fields,
                         refuses=lambda parent, chosen: fork_refusal(member_specs[parent], chosen))
    forks = [outcome for outcome in decided if isinstance(outcome, Fork)]
    weak = {fork.member for fork in forks}
    going_on = {job.id: pbt.Continue(job.id, step, f"pbt: member {job.id} ({settings.metric} "
                                                   f"{figure(values[job.id])}) goes on at step {step:,} "
                                                   f"(generation {generation})") for job in expected}
    going_on.update({outcome.member: outcome for outcome in decided if isinstance(outcome, pbt.Continue)})
    by_id = {job.id: job for job in expected}
    prepared: list[PreparedFork] = []
    try:
        for fork in forks:
            parent = by_id[fork.parent]
            prepared.append(prepare(store, fork, parent, member_specs[parent.id], generation))
            place_hold(prepared[-1].run_dir, generation_hold(settings, step, prepared[-1].spec.job.total_steps))
        for job in expected:
            place_hold(Path(job.run_dir), None if job.id in weak else generation_hold(settings, step, job.total_steps))
        if not commit_generation(store, settings, generation, expected, prepared,
                                 [going_on[job.id] for job in expected if job.id not in weak]):
            discard(store, prepared)
    except BaseException:
        discard(store, prepared)
        raise


def commit_generation(store: Store, settings: PbtSettings, generation: int, expected: list[Job],
                      prepared: list[PreparedFork], going_on: list[pbt.Continue]) -> bool:
    """Queue the forks and record every member's decision, in one transaction. False, with nothing recorded,
    when a user killed one of the members meanwhile (the forks took time to make): the generation is taken again
    at the next reconcile without that member, as it would have been had the kill come first."""
    now = time.time()
    with store.transaction():
        if any(current is None or current.desired is Desired.KILLED
               for current in (store.job(job.id) for job in expected)):
            return False
        standings.forget_unfinished_forks(store, [str(made.run_dir) for made in prepared])  # their jobs have them
        for made in prepared:
            job = queue(store, made)
            reason = f"replaced at generation {generation} by job {job.id} ({job.name}): {made.fork.reason}"
            replaced = standings.Decision(made.fork.member, made.fork.step, standings.REPLACED, reason, now)
            standings.record_decision(store, replaced, resume=False)
            forked = standings.Decision(job.id, made.fork.step, standings.FORKED, made.fork.reason, now)
            standings.record_decision(store, forked, resume=False)
        for continued in going_on:
            go_on(store, continued, now)
    return True


def go_on(store: Store, goes_on: pbt.Continue, now: float) -> None:
    """A member resumed to the hold placed for it (or to its end), with the decision that says why."""
    decision = standings.Decision(goes_on.member, goes_on.step, standings.CONTINUED, goes_on.reason, now)
    standings.record_decision(store, decision, resume=True)


def place_hold(run_dir: Path, hold: Hold | None) -> None:
    if hold is None:
        clear_hold(run_dir)
    else:
        write_hold(run_dir, hold)
