"""`rlsup plot`: runs' curves side by side, written as a picture (matplotlib) or drawn in the terminal (plotext)."""
from __future__ import annotations

import argparse
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from rlsup import client, spec as specs
from rlsup.run import files as runfiles
from rlsup.spec import experiments
from rlsup.views import plots as plotting
from rlsup.cli.arguments import CliError, names_experiments, resolve_run
from rlsup.decisions.pbt import PbtSettings
from rlsup.jobs import standings
from rlsup.jobs.store import Job, Store
from rlsup.views.decisions import read_scheduler_view

PICTURE_SUFFIXES = (".png", ".svg", ".pdf")
GROUP_BY = ("variant", "experiment", "env", "all")
FIGURE_INCHES = (8.0, 4.5)
PANEL_INCHES = (4.5, 3.2)  # each panel's, with --panels
PANEL_COLUMNS = 3
BAND_ALPHA = 0.2
INSTALL_PLOT = "pip install 'rlsup[plot]'"
FORK_MARKER = "◆"  # where a PBT fork's own training began, on its line (in a picture, a diamond)
TICK_COLUMNS, TICK_ROWS = 12, 5  # a terminal's room for each tick label: its columns across, its rows down


def register(subparsers: argparse._SubParsersAction) -> None:
    plot = subparsers.add_parser("plot", help="runs' curves side by side: a PNG, SVG or PDF, or in the terminal")
    names_experiments(plot.add_argument("runs", metavar="RUN", nargs="+", help="run directory, job id or name, "
                                        "experiment (drawn as its mean and band), or latest"))
    plot.add_argument("--out", metavar="FILE",
                      help=f"write a picture ({', '.join(PICTURE_SUFFIXES)}; needs {INSTALL_PLOT}); "
                           f"without it, draw in the terminal")
    plot.add_argument("--metric", default="return",
                      help="return (default), eval_return, length, loss, or any number the train records carry "
                           "(steps_per_second, epsilon, ...)")
    plot.add_argument("--smooth", metavar="W",
                      help=f"weight of the exponential moving average, from 0 (off) to under 1, as TensorBoard's "
                           f"(default: {plotting.DEFAULT_SMOOTHING:g}, and off for eval_return)")
    plot.add_argument("--group-by", choices=GROUP_BY,
                      help="draw runs of one sweep variant (the default for an experiment named as a RUN), of one "
                           "experiment, of one env (a sweep over games), or all runs as their mean with a "
                           "min-max band")
    plot.add_argument("--panels", action="store_true",
                      help="one panel per line, each with its own scale (a sweep over games, say)")
    plot.set_defaults(handler=command_plot)


def command_plot(args: argparse.Namespace) -> int:
    weight = smoothing_weight(args.smooth, args.metric)
    out = Path(args.out).expanduser() if args.out else None
    if out is not None and out.suffix.lower() not in PICTURE_SUFFIXES:
        raise CliError(f"--out {args.out}: the picture's name must end in {', '.join(PICTURE_SUFFIXES)}")
    lines = read_lines(resolve_groups(args.runs, args.group_by), args.metric, weight)
    title = f"{plotting.METRIC_TITLES.get(args.metric, args.metric)} · {plotting.smoothing_label(weight)}"
    panels = [[line] for line in lines] if args.panels else [lines]
    decided = read_decided(args.runs)
    if out is None:
        draw_in_terminal(panels, title, decided)
        if decided.caption:
            print(decided.caption)
    else:
        write_picture(panels, title, out, decided)
        print(out)
    return 0


@dataclass(frozen=True)
class Decided:
    """What the scheduler of each experiment drawn came to (views/outcome.py), and where each of its forks began."""

    caption: str = ""                                       # "pbt: finished: PBT took every generation; best ..."
    forks: tuple[tuple[str, int, str], ...] = ()            # (the fork's line label, its step, "job 7 forked from job 3")


def read_decided(references: list[str]) -> Decided:
    sentences, forks = [], []
    for reference in references:
        members = client.experiment_jobs(reference)
        if not members:
            continue
        with Store() as store:
            view = read_scheduler_view(store, members[0].experiment, members)
        if view is None:
            continue
        names = {job.id: job.name for job in members}  # a PBT member's line is labelled with its name (resolve_groups)
        sentences.append(f"{members[0].experiment}: {view.outcome.sentence()}")
        forks += [(names[mark.child], mark.step, f"job {mark.child} forked from job {mark.parent} at {mark.step:,}")
                  for mark in view.forks if mark.child in names]
    return Decided("\n".join(sentences), tuple(forks))


def fork_points(lines: list[plotting.Line], decided: Decided) -> list[tuple[float, float, str]]:
    """(step, value, words) of each fork on its own line: the fork's run holds its parent's records up to there."""
    points = []
    for label, step, words in decided.forks:
        for line in lines:
            if isinstance(line, plotting.Series) and line.label == label and line.steps:
                at = min(max(step, line.steps[0]), line.steps[-1])
                points.append((float(step), plotting.interpolate(line, at), words))
    return points


def smoothing_weight(text: str | None, metric: str) -> float:
    if text is None:
        # An evaluation is already a mean over episodes, and comes rarely: an average over them only lags.
        return 0.0 if metric == "eval_return" else plotting.DEFAULT_SMOOTHING
    try:
        weight = float(text)
    except ValueError:
        weight = -1.0
    if not 0 <= weight < 1:
        raise CliError(f"--smooth {text}: give a weight from 0 (off) up to, not including, 1")
    return weight


# ---------------------------------------------------------------------------------------------
# Which runs, under which labels


@dataclass(frozen=True)
class RunGroup:
    """Runs drawn as one line: one run's own, or several runs' mean and band."""

    label: str
    run_dirs: tuple[Path, ...]


def resolve_groups(references: list[str], group_by: str | None = None) -> list[RunGroup]:
    """Labelled lists of run directories for RUN references (each a run directory, job id or name, or
    latest), one per run, or grouped by variant, experiment or all together; a run named twice is drawn
    once. An experiment named as a RUN is drawn by variant unless grouped by experiment: a sweep's mean over
    its learning rates is no learning rate's curve."""
    by_variant = group_by != "experiment"
    runs: dict[Path, str] = {}
    named_groups: dict[Path, str] = {}  # runs named through their experiment: drawn as its groups
    for reference in references:
        members = client.experiment_jobs(reference)
        # A PBT member's run begins with its parent's metrics up to the fork: one line each draws the lineages.
        lineages = bool(members) and decides_by_pbt(members[0].experiment)
        for job in members:
            runs.setdefault(Path(job.run_dir), job.name)
            named_groups[Path(job.run_dir)] = job.name if lineages else group_of(job, by_variant)
        if not members:
            runs.setdefault(resolve_reference(reference), "")
    runs = {run_dir: label or run_label(run_dir) for run_dir, label in runs.items()}
    if group_by == "all":
        return [RunGroup("all runs", tuple(runs))]
    if group_by == "env":  # a sweep over games, its seeds as bands: foreground runs too, from their job.toml
        named_groups = {run_dir: env_of(run_dir) for run_dir in runs}
    groups: dict[str, list[Path]] = {}
    for run_dir, label in runs.items():
        group = named_groups.get(run_dir) or (stored_group(run_dir, by_variant) if group_by else "")
        groups.setdefault(group or label, []).append(run_dir)
    return [RunGroup(label, tuple(run_dirs)) for label, run_dirs in groups.items()]


def env_of(run_dir: Path) -> str:
    try:
        return runfiles.read_run_spec(run_dir).env.id
    except specs.SpecError as error:
        raise CliError(f"{run_dir}: cannot read its job.toml to group it by env: {error}") from None


def decides_by_pbt(experiment: str) -> bool:
    with Store() as store:
        return isinstance(standings.scheduler(store, experiment), PbtSettings)


def group_of(job: Job, by_variant: bool) -> str:
    """The group a job's run is drawn in: its experiment, followed by its variant ("sweep dqn.lr=3e-4") when
    by_variant; "" for a lone job."""
    if not job.experiment:
        return ""
    variant = experiments.variant_label(job.override_values) if by_variant else ""
    return f"{job.experiment} {variant}".strip()


def resolve_reference(reference: str) -> Path:
    try:
        return resolve_run(reference)
    except CliError as error:  # "no jobs yet in …" alone would not say which of several RUNs it was
        raise CliError(f"RUN {reference!r}: {error}") from None


def run_label(run_dir: Path) -> str:
    """The job's name where the store knows the run, else the directory's (a foreground run, a copied one)."""
    try:
        return client.find_job(str(run_dir)).name
    except client.JobNotFound:
        return run_dir.name


def stored_group(run_dir: Path, by_variant: bool) -> str:
    """group_of the run's job, "" for a run the store does not know."""
    try:
        job = client.find_job(str(run_dir))
    except client.JobNotFound:
        return ""
    return group_of(job, by_variant)


def read_lines(groups: list[RunGroup], metric: str, weight: float) -> list[plotting.Line]:
    """Each group's line of the smoothed metric; refuses a metric no run carries, or nothing to draw."""
    lines = []
    for group in groups:
        try:
            runs = [plotting.smooth(plotting.read_series(run_dir, metric, group.label), weight)
                    for run_dir in group.run_dirs]
        except plotting.UnknownMetric as error:
            raise CliError(str(error)) from None
        label = group.label if len(runs) == 1 else plotting.group_label(group.label, len(runs))
        lines.append(plotting.line_of(runs, label))
    if not any(line.steps for line in lines):
        raise CliError(f"no {metric} is recorded yet in {', '.join(group.label for group in groups)}")
    return lines


# ---------------------------------------------------------------------------------------------
# Drawing


def panel_grid(count: int) -> tuple[int, int]:
    """Rows and columns for this many panels: up to three side by side."""
    columns = min(count, PANEL_COLUMNS)
    return -(-count // columns), columns


def write_picture(panels: list[list[plotting.Line]], title: str, out: Path, decided: Decided = Decided()) -> None:
    try:
        import matplotlib  # noqa: F401 (the optional extra: say how to install it before anything else)
    except ImportError:
        raise CliError(f"--out needs matplotlib, which is not installed: {INSTALL_PLOT}") from None
    from matplotlib import rc_context
    from matplotlib.figure import Figure  # no pyplot: no GUI backend, no global figure state

    rows, columns = panel_grid(len(panels))
    width, height = FIGURE_INCHES if len(panels) == 1 else PANEL_INCHES
    figure = Figure(figsize=(width * columns, height * rows), layout="constrained")
    for number, lines in enumerate(panels, start=1):
        axes = figure.add_subplot(rows, columns, number)
        draw_panel(axes, lines, title if len(panels) == 1 else None)
        for step, value, words in fork_points(lines, decided):
            axes.plot([step], [value], marker="D", color="black", linestyle="none")
            axes.annotate(words, (step, value), textcoords="offset points", xytext=(4, 4), fontsize="small")
    if len(panels) > 1:
        figure.suptitle(title)
    if decided.caption:
        figure.supxlabel(decided.caption, fontsize="small")
    try:
        # Text stays text in an SVG: a paper's editor can restyle it, and it can be searched.
        with rc_context({"svg.fonttype": "none"}):
            figure.savefig(out)
    except OSError as error:
        raise CliError(f"cannot write {out}: {error.strerror or error}") from None


def draw_panel(axes, lines: list[plotting.Line], title: str | None) -> None:
    """Lines on one axes; a panel of one line is titled with its label instead of a legend."""
    for line in lines:
        if isinstance(line, plotting.GroupSeries):
            (drawn,) = axes.plot(line.steps, line.mean, label=line.label)
            axes.fill_between(line.steps, line.low, line.high, color=drawn.get_color(), alpha=BAND_ALPHA,
                              linewidth=0)
        else:
            axes.plot(line.steps, line.values, label=line.label)
    axes.set(title=title or lines[0].label, xlabel="step")
    axes.grid(alpha=0.3)
    if title is not None:
        axes.legend()


def draw_in_terminal(panels: list[list[plotting.Line]], title: str, decided: Decided = Decided()) -> None:
    import plotext  # the TUI's plotting library, without Textual

    columns, rows = shutil.get_terminal_size()
    plotext.clear_figure()
    grid_rows, grid_columns = panel_grid(len(panels))
    plotext.subplots(grid_rows, grid_columns)
    plotext.plotsize(columns, max(10, rows - 2))
    for number, lines in enumerate(panels):
        plotext.subplot(number // grid_columns + 1, number % grid_columns + 1)
        drawn = plotting.terminal_lines(lines)
        for steps, values, label, colour, marker in drawn:
            plotext.plot(steps, values, label=label if len(panels) == 1 else None, color=colour, marker=marker)
        if drawn:
            steps = [step for entry in drawn for step in entry[0]]
            values = [value for entry in drawn for value in entry[1]]
            across, down = max(2, columns // grid_columns // TICK_COLUMNS), max(2, rows // grid_rows // TICK_ROWS)
            plotext.xticks(*plotting.plot_ticks(min(steps), max(steps), across))
            plotext.yticks(*plotting.plot_ticks(min(values), max(values), down))
        for step, value, words in fork_points(lines, decided):
            plotext.scatter([step], [value], marker=FORK_MARKER, color="white", label=words if len(panels) == 1 else None)
        plotext.title(title if len(panels) == 1 else lines[0].label)
        plotext.xlabel("step")
    drawn = plotext.build()
    # Into a file or a pipe: the characters without colour codes.
    print(drawn if sys.stdout.isatty() else plotext.uncolorize(drawn))
