"""fa4-layout's JSON for the reference configurations matches the spec tables exactly."""

from __future__ import annotations

import json
import subprocess
import sys


def layout_json(*args):
    r = subprocess.run([sys.executable, "-m", "fa4_mlir.tools.fa4_layout", "--json", *args],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_depth512_d512_reference_layout():
    j = layout_json("--kernel", "depth512", "--qk-depth", "512", "--ov-depth", "512")
    assert j["kernel"] == "depth512"
    c = j["config"]
    assert (c["BM"], c["BN"], c["num_qk_stages"], c["num_pv_stages"], c["num_kv_stages"], c["fused_kv"]) == \
        (64, 256, 4, 2, 4, True)
    assert j["smem_bytes"] == 229780
    # Spec 2.2: Q, P, KV ring (4 slots of 128 x 128 bf16), correction, 18 barriers, tmem address.
    assert [(r["name"], r["offset"], r["bytes"]) for r in j["regions"]] == [
        ("q", 0, 65536), ("o", 0, 65536), ("p", 65536, 32768), ("kv", 98304, 131072),
        ("correction", 229376, 256), ("mbarriers", 229632, 144), ("tmem_addr", 229776, 4)]
    # Spec 3.4 (split_o): PO_lo 512, PO_hi 256, S consumers 256, C 128, the rest 1.
    assert [(b["name"], b["index"], b["count"]) for b in j["mbarriers"]] == [
        ("PO_lo", 0, 512), ("PO_hi", 1, 256), ("S_even_consumer", 2, 256), ("S_odd_consumer", 3, 256),
        ("C_producer", 4, 128), ("C_consumer", 5, 128), ("S_even_producer", 6, 1), ("S_odd_producer", 7, 1),
        ("O_mma_lo", 8, 1), ("O_mma_hi", 9, 1),
        *[(f"kv_producer[{i}]", 10 + i, 1) for i in range(4)], *[(f"kv_consumer[{i}]", 14 + i, 1) for i in range(4)]]
    assert [(t["name"], t["column"], t["columns"]) for t in j["tmem"]] == [
        ("O_lo", 0, 128), ("O_hi", 128, 128), ("S_even", 256, 128), ("S_odd", 384, 128)]


def test_depth512_absorbed_mla_layout():
    j = layout_json("--kernel", "depth512", "--rope-depth", "64", "--group", "128")
    c = j["config"]
    assert (c["BM"], c["BN"], c["num_qk_stages"], c["num_k_chunks"], c["num_kv_stages"], c["rope_depth"]) == \
        (64, 256, 4, 5, 3, 64)
    assert j["smem_bytes"] == 205188
    # Q holds 64 rows x (512 latent + 64 rope) columns; three 32 KiB KV slots (the rope chunk uses half of one)
    assert [(r["name"], r["offset"], r["bytes"]) for r in j["regions"]] == [
        ("q", 0, 73728), ("o", 0, 73728), ("p", 73728, 32768), ("kv", 106496, 98304),
        ("correction", 204800, 256), ("mbarriers", 205056, 128), ("tmem_addr", 205184, 4)]
    assert [(b["name"], b["index"]) for b in j["mbarriers"]][-6:] == [
        *[(f"kv_producer[{i}]", 10 + i) for i in range(3)], *[(f"kv_consumer[{i}]", 13 + i) for i in range(3)]]
    assert [(t["name"], t["column"], t["columns"]) for t in j["tmem"]] == [
        ("O_lo", 0, 128), ("O_hi", 128, 128), ("S_even", 256, 128), ("S_odd", 384, 128)]


def test_depth512_fp8_layouts():
    """fp8 (spec 1.5's worked fp8 d512 and the absorbed MLA with an fp8 latent and a bf16 rope): 64B
    swizzled tiles, O (bf16) 128B swizzled over Q; Q's rope columns and K's rope chunk in the rope dtype."""
    j = layout_json("--kernel", "depth512", "--dtype", "fp8_e4m3")
    assert (j["smem_bytes"], j["config"]["num_kv_stages"]) == (229892, 11)
    assert [(r["name"], r["offset"], r["bytes"], r["swizzle"]) for r in j["regions"][:4]] == [
        ("q", 0, 32768, "64B"), ("o", 0, 32768, "128B"), ("p", 32768, 16384, "64B"), ("kv", 49152, 180224, "64B")]
    j = layout_json("--kernel", "depth512", "--dtype", "fp8_e4m3", "--rope-depth", "64", "--rope-dtype", "bf16",
                    "--group", "16")
    c = j["config"]
    assert (c["rope_dtype"], c["num_k_chunks"], c["num_kv_stages"], j["smem_bytes"]) == ("bf16", 5, 10, 221684)
    assert [(r["name"], r["offset"], r["bytes"]) for r in j["regions"][:4]] == [
        ("q", 0, 64 * (512 + 2 * 64)), ("o", 0, 40960), ("p", 40960, 16384), ("kv", 57344, 10 * 16384)]


def test_rope_depth_is_a_depth512_option():
    r = subprocess.run([sys.executable, "-m", "fa4_mlir.tools.fa4_layout", "--rope-depth", "64"],
                       capture_output=True, text=True)
    assert r.returncode == 1
    assert "--rope-depth does not apply to --kernel fa4: absorbed MLA (rope depth 64) is a depth512 layout" in r.stderr


def test_fa4_bf16_d128_2q_reference_layout():
    j = layout_json("--kernel", "fa4", "--dtype", "bf16", "--qk-depth", "128", "--num-q", "2")
    c = j["config"]
    assert (c["BM"], c["BN"], c["num_qk_stages"], c["num_pv_stages"], c["num_kv_stages"], c["fused_kv"]) == \
        (256, 128, 1, 2, 5, True)
    assert j["smem_bytes"] == 230588 and c["smem_budget"] == 230596  # spec: the config over-reserves 8 B
    assert [(r["name"], r["offset"], r["bytes"]) for r in j["regions"]] == [
        ("q", 0, 65536), ("o", 0, 65536), ("kv", 65536, 163840), ("correction", 229376, 1024),
        ("mbarriers", 230400, 184), ("tmem_addr", 230584, 4)]
    names = [b["name"] for b in j["mbarriers"]]
    assert names[:11] == ["S0_consumer[0]", "S0_consumer[1]", "S1_consumer[0]", "S1_consumer[1]", "C0_producer",
                          "C0_consumer", "C1_producer", "C1_consumer", "S0_producer", "S1_producer", "Q1_sync"]
    assert names[11:21] == [f"kv_producer[{i}]" for i in range(5)] + [f"kv_consumer[{i}]" for i in range(5)]
    assert names[21:] == ["O0_producer", "O1_producer"]
    assert [b["index"] for b in j["mbarriers"]] == list(range(23))
    assert [b["count"] for b in j["mbarriers"]] == [256, 128, 256, 128] + [128] * 4 + [1] * 15
    assert [(t["name"], t["column"], t["columns"]) for t in j["tmem"]] == [
        ("S0", 0, 128), ("S1", 128, 128), ("O0", 256, 128), ("O1", 384, 128)]
