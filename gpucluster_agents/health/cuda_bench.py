# pyright: strict
"""Two short measurements of each GPU without PyTorch: an HBM device-to-device copy through the CUDA
driver API (ctypes on libcuda.so.1) and a BF16 GEMM through cuBLAS (ctypes on libcublas). On a real
H100 the copy reads 3.02 TB/s (read + write) in a fraction of a second, the same as PyTorch's copy
(FACTS.md), so a slow GPU — throttled, a bad HBM stack — shows without a training framework.

Every failure to load or call the libraries raises :class:`BenchUnavailable`: the check is then
skipped with that reason, never failed (a node image without cuBLAS is not a broken GPU).
"""

from __future__ import annotations

import ctypes
import time
from typing import Any


class BenchUnavailable(RuntimeError):
    pass


def _load(names: tuple[str, ...]) -> Any:
    for name in names:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    raise BenchUnavailable(f"{names[0]} not found")


class Cuda:
    """The few driver calls the measurements need, on one device's primary context."""

    def __init__(self) -> None:
        self.lib = _load(("libcuda.so.1", "libcuda.so"))
        self.check(self.lib.cuInit(0), "cuInit")

    def check(self, rc: int, what: str) -> None:
        if rc != 0:
            raise BenchUnavailable(f"{what} returned CUDA error {rc}")

    def device_count(self) -> int:
        n = ctypes.c_int()
        self.check(self.lib.cuDeviceGetCount(ctypes.byref(n)), "cuDeviceGetCount")
        return n.value

    def use(self, ordinal: int) -> None:
        dev, ctx = ctypes.c_int(), ctypes.c_void_p()
        self.check(self.lib.cuDeviceGet(ctypes.byref(dev), ordinal), "cuDeviceGet")
        self.check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
        self.check(self.lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")

    def alloc(self, nbytes: int) -> ctypes.c_uint64:
        ptr = ctypes.c_uint64()
        self.check(self.lib.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(nbytes)), "cuMemAlloc")
        return ptr

    def free(self, ptr: ctypes.c_uint64) -> None:
        self.lib.cuMemFree_v2(ptr)

    def sync(self) -> None:
        self.check(self.lib.cuCtxSynchronize(), "cuCtxSynchronize")


def hbm_copy_gbps(cuda: Cuda, ordinal: int, nbytes: int = 1 << 30, iterations: int = 10) -> float:
    """Device-to-device copy rate, GB/s counting read + write (as DCGM's and FACTS.md's figures do)."""
    cuda.use(ordinal)
    src, dst = cuda.alloc(nbytes), cuda.alloc(nbytes)
    try:
        copy = cuda.lib.cuMemcpyDtoD_v2
        cuda.check(copy(dst, src, ctypes.c_size_t(nbytes)), "cuMemcpyDtoD")  # warm up
        cuda.sync()
        start = time.perf_counter()
        for _ in range(iterations):
            cuda.check(copy(dst, src, ctypes.c_size_t(nbytes)), "cuMemcpyDtoD")
        cuda.sync()
        elapsed = time.perf_counter() - start
    finally:
        cuda.free(src)
        cuda.free(dst)
    return 2 * nbytes * iterations / elapsed / 1e9


# cuBLAS constants (cublas_api.h, library_types.h)
_CUDA_R_16BF = 14
_CUDA_R_32F = 0
_CUBLAS_COMPUTE_32F = 68
_CUBLAS_GEMM_DEFAULT = -1
_BF16_ONE = 0x3F80


def gemm_tflops(cuda: Cuda, ordinal: int, n: int = 8192, iterations: int = 20) -> float:
    """Dense BF16 n x n x n GEMM rate (FP32 accumulate), TFLOP/s."""
    blas = _load(("libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"))
    cuda.use(ordinal)
    handle = ctypes.c_void_p()
    if blas.cublasCreate_v2(ctypes.byref(handle)) != 0:
        raise BenchUnavailable("cublasCreate failed")
    size = n * n * 2
    a, b, c = cuda.alloc(size), cuda.alloc(size), cuda.alloc(n * n * 4)
    try:
        for ptr in (a, b):  # ones, so no NaN or denormal path changes the timing
            cuda.check(cuda.lib.cuMemsetD16_v2(ptr, ctypes.c_ushort(_BF16_ONE), ctypes.c_size_t(n * n)), "cuMemsetD16")
        alpha, beta = ctypes.c_float(1.0), ctypes.c_float(0.0)

        def run() -> None:
            rc = blas.cublasGemmEx(
                handle, 0, 0, n, n, n, ctypes.byref(alpha), a, _CUDA_R_16BF, n, b, _CUDA_R_16BF, n,
                ctypes.byref(beta), c, _CUDA_R_32F, n, _CUBLAS_COMPUTE_32F, _CUBLAS_GEMM_DEFAULT,
            )  # fmt: skip
            if rc != 0:
                raise BenchUnavailable(f"cublasGemmEx returned {rc}")

        run()
        cuda.sync()
        start = time.perf_counter()
        for _ in range(iterations):
            run()
        cuda.sync()
        elapsed = time.perf_counter() - start
    finally:
        for ptr in (a, b, c):
            cuda.free(ptr)
        blas.cublasDestroy_v2(handle)
    return 2 * n**3 * iterations / elapsed / 1e12
