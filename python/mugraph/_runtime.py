"""Generated code in this process: the μGraph's shared library (build.h), loaded with ctypes and
called as ugraph.h declares: mugraph_run(inputs, outputs, workspace, stream)."""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from . import _core

_BLAS_ERROR_BASE = 10000
_TMA_ERROR_BASE = 20000
_NUMPY_DTYPE = {"f16": np.float16, "f32": np.float32}


@functools.lru_cache(maxsize=None)
def torch_dtype(dtype: str):
    """The torch dtype of a mugraph dtype name (f16, bf16, f32)."""
    import torch

    return {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[dtype]


def cuda_arch_of(device) -> str:
    """The code-generation target for a CUDA device: sm_90a on Hopper and later, sm_80 on Ampere."""
    import torch

    index = torch.device(device).index
    return _cuda_arch_of_index(index if index is not None else torch.cuda.current_device())


@functools.lru_cache(maxsize=None)
def _cuda_arch_of_index(index: int) -> str:
    # Cached: the callable asks on every call, and a device's capability does not change.
    import torch

    device = torch.device("cuda", index)
    major, minor = torch.cuda.get_device_capability(device)
    if major >= 9:
        return "sm_90a"
    if major == 8:
        return "sm_80"
    raise _core.MugraphError(f"mugraph generates code for sm_80 and sm_90a; {torch.cuda.get_device_name(device)} "
                             f"is sm_{major}{minor}")


def _describe_status(status: int) -> str:
    if status >= _TMA_ERROR_BASE:
        return f"the driver refused a TMA tensor map (CUresult {status - _TMA_ERROR_BASE})"
    if status >= _BLAS_ERROR_BASE:
        return f"a cuBLAS call failed (cublasStatus_t {status - _BLAS_ERROR_BASE})"
    return f"a kernel launch failed (cudaError_t {status})"


class CompiledUGraph:
    """A μGraph's generated code, built and loaded. run_torch runs it on CUDA tensors; with
    emulate=True, run_numpy runs the host emulation on NumPy arrays."""

    def __init__(self, graph: _core.Graph, target: str, emulate: bool, cache_dir: str = ""):
        self.graph = graph
        self.target = target
        self.emulate = emulate
        self.library, self.build_dir, self.cached, self.workspace_bytes = _core.build_library(
            graph, target, emulate, cache_dir)
        self._lib = ctypes.CDLL(self.library)
        self._run = self._lib.mugraph_run
        self._run.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p,
                              ctypes.c_void_p]
        self._run.restype = ctypes.c_int
        self._inputs = graph.inputs()
        self._outputs = graph.outputs()
        self._in_array = ctypes.c_void_p * max(1, len(self._inputs))
        self._out_array = ctypes.c_void_p * max(1, len(self._outputs))
        self._torch_specs = None  # (name, shape, torch dtype) of inputs and outputs, on the first run_torch

    def _call(self, input_ptrs, output_ptrs, workspace, stream) -> None:
        ins = self._in_array(*input_ptrs)
        outs = self._out_array(*output_ptrs)
        status = self._run(ins, outs, workspace, stream)
        if status != 0:
            raise _core.MugraphError(f"running the generated code failed: {_describe_status(status)}")

    def run_numpy(self, arrays: list) -> list:
        """Runs the emulated build on NumPy arrays of the inputs' dtypes and shapes (f16, f32)."""
        if not self.emulate:
            raise _core.MugraphError("run_numpy runs an emulated build (compile(emulate=True)); a GPU build "
                                     "runs on CUDA tensors")
        if len(arrays) != len(self._inputs):
            raise _core.MugraphError(f"the μGraph takes {len(self._inputs)} inputs, {len(arrays)} given")
        ins = []
        for value, (name, shape, dtype) in zip(arrays, self._inputs):
            if dtype not in _NUMPY_DTYPE:
                raise _core.MugraphError(f"input {name} is {dtype}, which NumPy has no type for")
            ins.append(np.ascontiguousarray(np.asarray(value, dtype=_NUMPY_DTYPE[dtype])))
            if ins[-1].shape != tuple(shape):
                raise _core.MugraphError(f"input {name}: expected shape {list(shape)}, got {list(ins[-1].shape)}")
        outs = [np.empty(shape, dtype=_NUMPY_DTYPE[dtype]) for _, shape, dtype in self._outputs]
        workspace = np.empty(max(1, self.workspace_bytes), dtype=np.uint8)
        self._call([a.ctypes.data for a in ins], [o.ctypes.data for o in outs], workspace.ctypes.data, None)
        return outs

    def run_torch(self, tensors: list) -> list:
        """Runs the GPU build on CUDA tensors (one device; shapes and dtypes must match the
        inputs') on the current stream; returns new CUDA tensors."""
        import torch

        if self.emulate:
            raise _core.MugraphError("an emulated build runs on NumPy arrays (run_numpy), not CUDA tensors")
        if self._torch_specs is None:
            self._torch_specs = ([(name, tuple(shape), torch_dtype(dtype)) for name, shape, dtype in self._inputs],
                                 [(tuple(shape), torch_dtype(dtype)) for _, shape, dtype in self._outputs])
        in_specs, out_specs = self._torch_specs
        if len(tensors) != len(in_specs):
            raise _core.MugraphError(f"the μGraph takes {len(in_specs)} inputs, {len(tensors)} given")
        device = tensors[0].device
        ins = []
        for t, (name, shape, dtype) in zip(tensors, in_specs):
            if t.device != device:
                raise _core.MugraphError(f"input {name} is on {t.device}, the others on {device}")
            if t.shape != shape:
                raise _core.MugraphError(f"input {name}: expected shape {list(shape)}, got {list(t.shape)}")
            if t.dtype != dtype:
                raise _core.MugraphError(f"input {name}: expected {dtype}, got {t.dtype}")
            ins.append(t if t.is_contiguous() else t.contiguous())
        outs = [torch.empty(shape, dtype=dtype, device=device) for shape, dtype in out_specs]
        workspace = torch.empty(self.workspace_bytes, dtype=torch.uint8, device=device) if self.workspace_bytes else None
        args = ([t.data_ptr() for t in ins], [o.data_ptr() for o in outs],
                workspace.data_ptr() if workspace is not None else None)
        # Kernels launch on the current device: switch only when the inputs are on another one
        # (the switch and back cost more than the check).
        if device.index == torch.cuda.current_device():
            self._call(*args, torch.cuda.current_stream(device).cuda_stream)
        else:
            with torch.cuda.device(device):
                self._call(*args, torch.cuda.current_stream(device).cuda_stream)
        return outs
