"""The reference system's shared-memory and barrier structs, as ``fa4_mlir.dsl`` objects.

Each struct keeps the reference's name and accessors (``SM100AttentionSMem(config).q_smem()``,
``FA4MiscMBars``, ``Depth512AttentionSMem``, ``Depth512MBars``, the GEMM's) and is derived from
``fa4_mlir.layouts`` (what is declared, in which order, with which sizes and arrival counts) and
``fa4_mlir.placement`` (where it lands): one source of truth for offsets, shared with the allocation
passes and ``fa4-layout``. Building one inside ``Kernel.body()`` declares its regions and barrier
arrays; its accessors return the declared values.
"""
