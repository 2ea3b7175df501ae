"""A result's plot for its page: each curve table's mean and seeds against its comparisons (the paper, a peer).

The SVG is the same bytes for the same result on the same matplotlib: a fixed hash salt for its ids and no date.
"""
from __future__ import annotations

from pathlib import Path

from matplotlib.ticker import FuncFormatter, MaxNLocator

from minatar_paper import BREAKOUT_EARLY, MARKS
from results_format import MEASURES, comparison_values, is_curve, mark_figure

# The measures a page plots: those with curves to compare, the paper's and a greedy evaluation's.
PLOTTED = ("training_mean_100", "greedy_eval")
PANEL_INCHES = (3.8, 3.0)
COLUMNS = 3


def plotted_tables(data: dict) -> list[dict]:
    return [table for table in data.get("tables", []) if table["measure"] in PLOTTED and is_curve(table)]


def comparison_curves(data: dict, table: dict, results: dict[str, dict]) -> list[tuple[str, list]]:
    """(label, points) of each comparison with figures for this table: the paper's at every mark its figure gives
    up to the table's last."""
    last = max(mark["x"] for mark in table["marks"])
    paper_marks = [mark for mark in sorted({*MARKS, *BREAKOUT_EARLY["DQN"]}) if mark <= last]
    curves = [(comparison["label"], comparison_values(comparison, table, results, paper_marks))
              for comparison in data.get("comparisons", [])]
    return [(label, sorted((x, value) for x, value in values.items() if x is not None)) for label, values in curves
            if values]


def draw_panel(axes, data: dict, table: dict, results: dict[str, dict]) -> None:
    measure = MEASURES[table["measure"]]
    for mark in table["marks"]:
        values = [value for value in mark.get("seeds", {}).values() if value is not None]
        axes.scatter([mark["x"]] * len(values), values, s=8, color="tab:blue", alpha=0.35, linewidths=0)
    points = table.get("curve") or [[mark["x"], mark_figure(mark)] for mark in table["marks"]
                                    if mark_figure(mark) is not None]
    axes.plot(*zip(*points), color="tab:blue", zorder=3, label=f"{data['learner']} (mean of seeds)")
    styles = iter([("tab:orange", "--"), ("tab:green", "--"), ("tab:red", ":"), ("tab:purple", ":")])
    for label, curve in comparison_curves(data, table, results):
        colour, line = next(styles, ("grey", "-."))
        axes.plot(*zip(*curve), color=colour, linestyle=line, marker="o", markersize=3, label=label)
    if table["measure"] == "greedy_eval" and data.get("solved") is not None:
        axes.axhline(data["solved"], color="grey", linewidth=0.8, label=f"solved ({data['solved']:g})")
    axes.set_title(f"{table['group']}: {measure.name}", fontsize=9)
    axes.set_xlabel(measure.x, fontsize=8)
    axes.tick_params(labelsize=7)
    axes.xaxis.set_major_locator(MaxNLocator(nbins=5))
    axes.xaxis.set_major_formatter(FuncFormatter(lambda x, _: short_count(x)))
    axes.legend(fontsize=6, loc="best")
    axes.grid(alpha=0.3)


def short_count(x: float) -> str:
    """An axis tick: 2500000 -> '2.5M', 500000 -> '500k'."""
    if abs(x) >= 1_000_000:
        return f"{x / 1_000_000:g}M"
    return f"{x / 1000:g}k" if abs(x) >= 1000 else f"{x:g}"


def write_plot(data: dict, results: dict[str, dict], path: Path) -> None:
    """Every curve table of the result, a panel each, into one SVG."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    tables = plotted_tables(data)
    columns = min(COLUMNS, len(tables))
    rows = -(-len(tables) // columns)
    with matplotlib.rc_context({"svg.hashsalt": "rlsup-results", "svg.fonttype": "path"}):
        figure, axes = pyplot.subplots(rows, columns, squeeze=False,
                                       figsize=(PANEL_INCHES[0] * columns, PANEL_INCHES[1] * rows))
        for table, panel in zip(tables, axes.flat):
            draw_panel(panel, data, table, results)
        for unused in list(axes.flat)[len(tables):]:
            unused.set_visible(False)
        figure.tight_layout()
        figure.savefig(path, format="svg", metadata={"Date": None})
        pyplot.close(figure)
