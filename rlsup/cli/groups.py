"""Experiments on the command line: group rows of `rlsup list`, group intents and `rlsup status EXPERIMENT`."""
from __future__ import annotations

from rlsup import client, formatting
from rlsup.views import colour
from rlsup.views import groups
from rlsup.views import jobs as jobview
from rlsup.views.groups import GroupRow
from rlsup.jobs.state import Desired
from rlsup.jobs.store import Job, Store
from rlsup.views.decisions import read_scheduler_view, scheduler_lines

INDENT = "  "  # an experiment's jobs under its group row


def group_json(group: GroupRow) -> dict:
    """What `rlsup list --json` says of an experiment; its jobs' objects follow it, each naming it."""
    states: dict[str, int] = {}
    for row in group.rows:
        states[row.job.state.value] = states.get(row.job.state.value, 0) + 1
    spread = group.mean_return
    return {"kind": "experiment", "name": group.experiment, "jobs": list(group.job_ids), "states": states,
            "step": group.step, "total_steps": group.total_steps,
            "mean_return": spread.mean if spread else None, "return_std": spread.std if spread else None,
            "returns_reported": spread.count if spread else 0, "eta_s": group.eta_s}


def group_cells(group: GroupRow) -> tuple[str, ...]:
    """A group row in the columns of `rlsup list` (jobview.COLUMNS); its last cell gives the ETA."""
    algos = {row.job.algo for row in group.rows}
    envs = {row.job.env for row in group.rows}
    speeds = [row.steps_per_second for row in group.rows if row.steps_per_second is not None]
    return ("exp", f"{group.experiment} ({len(group.rows)} jobs)", ",".join(sorted(algos)), ",".join(sorted(envs)),
            group.counts, f"{group.step:,}/{group.total_steps:,}",
            formatting.speed(sum(speeds) if speeds else None, missing="-"), groups.shown(group.mean_return), "-",
            f"ETA {formatting.duration(group.eta_s)}")


def group_intent(reference: str, desired: Desired) -> bool:
    """Record desired for every job of the experiment reference names and say so; False when it names none."""
    if not client.experiment_jobs(reference):
        return False
    affected, jobs = client.set_group_intent(reference, desired)
    untouched = len(jobs) - len(affected)
    print(f"experiment {reference}: {desired.verb} requested for {len(affected)} of its {len(jobs)} jobs"
          + (f" ({untouched} had nothing to {desired.verb})" if untouched else "")
          + (f": {', '.join(str(job.id) for job in affected)}" if affected else ""))
    return True


def print_experiment_status(name: str, jobs: list[Job]) -> None:
    """The group's line and, for an experiment that decides, its outcome (finished, its best member); its jobs;
    variant -> n, final and best evaluation (mean ± std over seeds); what its scheduler decided."""
    group = GroupRow(name, tuple(jobview.sorted_rows([jobview.read_row(job) for job in jobs])))
    with Store() as store:
        view = read_scheduler_view(store, name, jobs)
    print(f"experiment {name}: {group.counts}; {group.step:,} of {group.total_steps:,} steps; "
          f"latest return {groups.shown(group.mean_return)}; ETA {formatting.duration(group.eta_s)}")
    if view is not None:
        print(f"{INDENT}{view.outcome.sentence()}")
    print_job_rows(group.rows)
    lineage = {"roots": view.roots, "replaced": view.replaced} if view is not None else {}
    cells = [groups.VARIANT_HEADINGS, *groups.variant_cells(groups.variant_results(jobs, **lineage))]
    widths = [max(len(line[index]) for line in cells) for index in range(4)]
    print("\nevaluations (mean ± std over seeds):")
    for line in cells:
        print(INDENT + "  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip())
    if view is not None:
        print("\nscheduler:")
        for line in scheduler_lines(view):
            print(INDENT + line)


def print_job_rows(rows: tuple[jobview.JobRow, ...]) -> None:
    """An experiment's jobs as columns: id, name, state, step/budget, run, each as wide as its widest (written at
    each name's own length, the columns of cp-lr0.001 and cp-lr0.0003 did not line up)."""
    painted = colour.wanted()
    names = [formatting.printable(row.job.name) for row in rows]
    progress = [f"{row.step:,}/{row.job.total_steps:,}" for row in rows]
    name_width, progress_width = max(map(len, names), default=0), max(map(len, progress), default=0)
    state_width = max((len(row.job.state.value) for row in rows), default=0)
    for row, name, done in zip(rows, names, progress):
        job = row.job
        state = colour.paint_state(job.state.value.ljust(state_width), job.state, painted)
        print(f"{INDENT}{job.id:>4}  {name.ljust(name_width)}  {state}  {done.rjust(progress_width)}  "
              f"{formatting.printable(job.run_dir)}")
