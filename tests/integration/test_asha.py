"""ASHA through a real daemon: members pause exactly at the rungs, the right ones go on, and nothing is decided twice."""
from __future__ import annotations

import collections
from pathlib import Path

import pytest

from rlsup.checkpoint.manifest import list_checkpoints
from rlsup.jobs import standings
from rlsup.jobs.state import State

TOTAL, RUNGS = 1_800, (600, 1_200)
SCHEDULER = '\n[scheduler]\nkind = "asha"\nmetric = "eval_return"\nrungs = [600, 1_200]\nkeep = 0.5\n'


def asha_file(harness, name: str) -> Path:
    path = harness.job_file(name, total_steps=TOTAL, checkpoint_every=0)
    path.write_text(path.read_text() + SCHEDULER)
    return path


def submit(harness, path: Path, experiment: str, seeds: str = "1-4") -> list[int]:
    code, out, err = harness.cli("submit", path, "--seeds", seeds, "--experiment", experiment)
    assert code == 0, err
    return [int(line) for line in out.split()]


def settled(harness, ids: list[int]) -> list:
    """Every member done or stopped for good (paused with ASHA's reason)."""
    def over():
        jobs = [harness.job(job_id) for job_id in ids]
        return jobs if all(job.state is State.DONE or (job.state is State.PAUSED and "stopped by ASHA" in job.reason)
                           for job in jobs) else None
    return harness.wait_for(over, timeout=240, what="every member done or stopped",
                            report=lambda: harness.report())


def verdicts(harness, ids: list[int]) -> list[tuple[int, int, str]]:
    """(seed, step, verdict) of every decision, by member seed: the same experiment gives the same list."""
    seed_of = {job_id: seed for seed, job_id in enumerate(ids, 1)}
    return sorted((seed_of[decision.job_id], decision.step, decision.verdict)
                  for decision in standings.decisions(harness.store, ids))


def kill_the_daemon_at_decisions(harness, ids: list[int], counts: tuple[int, ...]) -> None:
    """SIGKILL the daemon as soon as the store holds each count of decisions, and start another."""
    for count in counts:
        harness.wait_for(lambda: len(standings.decisions(harness.store, ids)) >= count, timeout=180,
                         what=f"{count} decisions", report=lambda: harness.report())
        harness.kill_daemon()
        harness.start_daemon()


@pytest.mark.slow  # whole experiments through a daemon: their files start first
def test_members_pause_at_each_rung_the_best_go_on_and_a_killed_daemon_decides_the_same(harness) -> None:
    """Two experiments of one file: the second's daemon is SIGKILLed as its first decision is recorded and
    again at the first of rung 2; both make the same decisions, each once. Then a stopped member resumed by
    hand trains on to the end, bit for bit as a member never stopped.

    One job at a time, so that members reach a rung in the order they were queued and the two experiments'
    reports come in the same order (the promotions would be the same in any order: issue 50 item 2)."""
    harness.settings(cpu_jobs=1)
    harness.start_daemon()
    path = asha_file(harness, "asha")
    first, second = submit(harness, path, "asha-a"), submit(harness, path, "asha-b")
    kill_the_daemon_at_decisions(harness, second, (1, 5))
    settled(harness, first)
    settled(harness, second)

    for ids in (first, second):
        held = standings.standings(harness.store, ids)
        # Each member paused exactly at the first rung, with a pause checkpoint and its evaluation there.
        assert all([standing.step for standing in held[job_id]][:1] == [600] for job_id in ids), held
        for job_id in ids:
            steps = [entry.step for entry in list_checkpoints(Path(harness.job(job_id).run_dir))]
            assert 600 in steps, steps
        values = {job_id: held[job_id][0].values["eval_return"] for job_id in ids}
        assert all(value is not None for value in values.values()), values
        # The top half by its evaluation at rung 1 is promoted, the rest stopped there; then one of two.
        best_two = sorted(ids, key=lambda job_id: (-values[job_id], job_id))[:2]
        decided = {(decision.job_id, decision.step): decision for decision in standings.decisions(harness.store, ids)}
        assert {job_id for (job_id, step), decision in decided.items()
                if step == 600 and decision.verdict == "promoted"} == set(best_two)
        assert sorted(collections.Counter(step for _, step in decided).items()) == [(600, 4), (1_200, 2)]
        done = [job_id for job_id in ids if harness.job(job_id).state is State.DONE]
        assert len(done) == 1 and done[0] in best_two and harness.job(done[0]).step == TOTAL
        for job_id in ids:
            job = harness.job(job_id)
            if job_id not in best_two:
                assert job.step == 600 and job.reason.startswith("stopped by ASHA at rung 1: eval_return "), job.reason
                assert "(kept: top 2)" in job.reason
        # Each decision an event, once, however often the daemon died.
        events = [event.message for job_id in ids for event in harness.events(job_id, "decision")]
        assert len(events) == 6 and sum("promoted by ASHA" in message for message in events) == 3
    code, out, _ = harness.cli("status", "asha-a")
    assert code == 0 and "ASHA on eval_return: rungs at 600, 1,200 steps" in out, out
    assert "rung 1 at 600: 4 reported" in out and "rung 2 at 1,200: 2 reported" in out, out
    code, out, _ = harness.cli("list")
    assert out.count("paused: stopped at rung 1") == 4 and out.count("paused: stopped at rung 2") == 2, out
    # The same file, the same seeds, the same order of reports: the same decisions, however often the daemon
    # died (a replay re-derives them from the standings).
    assert verdicts(harness, first) == verdicts(harness, second)

    stopped = next(job_id for job_id in first if harness.job(job_id).state is State.PAUSED)
    code, _, err = harness.cli("resume", str(stopped))
    assert code == 0, err
    resumed = harness.wait_state(stopped, State.DONE)
    assert resumed.step == TOTAL
    # A lone job of the same seed, trained straight: the same network at the end, bit for bit.
    lone = harness.submit(harness.job_file("straight", seed=first.index(stopped) + 1, total_steps=TOTAL,
                                           checkpoint_every=0))
    straight = harness.wait_state(lone.id, State.DONE)
    assert (harness.newest_checkpoint(resumed.run_dir).fingerprint
            == harness.newest_checkpoint(straight.run_dir).fingerprint)


def event_ids(harness, ids: list[int], kind: str, text: str) -> list[int]:
    """The ids (the store's order) of the members' events of `kind` whose message holds `text`."""
    return sorted(event.id for job_id in ids for event in harness.events(job_id, kind) if text in event.message)


def test_on_one_slot_the_first_member_past_rung_1_waits_at_rung_2_until_rung_1_is_decided(harness) -> None:
    """Issue 50 item 2: a rung after the first counted as expected only the members already promoted into it,
    so on one slot the first member promoted past rung 1 ran on (a promoted member's id is below the waiting
    ones') and reached rung 2 alone: "ranks 1 of 1", promoted again, never compared. Now the rung waits for
    every member that can still reach it, and its decisions are successive halving's."""
    harness.settings(cpu_jobs=1)
    harness.start_daemon()
    ids = submit(harness, asha_file(harness, "one-slot"), "one-slot")
    settled(harness, ids)
    reached_first = event_ids(harness, ids, "state", "reached rung 1 of ASHA")
    reached_second = event_ids(harness, ids, "state", "reached rung 2 of ASHA")
    # The case of the issue happened: a member reached rung 2 before the last member had reported at rung 1.
    assert len(reached_first) == 4 and len(reached_second) == 2 and reached_second[0] < reached_first[-1], \
        harness.report()
    # Rung 2 decided nothing before rung 1 was complete, and then compared both members that reached it.
    assert event_ids(harness, ids, "decision", "at rung 2")[0] > reached_first[-1], harness.report()
    decisions = {(decision.job_id, decision.step): decision for decision in standings.decisions(harness.store, ids)}
    second = sorted(decision.reason.split(": ", 1)[1] for (_, step), decision in decisions.items() if step == 1_200)
    assert len(second) == 2 and all("of 2 (kept: top 1)" in reason for reason in second), second
    # The promotions are synchronous successive halving's: the top two at rung 1, the better of them at rung 2.
    held = standings.standings(harness.store, ids)
    best_first = lambda step: sorted(  # noqa: E731
        (job_id for job_id in ids if any(standing.step == step for standing in held[job_id])),
        key=lambda job_id: (-next(s.values["eval_return"] for s in held[job_id] if s.step == step), job_id))
    promoted = {key for key, decision in decisions.items() if decision.verdict == standings.PROMOTED}
    assert promoted == {(job_id, 600) for job_id in best_first(600)[:2]} | {(best_first(1_200)[0], 1_200)}


def test_a_member_waiting_at_its_rung_is_not_resumed_by_hand_and_a_killed_member_lets_the_rung_decide(harness):
    """A member paused by hand before it starts holds rung 1's decision up: the member that reached the rung
    waits there. Resuming it would train no step and pause it again, so that is refused in one sentence saying
    what the decision waits for; killing the paused member lets ASHA decide without it."""
    harness.settings(cpu_jobs=1)
    harness.start_daemon()
    first, second = submit(harness, asha_file(harness, "held"), "held", seeds="1-2")
    code, _, err = harness.cli("pause", str(second))
    assert code == 0, err
    harness.wait_for(lambda: harness.job(first).reason.startswith("reached rung 1 of ASHA"), timeout=120,
                     what="the first member waiting at rung 1", report=lambda: harness.report())
    code, out, err = harness.cli("resume", str(first))
    assert code != 0 and "Traceback" not in err and len(err.strip().splitlines()) == 1, (code, out, err)
    assert f"job {first} is waiting at rung 1 for its experiment's decision" in err, err
    assert "rlsup status held" in err and "paused by hand" in err, err
    code, out, _ = harness.cli("list")
    assert "paused: waiting at rung 1" in out, out
    assert harness.job(first).state is State.PAUSED and not standings.decisions(harness.store, [first])

    code, _, err = harness.cli("kill", str(second))
    assert code == 0, err
    done = harness.wait_state(first, State.DONE)
    assert done.step == TOTAL
    assert [decision.verdict for decision in standings.decisions(harness.store, [first])] == ["promoted"] * 2


def test_a_worker_restarted_at_its_rung_pauses_there_again_instead_of_skipping_it(harness, tmp_path) -> None:
    """A worker killed after its pause checkpoint at a rung, before exit.json, is restarted from that
    checkpoint: it must report the rung again, not train past it (a hold at the step reached is not spent)."""
    import json
    import subprocess
    import sys

    from rlsup import client, paths

    jobs = client.submit_experiment(asha_file(harness, "restart"), seeds=(1, 2), home=harness.home,
                                    start_daemon=False)
    run_dir = Path(jobs[0].run_dir)
    environment = {**__import__("os").environ, "RLSUP_HOME": str(harness.home)}
    outcomes = []
    for _ in range(2):  # the first start reaches the rung; the second is the restart from its pause checkpoint
        process = subprocess.run([sys.executable, "-m", "rlsup.worker", str(run_dir)], env=environment,
                                 capture_output=True, text=True, timeout=120)
        record = json.loads((run_dir / paths.EXIT_FILE).read_text())
        outcomes.append((process.returncode, record["step"], record["standing"]["step"]))
        assert record["standing"]["eval_return"] is not None
    assert outcomes == [(77, 600, 600), (77, 600, 600)]
