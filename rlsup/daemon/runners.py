"""One JobRunner over several: this machine's processes and a RayRunner per [[cluster]], each job routed to its own."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from rlsup import spec as specs
from rlsup.run import files as runfiles
from rlsup.daemon.clusters import Cluster, UnknownCluster, cluster_named
from rlsup.daemon.runner import JobRunner, Signal, WorkerHandle
from rlsup.jobs.state import Exit


class Runners:
    """The daemon's runner: a job goes where its job.toml's [job] cluster says ("" = local).

    A new cluster runner is another entry here and nothing else: ray_runner.RayRunner for Ray, and a
    Slurm one would be the same contract over sbatch, scancel --signal=INT --batch and sacct.
    clusters is read at each use, so daemon.toml reloaded by SIGHUP applies to the next start.
    """

    def __init__(self, local: JobRunner, clusters: Callable[[], tuple[Cluster, ...]],
                 make_cluster_runner: Callable[[Cluster], JobRunner] | None = None):
        self.local = local
        self.boot_id = local.boot_id
        self.clusters = clusters
        self.make_cluster_runner = make_cluster_runner or _ray_runner
        self.remote: dict[Cluster, JobRunner] = {}

    def _cluster_runner(self, name: str) -> JobRunner:
        try:
            cluster = cluster_named(self.clusters(), name)
        except UnknownCluster as error:
            raise OSError(f"[job] cluster = {name!r}: {error}") from None
        if cluster not in self.remote:
            self.remote[cluster] = self.make_cluster_runner(cluster)
        return self.remote[cluster]

    def _for_run(self, run_dir: Path) -> JobRunner:
        """The runner of the cluster the run's job.toml names (an unreadable one runs, and fails, locally)."""
        try:
            name = runfiles.read_run_spec(Path(run_dir)).job.cluster
        except specs.SpecError:
            name = ""
        return self._cluster_runner(name) if name else self.local

    def _for_boot(self, boot_id: str) -> JobRunner:
        return next((runner for runner in self.remote.values() if runner.boot_id == boot_id), None) or (
            self._cluster_runner(boot_id.split(":", 1)[1]) if boot_id.startswith("ray:") else self.local)

    def _following(self, job_id: int) -> JobRunner | None:
        return next((runner for runner in self._all() if runner.handle(job_id) is not None), None)

    def _all(self) -> list[JobRunner]:
        return [self.local, *self.remote.values()]

    # -- the JobRunner protocol ------------------------------------------------------------------

    def ready_to_start(self, run_dir: Path) -> bool:
        return self._for_run(run_dir).ready_to_start(run_dir)

    def start(self, job_id: int, run_dir: Path, gpus: tuple[int, ...] = ()) -> WorkerHandle:
        return self._for_run(run_dir).start(job_id, run_dir, gpus)

    def adopt(self, recorded: WorkerHandle) -> bool:
        return self._for_boot(recorded.boot_id).adopt(recorded)

    def adopt_run_holder(self, job_id: int, run_dir: Path) -> WorkerHandle | None:
        return self._for_run(run_dir).adopt_run_holder(job_id, run_dir)

    def run_held(self, run_dir: Path) -> bool:
        return self._for_run(run_dir).run_held(run_dir)

    def handle(self, job_id: int) -> WorkerHandle | None:
        runner = self._following(job_id)
        return runner.handle(job_id) if runner else None

    def handles(self) -> list[WorkerHandle]:
        return [worker for runner in self._all() for worker in runner.handles()]

    def signal(self, job_id: int, kind: Signal) -> bool:
        runner = self._following(job_id)
        return runner.signal(job_id, kind) if runner else False

    def reap(self) -> list[tuple[WorkerHandle, Exit]]:
        return [ended for runner in self._all() for ended in runner.reap()]

    def exit_of_lost(self, recorded: WorkerHandle) -> Exit:
        return self._for_boot(recorded.boot_id).exit_of_lost(recorded)

    def forget(self, job_id: int) -> None:
        for runner in self._all():
            runner.forget(job_id)

    def log_tail(self, run_dir: Path, lines: int) -> list[str]:
        return self._for_run(run_dir).log_tail(run_dir, lines)


def _ray_runner(cluster: Cluster) -> JobRunner:
    from rlsup.daemon.ray_runner import RayRunner  # the module imports ray only when it talks to a head

    return RayRunner(cluster)
