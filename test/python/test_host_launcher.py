"""The C++ host launcher (fa4_mlir/torch/host_launcher.cpp) on the CPU: its build switch and errors,
and its logic run for real in its CPU test build against a stub driver.

The test build (``-DFA4_HOST_LAUNCHER_CPU_TEST``) is the same source attached to the CPU key, with
outputs on the CPU, stream 0 and the stub libcuda below, which records what each launch passed. A toy
op, ``fa4_hltest::axpy(x, y, a)``, plays the part of ``flash_attention``: its full path
(``_axpy_full``) computes ``a * x + y`` with torch and offers a plan whose parameters are a tensor map
for x, pointers for y and the output, and the scalar a. The test then checks what the C++ side does
with it: which calls it launches, which addresses it writes where, what it hands back to the full
path. The stub driver is bench/host_path_stubbed.py's (test_launch_fastpath uses it too). The GPU build runs the real ops in test/gpu/test_host_path_gpu.py.
"""

from __future__ import annotations

import ctypes
import pathlib
import shutil
import struct
import sys

import pytest

torch = pytest.importorskip("torch")

from fa4_mlir import knobs  # noqa: E402
from fa4_mlir.errors import ConfigError, LaunchError  # noqa: E402
from fa4_mlir.torch import host_launcher  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
import host_path_stubbed as stubs  # noqa: E402

FUNCTION, CONTEXT = 0xF00D, 0x2000  # the plan's kernel and context (the stub starts in stubs.CTX)


def test_the_knob_reads_its_three_modes(monkeypatch):
    for text, mode in (("", "auto"), ("auto", "auto"), ("1", "on"), ("ON", "on"), ("0", "off"), ("no", "off")):
        monkeypatch.setenv("FA4_HOST_LAUNCHER", text)
        assert knobs.host_launcher() == mode
    monkeypatch.setenv("FA4_HOST_LAUNCHER", "sometimes")
    with pytest.raises(ConfigError, match="FA4_HOST_LAUNCHER must be one of auto, on .1., off .0., got 'sometimes'"):
        knobs.host_launcher()


@pytest.fixture
def fresh_state(monkeypatch):
    """host_launcher's per-process state, reset (and restored after)."""
    monkeypatch.setattr(host_launcher, "_state", {"tried": False, "attached": False, "bypass": 0})


def test_ensure_stays_in_python_when_off_or_unbuildable(monkeypatch, fresh_state):
    monkeypatch.setattr(host_launcher, "build", lambda: pytest.fail("build must not run"))
    monkeypatch.setenv("FA4_HOST_LAUNCHER", "off")
    assert host_launcher.ensure() is False
    monkeypatch.setattr(host_launcher, "_state", {"tried": False, "attached": False, "bypass": 0})
    monkeypatch.setenv("FA4_HOST_LAUNCHER", "auto")
    monkeypatch.setattr(host_launcher, "toolchain_missing", lambda: "no C++ compiler (c++)")
    assert host_launcher.ensure() is False  # silently: nothing to build with
    assert host_launcher.stats() == {"hits": 0, "misses": 0, "plans": 0, "ops": 0}


def test_ensure_raises_when_required_and_unbuildable(monkeypatch, fresh_state):
    monkeypatch.setenv("FA4_HOST_LAUNCHER", "on")
    monkeypatch.setattr(host_launcher, "toolchain_missing", lambda: "no ninja (pip install ninja)")
    with pytest.raises(LaunchError, match=r"FA4_HOST_LAUNCHER=on: the host launcher cannot be built here: no ninja "
                                          r"\(pip install ninja\); set FA4_HOST_LAUNCHER=auto"):
        host_launcher.ensure()


def test_a_failed_build_warns_once_and_stays_in_python(monkeypatch, fresh_state, tmp_path):
    from torch.utils import cpp_extension

    def broken(*args, **kwargs):
        raise RuntimeError("Error building extension 'fa4_host_launcher': error: expected ';'")

    monkeypatch.setenv("FA4_HOST_LAUNCHER", "auto")
    monkeypatch.setenv("FA4_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(host_launcher, "toolchain_missing", lambda: None)
    monkeypatch.setattr(cpp_extension, "load", broken)
    with pytest.warns(UserWarning, match="the host launcher failed to build in .*expected ';'.*launch from Python"):
        assert host_launcher.ensure() is False
    assert host_launcher.ensure() is False  # tried once: no second warning (pytest would fail on an error)


def test_a_refused_registration_warns_and_stays_in_python(monkeypatch, fresh_state):
    def refused():
        raise RuntimeError("Tried to register an operator (fa4::flash_attention) with the same name twice")

    monkeypatch.setenv("FA4_HOST_LAUNCHER", "auto")
    monkeypatch.setattr(host_launcher, "toolchain_missing", lambda: None)
    monkeypatch.setattr(host_launcher, "build", lambda: "built.so")
    monkeypatch.setattr(host_launcher, "_attach", refused)
    with pytest.warns(UserWarning, match="same name twice; the ops launch from Python"):
        assert host_launcher.ensure() is False
    assert not host_launcher.attached()


def test_the_toolchain_check_names_what_is_missing(monkeypatch):
    if torch.version.cuda is None:
        assert host_launcher.toolchain_missing() == f"torch {torch.__version__} is not a CUDA build"
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    from torch.utils import cpp_extension

    monkeypatch.setattr(cpp_extension, "CUDA_HOME", None)
    assert host_launcher.toolchain_missing().startswith("no CUDA toolkit")


class _Launch:
    """What ``offer`` reads of a PackedLaunch."""

    def __init__(self, slots, plain=True):
        self.slots, self.plain = slots, plain


def test_offer_checks_the_sources(fresh_state):
    with pytest.raises(LaunchError, match=r"offer: sources must name each of the 2 slots \(a, b\), got 3"):
        host_launcher.offer(_Launch(["a", "b"]), (0, 1, -1))
    host_launcher.offer(_Launch(["a", "b"]), (0, 1))  # not attached: nothing to hand over, no error


# ---------------------------------------------------------------------------------------------------
# The C++ logic, in the CPU test build
# ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The CPU test build of host_launcher.cpp, loaded, and the stub driver (ctypes)."""
    from torch.utils import cpp_extension

    if shutil.which("cc") is None or shutil.which("c++") is None or not cpp_extension.is_ninja_available():
        pytest.skip("needs a C and C++ compiler and ninja")
    if torch.version.cuda is not None:
        pytest.skip("the CPU test build needs CPU-only PyTorch (a CUDA build tests the real one on the GPU)")
    where = tmp_path_factory.mktemp("host_launcher")
    stub = stubs.stub_libcuda()  # its own copy: its counters and context are this module's
    mp = pytest.MonkeyPatch()
    mp.setenv("FA4_HOST_LAUNCHER_TEST_LIBCUDA", str(stub))  # read once, at the first call
    cpp_extension.load("fa4_host_launcher_cputest", [str(host_launcher.SOURCE)], with_cuda=False,
                       extra_cflags=["-O1", "-DFA4_HOST_LAUNCHER_CPU_TEST"], build_directory=str(where),
                       is_python_module=False)
    driver = ctypes.CDLL(str(stub))
    ctypes.c_int.in_dll(driver, "param_count").value = 4
    _define_axpy()
    torch.ops.fa4_host.attach("fa4_hltest", "axpy")
    yield driver
    torch.ops.fa4_host.detach()
    mp.undo()


_full_calls = []
_lib = None


def _define_axpy():
    """``fa4_hltest::axpy``: a CompositeExplicitAutograd Python kernel (what runs with the launcher
    detached) and ``_axpy_full``, which computes, records the call and offers a plan."""
    global _lib
    _lib = torch.library.Library("fa4_hltest", "DEF")
    schema = "(Tensor x, Tensor y, float a) -> Tensor"
    _lib.define("axpy" + schema)
    _lib.define("_axpy_full" + schema)
    _lib.impl("axpy", lambda x, y, a: a * x + y, "CompositeExplicitAutograd")

    def full(x, y, a):
        if x.data_ptr() % 16:
            raise LaunchError(f"axpy: x must start 16-byte aligned, got 0x{x.data_ptr():x}")
        out = a * x + y
        _full_calls.append(out.data_ptr())
        tensor_map, y_ptr = (ctypes.c_ubyte * 128)(), ctypes.c_uint64(y.data_ptr())
        a_value, out_ptr = ctypes.c_float(a), ctypes.c_uint64(out.data_ptr())
        params = (tensor_map, y_ptr, a_value, out_ptr)
        cluster = [2, 1, 1] if a == 3.0 else [1, 1, 1]  # a == 3: a cluster launch
        torch.ops.fa4_host.offer(FUNCTION, CONTEXT, 0, [3, 2, 1], [384, 1, 1], 4096,
                                 [ctypes.addressof(p) for p in params], [ctypes.sizeof(p) for p in params],
                                 [0, 1, 3], [1, 0, 0], [0, 1, -1], cluster)
        return out

    _lib.impl("_axpy_full", full, "CompositeExplicitAutograd")


def _counter(driver, name):
    return ctypes.c_int.in_dll(driver, name).value


def _words(driver):
    return list((ctypes.c_uint64 * 16).in_dll(driver, "last_words"))


def _inputs(seed, n=64):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, generator=gen), torch.randn(n, generator=gen)


def test_a_planned_layout_launches_from_cpp_with_its_addresses(built):
    torch.ops.fa4_host.clear()
    x, y = _inputs(0)
    stats = host_launcher_stats()
    first = torch.ops.fa4_hltest.axpy(x, y, 0.5)
    torch.testing.assert_close(first, 0.5 * x + y)  # the full path ran
    assert _full_calls[-1] == first.data_ptr()
    launches, replaces = _counter(built, "launches"), _counter(built, "replaces")
    outs, held, moved = [], None, 0
    for seed in (1, 2, 3):
        x2, y2 = _inputs(seed)
        moved += x2.data_ptr() != held  # the first launch writes every slot (the copy's addresses are unknown)
        held = x2.data_ptr()
        out = torch.ops.fa4_hltest.axpy(x2, y2, 0.5)
        outs.append(out)  # kept: the next output gets another address
        words = _words(built)
        assert words[0] == x2.data_ptr() and words[1] == y2.data_ptr() and words[3] == out.data_ptr()
        assert struct.unpack("<f", struct.pack("<Q", words[2])[:4])[0] == 0.5  # the packed scalar
        assert (out.shape, out.stride(), out.dtype) == (first.shape, first.stride(), first.dtype)
    assert _counter(built, "launches") == launches + 3
    assert _counter(built, "replaces") == replaces + moved  # a map is rewritten only when x moved
    assert list((ctypes.c_uint * 3).in_dll(built, "last_grid")) == [3, 2, 1]
    assert list((ctypes.c_uint * 3).in_dll(built, "last_block")) == [384, 1, 1]
    assert _counter(built, "last_smem") == 4096
    assert ctypes.c_void_p.in_dll(built, "last_function").value == FUNCTION
    assert ctypes.c_void_p.in_dll(built, "context").value == CONTEXT  # the plan's context made current
    after = host_launcher_stats()
    assert (after[0] - stats[0], after[1] - stats[1], after[2]) == (3, 1, 1)


def test_a_cluster_plan_launches_with_its_cluster_shape(built):
    """A plan offered with a cluster shape launches with the cluster dimension attribute; a plain one with none."""
    torch.ops.fa4_host.clear()
    x, y = _inputs(4)
    for a, cluster in ((3.0, [2, 1, 1]), (0.5, [1, 1, 1])):
        torch.ops.fa4_hltest.axpy(x, y, a)  # plans
        launches = _counter(built, "launches")
        torch.ops.fa4_hltest.axpy(x, y, a)  # launched from C++ (the stub records it)
        assert _counter(built, "launches") == launches + 1 and _words(built)[0] == x.data_ptr()
        assert list((ctypes.c_uint * 3).in_dll(built, "last_cluster")) == cluster


def test_an_unmoved_map_is_not_rewritten(built):
    torch.ops.fa4_host.clear()
    x, y = _inputs(3)
    torch.ops.fa4_hltest.axpy(x, y, 2.0)  # plans
    torch.ops.fa4_hltest.axpy(x, y, 2.0)  # writes every slot once (the copied parameters' addresses are unknown)
    replaces = _counter(built, "replaces")
    for _ in range(3):
        torch.ops.fa4_hltest.axpy(x, y, 2.0)
    assert _counter(built, "replaces") == replaces


def test_every_key_part_separates_plans(built, monkeypatch):
    """Another scalar, shape, dtype or FA4_* variable is another layout: a miss, then its own plan."""
    torch.ops.fa4_host.clear()
    x, y = _inputs(4)
    calls = [lambda: torch.ops.fa4_hltest.axpy(x, y, 1.0), lambda: torch.ops.fa4_hltest.axpy(x, y, 3.0),
             lambda: torch.ops.fa4_hltest.axpy(x[:32], y[:32], 1.0),
             lambda: torch.ops.fa4_hltest.axpy(x.double(), y.double(), 1.0)]
    for i, call in enumerate(calls):
        before = len(_full_calls)
        call()
        call()
        assert len(_full_calls) == before + 1, f"call {i}: not one miss then one hit"
    monkeypatch.setenv("FA4_DEBUG_TIMEOUT_MS", "5")
    before = len(_full_calls)
    calls[0]()
    assert len(_full_calls) == before + 1
    assert host_launcher_stats()[2] == 5


def test_what_cpp_cannot_launch_goes_to_the_full_path(built):
    """A misaligned tensor map (the full path's error), an emulator block (bypass) and a failed
    driver launch all reach the full path, which raises or launches."""
    torch.ops.fa4_host.clear()
    x, y = _inputs(5)
    torch.ops.fa4_hltest.axpy(x, y, 1.0)
    flat = torch.zeros(x.numel() + 4)
    shifted = flat[1:1 + x.numel()]  # the same layout, 4 bytes off
    with pytest.raises(LaunchError, match="x must start 16-byte aligned"):
        torch.ops.fa4_hltest.axpy(shifted, y, 1.0)
    before = len(_full_calls)
    torch.ops.fa4_host.add_bypass(1)
    try:
        torch.ops.fa4_hltest.axpy(x, y, 1.0)
    finally:
        torch.ops.fa4_host.add_bypass(-1)
    assert len(_full_calls) == before + 1
    ctypes.c_int.in_dll(built, "fail_launch").value = 1
    try:
        out = torch.ops.fa4_hltest.axpy(x, y, 1.0)
    finally:
        ctypes.c_int.in_dll(built, "fail_launch").value = 0
    assert len(_full_calls) == before + 2
    torch.testing.assert_close(out, x + y)
    torch.ops.fa4_hltest.axpy(x, y, 1.0)
    assert len(_full_calls) == before + 2  # planned again


def test_detach_leaves_the_python_kernel(built):
    x, y = _inputs(6)
    torch.ops.fa4_hltest.axpy(x, y, 1.0)
    torch.ops.fa4_host.detach()
    try:
        launches, calls = _counter(built, "launches"), len(_full_calls)
        torch.testing.assert_close(torch.ops.fa4_hltest.axpy(x, y, 1.0), x + y)
        assert (_counter(built, "launches"), len(_full_calls)) == (launches, calls)
        assert host_launcher_stats()[2:] == [0, 0]
    finally:
        torch.ops.fa4_host.attach("fa4_hltest", "axpy")


def test_offer_refuses_bad_plans(built):
    args = dict(function=1, context=1, device=0, grid=[1, 1, 1], block=[128, 1, 1], smem=0,
                param_addresses=[0], param_sizes=[8], slot_params=[0], slot_maps=[0], slot_sources=[0],
                cluster=[1, 1, 1])
    cases = [({"grid": [1, 1]}, "grid and block must have 3 entries, got 2 and 3"),
             ({"param_sizes": [8, 8]}, "param_addresses and param_sizes must have one length, got 1 and 2"),
             ({"slot_maps": [0, 0]}, "the slot lists must have one length <= 16, got 1, 2, 1"),
             ({"slot_params": [1]}, "slot 0 must name a parameter < 1, got 1"),
             ({"slot_maps": [1]}, "slot 0 must name a 128-byte tensor map, got 8 bytes"),
             ({"param_sizes": [0]}, "a parameter size must be > 0, got 0"),
             ({"cluster": [2, 1]}, r"cluster must be 3 sizes >= 1, got \[2, 1\]"),
             ({"cluster": [2, 0, 1]}, r"cluster must be 3 sizes >= 1, got \[2, 0, 1\]")]
    holder = ctypes.c_uint64(0)
    for change, message in cases:
        call = {**args, "param_addresses": [ctypes.addressof(holder)], **change}
        with pytest.raises(RuntimeError, match=message.replace("(", r"\(")):
            torch.ops.fa4_host.offer(*call.values())


def host_launcher_stats():
    return list(torch.ops.fa4_host.stats())
