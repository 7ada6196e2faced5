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
