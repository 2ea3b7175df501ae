"""`rlsup checkpoints`, and the one checkpoint table that it and `rlsup status` print."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from rlsup import formatting
from rlsup.checkpoint.manifest import CheckpointEntry, list_checkpoints, scan_checkpoints, verify
from rlsup.cli.arguments import resolve_run

VERIFIED_MARKS = {True: "yes", False: "NO", None: "-"}


def register(subparsers: argparse._SubParsersAction) -> None:
    checkpoints = subparsers.add_parser("checkpoints", help="list a run's checkpoints")
    checkpoints.add_argument("run", metavar="RUN", help="run directory, job id or name, or latest")
    checkpoints.add_argument("--json", action="store_true", help="a JSON list of objects")
    checkpoints.add_argument("--verify", action="store_true", help="check every file's checksum")
    checkpoints.set_defaults(handler=command_checkpoints)


def command_checkpoints(args: argparse.Namespace) -> int:
    run_dir = resolve_run(args.run)
    entries, invalid = scan_checkpoints(run_dir, strict=True)
    rows = [checkpoint_row(entry, verify(entry.path) if args.verify else None, checked=args.verify)
            for entry in entries]
    # A checkpoint its worker rotated away while it was read is no longer there to list: not damage.
    rows = [row for row in rows if row["verified"] is not False or Path(row["path"]).is_dir()]
    # A directory whose manifest is missing or broken is no checkpoint, but it must not go unseen.
    broken = [{"step": refused.step, "path": str(refused.path), "verified": False, "problem": refused.problem}
              for refused in invalid if refused.path.is_dir()]
    code = 1 if any(row["verified"] is False for row in rows + broken) else 0
    if args.json:
        print(json.dumps(rows + broken, indent=1))
        return code
    for line in checkpoint_table(rows):
        print(line)
    for row in broken:
        print(f"{Path(row['path']).name}: not a usable checkpoint ({row['problem']})")
    return code


def checkpoint_row(entry: CheckpointEntry, problem: str | None = None, *, checked: bool = False) -> dict:
    """What --json says of a checkpoint: its manifest, and the verdict when it was checked (None if not)."""
    return {**entry.to_json(), "verified": (problem is None) if checked else None, "problem": problem}


def checkpoint_table(rows: list[dict]) -> list[str]:
    """The lines of the checkpoint table: step, time, reason, size, fingerprint and verdict."""
    lines = [f"{'step':>12}  {'time':19}  {'reason':16}  {'size':>10}  {'fingerprint':12}  verified"]
    for row in rows:
        when = formatting.clock_time(row["time"], formatting.DATE_AND_TIME)
        lines.append(f"{row['step']:>12,}  {when:19}  {row['label']:16}  {formatting.byte_size(row['bytes']):>10}  "
                     f"{row['fingerprint'][:12]:12}  {VERIFIED_MARKS[row['verified']]}"
                     + (f"  ({row['problem']})" if row["problem"] else ""))
    return lines


def run_checkpoint_lines(run_dir: Path) -> list[str]:
    """The table of a run's checkpoints as they are listed (not verified), or a line saying there are none."""
    entries = list_checkpoints(run_dir)
    return checkpoint_table([checkpoint_row(entry) for entry in entries]) if entries else ["none yet"]
