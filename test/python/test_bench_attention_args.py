"""bench/attention.py's arguments: a bad ``--exp2-emulation`` entry is a usage error naming the option, before
anything touches the GPU (the bench needs one to time)."""

from __future__ import annotations

import pathlib
import sys

import pytest

pytest.importorskip("torch")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
import attention as bench_attention  # noqa: E402


@pytest.mark.parametrize("value", ["4x", "h", "4,-2"])
def test_a_bad_exp2_emulation_entry_is_a_usage_error(value, capsys):
    with pytest.raises(SystemExit) as exit_:
        bench_attention.main(["--dtype", "fp8", f"--exp2-emulation={value}"])
    assert exit_.value.code == 2
    assert f"--exp2-emulation must be counts, each optionally suffixed h, got {value!r}" in capsys.readouterr().err


def test_block_n_entries_name_their_fields():
    tiles = bench_attention.parse_tiles("3x128L,P2x64s3,H")
    assert [t.name for t in tiles] == ["q3bn128L", "pbn64s3", "hbn0"]
    assert tiles[1].fields == dict(num_q=2, block_n=64, persistent=True, kv_stages=3, single_kv_loop=False)


def test_one_role_entries_and_their_ratio_to_the_op(capsys):
    """``U`` alone: the op's tile of each row with one consumer role (``op_fields``, ``one_consumer_role`` forced);
    a ``U`` suffix: that tile with one role. The table gives each variant's ratio to the op's kernel of its row."""
    op_role, tile = bench_attention.parse_tiles("U,3x128U")
    assert (op_role.name, tile.name) == ("op1role", "q3bn128U")
    assert tile.fields == dict(num_q=3, block_n=128, persistent=False, kv_stages=0, single_kv_loop=False,
                               one_consumer_role=True)
    assert op_role.fields_for("bf16", 64, True, 4096) == dict(num_q=3, block_n=0, persistent=False,
                                                             single_kv_loop=False, one_consumer_role=True)
    assert op_role.fields_for("bf16", 128, False, 16384)["one_consumer_role"]
    rows = [{"dtype": "bf16", "head_dim": 64, "batch": 4, "seqlen": 4096, "heads": 32, "kv_heads": 32, "causal": True,
             "tflops": {"fa4-mlir": 400.0, "cudnn": 500.0, "op1role": 420.0}}]
    bench_attention.print_rows(rows, [op_role, tile])
    header, _, line = capsys.readouterr().out.splitlines()
    assert header.endswith("| fa4-mlir / cudnn | op1role / fa4-mlir |")  # q3bn128U was not timed: no column
    assert line.endswith("| 400 | 500 | 420 | 0.80 | 1.05 |")

