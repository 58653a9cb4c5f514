// The MLP block of a GPT-3 175B layer (d_model 12288, d_ff 4 x 12288) on one
// micro-batch of 8 sequences x 2048 tokens in bf16, Megatron-style: data
// parallel over "data", the two weight matrices split column- then row-wise
// over "model", so the second matmul ends in an all-reduce (or reduce-scatter)
// over "model". Shapes only: run it with
//   shardsim exec models/gpt3_mlp_block.mlir --topology dgx-h100
// (the 3.4 GiB of device buffers put it above --max-data-bytes).
module @gpt3_mlp_block {
  sdy.mesh @mesh = <["data"=2, "model"=4]>
  func.func @main(%arg0: tensor<16384x12288xbf16> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}, %arg1: tensor<12288x49152xbf16> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>}, %arg2: tensor<49152x12288xbf16> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>}) -> (tensor<16384x12288xbf16> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<16384x12288xbf16>, tensor<12288x49152xbf16>) -> tensor<16384x49152xbf16>
    %1 = stablehlo.tanh %0 : tensor<16384x49152xbf16>
    %2 = stablehlo.multiply %0, %1 : tensor<16384x49152xbf16>
    %3 = stablehlo.dot_general %2, %arg2, contracting_dims = [1] x [0] : (tensor<16384x49152xbf16>, tensor<49152x12288xbf16>) -> tensor<16384x12288xbf16>
    %4 = stablehlo.add %3, %arg0 : tensor<16384x12288xbf16>
    return %4 : tensor<16384x12288xbf16>
  }
}
