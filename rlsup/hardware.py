"""CPU, memory and GPU sampling (psutil + NVML) behind one interface, with a fake for tests."""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Mapping, NamedTuple, Protocol

import psutil

from rlsup.formatting import GIB, whole


FAKE_GPU_MEMORY_BYTES = 16 * GIB  # a fake GPU's memory unless RLSUP_FAKE_GPUS or the caller says otherwise
# The most fake GPUs a machine has: beyond the 16 of the largest NVLink boxes (DGX-2, HGX-2) and the 20 of the
# densest PCIe chassis. A larger count is read as this one; 100,000 made each stored hardware sample megabytes of
# JSON, and a count of 20 digits overflowed the scheduler's tuple(range()).
MAX_GPUS = 64


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

    @classmethod
    def from_stored(cls, data: dict | None) -> "Sample | None":
        """A sample the daemon stored, or None for none or one from another version (not a failure)."""
        if data is None:
            return None
        try:
            return cls.from_dict(data)
        except (KeyError, TypeError, ValueError):
            return None


def gpu_totals(sample: Sample | dict | None) -> dict[int, int | None]:
    """Each GPU's total memory as a hardware sample has it (the daemon's newest, stored: NVML's, or a fake's)."""
    if isinstance(sample, dict):
        sample = Sample.from_stored(sample)
    return {gpu.index: gpu.memory_total_bytes for gpu in sample.gpus} if sample else {}


@dataclass(frozen=True)
class GpuMemory:
    """What one worker holds on its GPU, by two counts; either may be missing."""

    reserved_peak_bytes: int | None  # torch's caching allocator: the most it reserved since the worker started
    process_bytes: int | None        # NVML's count for the worker's pid, CUDA context included, where it sees it

    @property
    def figure(self) -> int | None:
        """The one number placement goes by: the larger count, since NVML's adds the CUDA context."""
        counts = [count for count in (self.reserved_peak_bytes, self.process_bytes) if count is not None]
        return max(counts) if counts else None

    def to_json(self) -> dict:
        return {"reserved_peak_bytes": self.reserved_peak_bytes, "process_bytes": self.process_bytes}

    @classmethod
    def from_json(cls, raw: object) -> GpuMemory | None:
        """Read back checked (a stranger's file): None unless some count is a whole number of bytes."""
        if not isinstance(raw, dict):
            return None
        memory = cls(byte_count(raw.get("reserved_peak_bytes")), byte_count(raw.get("process_bytes")))
        return memory if memory.figure is not None else None


# More bytes than any machine's memory (an exbibyte), and still far inside SQLite's 64-bit integers.
BYTES_LIMIT = 1 << 60


def byte_count(value: object) -> int | None:
    count = whole(value)
    return count if count is not None and 0 <= count < BYTES_LIMIT else None


class Machine(Protocol):
    """What the daemon and the TUI read of a machine: Hardware, or FakeHardware in tests."""

    def gpu_indices(self) -> tuple[int, ...]: ...

    def gpu_memory_totals(self) -> dict[int, int | None]: ...

    def sample(self) -> Sample: ...

    def close(self) -> None: ...


class Hardware:
    """The real machine: psutil for CPU and memory, NVML for GPUs when it is there.

    fake_gpus=K replaces NVML by K idle fake GPUs of fake_gpu_memory_bytes each (placement on GPU-less
    machines); whoever builds the machine decides, so no test switch is read here.
    """

    def __init__(self, *, fake_gpus: int | None = None, fake_gpu_memory_bytes: int = FAKE_GPU_MEMORY_BYTES):
        self.fake_gpu_count = None if fake_gpus is None else min(max(0, int(fake_gpus)), MAX_GPUS)
        self.fake_gpu_memory_bytes = fake_gpu_memory_bytes
        self._nvml = None if self.fake_gpu_count is not None else _Nvml.open()
        self._totals: dict[int, int] = {}  # a GPU's total memory never changes: NVML is asked once per GPU

    def gpu_indices(self) -> tuple[int, ...]:
        """The GPUs jobs can be placed on: all NVML sees, or those of the daemon's own CUDA_VISIBLE_DEVICES."""
        if self.fake_gpu_count is not None:
            return tuple(range(self.fake_gpu_count))
        found = self._nvml.indices() if self._nvml else ()
        allowed = visible_device_indices()
        return found if allowed is None else tuple(index for index in found if index in allowed)

    def gpu_memory_totals(self) -> dict[int, int | None]:
        """Each placeable GPU's total memory in bytes; None where NVML cannot read it."""
        if self.fake_gpu_count is not None:
            return {index: self.fake_gpu_memory_bytes for index in self.gpu_indices()}
        for index in self.gpu_indices():
            if index not in self._totals and (total := self._nvml.memory_total(index)) is not None:
                self._totals[index] = total
        return {index: self._totals.get(index) for index in self.gpu_indices()}

    def sample(self) -> Sample:
        memory = psutil.virtual_memory()
        return Sample(time=time.time(), cpu_percent=tuple(psutil.cpu_percent(percpu=True)),
                      memory_used_bytes=int(memory.total - memory.available),
                      memory_total_bytes=int(memory.total), gpus=self._gpus())

    def _gpus(self) -> tuple[Gpu, ...]:
        if self.fake_gpu_count is not None:
            return tuple(Gpu(index, "fake GPU", 0.0, 0, self.fake_gpu_memory_bytes, None, None, fake=True)
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
                 gpu_memory_bytes: int = FAKE_GPU_MEMORY_BYTES, clock=lambda: 1_700_000_000.0):
        self.cores, self.gpu_count, self.cpu_level = cores, gpus, cpu_percent
        self.memory_used, self.memory_total, self.clock = memory_used_bytes, memory_total_bytes, clock
        self.gpu_memory = gpu_memory_bytes

    def gpu_indices(self) -> tuple[int, ...]:
        return tuple(range(self.gpu_count))

    def gpu_memory_totals(self) -> dict[int, int | None]:
        return {index: self.gpu_memory for index in self.gpu_indices()}

    def sample(self) -> Sample:
        gpus = tuple(Gpu(index, "Fake GPU", 50.0, 2 << 30, self.gpu_memory, 60.0, 150.0, fake=True)
                     for index in range(self.gpu_count))
        return Sample(time=self.clock(), cpu_percent=(self.cpu_level,) * self.cores,
                      memory_used_bytes=self.memory_used, memory_total_bytes=self.memory_total, gpus=gpus)

    def close(self) -> None:
        pass


# The demo switch: read by entry points only (the daemon's start and the CLI's GPU check; the TUI shows the
# daemon's stored readings), so that a test or a library caller always says which machine it means.
FAKE_GPUS_VARIABLE = "RLSUP_FAKE_GPUS"


# K, or KxSIZE with SIZE in GiB ("2x80GiB", "4x40.5GiB"); ASCII digits only, so that no other script's
# digits or a float's exponent ("1e400") slips through int() or float().
_FAKE_GPUS_PATTERN = re.compile(r"(\d+)(?:\s*x\s*(\d+(?:\.\d+)?)\s*gib)?", re.ASCII | re.IGNORECASE)


class FakeGpus(NamedTuple):
    """What RLSUP_FAKE_GPUS asks for: how many fake GPUs, and the memory of each."""

    count: int
    memory_bytes: int


def fake_gpus(environment: Mapping[str, str] = os.environ) -> FakeGpus | None:
    """RLSUP_FAKE_GPUS=K or KxSIZE: pretend there are K GPUs (try placement on a GPU-less machine), at most
    MAX_GPUS, of SIZE (default 16 GiB); None when unset or not of that form."""
    match = _FAKE_GPUS_PATTERN.fullmatch(environment.get(FAKE_GPUS_VARIABLE, "").strip())
    if not match:
        return None
    # Capped before int(), which refuses more than 4,300 digits.
    digits = match[1].lstrip("0") or "0"
    count = MAX_GPUS if len(digits) > len(str(MAX_GPUS)) else min(int(digits), MAX_GPUS)
    if match[2] is None:
        return FakeGpus(count, FAKE_GPU_MEMORY_BYTES)
    size = float(match[2]) * GIB
    # Less than a byte is no GPU; more than BYTES_LIMIT (hundreds of digits overflow to inf) is no GPU either.
    memory_bytes = int(size) if size < BYTES_LIMIT else 0
    return FakeGpus(count, memory_bytes) if memory_bytes > 0 else None


def machine_from_environment(environment: Mapping[str, str] = os.environ) -> Hardware | None:
    """A machine with fake GPUs when the switch is set; None leaves the real one to whoever builds it."""
    asked = fake_gpus(environment)
    return None if asked is None else Hardware(fake_gpus=asked.count, fake_gpu_memory_bytes=asked.memory_bytes)


def visible_device_indices() -> tuple[int, ...] | None:
    """Numeric CUDA_VISIBLE_DEVICES of this process in its order, which is cuda:0's, cuda:1's...

    None when unset or given as UUIDs."""
    text = os.environ.get("CUDA_VISIBLE_DEVICES")
    if text is None:
        return None
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not all(part.isdigit() for part in parts):
        return None
    return tuple(int(part) for part in parts)


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

    def memory_total(self, index: int) -> int | None:
        handle = _try(lambda: self.module.nvmlDeviceGetHandleByIndex(index), None)
        memory = _try(lambda: self.module.nvmlDeviceGetMemoryInfo(handle), None) if handle is not None else None
        return int(memory.total) if memory else None

    def process_memory(self, pid: int) -> int | None:
        """What NVML counts for one process on the GPU where it holds the most: a figure per GPU, as placement
        packs by (a sum over a 2-GPU job's GPUs is more than either holds); None where it lists the process on
        none."""
        counts = []
        for index in self.indices():
            handle = _try(lambda: self.module.nvmlDeviceGetHandleByIndex(index), None)
            listed = _try(lambda: self.module.nvmlDeviceGetComputeRunningProcesses(handle), []) if handle else []
            used = [int(entry.usedGpuMemory) for entry in listed
                    if entry.pid == pid and isinstance(getattr(entry, "usedGpuMemory", None), int)]
            counts += [sum(used)] if used else []
        return max(counts) if counts else None

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


@functools.cache
def _worker_nvml() -> _Nvml | None:
    """NVML for a worker's reports, opened on the first and then kept: nvmlInit is not free."""
    return _Nvml.open()


def process_gpu_memory_bytes(pid: int) -> int | None:
    """NVML's count of one process's GPU memory (CUDA context included); None without NVML, or where it does
    not list the pid (a container's pid namespace hides it)."""
    nvml = _worker_nvml()
    return nvml.process_memory(pid) if nvml else None


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
