"""CPU, memory and GPU sampling (psutil + NVML) behind one interface, with a fake for tests."""
from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Mapping, Protocol

import psutil


@dataclass(frozen=True)
class Gpu:
    """One GPU as NVML (or the fake) sees it; None where a reading is not supported."""

    index: int
    name: str
    utilization_percent: float | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    fake: bool = False


@dataclass(frozen=True)
class Sample:
    """One reading of the machine."""

    time: float
    cpu_percent: tuple[float, ...]   # per core, since the previous sample
    memory_used_bytes: int
    memory_total_bytes: int
    gpus: tuple[Gpu, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Sample":
        gpus = tuple(Gpu(**gpu) for gpu in data.get("gpus", ()))
        return cls(time=data["time"], cpu_percent=tuple(data.get("cpu_percent", ())),
                   memory_used_bytes=data.get("memory_used_bytes", 0),
                   memory_total_bytes=data.get("memory_total_bytes", 0), gpus=gpus)


class Machine(Protocol):
    """What the daemon and the TUI read of a machine: Hardware, or FakeHardware in tests."""

    def gpu_indices(self) -> tuple[int, ...]: ...

    def sample(self) -> Sample: ...

    def close(self) -> None: ...


class Hardware:
    """The real machine: psutil for CPU and memory, NVML for GPUs when it is there.

    fake_gpus=K replaces NVML by K idle fake GPUs (placement on GPU-less machines); whoever builds
    the machine decides, so no test switch is read here.
    """

    def __init__(self, *, fake_gpus: int | None = None):
        self.fake_gpu_count = None if fake_gpus is None else max(0, int(fake_gpus))
        self._nvml = None if self.fake_gpu_count is not None else _Nvml.open()

    def gpu_indices(self) -> tuple[int, ...]:
        """The GPUs jobs can be placed on: all NVML sees, or those of the daemon's own CUDA_VISIBLE_DEVICES."""
        if self.fake_gpu_count is not None:
            return tuple(range(self.fake_gpu_count))
        found = self._nvml.indices() if self._nvml else ()
        allowed = visible_device_indices()
        return found if allowed is None else tuple(index for index in found if index in allowed)

    def sample(self) -> Sample:
        memory = psutil.virtual_memory()
        return Sample(time=time.time(), cpu_percent=tuple(psutil.cpu_percent(percpu=True)),
                      memory_used_bytes=int(memory.total - memory.available),
                      memory_total_bytes=int(memory.total), gpus=self._gpus())

    def _gpus(self) -> tuple[Gpu, ...]:
        if self.fake_gpu_count is not None:
            return tuple(Gpu(index, "fake GPU", 0.0, 0, 16 << 30, None, None, fake=True)
                         for index in range(self.fake_gpu_count))
        return self._nvml.read() if self._nvml else ()

    def close(self) -> None:
        if self._nvml:
            self._nvml.close()
            self._nvml = None


class FakeHardware:
    """A scripted machine for tests and TUI snapshots: fixed cores, memory and GPUs."""

    def __init__(self, *, cores: int = 4, gpus: int = 0, cpu_percent: float = 12.5,
                 memory_used_bytes: int = 4 << 30, memory_total_bytes: int = 16 << 30,
                 clock=lambda: 1_700_000_000.0):
        self.cores, self.gpu_count, self.cpu_level = cores, gpus, cpu_percent
        self.memory_used, self.memory_total, self.clock = memory_used_bytes, memory_total_bytes, clock

    def gpu_indices(self) -> tuple[int, ...]:
        return tuple(range(self.gpu_count))

    def sample(self) -> Sample:
        gpus = tuple(Gpu(index, "Fake GPU", 50.0, 2 << 30, 16 << 30, 60.0, 150.0, fake=True)
                     for index in range(self.gpu_count))
        return Sample(time=self.clock(), cpu_percent=(self.cpu_level,) * self.cores,
                      memory_used_bytes=self.memory_used, memory_total_bytes=self.memory_total, gpus=gpus)

    def close(self) -> None:
        pass


# The demo switch: read by entry points only (the daemon's start, the CLI's GPU check, the TUI's pane), so
# that a test or a library caller always says which machine it means.
FAKE_GPUS_VARIABLE = "RLSUP_FAKE_GPUS"


def fake_gpu_count(environment: Mapping[str, str] = os.environ) -> int | None:
    """RLSUP_FAKE_GPUS=K: pretend there are K GPUs (try placement on a GPU-less machine); None when unset."""
    text = environment.get(FAKE_GPUS_VARIABLE, "").strip()
    if not text:
        return None
    try:
        return max(0, int(text))
    except ValueError:
        return None


def machine_from_environment(environment: Mapping[str, str] = os.environ) -> Hardware | None:
    """A machine with fake GPUs when the switch is set; None leaves the real one to whoever builds it."""
    count = fake_gpu_count(environment)
    return None if count is None else Hardware(fake_gpus=count)


def visible_device_indices() -> set[int] | None:
    """Numeric CUDA_VISIBLE_DEVICES of this process (None when unset or given as UUIDs)."""
    text = os.environ.get("CUDA_VISIBLE_DEVICES")
    if text is None:
        return None
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not all(part.isdigit() for part in parts):
        return None
    return {int(part) for part in parts}


class _Nvml:
    """NVML through pynvml; every failure degrades to 'no GPU' or a missing reading."""

    _lock = threading.Lock()

    def __init__(self, module):
        self.module = module

    @classmethod
    def open(cls) -> "_Nvml | None":
        try:
            import pynvml
            with cls._lock:
                pynvml.nvmlInit()
        except Exception:  # no driver, no library, no permission: a machine without GPUs
            return None
        return cls(pynvml)

    def indices(self) -> tuple[int, ...]:
        try:
            return tuple(range(self.module.nvmlDeviceGetCount()))
        except Exception:
            return ()

    def read(self) -> tuple[Gpu, ...]:
        return tuple(self._read_one(index) for index in self.indices())

    def _read_one(self, index: int) -> Gpu:
        nvml = self.module
        handle = _try(lambda: nvml.nvmlDeviceGetHandleByIndex(index), None)
        if handle is None:
            return Gpu(index=index, name=f"GPU {index}")
        name = _try(lambda: nvml.nvmlDeviceGetName(handle), f"GPU {index}")
        if isinstance(name, bytes):
            name = name.decode(errors="replace")
        memory = _try(lambda: nvml.nvmlDeviceGetMemoryInfo(handle), None)
        return Gpu(
            index=index, name=name,
            utilization_percent=_try(lambda: float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu), None),
            memory_used_bytes=int(memory.used) if memory else None,
            memory_total_bytes=int(memory.total) if memory else None,
            temperature_c=_try(lambda: float(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)),
                               None),
            power_w=_try(lambda: nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0, None))

    def close(self) -> None:
        try:
            self.module.nvmlShutdown()
        except Exception:
            pass


def _try(read, default):
    try:
        return read()
    except Exception:  # an unsupported reading on this GPU model is not an error
        return default


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity where the platform tells it)."""
    affinity = _affinity()
    return len(affinity) if affinity is not None else os.cpu_count() or 1


def idle_cpus(sample_s: float = 0.1) -> float:
    """How many of this process's usable CPUs the machine leaves idle over the next sample_s seconds.

    Sampled, not read from the load average, which lags by a minute: right after a run ended (a user's
    previous job, a bench's previous column) it still counts that run's core as busy."""
    try:
        per_cpu = psutil.cpu_percent(interval=sample_s, percpu=True)
    except Exception:  # no CPU times on this platform: count every usable CPU idle
        return float(usable_cpus())
    affinity = _affinity()
    return sum(100.0 - percent for index, percent in enumerate(per_cpu)
               if affinity is None or index in affinity) / 100.0


def _affinity() -> set[int] | None:
    with contextlib.suppress(AttributeError):
        return os.sched_getaffinity(0)
    return None
