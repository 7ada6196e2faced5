"""The launch fast path without a GPU: ``PackedLaunch`` (fa4_mlir.runtime.launcher) and the plans of
``flash_attention`` and ``gemm_residual`` (fa4_mlir.torch.fastpath), against a stub libcuda compiled
here (bench/host_path_stubbed.py) that records what each launch passed: the grid, the stream and the
first 8 bytes of each parameter (a stub tensor map holds its address there).

Needs PyTorch and a C compiler; the kernels' manifests come from the runtime's cache (compiled on
first use); nothing is launched on a GPU.
"""

from __future__ import annotations

import ctypes
import pathlib
import shutil
import struct
import sys

import pytest

torch = pytest.importorskip("torch")
if shutil.which("cc") is None:
    pytest.skip("no C compiler for the stub libcuda", allow_module_level=True)

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
import host_path_stubbed as stubs  # noqa: E402

from fa4_mlir import runtime  # noqa: E402
from fa4_mlir.configs.gemm import GemmConfig  # noqa: E402
from fa4_mlir.errors import LaunchError  # noqa: E402
from fa4_mlir.kernels import gemm  # noqa: E402
from fa4_mlir.runtime import launcher  # noqa: E402
from fa4_mlir.runtime.tensormap import GlobalTensor  # noqa: E402
from fa4_mlir.torch import attention, fastpath, ops  # noqa: E402
from fa4_mlir.torch.emulated import emulator  # noqa: E402


@pytest.fixture(scope="module")
def stub_path():
    return stubs.stub_libcuda()


@pytest.fixture
def lib(monkeypatch, stub_path):
    for name in ("FA4_DEVICE", "FA4_DEBUG"):
        monkeypatch.delenv(name, raising=False)
    found = stubs.install_stubs(monkeypatch.setattr, stub_path)
    found.param_count = ctypes.c_int.in_dll(found, "param_count")
    yield found
    stubs.clear_driver_caches()  # the next caller asks the real driver (or finds none)


def _count(lib, name: str) -> int:
    return ctypes.c_int.in_dll(lib, name).value


def _words(lib, n: int) -> list[int]:
    return list((ctypes.c_uint64 * 16).in_dll(lib, "last_words"))[:n]


def _f32(word: int) -> float:
    return struct.unpack("<f", struct.pack("<I", word & 0xFFFFFFFF))[0]


def _gemm_kernel():
    return runtime.load("gemm", GemmConfig(target="sm_90a", b_major="mn"), device=0)


def _gemm_args(kernel, base: int, m=128, n=256, k=64):
    grid, tiles = gemm.launch_geometry(GemmConfig(target="sm_90a", b_major="mn"), m, n, k, kernel.resident_ctas)
    args = {"a": GlobalTensor.contiguous(base, "bf16", (m, k)), "b": GlobalTensor.contiguous(base + 0x100000, "bf16", (k, n)),
            "c": GlobalTensor.contiguous(base + 0x200000, "bf16", (m, n)),
            "d": GlobalTensor.contiguous(base + 0x300000, "bf16", (m, n)), **tiles, "alpha": 1.5, "beta": -2.0,
            "has_c": 1}
    return grid, tiles, args


def test_packed_launch_passes_the_new_addresses_and_the_packed_scalars(lib):
    kernel = _gemm_kernel()
    grid, tiles, args = _gemm_args(kernel, 0x10000000)
    packed = kernel.packed(grid, args, ("d", "a", "b", "c"))
    assert packed.slots == ["d", "a", "b", "c"]
    lib.param_count.value = 10
    before = _count(lib, "launches")
    packed.launch((0x10300000, 0x10000000, 0x10100000, 0x10200000), 77)
    words = _words(lib, 10)
    assert _count(lib, "launches") == before + 1 and _count(lib, "replaces") == 0  # the encoded addresses
    assert words[:4] == [0x10000000, 0x10100000, 0x10200000, 0x10300000]
    assert [w & 0xFFFFFFFF for w in (words[4], words[5], words[6], words[9])] == [
        tiles["num_m"], tiles["num_n"], tiles["k_tiles"], 1]
    assert (_f32(words[7]), _f32(words[8])) == (1.5, -2.0)
    assert list((ctypes.c_uint * 3).in_dll(lib, "last_grid")) == [*grid, 1, 1]
    assert tuple((ctypes.c_uint * 3).in_dll(lib, "last_block")) == kernel.threads
    assert ctypes.c_uint.in_dll(lib, "last_smem").value == kernel.smem_bytes
    assert ctypes.c_void_p.in_dll(lib, "last_stream").value == 77
    packed.launch((0x20000000, 0x10000000, 0x10100000, 0x10200000), 0)  # only d moved
    assert _count(lib, "replaces") == 1 and _words(lib, 4)[3] == 0x20000000


def test_packed_launch_of_a_cluster_kernel_passes_its_cluster_shape(lib):
    """A cluster kernel (the 2x1 B-multicast GEMM) launches through cuLaunchKernelEx with the cluster
    dimension attribute, and so is plain (the C++ launcher can take it); a plain kernel passes no attribute."""
    config = GemmConfig(target="sm_90a", b_major="mn", cluster_m=2)
    kernel = runtime.load("gemm", config, device=0)
    assert kernel.cluster == (2, 1, 1) and kernel.resident_ctas == 2 * stubs.STUB_CLUSTERS  # the active clusters
    grid, tiles = gemm.launch_geometry(config, 128, 256, 64, kernel.resident_ctas)
    _, _, args = _gemm_args(kernel, 0x10000000)
    packed = kernel.packed(grid, {**args, **tiles})
    assert packed.plain
    packed.launch((0x10000000, 0x10100000, 0x10200000, 0x10300000), 0)
    assert list((ctypes.c_uint * 3).in_dll(lib, "last_cluster")) == [2, 1, 1]
    assert list((ctypes.c_uint * 3).in_dll(lib, "last_grid")) == [*grid, 1, 1] and grid == (2,)
    plain = _gemm_kernel()
    grid, _, args = _gemm_args(plain, 0x10000000)
    plain.packed(grid, args).launch((0x10000000, 0x10100000, 0x10200000, 0x10300000), 0)
    assert list((ctypes.c_uint * 3).in_dll(lib, "last_cluster")) == [1, 1, 1]


def test_packed_launch_exports_what_the_host_launcher_copies(lib):
    """What fa4_mlir.torch.host_launcher.offer hands to C++: each packed parameter's address and size
    (128 bytes for a tensor map, the holder's size otherwise, in the manifest's order, holding the
    packed values), and per slot (in the caller's order) its parameter's index and whether it is a map."""
    kernel = _gemm_kernel()
    grid, _, args = _gemm_args(kernel, 0x10000000)
    packed = kernel.packed(grid, args, ("d", "a", "b", "c"))
    sizes = {"tensormap": 128, "f32": 4, "i32": 4, "i64": 8, "ptr": 8}
    assert packed.param_sizes == [sizes[p["kind"]] for p in kernel.params]
    names = [p["name"] for p in kernel.params]
    assert packed.slot_params == [names.index(n) for n in ("d", "a", "b", "c")]
    assert packed.slot_maps == [True] * 4 and packed.plain
    assert len(packed.param_addresses) == len(kernel.params)
    alpha = names.index("alpha")
    assert ctypes.c_float.from_address(packed.param_addresses[alpha]).value == 1.5


def test_packed_launch_writes_only_what_changed(lib):
    """Addresses equal to the last launch's are not written again (no cuTensorMapReplaceAddress); one
    that changes is, also after a launch that refused an address half-way through its writes."""
    kernel = _gemm_kernel()
    grid, _, args = _gemm_args(kernel, 0x10000000)
    packed = kernel.packed(grid, args)
    lib.param_count.value = 4
    first = (0x10000000, 0x10100000, 0x10200000, 0x10300000)
    replaces, launches = _count(lib, "replaces"), _count(lib, "launches")
    for _ in range(3):
        packed.launch(first, 0)
    assert _count(lib, "replaces") == replaces and _count(lib, "launches") == launches + 3
    moved = (0x40000000, 0x10100000, 0x10200000, 0x10300000)
    packed.launch(moved, 0)
    packed.launch(moved, 0)
    assert _count(lib, "replaces") == replaces + 1 and _words(lib, 4) == list(moved)
    with pytest.raises(LaunchError, match="argument 'b' of gemm.* address must be 16-byte aligned"):
        packed.launch((0x50000000, 0x10100008, 0x10200000, 0x10300000), 0)  # a written, then b refused
    packed.launch(moved, 0)  # a is written back
    assert _words(lib, 4) == list(moved)
    packed.launch(list(first), 0)  # a list: compared slot by slot
    assert _words(lib, 4) == list(first)


def test_launch_config_matches_cuda_h():
    """launcher.LaunchConfig, which the fast path hands cuLaunchKernelEx, has CUlaunchConfig's layout (as
    cuda-python compiles it from cuda.h): the same bytes for the same fields."""
    cu = pytest.importorskip("cuda.bindings.driver")
    ours = launcher.LaunchConfig((ctypes.c_uint * 3)(7, 8, 9), (ctypes.c_uint * 3)(384, 2, 3), 200000, 0x1234)
    theirs = cu.CUlaunchConfig()
    theirs.gridDimX, theirs.gridDimY, theirs.gridDimZ = 7, 8, 9
    theirs.blockDimX, theirs.blockDimY, theirs.blockDimZ = 384, 2, 3
    theirs.sharedMemBytes, theirs.hStream = 200000, cu.CUstream(0x1234)
    size = ctypes.sizeof(launcher.LaunchConfig)
    assert size == 56 and bytes(ours) == ctypes.string_at(theirs.getPtr(), size)


def test_packed_launch_refuses_what_it_cannot_pass(lib):
    kernel = _gemm_kernel()
    grid, _, args = _gemm_args(kernel, 0x10000000)
    packed = kernel.packed(grid, args)
    assert packed.slots == ["a", "b", "c", "d"]
    with pytest.raises(LaunchError, match="argument 'b' of gemm.* address must be 16-byte aligned"):
        packed.launch((0x10000000, 0x10100008, 0x10200000, 0x10300000), 0)
    with pytest.raises(LaunchError, match="takes 4 addresses"):
        packed.launch((0x10000000,), 0)
    with pytest.raises(LaunchError, match="raw handle"):
        packed.launch((0x10000000, 0x10100000, 0x10200000, 0x10300000), None)
    with pytest.raises(LaunchError, match="slots of a PackedLaunch of gemm must name"):
        kernel.packed(grid, args, ("a", "b", "c", "x"))
    with pytest.raises(LaunchError, match="16-byte aligned"):  # the build checks as Kernel.launch does
        kernel.packed(grid, {**args, "a": GlobalTensor.contiguous(0x10000002, "bf16", (128, 64))})
    with pytest.raises(LaunchError, match="finite number"):
        kernel.packed(grid, {**args, "alpha": float("nan")})
    with pytest.raises(LaunchError, match="argument 'a' of gemm must be a GlobalTensor for a PackedLaunch, got int"):
        kernel.packed(grid, {**args, "a": 0x10000000})


def test_packed_launch_refuses_a_bad_pointer_and_a_missing_libcuda(lib, monkeypatch):
    """The LSE pointer of an attention plan must be a device address (int >= 0); without a libcuda that
    ctypes can open there is no PackedLaunch (``Kernel.launch`` goes through cuda-python)."""
    lib.param_count.value = 5
    q = torch.randn(1, 128, 1, 128).bfloat16()
    attention.flash_attention_op(q, q, q, False, None, True)
    plan = next(iter(attention._plans.values()))
    with pytest.raises(LaunchError, match=r"argument 'lse' of attention must be a device address \(int\), got -1"):
        plan.launch.launch((q.data_ptr(), q.data_ptr(), q.data_ptr(), q.data_ptr(), -1), 0)
    kernel = _gemm_kernel()
    grid, _, args = _gemm_args(kernel, 0x10000000)
    with monkeypatch.context() as patch:  # undone before the lib fixture clears the driver caches
        patch.setattr(launcher, "libcuda", lambda: None)
        with pytest.raises(LaunchError, match=r"PackedLaunch needs libcuda through ctypes \(libcuda.so.1\); use "
                                              r"Kernel.launch"):
            kernel.packed(grid, args)


def test_kernel_launch_goes_through_ctypes(lib):
    kernel = _gemm_kernel()
    grid, _, args = _gemm_args(kernel, 0x30000000)
    lib.param_count.value = 4
    before = _count(lib, "launches")
    kernel.launch(grid, args, stream=5)
    assert _count(lib, "launches") == before + 1 and _words(lib, 4) == [0x30000000, 0x30100000, 0x30200000, 0x30300000]


def test_gemm_residual_reuses_its_plan_with_the_new_addresses(lib):
    a, b, c = (torch.randn(128, 128).bfloat16() for _ in range(3))
    lib.param_count.value = 4
    outs = []
    for i in range(3):
        a2, b2, c2 = a.clone(), b.clone(), c.clone()  # new addresses, one layout
        outs.append(ops.gemm_residual(a2, b2, c2, 1.0, 1.0))
        assert _words(lib, 4) == [a2.data_ptr(), b2.data_ptr(), c2.data_ptr(), outs[-1].data_ptr()]
        assert (outs[-1].shape, outs[-1].stride(), outs[-1].dtype) == ((128, 128), (128, 1), torch.bfloat16)
    assert len(ops._plans) == 1
    ops.gemm_residual(a, b.t().contiguous().t(), c, 1.0, 1.0)  # B K-major: another layout, another kernel
    ops.gemm_residual(a, b, c, 2.0, 1.0)  # another alpha
    assert len(ops._plans) == 3
    base = torch.empty(128 * 128 + 1, dtype=torch.bfloat16)
    shifted = base[1:].view(128, 128)  # the plan's layout, 2 bytes off 16
    with pytest.raises(LaunchError, match="16-byte aligned"):
        ops.gemm_residual(shifted, b, c, 1.0, 1.0)


@pytest.mark.parametrize("return_lse", [False, True])
def test_flash_attention_reuses_its_plan_with_the_new_addresses(lib, return_lse):
    """The outputs of a planned call are new tensors as the full path makes them; without return_lse
    the lse pointer (not dereferenced by the kernel) stays the one packed by the first call."""
    lib.param_count.value = 5
    first_out = None
    for _ in range(3):
        q, k, v = (torch.randn(1, 128, 2, 128).bfloat16() for _ in range(3))
        out, lse = attention.flash_attention_op(q, k, v, False, None, return_lse)
        assert (out.shape, out.stride(), out.dtype) == (q.shape, (32768, 256, 128, 1), torch.bfloat16)
        assert (lse.shape, lse.stride(), lse.dtype) == (((1, 2, 128), (256, 128, 1)) if return_lse else
                                                        ((0,), (1,))) + (torch.float32,)
        first_out = first_out or out.data_ptr()
        lse_word = lse.data_ptr() if return_lse else first_out
        assert _words(lib, 5) == [q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), lse_word]
    assert len(attention._plans) == 1
    with emulator(target="sm_90a"):  # a requested emulator is part of the key (the stubbed placement ignores it)
        attention.flash_attention_op(q, k, v, False, None, return_lse)
    assert len(attention._plans) == 2
    strided = torch.randn(1, 128, 2, 136).bfloat16()[..., :128]
    attention.flash_attention_op(strided, k, v, False, None, return_lse)  # other strides: a third plan
    assert len(attention._plans) == 3 and _words(lib, 1) == [strided.data_ptr()]
    with pytest.raises(LaunchError, match="unit innermost stride"):  # the full checks on a new layout
        attention.flash_attention_op(q.transpose(1, 3).contiguous().transpose(1, 3), k, v, False, None, return_lse)


def test_flash_attention_gqa_plans_pass_the_group(lib):
    """sm_90a GQA on the fast path: the plan key holds K's shape (its K/V heads), so each head count has
    its plan, whose packed ``group`` (the parameter after ``num_heads``) is H / H_kv; one kernel serves
    every group. A head count that does not divide H is a new layout: the full path's error."""
    lib.param_count.value = 11  # q, k, v, o, lse, seq_q, seq_k, num_heads, group, scale_log2e, write_lse
    q = torch.randn(1, 128, 8, 128).bfloat16()
    for hk in (8, 2, 2, 1):
        k, v = (torch.randn(1, 128, hk, 128).bfloat16() for _ in range(2))
        out, _ = attention.flash_attention_op(q, k, v, False, None, False)
        words = _words(lib, 11)
        assert words[:4] == [q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr()]
        assert [w & 0xFFFFFFFF for w in words[5:9]] == [128, 128, 8, 8 // hk]
    assert len(attention._plans) == 3 and len(runtime._loaded) == 1
    k = torch.randn(1, 128, 3, 128).bfloat16()
    with pytest.raises(LaunchError, match=r"flash_attention: k/v heads must divide q heads \(8\), got 3"):
        attention.flash_attention_op(q, k, k, False, None, False)


def test_env_state_follows_the_environment(monkeypatch):
    monkeypatch.delenv("FA4_DEBUG", raising=False)
    monkeypatch.delenv("FA4_DEVICE", raising=False)
    before = fastpath.env_state()
    monkeypatch.setenv("FA4_DEBUG", "1")
    debug = fastpath.env_state()
    monkeypatch.setenv("FA4_DEVICE", "emulator")
    assert len({before, debug, fastpath.env_state()}) == 3


def test_plans_are_bounded(monkeypatch):
    monkeypatch.setattr(fastpath, "PLANS", 3)
    plans = fastpath.Plans()
    for key in range(5):
        plans.put(key, key)
    assert sorted(plans) == [2, 3, 4]


@pytest.mark.parametrize("shape", [(1, 128, 1, 128), (2, 3, 4, 5), (1, 1, 1, 1), (3, 1, 128), (128, 256), (0,)])
def test_template_gives_the_output_without_its_memory(shape):
    """``torch.empty_like(fastpath.template(t))`` is a new tensor with t's shape, strides and dtype; the
    template holds at most one element."""
    for dtype in (torch.bfloat16, torch.float32):
        t = torch.empty(shape, dtype=dtype)
        like = fastpath.template(t)
        made = torch.empty_like(like)
        assert (made.shape, made.stride(), made.dtype, made.device) == (t.shape, t.stride(), dtype, t.device)
        assert like.untyped_storage().nbytes() <= like.element_size()
        assert made.data_ptr() != t.data_ptr() or t.numel() == 0
    with pytest.raises(ValueError, match=r"template: t must be a contiguous tensor, got strides \(1, 64\)"):
        fastpath.template(torch.empty(128, 64).t())
