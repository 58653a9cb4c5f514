// The GPT-3 175B MLP block of gpt3_mlp_block.mlir written by hand as JAX's
// shard_map would lower it: every device computes on its own blocks (data
// parallel over "data", W1 column- and W2 row-split over "model") and sums the
// second matmul's partial results with an explicit all-reduce over "model".
// The automatic partitioner derives the same per-device program from
// gpt3_mlp_block.mlir; the two time alike (tests/timed/models.rs). Shapes only:
//   shardsim exec models/gpt3_mlp_block_shard_map.mlir --topology dgx-h100
module @gpt3_mlp_block_shard_map {
  sdy.mesh @mesh = <["data"=2, "model"=4]>
  func.func @main(%arg0: tensor<16384x12288xbf16> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}, %arg1: tensor<12288x49152xbf16> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>}, %arg2: tensor<49152x12288xbf16> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>}) -> (tensor<16384x12288xbf16> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}) {
    %0 = sdy.manual_computation(%arg0, %arg1, %arg2) in_shardings=[<@mesh, [{"data"}, {}]>, <@mesh, [{}, {"model"}]>, <@mesh, [{"model"}, {}]>] out_shardings=[<@mesh, [{"data"}, {}]>] manual_axes={"data", "model"} (%x: tensor<8192x12288xbf16>, %w1: tensor<12288x12288xbf16>, %w2: tensor<12288x12288xbf16>) {
      %1 = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0] : (tensor<8192x12288xbf16>, tensor<12288x12288xbf16>) -> tensor<8192x12288xbf16>
      %2 = stablehlo.tanh %1 : tensor<8192x12288xbf16>
      %3 = stablehlo.multiply %1, %2 : tensor<8192x12288xbf16>
      %4 = stablehlo.dot_general %3, %w2, contracting_dims = [1] x [0] : (tensor<8192x12288xbf16>, tensor<12288x12288xbf16>) -> tensor<8192x12288xbf16>
      %5 = "stablehlo.all_reduce"(%4) <{replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>, use_global_device_ids}> ({
      ^bb0(%a: tensor<bf16>, %b: tensor<bf16>):
        %s = stablehlo.add %a, %b : tensor<bf16>
        stablehlo.return %s : tensor<bf16>
      }) : (tensor<8192x12288xbf16>) -> tensor<8192x12288xbf16>
      %6 = stablehlo.add %5, %x : tensor<8192x12288xbf16>
      sdy.return %6 : tensor<8192x12288xbf16>
    } : (tensor<16384x12288xbf16>, tensor<12288x49152xbf16>, tensor<49152x12288xbf16>) -> tensor<16384x12288xbf16>
    return %0 : tensor<16384x12288xbf16>
  }
}
