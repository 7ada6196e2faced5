"""A warp-specialised kernel built through the MLIR bindings: its parameters, declared once, and its body.

``Kernel`` holds the parameter list (the manifest's ABI: each parameter's kind, doc and, for a tensor
map, its dtype, box and swizzle) and builds one ``gpu.module`` with one ``gpu.func`` whose body is the
kernel's prologue and one ``fa4.warp_specialize`` of its roles::

    k = Kernel("copy", target="sm_100a", num_warps=9)
    src = k.tensormap("src", "bf16", box=(64, 128), doc="in[M, N]")
    n = k.i32("num_tiles", doc="tiles")
    with k.body():
        ring = k.smem_region("ring", bytes=4 * 16384, align=1024)
        ...
        with k.role("producer", warps=[8], registers=40), k.elect_one():
            ...
    source = k.source(grid="(ceil(total / per_cta), 1, 1)", config={...})   # a KernelSource

Control flow: ``range`` (``scf.for``) and ``if_`` (``scf.if``) take ``carry=`` states (``Var``,
``PipelineState``) that become the loop's iter_args or the branch's results and are rebound inside and
after. Every op carries the line of the kernel file that created it (``location.here``).
"""

from __future__ import annotations

import contextlib
import types

from fa4_mlir._mlir import gpu, ir, scf
from fa4_mlir.dsl.location import here
from fa4_mlir.dsl.pipelines import Carried, Pipeline
from fa4_mlir.dsl.values import Value, raw
from fa4_mlir.core.context import make_context
from fa4_mlir.dialects import fa4
from fa4_mlir.kernels.source import KernelSource, Param, TensorMapSpec

_TYPES = {"tensormap": "!fa4.tensormap", "i32": "i32", "f32": "f32", "ptr": "!llvm.ptr<1>"}
_TARGETS = ("sm_90a", "sm_100a")


class Kernel:
    """One kernel: ``name`` (its symbol), ``target`` (sm_90a or sm_100a), ``num_warps`` (the CTA's
    warps), ``cluster`` (CTAs per cluster along x, y, z; None for no cluster attribute)."""

    def __init__(self, name: str, target: str, num_warps: int, cluster: tuple[int, int, int] | None = None):
        if not name.isidentifier():
            raise ValueError(f"kernel name must be an identifier, got {name!r}")
        if target not in _TARGETS:
            raise ValueError(f"target must be one of {', '.join(_TARGETS)}, got {target!r}")
        if not isinstance(num_warps, int) or not 1 <= num_warps <= 32:
            raise ValueError(f"num_warps must be an int in [1, 32], got {num_warps!r}")
        self.name, self.target, self.num_warps, self.cluster = name, target, num_warps, cluster
        self.params: list[Param] = []
        self._handles: list[_Param] = []
        self.module = None
        self._context = None

    # -- parameters: the ABI, declared once -----------------------------------------------------------
    def _declare(self, name: str, kind: str, doc: str, spec: TensorMapSpec | None = None) -> _Param:
        if self.module is not None:
            raise RuntimeError(f"parameter '{name}' must be declared before kernel.body(), got it inside")
        if not name.isidentifier() or name in {p.name for p in self.params}:
            raise ValueError(f"parameter name must be a new identifier, got {name!r}")
        self.params.append(Param(name, kind, doc, spec))
        handle = _Param(name, kind)
        self._handles.append(handle)
        return handle

    def tensormap(self, name: str, dtype: str, box: tuple[int, ...], swizzle: str = "none", doc: str = ""):
        """A CUtensorMap passed by value (grid-constant): the host encodes it with ``box`` and ``swizzle``."""
        return self._declare(name, "tensormap", doc, TensorMapSpec(dtype, tuple(box), swizzle))

    def i32(self, name: str, doc: str = ""):
        return self._declare(name, "i32", doc)

    def f32(self, name: str, doc: str = ""):
        return self._declare(name, "f32", doc)

    def ptr(self, name: str, doc: str = ""):
        """A global-memory pointer (``!llvm.ptr<1>``)."""
        return self._declare(name, "ptr", doc)

    def declare_params(self, params) -> None:
        """Declare ``Param``s in order (a kernel's ABI list, kept where its launch code reads it too)."""
        for p in params:
            self._declare(p.name, p.kind, p.doc, p.tensor_map if p.kind == "tensormap" else None)

    # -- the body ------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def body(self):
        """Open the kernel function: code inside runs before the roles (the prologue), then each
        ``role``. Yields a namespace of the parameters' values by name."""
        if self.module is not None:
            raise RuntimeError(f"kernel '{self.name}' has a body already")
        with contextlib.ExitStack() as stack:
            self._context = stack.enter_context(make_context())
            loc = here()
            stack.enter_context(loc)
            self.module = ir.Module.create()
            self.module.operation.attributes["gpu.container_module"] = ir.UnitAttr.get()
            self.module.operation.attributes["fa4.target"] = ir.StringAttr.get(self.target)
            with ir.InsertionPoint(self.module.body):
                target = ir.Attribute.parse(f'#nvvm.target<chip = "{self.target}", features = "+ptx86", O = 3>')
                module = gpu.GPUModuleOp(self.name, targets=ir.ArrayAttr.get([target]))
                module.bodyRegion.blocks.append()
            with ir.InsertionPoint(module.bodyRegion.blocks[0]):
                types_ = [ir.Type.parse(_TYPES[p.kind]) for p in self.params]
                function = gpu.GPUFuncOp(ir.TypeAttr.get(ir.FunctionType.get(types_, [])), sym_name=self.name,
                                         kernel=True)
                if self.cluster:
                    function.operation.attributes["nvvm.cluster_dim"] = ir.DenseI32ArrayAttr.get(list(self.cluster))
                block = function.add_entry_block()
            for handle, argument in zip(self._handles, block.arguments):
                handle.value = argument
            with ir.InsertionPoint(block):
                yield types.SimpleNamespace(**{h.name: h.get() for h in self._handles})
                gpu.ReturnOp([], loc=here())
            self._check()

    _roles = None  # the open fa4.warp_specialize's block, once the first role opens it

    def _check(self) -> None:
        """MLIR's own verification of the built module (fa4's checks run in fa4-verify at compile time)."""
        try:
            self.module.operation.verify()
        except ir.MLIRError as exc:
            found = "; ".join(f"{d.location}: {d.message}" for d in exc.error_diagnostics)
            raise ValueError(f"kernel '{self.name}' must be valid MLIR, got: {found}") from None

    @contextlib.contextmanager
    def role(self, name: str, warps, registers: int | None = None):
        """A warp role (``fa4.warp_role``) of ``warps`` (warp indices in the CTA) with an optional
        ``setmaxnreg`` budget. The first role opens the kernel's ``fa4.warp_specialize``."""
        if self._roles is None:
            specialize = fa4.WarpSpecializeOp(num_warps=self.num_warps, loc=here())
            self._roles = specialize.operation.regions[0].blocks[0]
        with ir.InsertionPoint.at_block_terminator(self._roles):
            role = fa4.WarpRoleOp(sym_name=name, warps=list(warps), registers=registers, loc=here())
        with ir.InsertionPoint.at_block_terminator(role.operation.regions[0].blocks[0]):
            yield

    @contextlib.contextmanager
    def elect_one(self):
        """The body runs in one elected lane of each warp (``fa4.elect_one`` and an ``scf.if``)."""
        with self.if_(Value(fa4.elect_one(loc=here()))):
            yield

    def debug_check(self, cond, message: str, *values) -> None:
        """Assert ``cond`` (an i1 ``Value``) in debug builds (``fa4.debug_check``): where it is false the
        thread prints ``message``, a printf format with one ``%d``/``%u``/``%x`` per i32 value (``%ld``
        ... per i64), and traps. Release builds compile it to nothing. Ints among ``values`` are i32
        constants. A bad condition or message is an error here, at the author's line."""
        cond = raw(cond)
        if str(cond.type) != "i1":
            raise TypeError(f"debug_check condition must be an i1 (a comparison), got {cond.type}")
        if not isinstance(message, str):
            raise TypeError(f"debug_check message must be a str, got {type(message).__name__}")
        op = fa4.DebugCheckOp(cond, [raw(v) for v in values], message=message, loc=here())
        errors = list(fa4.DebugCheckOp.field_errors(op.operation)) or list(op.verify())
        if errors:
            op.operation.erase()
            raise ValueError(f"debug_check {errors[0]}")

    # -- control flow ----------------------------------------------------------------------------------
    @contextlib.contextmanager
    def if_(self, condition, carry: tuple[Carried, ...] = ()):
        """``scf.if``: the body runs where ``condition`` (an i1) holds. With ``carry``, the states
        assigned inside are the results (unchanged where the condition fails)."""
        carry = tuple(carry)
        before = [v for c in carry for v in c.carried()]
        op = scf.IfOp(raw(condition), [v.type for v in before], has_else=bool(carry), loc=here())
        if carry:
            with ir.InsertionPoint(op.else_block):
                scf.YieldOp(before, loc=here())
        with ir.InsertionPoint(op.then_block):
            yield
            scf.YieldOp([v for c in carry for v in c.carried()], loc=here())
        _rebind(carry, list(op.results))

    @contextlib.contextmanager
    def range(self, start, stop, step=1, carry: tuple[Carried, ...] = ()):
        """``scf.for`` from ``start`` to ``stop`` (i32); yields the induction variable. ``carry`` states
        are the loop's iter_args: rebound to the block arguments inside, to the results after."""
        carry = tuple(carry)
        initial = [v for c in carry for v in c.carried()]
        loop = scf.ForOp(raw(start), raw(stop), raw(step), initial or None, loc=here())
        _rebind(carry, list(loop.inner_iter_args))
        with ir.InsertionPoint(loop.body):
            yield Value(loop.induction_variable)
            scf.YieldOp([v for c in carry for v in c.carried()], loc=here())
        _rebind(carry, list(loop.results))

    # -- declarations -------------------------------------------------------------------------------
    def smem_region(self, name: str, bytes: int, align: int = 16, swizzle: str | None = None):  # noqa: A002
        """A named shared-memory region (``fa4.smem_region``), placed by fa4-alloc-smem."""
        kwargs = {"swizzle": swizzle} if swizzle else {}
        return fa4.smem_region(sym_name=name, bytes=bytes, align=align, loc=here(), **kwargs)

    def mbarriers(self, name: str, count: int, arrive_count: int, arrival: str):
        """An array of ``count`` mbarriers (``fa4.mbarrier_alloc``); ``arrival`` "tx" or "threads"."""
        return fa4.mbarrier_alloc(sym_name=name, num_barriers=count, arrive_count=arrive_count, arrival=arrival,
                                  loc=here())

    def pipeline(self, name: str, stages: int, full, empty, **sub_stages) -> Pipeline:
        return Pipeline(name, stages, full, empty, **sub_stages)

    # -- the result -----------------------------------------------------------------------------------
    def source(self, grid: str, config: dict | None = None) -> KernelSource:
        """The compiler's input: the built module (its text, with the authors' locations, printed on
        demand as ``.mlir``) and the launch facts."""
        if self.module is None:
            raise RuntimeError(f"kernel '{self.name}' has no body: build it inside `with kernel.body():` first")
        return KernelSource(name=self.name, target=self.target, module=self.module, params=tuple(self.params),
                            grid=grid, config=dict(config or {}))


class _Param:
    """A declared parameter; its SSA value once the body is open."""

    def __init__(self, name: str, kind: str):
        self.name, self.kind, self.value = name, kind, None

    def get(self):
        return Value(self.value) if self.kind == "i32" else self.value


def _rebind(carry: tuple[Carried, ...], values: list) -> None:
    for c in carry:
        n = len(c.carried())
        c.rebind(values[:n])
        values = values[n:]
