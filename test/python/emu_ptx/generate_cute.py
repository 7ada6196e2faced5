"""Regenerate the CuTe DSL sm_100a PTX fixtures of fa4_mlir.emu (run by hand; needs nvidia-cutlass-dsl, no GPU).

    . .venv/bin/activate                                   # from the repository root
    pip install nvidia-cutlass-dsl==4.8.1
    git clone https://github.com/NVIDIA/cutlass CUTLASS && git -C CUTLASS checkout 7107b0553
    python test/python/emu_ptx/generate_cute.py --cutlass CUTLASS [NAME ...]

The kernel is NVIDIA's own: the CUTLASS example ``DenseGemmKernel``
(examples/python/CuTeDSL/cute/blackwell/kernel/dense_gemm/dense_gemm.py at the commit pinned in
SOURCE; the file's git blob hash is checked, so a different revision is refused rather than silently
compiled). Each configuration in CONFIGS is compiled with ``cute.compile`` for sm_100a on a machine
without a GPU: ``CUTE_DSL_ARCH=sm_100a`` picks the target, CuTe's fake tensors (``make_fake_compact_tensor``
with symbolic M, N, K, L) stand in for device tensors and ``make_fake_stream`` for the stream, and
``CUTE_DSL_KEEP=ptx,ir`` keeps the PTX (written verbatim as ``<name>.ptx``) and the MLIR, from which the
dynamic shared-memory size is read (``cute.kernel_smem_size`` is only resolved inside the compiler: it is
the kernel's shared-memory allocations laid out in order at their alignments). The example's ``__call__``
never asks the driver for anything (only its ``run()`` calls ``HardwareInfo``), so no stub is needed.

``kernels_cute_sm100a.json`` records, per fixture, the source, the configuration, the launch geometry
and how each ``.entry`` parameter is packed (test/python/test_emu_cute_sm100a.py builds the arguments from
it). The PTX carries no file paths (no ``.file``/``.loc``: the DSL does not emit line info by default);
the script checks that.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "kernels_cute_sm100a.json"

SOURCE = {
    "repo": "NVIDIA/cutlass",
    "commit": "7107b05535f8977f5ecb9d01ee203205b1fd9bc4",
    "path": "examples/python/CuTeDSL/cute/blackwell/kernel/dense_gemm/dense_gemm.py",
    "blob": "6c6144bc88896cffb3c8c4692ca915f993c71e1d",   # git hash-object of that file at that commit
    "class": "DenseGemmKernel",
    "dsl": "nvidia-cutlass-dsl 4.8.1",
}

# DenseGemmKernel(acc_dtype, use_2cta_instrs, mma_tiler_mn, cluster_shape_mn, use_tma_store); A, B, C bf16,
# A (M, K, L) and B (N, K, L) K-major, C (M, N, L) N-major.
CONFIGS = {
    "cute_dense_gemm_1cta": dict(use_2cta_instrs=False, mma_tiler_mn=(128, 128), cluster_shape_mn=(1, 1),
                                 use_tma_store=True),
    "cute_dense_gemm_2cta": dict(use_2cta_instrs=True, mma_tiler_mn=(256, 128), cluster_shape_mn=(2, 1),
                                 use_tma_store=True),
    "cute_dense_gemm_1cta_stg": dict(use_2cta_instrs=False, mma_tiler_mn=(128, 128), cluster_shape_mn=(1, 1),
                                     use_tma_store=False),
    # tcgen05.mma.cta_group::2 with M = 128: 64 rows per CTA, data-path layout B in tensor memory.
    "cute_dense_gemm_2cta_m128": dict(use_2cta_instrs=True, mma_tiler_mn=(128, 128), cluster_shape_mn=(2, 1),
                                      use_tma_store=True),
}


def blob_hash(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def load_example(cutlass_dir: Path):
    path = cutlass_dir / SOURCE["path"]
    data = path.read_bytes()
    if blob_hash(data) != SOURCE["blob"]:
        sys.exit(f"{path} must be the file at NVIDIA/cutlass {SOURCE['commit']} (blob {SOURCE['blob']}), got blob "
                 f"{blob_hash(data)}; check out that commit")
    # The module name appears in the kernel's mangled name: keep it "dense_gemm" for stable fixtures.
    spec = importlib.util.spec_from_file_location("dense_gemm", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["dense_gemm"] = module
    spec.loader.exec_module(module)
    return module


def smem_bytes(mlir: str) -> int:
    """The kernel's dynamic shared memory: its ``cute.memref.alloca`` in shared memory, in order, each at
    its alignment (SmemAllocator's bump allocation)."""
    types = {alias: (int(align), int(size)) for alias, align, size in re.findall(
        r'^(!memref_smem_i8\w*) = !cute\.memref<i8, smem, align<(\d+)>, "(\d+):1">', mlir, re.M)}
    offset = 0
    for alias in re.findall(r"cute\.memref\.alloca\(\) \{smem\.[^}]*\} : (!memref_smem_i8\w*)", mlir):
        align, size = types[alias]
        offset = -(-offset // align) * align + size
    if not offset:
        raise SystemExit("found no shared-memory allocations in the kernel's MLIR")
    return offset


def tensormap_param(array: str, box: tuple, swizzle: str) -> dict:
    return {"kind": "tensormap", "array": array, "box": list(box), "swizzle": swizzle, "dtype": "bf16"}


def params(cfg: dict, entry_params: list) -> list:
    """How each .entry parameter is packed, in order (cross-checked against the PTX's sizes)."""
    words = 8 if cfg["use_2cta_instrs"] else 4
    cta_m = cfg["mma_tiler_mn"][0] // (2 if cfg["use_2cta_instrs"] else 1)
    b_rows = cfg["mma_tiler_mn"][1] // (2 if cfg["use_2cta_instrs"] else 1)
    out = [
        # The TiledMma's runtime state, as cute.make_atom builds it on the host: i1 accumulate, i1 negate-A,
        # i1 negate-B (bytes 0..2, all false), then the disable-output-lane vector (all zero) at 16 or 32.
        {"kind": "bytes", "what": f"tiled MMA state: accumulate, negate A, negate B flags (false) and a "
                                  f"{words}-word disable-output-lane vector (zero)", "size": 64 if words == 8 else 32},
        tensormap_param("a", (1, cta_m, 64), "128B"),
        {"kind": "s32x3", "values": ["M", "K", "L"], "what": "TMA coordinate tensor of A: its shape"},
        tensormap_param("b", (1, b_rows, 64), "128B"),
        {"kind": "s32x3", "values": ["N", "K", "L"], "what": "TMA coordinate tensor of B: its shape"},
    ]
    if cfg["use_tma_store"]:
        out += [tensormap_param("c", (1, cta_m, 32), "64B"),
                {"kind": "s32x3", "values": ["M", "N", "L"], "what": "TMA coordinate tensor of C: its shape"}]
    else:
        out += [{"kind": "aggregate", "array": "c", "what": "C as a CuTe tensor passed by value: pointer, shape "
                                                            "(M, N, L) as s32, strides of modes 0 and 2 as s64",
                 "fields": [["u64", "c"], ["s32", "M"], ["s32", "N"], ["s32", "L"], ["s64", "N"], ["s64", "M*N"]]}]
    sizes = [p["size"] if p["kind"] == "bytes" else 128 if p["kind"] == "tensormap" else 12 if p["kind"] == "s32x3"
             else 40 for p in out]
    if sizes != entry_params:
        raise SystemExit(f"the .entry parameter sizes must be {sizes}, got {entry_params}: the kernel's ABI changed")
    return out


def compile_one(cutlass_dir: Path, name: str, dump: Path) -> None:
    """In a fresh interpreter (the DSL reads CUTE_DSL_* when it loads): compile one configuration into dump."""
    module = load_example(cutlass_dir)
    cfg = CONFIGS[name]
    import cutlass
    import cutlass.cute as cute
    import cutlass.runtime
    from cutlass.cute.runtime import make_fake_compact_tensor

    m, n, k, l = cute.sym_int32(), cute.sym_int32(divisibility=8), cute.sym_int32(divisibility=8), cute.sym_int32()
    a = make_fake_compact_tensor(cutlass.BFloat16, (m, k, l), stride_order=(1, 0, 2), assumed_align=16)
    b = make_fake_compact_tensor(cutlass.BFloat16, (n, k, l), stride_order=(1, 0, 2), assumed_align=16)
    c = make_fake_compact_tensor(cutlass.BFloat16, (m, n, l), stride_order=(1, 0, 2), assumed_align=16)
    gemm = getattr(module, SOURCE["class"])(cutlass.Float32, cfg["use_2cta_instrs"], cfg["mma_tiler_mn"],
                                            cfg["cluster_shape_mn"], cfg["use_tma_store"])
    cute.compile(gemm, a, b, c, cutlass.runtime.make_fake_stream())


def compiled(cutlass_dir: Path, name: str) -> tuple[str, str]:
    with tempfile.TemporaryDirectory(prefix="emu_cute_") as tmp:
        env = dict(os.environ, CUTE_DSL_ARCH="sm_100a", CUTE_DSL_KEEP="ptx,ir", CUTE_DSL_DUMP_DIR=tmp)
        subprocess.run([sys.executable, __file__, "--cutlass", str(cutlass_dir), "--compile-only", name], env=env,
                       check=True)
        dump = Path(tmp)
        ptx = list(dump.glob("*.ptx"))
        mlir = list(dump.glob("*.mlir"))
        if len(ptx) != 1 or len(mlir) != 1:
            raise SystemExit(f"{name}: expected one .ptx and one .mlir in {dump}, got {ptx + mlir}")
        return ptx[0].read_text(), mlir[0].read_text()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cutlass", type=Path, required=True, help="a checkout of NVIDIA/cutlass at the pinned commit")
    parser.add_argument("--compile-only", help=argparse.SUPPRESS)
    parser.add_argument("names", nargs="*", help=f"fixtures to rebuild (default: all of {', '.join(CONFIGS)})")
    args = parser.parse_args(argv)
    if args.compile_only:
        compile_one(args.cutlass, args.compile_only, Path(os.environ["CUTE_DSL_DUMP_DIR"]))
        return 0
    names = args.names or list(CONFIGS)
    unknown = set(names) - set(CONFIGS)
    if unknown:
        parser.error(f"names must be among {', '.join(CONFIGS)}, got {', '.join(sorted(unknown))}")
    manifest = json.loads(MANIFEST.read_text()) if MANIFEST.exists() else {}
    for name in names:
        cfg = CONFIGS[name]
        ptx, mlir = compiled(args.cutlass.resolve(), name)
        if re.search(r"^\s*\.(file|loc)\b", ptx, re.M) or re.search(r"/(work|root|home|tmp)/", ptx):
            raise SystemExit(f"{name}: the PTX names a file path; strip it before committing")
        entry = re.search(r"^\.visible \.entry (\w+)\(", ptx, re.M).group(1)
        entry_params = [int(s) for s in re.findall(r"^\s*\.param \.align \d+ \.b8 \w+\[(\d+)\]", ptx, re.M)]
        (HERE / f"{name}.ptx").write_text(ptx)
        cluster = [*cfg["cluster_shape_mn"], 1]
        cta_m = cfg["mma_tiler_mn"][0] // (2 if cfg["use_2cta_instrs"] else 1)
        manifest[name] = {
            "file": f"{name}.ptx",
            "sha256": hashlib.sha256(ptx.encode()).hexdigest(),
            "target": "sm_100a",
            "entry": entry,
            "source": SOURCE,
            "config": {"ab_dtype": "bf16", "acc_dtype": "f32", "c_dtype": "bf16", "a_major": "k", "b_major": "k",
                       "c_major": "n", **{k: list(v) if isinstance(v, tuple) else v for k, v in cfg.items()}},
            "launch": {
                "grid": f"(roundup(ceil(M/{cta_m}), {cluster[0]}), roundup(ceil(N/{cfg['mma_tiler_mn'][1]}), "
                        f"{cluster[1]}), L)",
                "cta_tile_mn": [cta_m, cfg["mma_tiler_mn"][1]],
                "block": [128, 1, 1],
                "cluster": cluster,
                "smem_bytes": smem_bytes(mlir),
            },
            "params": params(cfg, entry_params),
            "arrays": {"a": "(L, M, K) bf16 bit patterns (uint16)", "b": "(L, N, K) bf16 bit patterns (uint16)",
                       "c": "(L, M, N) bf16 bit patterns (uint16), written by the kernel"},
            "shape_rules": "K and N multiples of 8 (16-byte TMA rows)" + (
                "" if cfg["use_tma_store"] else "; M and N multiples of the CTA tile (the example allows no "
                                                "partial tiles without the TMA store)"),
        }
        print(f"{name}: {entry[:60]}... {len(ptx)} bytes, smem {manifest[name]['launch']['smem_bytes']}")
    MANIFEST.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
