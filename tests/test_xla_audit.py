"""trnplan.tools.xla_audit's parsers and checks, on HLO and StableHLO text as torch-xla 2.9 prints it.

These run without torch-xla (the texts below were printed by torch-xla 2.9.0 on XLA:CPU for
trnplan plans, trimmed); the torch-xla lane (tests/xla/) runs the audit on live lowerings.
"""

from __future__ import annotations

from trnplan.tools import xla_audit

HLO_BUTTERFLY = """HloModule IrToHlo.40, entry_computation_layout={(s64[8]{0}, f32[4,8]{1,0})->(f32[4,8]{1,0})}

ENTRY %IrToHlo.40 (p0.1: s64[8], p1.2: f32[4,8]) -> (f32[4,8]) {
  %p1.2 = f32[4,8]{1,0} parameter(1)
  %p0.1 = s64[8]{0} parameter(0)
  %convert.3 = u32[8]{0} convert(s64[8]{0} %p0.1)
  %gather.4 = f32[4,8]{1,0} gather(f32[4,8]{1,0} %p1.2, u32[8]{0} %convert.3), offset_dims={0}, collapsed_slice_dims={1}, start_index_map={1}, index_vector_dim=1, slice_sizes={4,1}
  %constant.5 = f32[] constant(1)
  %broadcast.6 = f32[4,8]{1,0} broadcast(f32[] %constant.5), dimensions={}
  %multiply.7 = f32[4,8]{1,0} multiply(f32[4,8]{1,0} %gather.4, f32[4,8]{1,0} %broadcast.6)
  ROOT %tuple.8 = (f32[4,8]{1,0}) tuple(f32[4,8]{1,0} %multiply.7)
}
"""

STABLEHLO_DFT = """module @IrToHlo.14 attributes {mhlo.cross_program_prefetches = [], mhlo.input_output_alias = [], mhlo.is_dynamic = false, mhlo.use_auto_spmd_partitioning = false} {
  func.func @main(%arg0: tensor<4x64xf32>, %arg1: tensor<4x64xf32>, %arg2: tensor<128x128xf32>) -> (tensor<4x64xf32>, tensor<4x64xf32>) {
    %0 = stablehlo.transpose %arg0, dims = [1, 0] {result_layout = dense<[0, 1]> : tensor<2xindex>, xla_shape = "f32[64,4]{0,1}"} : (tensor<4x64xf32>) -> tensor<64x4xf32>
    %1 = stablehlo.concatenate %arg0, %arg1, dim = 1 : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x128xf32>
    %2 = stablehlo.dot_general %1, %arg2, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<4x128xf32>, tensor<128x128xf32>) -> tensor<4x128xf32>
    %3 = stablehlo.slice %2 [0:4, 0:64] : (tensor<4x128xf32>) -> tensor<4x64xf32>
    %4 = stablehlo.slice %2 [0:4, 64:128] : (tensor<4x128xf32>) -> tensor<4x64xf32>
    %5 = "stablehlo.gather"(%3, %arg0) <{dimension_numbers = #stablehlo.gather<offset_dims = [0], collapsed_slice_dims = [1], start_index_map = [1], index_vector_dim = 1>, slice_sizes = array<i64: 4, 1>}> : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
    return %3, %4 : tensor<4x64xf32>, tensor<4x64xf32>
  }
}
"""


def test_hlo_ops_and_types():
    parsed = xla_audit.parse_hlo(HLO_BUTTERFLY)
    assert parsed.ops == {"convert": 1, "gather": 1, "constant": 1, "broadcast": 1, "multiply": 1, "tuple": 1}
    assert parsed.types == {"s64", "u32", "f32"}
    assert parsed.dynamic == ()
    assert len(parsed.gathers) == 1


def test_stablehlo_ops_skip_attributes_and_layouts():
    parsed = xla_audit.parse_stablehlo(STABLEHLO_DFT)
    # mhlo.is_dynamic = false and #stablehlo.gather<...> are attributes; tensor<2xindex> is a layout
    assert parsed.ops == {"transpose": 1, "concatenate": 1, "dot_general": 1, "slice": 2, "gather": 1}
    assert parsed.types == {"f32"}
    assert parsed.dynamic == ()


def test_findings_name_s64_and_pass_the_rest():
    found = xla_audit.findings(xla_audit.parse_hlo(HLO_BUTTERFLY), xla_audit.parse_stablehlo(STABLEHLO_DFT))
    assert found == [f"HLO holds s64 tensors: {xla_audit.FORBIDDEN_TYPES['s64']}"]


def test_findings_refuse_complex_fft_and_dynamic_shapes():
    hlo = ("%p0 = c64[4,<=8]{1,0} parameter(0)\n"
           "%fft.1 = c64[4,<=8]{1,0} fft(c64[4,<=8]{1,0} %p0), fft_type=FFT, fft_length={8}\n")
    shlo = "%0 = stablehlo.fft %arg0, type =  FFT, length = [8] : (tensor<4x?xcomplex<f32>>) -> tensor<4x?xcomplex<f32>>\n"
    found = xla_audit.findings(xla_audit.parse_hlo(hlo), xla_audit.parse_stablehlo(shlo))
    assert "HLO op 'fft' is not on neuronx-cc's supported list (neuronx_cc_xla_ops.tsv)" in found
    assert "StableHLO op 'fft' is not on neuronx-cc's supported list (neuronx_cc_xla_ops.tsv)" in found
    assert f"HLO holds c64 tensors: {xla_audit.FORBIDDEN_TYPES['c64']}" in found
    assert f"StableHLO holds c64 tensors: {xla_audit.FORBIDDEN_TYPES['c64']}" in found
    assert any(f.startswith("HLO has a dynamic shape c64[4,<=8]") for f in found)
    assert any(f.startswith("StableHLO has a dynamic shape tensor<4x?xcomplex<f32>>") for f in found)


def test_gather_rule():
    ok = "gather(f32[4,8] %a, u32[8] %i), offset_dims={0}, collapsed_slice_dims={1}, start_index_map={1}, index_vector_dim=1"
    bad = "gather(f32[4,8] %a, u32[2] %i), offset_dims={0,1}, collapsed_slice_dims={}, start_index_map={1}, index_vector_dim=1"
    assert xla_audit.gather_finding(ok) is None
    assert "indexes operand dimension(s) [1] that it also keeps" in xla_audit.gather_finding(bad)


def test_the_shipped_op_list():
    ops = xla_audit.neuronx_cc_ops()
    assert {"Dot", "DotGeneral", "Concatenate", "Slice", "Pad", "Transpose", "Reshape", "Gather"} <= set(ops)
    assert "Fft" not in ops and "Real" not in ops
    assert ops["Gather"].startswith("Supports only disjoint start_index_map")


def test_hlo_traffic_counts_the_entry_computation():
    """hlo_traffic reads XLA's optimized ENTRY: parameters, bitcasts and tuples are free; a fusion
    and a dot read their operands and write their result (an (nd 4096=16x16x16) pass, XLA:CPU)."""
    from trnplan.tools.xla_audit import hlo_traffic

    text = """HloModule m
%fused_computation.4 (param_0: f32[2,4096]) -> f32[512,32] {
  %param_0 = f32[2,4096]{1,0} parameter(0)
  ROOT %bitcast.9 = f32[512,32]{1,0} bitcast(%param_0)
}

ENTRY %SyncTensorsGraph.43 (p2.3: f32[32,32], p3.4: f32[2,4096], p4.7: f32[2,4096]) -> (f32[512,32]) {
  %p2.3 = f32[32,32]{1,0} parameter(0)
  %p3.4 = f32[2,4096]{1,0} parameter(1)
  %p4.7 = f32[2,4096]{1,0} parameter(2)
  %bitcast_concatenate_fusion.2 = f32[512,32]{1,0} fusion(%p3.4, %p4.7), kind=kLoop, calls=%fused_computation.4
  %dot.11 = f32[512,32]{1,0} dot(%bitcast_concatenate_fusion.2, %p2.3), lhs_contracting_dims={1}
  %bitcast.1 = f32[16384]{0} bitcast(%dot.11)
  ROOT %tuple.42 = (f32[512,32]{1,0}) tuple(%dot.11)
}
"""
    t = hlo_traffic(text)
    plane, block, matrix = 2 * 4096 * 4, 512 * 32 * 4, 32 * 32 * 4
    assert [op for op, _, _ in t.ops] == ["fusion", "dot"]
    assert t.ops[0][1:] == (2 * plane, block) and t.ops[1][1:] == (block + matrix, block)
    assert t.bytes == 2 * plane + block + block + matrix + block
