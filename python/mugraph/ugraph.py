"""The optimized object: a μGraph that can be called, saved, verified, drawn and compiled."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import warnings
from typing import Optional

import numpy as np

from . import _core
from ._runtime import CompiledUGraph, cuda_arch_of, torch_dtype
from .program import Program

_NUMPY_DTYPE = {"f16": np.float16, "f32": np.float32, "bf16": np.float32}  # NumPy has no bfloat16


class UGraph:
    """A μGraph: the result of superoptimize, or one loaded with load_ugraph.

    Calling it runs it: on CUDA tensors, the generated kernels on the current stream; on NumPy
    arrays or CPU tensors, the CPU interpreter (what a μGraph means). Inputs are positional in
    the program's input order, or by name."""

    def __init__(self, graph: _core.Graph, program: Optional[Program] = None, report: Optional[dict] = None,
                 candidates: Optional[list] = None):
        self.graph = graph
        #: The program it was found for (None when loaded from a file).
        self.program = program
        #: The search's report (report.json's contents), or None.
        self.report = report
        #: Every verified candidate the search kept, best first (this one is candidates[0]).
        self.candidates = candidates if candidates is not None else [self]
        self._compiled: dict = {}
        self._input_names: Optional[list] = None  # cached: the callable needs them on every call
        self._free_names: Optional[tuple] = None  # (how many inputs were bound, the others' names)

    # --- describing ----------------------------------------------------------------------------

    def inputs(self) -> list:
        """(name, shape, dtype) of each input, in order."""
        return self.graph.inputs()

    def outputs(self) -> list:
        """(name, shape, dtype) of each output, in order."""
        return self.graph.outputs()

    def __str__(self) -> str:
        return self.graph.describe()

    def __repr__(self) -> str:
        return (f"mugraph.UGraph({self.graph.op_count()} ops, {self.graph.graph_defined_kernels()} "
                f"graph-defined kernels)")

    def cost(self, target: str = "h100") -> float:
        """The cost model's estimate in microseconds on a target (a100, h100, h200)."""
        return self.graph.cost(target)[0]

    def to_dot(self) -> str:
        """Graphviz DOT: each graph-defined kernel a box with its grid, threads and for-loop, each
        thread graph a box inside it, iterators with imap/fmap, savers with omap."""
        return self.graph.to_dot()

    def draw(self, path: str, format: Optional[str] = None) -> str:
        """Renders to_dot() with Graphviz's ``dot`` into path (format from its suffix: svg, png,
        pdf); returns path."""
        dot = shutil.which("dot")
        if dot is None:
            raise _core.MugraphError("drawing needs Graphviz's dot on PATH (Debian: apt-get install graphviz)")
        fmt = format or os.path.splitext(path)[1].lstrip(".") or "svg"
        r = subprocess.run([dot, f"-T{fmt}", "-o", path], input=self.to_dot(), text=True, capture_output=True)
        if r.returncode != 0:
            raise _core.MugraphError(f"dot failed: {r.stderr.strip()}")
        return path

    # --- files ---------------------------------------------------------------------------------

    def save(self, path: str) -> None:
        """Writes the μGraph as JSON (docs/json-format.md); load_ugraph reads it back."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.graph.to_json())

    def codegen(self, out_dir: str, target: str = "sm_90a", layouts: str = "chosen") -> dict:
        """Writes the generated CUDA (ugraph.cu, ugraph.h, CMakeLists.txt, manifest.json and the
        device library) into out_dir."""
        if layouts not in ("chosen", "row-major"):
            raise _core.MugraphError(f"layouts must be 'chosen' or 'row-major', got {layouts!r}")
        kernels, blas, workspace = _core.codegen(self.graph, target, out_dir, layouts == "chosen")
        return {"kernels": kernels, "blas_calls": blas, "workspace_bytes": workspace}

    # --- checking ------------------------------------------------------------------------------

    def verify(self, reference=None, delta: float = 1e-9, seed: int = 0, max_tests: int = 64,
               float_check: bool = True, threads: int = 0, unknown_functions: bool = True):
        """Checks that this μGraph computes the same function as reference (a Program, UGraph or
        path; default: the program it was found for) by random tests over finite fields. The
        result has verdict ('equivalent', 'not_equivalent', 'incomparable'), reason, tests_run,
        bound (the probability bound reached), guarantee, opaque_functions (whether the bound is
        for exp, silu, relu, gelu and sqrt as unknown functions) and float_max_rel_error."""
        if reference is None:
            if self.program is None:
                raise _core.MugraphError("verify needs a reference: this μGraph was not found from a Program here")
            reference = self.program
        if isinstance(reference, Program):
            ref_graph = reference.graph
        elif isinstance(reference, UGraph):
            ref_graph = reference.graph
        elif isinstance(reference, (str, os.PathLike)):
            ref_graph = _core.load(os.fspath(reference))
        else:
            raise _core.MugraphError(f"verify: reference must be a Program, UGraph or path, got {type(reference).__name__}")
        if not (0 < delta <= 1):
            raise _core.MugraphError(f"delta must be in (0, 1], got {delta}")
        options = _core.VerifyOptions()
        options.delta = delta
        options.seed = seed
        options.max_tests = max_tests
        options.float_check = float_check
        options.unknown_functions = unknown_functions
        options.threads = threads
        return _core.verify(ref_graph, self.graph, options)

    # --- running -------------------------------------------------------------------------------

    def compile(self, target: str = "sm_90a", emulate: bool = False, cache_dir: str = "") -> CompiledUGraph:
        """Builds the generated code into a shared library (cached on disk) and loads it. With
        emulate=True it is built against the device library's host emulation and runs on NumPy
        arrays on the CPU (slowly: for checking the generated code without a GPU)."""
        key = (target, emulate, cache_dir)
        if key not in self._compiled:
            self._compiled[key] = CompiledUGraph(self.graph, target, emulate, cache_dir)
        return self._compiled[key]

    def __call__(self, *inputs, threads: int = 0, **named):
        """Runs the μGraph. Inputs: NumPy arrays (values are rounded to each input's dtype; outputs
        are float16 for f16, float32 for f32 and bf16), PyTorch CPU tensors (outputs in the
        μGraph's dtypes) or PyTorch CUDA tensors (the generated kernels on the current stream;
        dtypes and shapes must match). Returns one output, or a tuple of them."""
        values = self._arrange(inputs, named)
        kind = _kind_of(values)
        if kind == "cuda":
            outs = self.compile(cuda_arch_of(values[0].device)).run_torch(values)
        elif kind == "torch":
            import torch

            arrays = [np.ascontiguousarray(v.detach().to(torch.float32).numpy()) for v in values]
            outs = [torch.from_numpy(np.array(a)).to(torch_dtype(dtype))
                    for a, (_, _, dtype) in zip(_core.run(self.graph, arrays, threads), self.outputs())]
        else:
            arrays = [np.ascontiguousarray(np.asarray(v, dtype=np.float32)) for v in values]
            outs = [a.astype(_NUMPY_DTYPE[dtype], copy=False)
                    for a, (_, _, dtype) in zip(_core.run(self.graph, arrays, threads), self.outputs())]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _arrange(self, inputs, named) -> list:
        """The inputs in the μGraph's order: positional ones first, then by name, then values
        bound to the program (from_torch's parameters)."""
        names = self._input_names
        if names is None:
            names = self._input_names = [name for name, _, _ in self.inputs()]
        bindings = self.program.bindings if self.program is not None else {}
        if self._free_names is None or self._free_names[0] != len(bindings):
            self._free_names = (len(bindings), [n for n in names if n not in bindings])
        free = self._free_names[1]
        usual = not named and len(inputs) == len(free)  # every free input given in order, the rest bound
        if usual and not bindings:
            return list(inputs)
        values = dict(zip(free, inputs)) if len(inputs) <= len(free) else None
        if not usual:
            if values is None:
                if len(inputs) == len(names):
                    values = dict(zip(names, inputs))
                else:
                    raise _core.MugraphError(f"the μGraph takes {len(free)} inputs ({', '.join(free)}), "
                                             f"{len(inputs)} given")
            for name, value in named.items():
                if name not in names:
                    raise _core.MugraphError(
                        f"the μGraph has no input named {name!r}; its inputs are {', '.join(names)}")
                if name in values:
                    raise _core.MugraphError(f"input {name} is given twice")
                values[name] = value
            missing = [n for n in names if n not in values and n not in bindings]
            if missing:
                raise _core.MugraphError(f"missing input{'s' if len(missing) > 1 else ''}: {', '.join(missing)}")
        device = _device_of(values.values())
        # Bound values follow the caller's: NumPy arrays where every value given is one.
        as_numpy = bool(values) and device is None
        for name in names:
            if name not in values:
                # A binding may read an argument (one it transposes), never a bound value: the
                # arguments are all in values before this loop adds to it.
                value = bindings[name](device, values)
                if as_numpy and type(value).__module__.startswith("torch"):
                    import torch

                    value = value.to(torch.float32).numpy()
                values[name] = value
        return [values[n] for n in names]


def _kind_of(values: list) -> str:
    kinds = set()
    for v in values:
        if v is None:
            raise _core.MugraphError("an input is None; give an array or tensor for every input")
        module = type(v).__module__
        if module.startswith("torch"):
            kinds.add("cuda" if v.is_cuda else "torch")
        else:
            kinds.add("numpy")
    if len(kinds) > 1:
        raise _core.MugraphError(f"inputs mix {' and '.join(sorted(kinds))} values; give all of one kind")
    return kinds.pop()


def _device_of(values):
    for v in values:
        if type(v).__module__.startswith("torch"):
            return v.device
    return None


def superoptimize(program: Program, time_limit: Optional[float] = None, target: str = "h100", threads: int = 0,
                  top: int = 8, max_kernel_ops: int = 5, max_block_ops: int = 12, max_graph_kernels: int = 2,
                  max_kernel_inputs: Optional[int] = None, checkpoint: Optional[str] = None, resume: bool = False, deterministic: bool = False,
                  cost_bound: str = _core.DEFAULT_COST_BOUND, memory_limit: Optional[float] = None, retile_seeds: int = 4,
                  bound_ratio: float = 2.0) -> UGraph:
    """Searches for the fastest μGraph equivalent to program (by the cost model on target) and
    returns it. Every candidate is verified before it is kept. cost_bound is what prunes
    (docs/search.md, "The cost bound"): "both" (the default: the bytes search, then the model
    search until the time limit), "bytes" (fast; it reports only candidates of the best verified
    device bytes and kernels) or "model". The model bound also finds μGraphs that move more bytes
    to use more of the GPU, such as attention split along the keys. time_limit in seconds: None
    gives the model bound ("both", "model") 60 s and "bytes" none; 0 is none (until the search
    space is exhausted, which under the model bound can take hours). With checkpoint (a file path) the search saves its state
    there as it goes, and resume=True continues from it. memory_limit in GiB (None: three quarters
    of the physical memory, or of the control group's limit where lower): the search stops there as at a time limit, keeping what it found.
    max_kernel_inputs: most tensors one graph-defined kernel reads; None: 4, or 5 for a program of
    five inputs or more (docs/search.md, "Inputs per kernel").
    retile_seeds: after the search, the block graphs of the best candidates of this many structures
    are rebuilt under every grid, for-loop and tiling of their kernels (docs/search.md, "Retiling");
    0: none.
    bound_ratio: with cost_bound "model" or "both", what cannot come within this many times the best
    verified candidate's estimate is cut too, before top candidates are verified (docs/search.md,
    "The ratio bound"); 0: off.
    Ctrl-C stops the search: it returns the best μGraph found so far (with a warning), or raises
    KeyboardInterrupt if none was."""
    if isinstance(program, str):
        program = Program(program)
    if not isinstance(program, Program):
        raise _core.MugraphError(f"superoptimize takes a mugraph.Program, got {type(program).__name__}")
    options = _core.SearchOptions()
    options.target = target
    options.threads = threads
    options.top_k = top
    options.max_kernel_ops = max_kernel_ops
    options.max_block_ops = max_block_ops
    options.max_graph_kernels = max_graph_kernels
    if max_kernel_inputs is not None:
        options.max_kernel_inputs = max_kernel_inputs
    options.deterministic = deterministic
    options.cost_bound = cost_bound
    options.retile_seeds = retile_seeds
    options.model_bound_ratio = float(bound_ratio)
    if time_limit is None:
        time_limit = _core.default_time_limit(options.cost_bound)
    if not (time_limit >= 0 and math.isfinite(time_limit)):
        raise _core.MugraphError(f"time_limit must be a finite number of seconds, 0 (none) or more, got {time_limit}")
    options.time_limit_seconds = float(time_limit)
    if memory_limit is not None:
        if not memory_limit > 0:
            raise _core.MugraphError(f"memory_limit must be a positive number of GiB, got {memory_limit}")
        options.memory_limit_bytes = max(1, int(memory_limit * 2**30))
    if checkpoint is not None:
        options.checkpoint_path = os.fspath(checkpoint)
    elif resume:
        raise _core.MugraphError("resume=True needs checkpoint= (the file a previous search saved)")
    options.resume = resume
    validation = program.graph.validate(target)
    if validation is not None:
        raise _core.MugraphError(f"not a valid program for {target}: {validation}")
    outcome = _core.search(program.graph, options)
    report = json.loads(outcome.report_json)
    if not outcome.top:
        if outcome.interrupted:
            raise KeyboardInterrupt("search interrupted before any μGraph was verified")
        raise _core.MugraphError(f"no equivalent μGraph found within the limits ({outcome.stop_reason}"
                                 + (f": {outcome.stop_detail}" if outcome.stop_detail else "") + ")")
    # A Ctrl-C that came as the last candidate was being verified stops nothing: the result is
    # complete, and is returned as such.
    if outcome.interrupted and outcome.stop_reason == "interrupted":
        warnings.warn(f"search interrupted after {outcome.search_seconds:.1f} s; returning the best μGraph found so far"
                      + (f" (checkpoint: {checkpoint})" if checkpoint else ""), RuntimeWarning, stacklevel=2)
    candidates: list = []
    for c in outcome.top:
        candidates.append(UGraph(c.graph, program=program, report=report, candidates=candidates))
    return candidates[0]


def load_ugraph(path: str, program: Optional[Program] = None) -> UGraph:
    """A μGraph from a JSON file (UGraph.save, mugraph search's best.json) or a program file,
    checked to be a valid μGraph for the default target (h100) as the command line does: a file
    that breaks the shape rules or a target limit is refused here, not run."""
    graph = _core.load(os.fspath(path))
    rejection = graph.validate("h100")
    if rejection is not None:
        raise _core.MugraphError(f"{os.fspath(path)}: not a valid μGraph for h100: {rejection}")
    return UGraph(graph, program=program)
