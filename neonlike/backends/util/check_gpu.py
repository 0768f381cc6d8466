"""neon's GPU checks: compute capability and device count through PyCUDA; 0 where PyCUDA or a
GPU is missing (never an exception: callers ask in order to decide whether to use a GPU)."""
from __future__ import annotations


def _devices() -> list:
    try:
        import pycuda.driver as drv
        drv.init()
        return [drv.Device(i) for i in range(drv.Device.count())]
    except Exception:  # no pycuda, no driver, no device
        return []


def get_compute_capability(device_id: int | None = None, verbose: bool = False) -> float:
    """The compute capability (major.minor) of the device, or the highest of all; 0 without one."""
    devices = _devices()
    if device_id is not None:
        devices = devices[device_id:device_id + 1]
    caps = [float("%d.%d" % d.compute_capability()) for d in devices]
    if verbose:
        print(f"compute capabilities: {caps or 'no CUDA device'}")
    return max(caps, default=0.0)


def ensure_gpu_capability(device_id: int) -> None:
    if get_compute_capability(device_id) < 3.0:
        raise RuntimeError(f"Device {device_id} does not have CUDA compute capability 3.0 or "
                           "greater")


def get_device_count(verbose: bool = False) -> int:
    count = len(_devices())
    if verbose:
        print(f"{count} CUDA device(s)")
    return count
