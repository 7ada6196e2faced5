"""The Python verifier and the fa4-verify pass on IR built without verification."""

from __future__ import annotations

from fa4_mlir._mlir import ir


def _messages(root):
    from fa4_mlir.core.verify import verify_fa4

    return [d.message for d in verify_fa4(root)]


def test_cross_op_errors_are_found_on_built_ir(module):
    # Builders check each op's own fields; cross-op invariants need the verifier.
    from fa4_mlir.dialects import fa4

    full = fa4.mbarrier_alloc(sym_name="full", num_barriers=3, arrive_count=1, arrival="tx")
    empty = fa4.mbarrier_alloc(sym_name="empty", num_barriers=2, arrive_count=1, arrival="threads")
    pipe = fa4.pipeline_create(full, empty, sym_name="kv", num_stages=2)
    stage, _ = fa4.pipeline_initial_state(pipe, side="producer")
    fa4.pipeline_producer_commit(pipe, stage)
    assert _messages(module.operation) == [
        "'fa4.pipeline_create' full must hold num_stages * producer_sub_stages = 2 barriers, got 'full' with 3",
        "'fa4.pipeline_producer_commit' tx_bytes must be set when the full barriers ('full') arrive by 'tx', got none",
    ]


def test_verify_pass_reports_located_errors(ctx):
    from fa4_mlir.passes.verify import VerifyPass

    m = ir.Operation.parse("""module {
      func.func @f(%b: !fa4.mbarriers) {
        %c7 = arith.constant 7 : i32
        %bars = "fa4.mbarrier_alloc"() {sym_name = "b", num_barriers = 4, arrive_count = 1, arrival = "commit"} : () -> !fa4.mbarriers
        "fa4.mma_commit"(%bars, %c7) : (!fa4.mbarriers, i32) -> ()
        return
      }
    }""", source_name="k.mlir")
    (d,) = VerifyPass().run(m.operation)
    assert str(d) == "k.mlir:5:9: error: 'fa4.mma_commit' index must be in [0, 4) for mbarrier array 'b', got 7"


def test_valid_reference_roles_pass_and_mixed_warpgroup_budgets_fail(module):
    from fa4_mlir.dialects import fa4

    ws = fa4.warp_specialize(num_warps=16)
    with ws.region_ip():
        for name, warps, regs in (("softmax", range(8), 192), ("correction", range(8, 12), 88),
                                  ("mma", [12], 40), ("load", [13], 40)):
            fa4.warp_role(sym_name=name, warps=list(warps), registers=regs)
    assert _messages(module.operation) == []
    with ws.region_ip():  # the reference's idle warps at 24 in the warpgroup of mma/load at 40
        fa4.warp_role(sym_name="idle", warps=[14, 15], registers=24)
    assert _messages(module.operation) == [
        "'fa4.warp_specialize' registers of roles sharing warpgroup 3 must be equal (setmaxnreg is "
        "warpgroup-wide), got 40 for 'load' and 24 for 'idle'"]


def test_a_failing_hook_is_reported_not_raised(module, monkeypatch):
    from fa4_mlir.dialects import fa4

    fa4.elect_one()

    def broken(self):
        raise KeyError("boom")

    monkeypatch.setattr(fa4.ElectOneOp, "verify", broken)
    (message,) = _messages(module.operation)
    assert message.startswith("'fa4.elect_one' verifier failed with KeyError: 'boom'; this is a bug in fa4-mlir")
