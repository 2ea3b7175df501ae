"""runfiles.tail_lines: the last lines of a log, read from its end within a fixed bound, whatever the file."""
from __future__ import annotations

import os

import pytest

from rlsup.own_files import NotOwnFile
from rlsup.run import files as runfiles

HUGE = 24 * 1024 * 1024  # a `\r` progress bar's one line, as issue 23 found in a worker.log


def test_a_24_mib_line_is_shown_cut_to_the_bound_with_a_marker(tmp_path) -> None:
    log = tmp_path / "worker.log"
    with open(log, "wb") as handle:
        handle.write(b"started\n")
        handle.write(b"x" * HUGE + b"END")
    lines = runfiles.tail_lines(log, 50)
    assert len(lines) == 1, [line[:80] for line in lines]
    assert lines[0].startswith(runfiles.CUT_MARK) and lines[0].endswith("xEND")
    # At most the bound is read, however large the file: the line shown is the bound's worth, no more.
    assert len(lines[0]) <= runfiles.TAIL_BYTES + len(runfiles.CUT_MARK)


def test_lines_within_the_bound_are_whole_and_a_cut_one_is_marked_only_when_shown(tmp_path) -> None:
    log = tmp_path / "worker.log"
    with open(log, "wb") as handle:
        handle.write(b"y" * HUGE + b"\n" + b"".join(b"line %d\n" % number for number in range(100)))
    assert runfiles.tail_lines(log, 3) == ["line 97", "line 98", "line 99"]
    everything = runfiles.tail_lines(log, 10_000)
    assert everything[0].startswith(runfiles.CUT_MARK) and everything[-1] == "line 99"
    assert len(everything) == 101


def test_a_file_read_whole_has_no_marker(tmp_path) -> None:
    log = tmp_path / "worker.log"
    log.write_bytes(b"first\nsecond\n")
    assert runfiles.tail_lines(log, 50) == ["first", "second"]
    # A cut that falls just after a newline cuts no line.
    log.write_bytes(b"z" * (runfiles.TAIL_BYTES - 1) + b"\n" + b"w" * runfiles.TAIL_BYTES)
    assert runfiles.tail_lines(log, 50) == ["w" * runfiles.TAIL_BYTES]


def test_a_fifo_or_a_directory_is_no_log_and_never_blocks(tmp_path) -> None:
    fifo = tmp_path / "worker.log"
    os.mkfifo(fifo)  # opening it to read would wait for a writer for ever
    assert runfiles.tail_lines(fifo, 50) == []
    assert runfiles.tail_lines(tmp_path, 50) == []
    assert runfiles.tail_lines(tmp_path / "missing.log", 50) == []


def test_a_log_linked_to_a_file_outside_the_run_is_not_read(tmp_path) -> None:
    """Issue 49 item 10: `rlsup logs`, the TUI and a failed job's stored reason printed a secret file's text
    through a worker.log that was a symbolic link to it."""
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"the secret\n")
    log = tmp_path / "worker.log"
    log.symlink_to(secret)
    assert not any("the secret" in line for line in runfiles.tail_lines(log, 50))
    for read in (lambda: runfiles.read_tail(log, 50), lambda: runfiles.read_appended(log, 0)):  # logs, logs -f
        with pytest.raises(NotOwnFile, match=f"{log} is a symbolic link"):
            read()


def test_following_a_log_reads_what_was_appended_and_starts_over_when_it_is_cut_back(tmp_path) -> None:
    log = tmp_path / "worker.log"
    log.write_bytes(b"before\n")
    data, offset = runfiles.read_appended(log, None)
    assert (data, offset) == (b"", 7)
    with open(log, "ab") as handle:
        handle.write(b"after\n")
    assert runfiles.read_appended(log, offset) == (b"after\n", 13)
    log.write_bytes(b"new\n")
    assert runfiles.read_appended(log, 13) == (b"new\n", 4)
