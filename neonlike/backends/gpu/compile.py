"""CUDA C -> cubin with nvcc, cached in memory and on disk. Needs nvcc, never a GPU or pycuda
(pycuda only tells the current device's architecture where `arch` is not given).

    compile_cubin(source, name, arch="sm_90") -> bytes   (load with pycuda's module_from_buffer)

On disk a binary is `<cache dir>/cuda/<name>_<sha256 of (source, arch, nvcc --version)>.cubin`,
written atomically (temp file + rename). A file that is not a whole ELF image (a truncated or
corrupt write, a foreign file) is recompiled and rewritten, never trusted.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import struct
import subprocess
import tempfile
import threading
from pathlib import Path

from ...memo import Memo
from ..cache import cache_dir

NVCC_OPTIONS = ("--cubin",)
_MEMORY = Memo("gpu.cubins", 4096)  # digest -> cubin
_VERSION = Memo("gpu.nvcc_versions", 8)   # nvcc path -> its `--version` text
_LOCK = threading.Lock()
STATS = {"memory_hits": 0, "disk_hits": 0, "compiles": 0, "corrupt": 0}


def nvcc_path() -> str:
    """The nvcc on PATH ($NEONLIKE_NVCC overrides), or RuntimeError saying what to install."""
    nvcc = os.environ.get("NEONLIKE_NVCC") or shutil.which("nvcc")
    if not nvcc or not os.path.exists(nvcc):
        raise RuntimeError("neonlike's GPU backend compiles its kernels with nvcc, which is not on "
                           "PATH; install the CUDA toolkit (or set NEONLIKE_NVCC to nvcc's path)")
    return nvcc


def nvcc_version(nvcc: str | None = None) -> str:
    """`nvcc --version` text (part of every cache key: a new toolkit recompiles)."""
    nvcc = nvcc or nvcc_path()
    text = _VERSION.get(nvcc)
    if text is None:
        r = subprocess.run([nvcc, "--version"], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"`{nvcc} --version` failed ({r.returncode}): {r.stderr.strip()}")
        text = _VERSION.put(nvcc, r.stdout.strip())
    return text


def device_arch() -> str:
    """The current CUDA context's architecture as nvcc names it ('sm_90'); needs pycuda."""
    try:
        import pycuda.driver as drv
        major, minor = drv.Context.get_device().compute_capability()
    except Exception as e:  # no pycuda, no driver or no current context
        raise RuntimeError(f"compile_cubin: no arch given and no current CUDA device to ask "
                           f"({type(e).__name__}: {e}); pass arch='sm_90' (say)") from e
    return f"sm_{major}{minor}"


def cache_key(source: str, arch: str, version: str) -> str:
    h = hashlib.sha256()
    for part in (source, arch, version, " ".join(NVCC_OPTIONS)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def cubin_path(source: str, name: str, arch: str) -> Path:
    """Where the binary of `source` for `arch` lives in the disk cache."""
    safe = re.sub(r"[^A-Za-z0-9_]", "_", name)[:64] or "kernel"
    return cache_dir() / "cuda" / f"{safe}_{cache_key(source, arch, nvcc_version())[:32]}.cubin"


def is_whole_elf(data: bytes) -> bool:
    """An ELF64 image whose section header table lies inside it (a truncated file fails: nvcc
    writes that table last)."""
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2:
        return False
    endian = "<" if data[5] == 1 else ">"
    shoff, = struct.unpack_from(endian + "Q", data, 0x28)
    shentsize, shnum = struct.unpack_from(endian + "HH", data, 0x3A)
    return shnum > 0 and shoff + shentsize * shnum <= len(data)


def compile_cubin(source: str, name: str, arch: str | None = None) -> bytes:
    """The cubin of CUDA C `source` for `arch` ('sm_90'; default: the current device's).

    `name` only makes the cache file findable (the kernel's name). RuntimeError carries nvcc's
    log when compilation fails, or says that nvcc is missing.
    """
    arch = arch or device_arch()
    if not re.fullmatch(r"sm_\d+[a-z]?", arch):
        raise ValueError(f"compile_cubin: arch must look like 'sm_90', got {arch!r}")
    digest = cache_key(source, arch, nvcc_version())
    cubin = _MEMORY.get(digest)
    if cubin is not None:
        STATS["memory_hits"] += 1
        return cubin
    path = cubin_path(source, name, arch)
    try:
        cubin = path.read_bytes()
    except OSError:
        cubin = None
    if cubin is not None and is_whole_elf(cubin):
        STATS["disk_hits"] += 1
    else:
        if cubin is not None:
            STATS["corrupt"] += 1
        cubin = _nvcc(source, name, arch)
        _write(path, cubin)
    with _LOCK:
        _MEMORY.put(digest, cubin)
    return cubin


def clear_memory() -> None:
    """Forget the in-memory binaries (the disk cache stays)."""
    _MEMORY.clear()


def _nvcc(source: str, name: str, arch: str) -> bytes:
    nvcc = nvcc_path()
    STATS["compiles"] += 1
    with tempfile.TemporaryDirectory(prefix="neonlike-nvcc-") as tmp:
        src, out = os.path.join(tmp, "kernel.cu"), os.path.join(tmp, "kernel.cubin")
        with open(src, "w") as f:
            f.write(source)
        r = subprocess.run([nvcc, *NVCC_OPTIONS, f"-arch={arch}", "-o", out, src],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"nvcc failed on kernel {name} for {arch} "
                               f"({r.returncode}):\n{r.stdout}{r.stderr}")
        with open(out, "rb") as f:
            return f.read()


def _write(path: Path, data: bytes) -> None:
    """Atomic: readers see the old file or the whole new one. An unwritable cache is not fatal."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.stem, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        pass


__all__ = ["compile_cubin", "cubin_path", "nvcc_version", "nvcc_path", "device_arch",
           "is_whole_elf", "clear_memory", "STATS"]
