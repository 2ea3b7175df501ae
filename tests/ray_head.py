"""A real Ray head on loopback for tests and benches, stopped by the pids of its own process tree."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil

RAY_WORKER_PORTS = range(10_002, 20_000)  # Ray's default worker-port range: every port below stays out of it
PORT_OPTIONS = ("--port", "--dashboard-port", "--ray-client-server-port", "--node-manager-port",
                "--object-manager-port", "--metrics-export-port", "--dashboard-agent-listen-port",
                "--dashboard-agent-grpc-port", "--runtime-env-agent-port")


def free_ports(count: int) -> list[int]:
    """Ports free now, from the kernel's ephemeral range (above Ray's worker ports)."""
    sockets, ports = [], []
    while len(ports) < count:
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        sockets.append(listener)
        port = listener.getsockname()[1]
        if port not in RAY_WORKER_PORTS:
            ports.append(port)
    for listener in sockets:
        listener.close()
    return ports


class RayHead:
    """`ray start --head --block` as our child: every Ray process it starts is in its tree, so stop() ends
    exactly those, by pid (never Ray's own stop command, which would end every Ray process on the machine)."""

    def __init__(self, *, num_cpus: int = 2, num_gpus: int = 2, python_path: str | None = None,
                 ports: dict[str, int] | None = None):
        """ports: those of a head stopped before, to start a fresh one at the same address (a restarted head)."""
        self.temp_dir = Path(tempfile.mkdtemp(prefix="rlsupray-", dir="/tmp"))  # Ray's socket paths must be short
        self.ports = ports = ports or dict(zip(PORT_OPTIONS, free_ports(len(PORT_OPTIONS))))
        self.address = f"http://127.0.0.1:{ports['--dashboard-port']}"
        ray = Path(sys.executable).with_name("ray")
        command = [str(ray), "start", "--head", "--block", "--node-ip-address", "127.0.0.1",
                   "--dashboard-host", "127.0.0.1", "--include-dashboard", "true", "--num-cpus", str(num_cpus),
                   "--num-gpus", str(num_gpus), "--temp-dir", str(self.temp_dir), "--disable-usage-stats",
                   *[part for option, port in ports.items() for part in (option, str(port))]]
        environment = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0",
                       # Jobs run `python`: this interpreter, with the rlsup under test importable.
                       "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        if python_path:
            environment["PYTHONPATH"] = python_path
        self.log = open(self.temp_dir / "head.log", "wb")
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
                                        env=environment, start_new_session=True)
        self.processes: dict[int, psutil.Process] = {self.process.pid: psutil.Process(self.process.pid)}

    def wait_ready(self, timeout: float = 180) -> None:
        """Until the job server answers; raises with the head's output when it does not come up."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.collect()
            if self.process.poll() is not None:
                break
            try:
                with urllib.request.urlopen(f"{self.address}/api/version", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"the Ray head did not come up:\n{(self.temp_dir / 'head.log').read_text()[-3000:]}")

    def collect(self) -> None:
        """Remember every process of the head's tree now (a reparented orphan is still stopped later)."""
        try:
            children = psutil.Process(self.process.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return
        for child in children:
            self.processes.setdefault(child.pid, child)

    def stop(self) -> None:
        """SIGKILL every process of the tree, by pid (each still the very process seen), and remove the temp dir."""
        self.collect()
        alive = [process for process in self.processes.values() if process.is_running()]  # is_running: same start
        for process in alive:
            try:
                process.send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(alive, timeout=30)
        self.process.wait(timeout=30)
        self.log.close()
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def started_head(ports: dict[str, int] | None = None) -> RayHead:
    """A loopback head with 2 CPUs and 2 fake GPUs whose jobs import this rlsup (a test skips without ray)."""
    import pytest

    try:
        import ray  # noqa: F401
    except ImportError as error:
        pytest.skip(f"ray is not installed ({error}): pip install 'rlsup[ray]' to run the cluster tests")
    root = Path(__file__).resolve().parents[1]
    head = RayHead(num_cpus=2, num_gpus=2, ports=ports,
                   python_path=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))
    try:
        head.wait_ready()
    except BaseException:
        head.stop()
        raise
    return head


def lab_daemon(harness, address: str, run_root: Path, **settings) -> Path:
    """The test's daemon (with these daemon.toml settings) and cluster "lab" at address; returns its run_root."""
    from rlsup import paths

    harness.settings(**settings)
    with open(harness.home / paths.DAEMON_SETTINGS, "a") as daemon_settings:
        daemon_settings.write(f'\n[[cluster]]\nname = "lab"\naddress = "{address}"\nrun_root = "{run_root}"\n')
    harness.start_daemon()
    return run_root
