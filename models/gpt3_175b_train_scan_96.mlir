module @jit_f attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["data"=2, "model"=4]> {stablehlo.mesh = {axes = [{name = "data", size = 2 : i64}, {name = "model", size = 4 : i64}]}}
  func.func public @main(%arg0: tensor<96x12288xbf16> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}, %arg1: tensor<96x12288xbf16> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}, %arg2: tensor<96x12288x49152xbf16> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}, {"model"}]>}, %arg3: tensor<96x49152x12288xbf16> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}, {}]>}, %arg4: tensor<96x12288x12288xbf16> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}, {}]>}, %arg5: tensor<96x12288x36864xbf16> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}, {"model"}]>}, %arg6: tensor<51200x12288xbf16> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>}, %arg7: tensor<8x2048xi32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}) -> (tensor<96x12288xbf16> {jax.result_info = "result[0]['blocks']['g1']"}, tensor<96x12288xbf16> {jax.result_info = "result[0]['blocks']['g2']"}, tensor<96x12288x49152xbf16> {jax.result_info = "result[0]['blocks']['w1']"}, tensor<96x49152x12288xbf16> {jax.result_info = "result[0]['blocks']['w2']"}, tensor<96x12288x12288xbf16> {jax.result_info = "result[0]['blocks']['wo']"}, tensor<96x12288x36864xbf16> {jax.result_info = "result[0]['blocks']['wqkv']"}, tensor<51200x12288xbf16> {jax.result_info = "result[0]['emb']"}, tensor<bf16> {jax.result_info = "result[1]"}) {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<8x2048xi32>
    %1 = stablehlo.compare LT, %arg7, %0, SIGNED : (tensor<8x2048xi32>, tensor<8x2048xi32>) -> tensor<8x2048xi1>
    %c_0 = stablehlo.constant dense<51200> : tensor<i32>
    %2 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i32>) -> tensor<8x2048xi32>
    %3 = stablehlo.add %arg7, %2 : tensor<8x2048xi32>
    %4 = stablehlo.select %1, %3, %arg7 : tensor<8x2048xi1>, tensor<8x2048xi32>
    %5 = stablehlo.broadcast_in_dim %4, dims = [0, 1] : (tensor<8x2048xi32>) -> tensor<8x2048x1xi32>
    %6 = "stablehlo.gather"(%arg6, %5) <{dimension_numbers = #stablehlo.gather<offset_dims = [2], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 2>, indices_are_sorted = false, slice_sizes = array<i64: 1, 12288>}> : (tensor<51200x12288xbf16>, tensor<8x2048x1xi32>) -> tensor<8x2048x12288xbf16>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %7 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<bf16>) -> tensor<96x8x2048x12288xbf16>
    %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %8 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<bf16>) -> tensor<96x8x2048x1xbf16>
    %cst_2 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %9 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<bf16>) -> tensor<96x8x2048x1xbf16>
    %cst_3 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %10 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<bf16>) -> tensor<96x8x2048x12288xbf16>
    %cst_4 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %11 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<bf16>) -> tensor<96x1x1x12288xbf16>
    %cst_5 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %12 = stablehlo.broadcast_in_dim %cst_5, dims = [] : (tensor<bf16>) -> tensor<96x8x2048x12288xbf16>
    %cst_6 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %13 = stablehlo.broadcast_in_dim %cst_6, dims = [] : (tensor<bf16>) -> tensor<96x8x2048x12288xbf16>
    %cst_7 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %14 = stablehlo.broadcast_in_dim %cst_7, dims = [] : (tensor<bf16>) -> tensor<96x8x2048x96x128xbf16>
    %cst_8 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %15 = stablehlo.broadcast_in_dim %cst_8, dims = [] : (tensor<bf16>) -> tensor<96x8x2048x96x128xbf16>
    %cst_9 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %16 = stablehlo.broadcast_in_dim %cst_9, dims = [] : (tensor<bf16>) -> tensor<96x8x96x2048x2048xbf16>
    %cst_10 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %17 = stablehlo.broadcast_in_dim %cst_10, dims = [] : (tensor<bf16>) -> tensor<96x8x96x2048x1xbf16>
    %cst_11 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %18 = stablehlo.broadcast_in_dim %cst_11, dims = [] : (tensor<bf16>) -> tensor<96x8x96x2048x1xbf16>
    %cst_12 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %19 = stablehlo.broadcast_in_dim %cst_12, dims = [] : (tensor<bf16>) -> tensor<96x8x96x2048x2048xbf16>
    %cst_13 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %20 = stablehlo.broadcast_in_dim %cst_13, dims = [] : (tensor<bf16>) -> tensor<96x8x2048x96x128xbf16>
    %cst_14 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %21 = stablehlo.broadcast_in_dim %cst_14, dims = [] : (tensor<bf16>) -> tensor<96x8x2048x12288xbf16>
    %cst_15 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %22 = stablehlo.broadcast_in_dim %cst_15, dims = [] : (tensor<bf16>) -> tensor<96x8x2048x12288xbf16>
    %cst_16 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %23 = stablehlo.broadcast_in_dim %cst_16, dims = [] : (tensor<bf16>) -> tensor<96x8x2048x1xbf16>
    %cst_17 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %24 = stablehlo.broadcast_in_dim %cst_17, dims = [] : (tensor<bf16>) -> tensor<96x8x2048x1xbf16>
    %cst_18 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %25 = stablehlo.broadcast_in_dim %cst_18, dims = [] : (tensor<bf16>) -> tensor<96x8x2048x12288xbf16>
    %cst_19 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %26 = stablehlo.broadcast_in_dim %cst_19, dims = [] : (tensor<bf16>) -> tensor<96x1x1x12288xbf16>
    %cst_20 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %27 = stablehlo.broadcast_in_dim %cst_20, dims = [] : (tensor<bf16>) -> tensor<96x8x2048x12288xbf16>
    %cst_21 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %28 = stablehlo.broadcast_in_dim %cst_21, dims = [] : (tensor<bf16>) -> tensor<96x8x2048x12288xbf16>
    %cst_22 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %29 = stablehlo.broadcast_in_dim %cst_22, dims = [] : (tensor<bf16>) -> tensor<96x8x2048x49152xbf16>
    %cst_23 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %30 = stablehlo.broadcast_in_dim %cst_23, dims = [] : (tensor<bf16>) -> tensor<96x8x2048x49152xbf16>
    %cst_24 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %31 = stablehlo.broadcast_in_dim %cst_24, dims = [] : (tensor<bf16>) -> tensor<96x8x2048x49152xbf16>
    %cst_25 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %32 = stablehlo.broadcast_in_dim %cst_25, dims = [] : (tensor<bf16>) -> tensor<96x8x2048x49152xbf16>
    %cst_26 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %33 = stablehlo.broadcast_in_dim %cst_26, dims = [] : (tensor<bf16>) -> tensor<96x8x2048x49152xbf16>
    %cst_27 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %34 = stablehlo.broadcast_in_dim %cst_27, dims = [] : (tensor<bf16>) -> tensor<96x8x2048x49152xbf16>
    %c_28 = stablehlo.constant dense<0> : tensor<i32>
    %35:36 = stablehlo.while(%iterArg = %arg0, %iterArg_48 = %arg1, %iterArg_49 = %arg2, %iterArg_50 = %arg3, %iterArg_51 = %arg4, %iterArg_52 = %arg5, %iterArg_53 = %c_28, %iterArg_54 = %6, %iterArg_55 = %7, %iterArg_56 = %8, %iterArg_57 = %9, %iterArg_58 = %10, %iterArg_59 = %11, %iterArg_60 = %12, %iterArg_61 = %13, %iterArg_62 = %14, %iterArg_63 = %15, %iterArg_64 = %16, %iterArg_65 = %17, %iterArg_66 = %18, %iterArg_67 = %19, %iterArg_68 = %20, %iterArg_69 = %21, %iterArg_70 = %22, %iterArg_71 = %23, %iterArg_72 = %24, %iterArg_73 = %25, %iterArg_74 = %26, %iterArg_75 = %27, %iterArg_76 = %28, %iterArg_77 = %29, %iterArg_78 = %30, %iterArg_79 = %31, %iterArg_80 = %32, %iterArg_81 = %33, %iterArg_82 = %34) : tensor<96x12288xbf16>, tensor<96x12288xbf16>, tensor<96x12288x49152xbf16>, tensor<96x49152x12288xbf16>, tensor<96x12288x12288xbf16>, tensor<96x12288x36864xbf16>, tensor<i32>, tensor<8x2048x12288xbf16>, tensor<96x8x2048x12288xbf16>, tensor<96x8x2048x1xbf16>, tensor<96x8x2048x1xbf16>, tensor<96x8x2048x12288xbf16>, tensor<96x1x1x12288xbf16>, tensor<96x8x2048x12288xbf16>, tensor<96x8x2048x12288xbf16>, tensor<96x8x2048x96x128xbf16>, tensor<96x8x2048x96x128xbf16>, tensor<96x8x96x2048x2048xbf16>, tensor<96x8x96x2048x1xbf16>, tensor<96x8x96x2048x1xbf16>, tensor<96x8x96x2048x2048xbf16>, tensor<96x8x2048x96x128xbf16>, tensor<96x8x2048x12288xbf16>, tensor<96x8x2048x12288xbf16>, tensor<96x8x2048x1xbf16>, tensor<96x8x2048x1xbf16>, tensor<96x8x2048x12288xbf16>, tensor<96x1x1x12288xbf16>, tensor<96x8x2048x12288xbf16>, tensor<96x8x2048x12288xbf16>, tensor<96x8x2048x49152xbf16>, tensor<96x8x2048x49152xbf16>, tensor<96x8x2048x49152xbf16>, tensor<96x8x2048x49152xbf16>, tensor<96x8x2048x49152xbf16>, tensor<96x8x2048x49152xbf16>
    cond {
      %c_83 = stablehlo.constant dense<96> : tensor<i32>
      %80 = stablehlo.compare LT, %iterArg_53, %c_83, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %80 : tensor<i1>
    } do {
      %80 = func.call @dynamic_index_in_dim(%iterArg, %iterArg_53) : (tensor<96x12288xbf16>, tensor<i32>) -> tensor<12288xbf16>
      %81 = func.call @dynamic_index_in_dim(%iterArg_48, %iterArg_53) : (tensor<96x12288xbf16>, tensor<i32>) -> tensor<12288xbf16>
      %82 = func.call @dynamic_index_in_dim_0(%iterArg_49, %iterArg_53) : (tensor<96x12288x49152xbf16>, tensor<i32>) -> tensor<12288x49152xbf16>
      %83 = func.call @dynamic_index_in_dim_1(%iterArg_50, %iterArg_53) : (tensor<96x49152x12288xbf16>, tensor<i32>) -> tensor<49152x12288xbf16>
      %84 = func.call @dynamic_index_in_dim_2(%iterArg_51, %iterArg_53) : (tensor<96x12288x12288xbf16>, tensor<i32>) -> tensor<12288x12288xbf16>
      %85 = func.call @dynamic_index_in_dim_3(%iterArg_52, %iterArg_53) : (tensor<96x12288x36864xbf16>, tensor<i32>) -> tensor<12288x36864xbf16>
      %86:29 = func.call @closed_call(%iterArg_54, %80, %81, %82, %83, %84, %85) : (tensor<8x2048x12288xbf16>, tensor<12288xbf16>, tensor<12288xbf16>, tensor<12288x49152xbf16>, tensor<49152x12288xbf16>, tensor<12288x12288xbf16>, tensor<12288x36864xbf16>) -> (tensor<8x2048x12288xbf16>, tensor<8x2048x12288xbf16>, tensor<8x2048x1xbf16>, tensor<8x2048x1xbf16>, tensor<8x2048x12288xbf16>, tensor<1x1x12288xbf16>, tensor<8x2048x12288xbf16>, tensor<8x2048x12288xbf16>, tensor<8x2048x96x128xbf16>, tensor<8x2048x96x128xbf16>, tensor<8x96x2048x2048xbf16>, tensor<8x96x2048x1xbf16>, tensor<8x96x2048x1xbf16>, tensor<8x96x2048x2048xbf16>, tensor<8x2048x96x128xbf16>, tensor<8x2048x12288xbf16>, tensor<8x2048x12288xbf16>, tensor<8x2048x1xbf16>, tensor<8x2048x1xbf16>, tensor<8x2048x12288xbf16>, tensor<1x1x12288xbf16>, tensor<8x2048x12288xbf16>, tensor<8x2048x12288xbf16>, tensor<8x2048x49152xbf16>, tensor<8x2048x49152xbf16>, tensor<8x2048x49152xbf16>, tensor<8x2048x49152xbf16>, tensor<8x2048x49152xbf16>, tensor<8x2048x49152xbf16>)
      %87 = func.call @dynamic_update_index_in_dim(%iterArg_55, %86#1, %iterArg_53) : (tensor<96x8x2048x12288xbf16>, tensor<8x2048x12288xbf16>, tensor<i32>) -> tensor<96x8x2048x12288xbf16>
      %88 = func.call @dynamic_update_index_in_dim_4(%iterArg_56, %86#2, %iterArg_53) : (tensor<96x8x2048x1xbf16>, tensor<8x2048x1xbf16>, tensor<i32>) -> tensor<96x8x2048x1xbf16>
      %89 = func.call @dynamic_update_index_in_dim_4(%iterArg_57, %86#3, %iterArg_53) : (tensor<96x8x2048x1xbf16>, tensor<8x2048x1xbf16>, tensor<i32>) -> tensor<96x8x2048x1xbf16>
      %90 = func.call @dynamic_update_index_in_dim(%iterArg_58, %86#4, %iterArg_53) : (tensor<96x8x2048x12288xbf16>, tensor<8x2048x12288xbf16>, tensor<i32>) -> tensor<96x8x2048x12288xbf16>
      %91 = func.call @dynamic_update_index_in_dim_5(%iterArg_59, %86#5, %iterArg_53) : (tensor<96x1x1x12288xbf16>, tensor<1x1x12288xbf16>, tensor<i32>) -> tensor<96x1x1x12288xbf16>
      %92 = func.call @dynamic_update_index_in_dim(%iterArg_60, %86#6, %iterArg_53) : (tensor<96x8x2048x12288xbf16>, tensor<8x2048x12288xbf16>, tensor<i32>) -> tensor<96x8x2048x12288xbf16>
      %93 = func.call @dynamic_update_index_in_dim(%iterArg_61, %86#7, %iterArg_53) : (tensor<96x8x2048x12288xbf16>, tensor<8x2048x12288xbf16>, tensor<i32>) -> tensor<96x8x2048x12288xbf16>
      %94 = func.call @dynamic_update_index_in_dim_6(%iterArg_62, %86#8, %iterArg_53) : (tensor<96x8x2048x96x128xbf16>, tensor<8x2048x96x128xbf16>, tensor<i32>) -> tensor<96x8x2048x96x128xbf16>
      %95 = func.call @dynamic_update_index_in_dim_6(%iterArg_63, %86#9, %iterArg_53) : (tensor<96x8x2048x96x128xbf16>, tensor<8x2048x96x128xbf16>, tensor<i32>) -> tensor<96x8x2048x96x128xbf16>
      %96 = func.call @dynamic_update_index_in_dim_7(%iterArg_64, %86#10, %iterArg_53) : (tensor<96x8x96x2048x2048xbf16>, tensor<8x96x2048x2048xbf16>, tensor<i32>) -> tensor<96x8x96x2048x2048xbf16>
      %97 = func.call @dynamic_update_index_in_dim_8(%iterArg_65, %86#11, %iterArg_53) : (tensor<96x8x96x2048x1xbf16>, tensor<8x96x2048x1xbf16>, tensor<i32>) -> tensor<96x8x96x2048x1xbf16>
      %98 = func.call @dynamic_update_index_in_dim_8(%iterArg_66, %86#12, %iterArg_53) : (tensor<96x8x96x2048x1xbf16>, tensor<8x96x2048x1xbf16>, tensor<i32>) -> tensor<96x8x96x2048x1xbf16>
      %99 = func.call @dynamic_update_index_in_dim_7(%iterArg_67, %86#13, %iterArg_53) : (tensor<96x8x96x2048x2048xbf16>, tensor<8x96x2048x2048xbf16>, tensor<i32>) -> tensor<96x8x96x2048x2048xbf16>
      %100 = func.call @dynamic_update_index_in_dim_6(%iterArg_68, %86#14, %iterArg_53) : (tensor<96x8x2048x96x128xbf16>, tensor<8x2048x96x128xbf16>, tensor<i32>) -> tensor<96x8x2048x96x128xbf16>
      %101 = func.call @dynamic_update_index_in_dim(%iterArg_69, %86#15, %iterArg_53) : (tensor<96x8x2048x12288xbf16>, tensor<8x2048x12288xbf16>, tensor<i32>) -> tensor<96x8x2048x12288xbf16>
      %102 = func.call @dynamic_update_index_in_dim(%iterArg_70, %86#16, %iterArg_53) : (tensor<96x8x2048x12288xbf16>, tensor<8x2048x12288xbf16>, tensor<i32>) -> tensor<96x8x2048x12288xbf16>
      %103 = func.call @dynamic_update_index_in_dim_4(%iterArg_71, %86#17, %iterArg_53) : (tensor<96x8x2048x1xbf16>, tensor<8x2048x1xbf16>, tensor<i32>) -> tensor<96x8x2048x1xbf16>
      %104 = func.call @dynamic_update_index_in_dim_4(%iterArg_72, %86#18, %iterArg_53) : (tensor<96x8x2048x1xbf16>, tensor<8x2048x1xbf16>, tensor<i32>) -> tensor<96x8x2048x1xbf16>
      %105 = func.call @dynamic_update_index_in_dim(%iterArg_73, %86#19, %iterArg_53) : (tensor<96x8x2048x12288xbf16>, tensor<8x2048x12288xbf16>, tensor<i32>) -> tensor<96x8x2048x12288xbf16>
      %106 = func.call @dynamic_update_index_in_dim_5(%iterArg_74, %86#20, %iterArg_53) : (tensor<96x1x1x12288xbf16>, tensor<1x1x12288xbf16>, tensor<i32>) -> tensor<96x1x1x12288xbf16>
      %107 = func.call @dynamic_update_index_in_dim(%iterArg_75, %86#21, %iterArg_53) : (tensor<96x8x2048x12288xbf16>, tensor<8x2048x12288xbf16>, tensor<i32>) -> tensor<96x8x2048x12288xbf16>
      %108 = func.call @dynamic_update_index_in_dim(%iterArg_76, %86#22, %iterArg_53) : (tensor<96x8x2048x12288xbf16>, tensor<8x2048x12288xbf16>, tensor<i32>) -> tensor<96x8x2048x12288xbf16>
      %109 = func.call @dynamic_update_index_in_dim_9(%iterArg_77, %86#23, %iterArg_53) : (tensor<96x8x2048x49152xbf16>, tensor<8x2048x49152xbf16>, tensor<i32>) -> tensor<96x8x2048x49152xbf16>
      %110 = func.call @dynamic_update_index_in_dim_9(%iterArg_78, %86#24, %iterArg_53) : (tensor<96x8x2048x49152xbf16>, tensor<8x2048x49152xbf16>, tensor<i32>) -> tensor<96x8x2048x49152xbf16>
      %111 = func.call @dynamic_update_index_in_dim_9(%iterArg_79, %86#25, %iterArg_53) : (tensor<96x8x2048x49152xbf16>, tensor<8x2048x49152xbf16>, tensor<i32>) -> tensor<96x8x2048x49152xbf16>
      %112 = func.call @dynamic_update_index_in_dim_9(%iterArg_80, %86#26, %iterArg_53) : (tensor<96x8x2048x49152xbf16>, tensor<8x2048x49152xbf16>, tensor<i32>) -> tensor<96x8x2048x49152xbf16>
      %113 = func.call @dynamic_update_index_in_dim_9(%iterArg_81, %86#27, %iterArg_53) : (tensor<96x8x2048x49152xbf16>, tensor<8x2048x49152xbf16>, tensor<i32>) -> tensor<96x8x2048x49152xbf16>
      %114 = func.call @dynamic_update_index_in_dim_9(%iterArg_82, %86#28, %iterArg_53) : (tensor<96x8x2048x49152xbf16>, tensor<8x2048x49152xbf16>, tensor<i32>) -> tensor<96x8x2048x49152xbf16>
      %c_83 = stablehlo.constant dense<1> : tensor<i32>
      %115 = stablehlo.add %iterArg_53, %c_83 : tensor<i32>
      stablehlo.return %iterArg, %iterArg_48, %iterArg_49, %iterArg_50, %iterArg_51, %iterArg_52, %115, %86#0, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114 : tensor<96x12288xbf16>, tensor<96x12288xbf16>, tensor<96x12288x49152xbf16>, tensor<96x49152x12288xbf16>, tensor<96x12288x12288xbf16>, tensor<96x12288x36864xbf16>, tensor<i32>, tensor<8x2048x12288xbf16>, tensor<96x8x2048x12288xbf16>, tensor<96x8x2048x1xbf16>, tensor<96x8x2048x1xbf16>, tensor<96x8x2048x12288xbf16>, tensor<96x1x1x12288xbf16>, tensor<96x8x2048x12288xbf16>, tensor<96x8x2048x12288xbf16>, tensor<96x8x2048x96x128xbf16>, tensor<96x8x2048x96x128xbf16>, tensor<96x8x96x2048x2048xbf16>, tensor<96x8x96x2048x1xbf16>, tensor<96x8x96x2048x1xbf16>, tensor<96x8x96x2048x2048xbf16>, tensor<96x8x2048x96x128xbf16>, tensor<96x8x2048x12288xbf16>, tensor<96x8x2048x12288xbf16>, tensor<96x8x2048x1xbf16>, tensor<96x8x2048x1xbf16>, tensor<96x8x2048x12288xbf16>, tensor<96x1x1x12288xbf16>, tensor<96x8x2048x12288xbf16>, tensor<96x8x2048x12288xbf16>, tensor<96x8x2048x49152xbf16>, tensor<96x8x2048x49152xbf16>, tensor<96x8x2048x49152xbf16>, tensor<96x8x2048x49152xbf16>, tensor<96x8x2048x49152xbf16>, tensor<96x8x2048x49152xbf16>
    }
    %36 = stablehlo.transpose %arg6, dims = [1, 0] : (tensor<51200x12288xbf16>) -> tensor<12288x51200xbf16>
    %37 = stablehlo.dot_general %35#7, %36, contracting_dims = [2] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x2048x12288xbf16>, tensor<12288x51200xbf16>) -> tensor<8x2048x51200xbf16>
    %38 = stablehlo.convert %37 : (tensor<8x2048x51200xbf16>) -> tensor<8x2048x51200xf32>
    %cst_29 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %39 = stablehlo.reduce(%38 init: %cst_29) applies stablehlo.add across dimensions = [0, 1, 2] : (tensor<8x2048x51200xf32>, tensor<f32>) -> tensor<f32>
    %cst_30 = stablehlo.constant dense<0x4E480000> : tensor<f32>
    %40 = stablehlo.divide %39, %cst_30 : tensor<f32>
    %41 = stablehlo.convert %40 : (tensor<f32>) -> tensor<bf16>
    %cst_31 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %cst_32 = stablehlo.constant dense<0x4E480000> : tensor<f32>
    %42 = stablehlo.divide %cst_31, %cst_32 : tensor<f32>
    %43 = stablehlo.broadcast_in_dim %42, dims = [] : (tensor<f32>) -> tensor<8x2048x51200xf32>
    %44 = stablehlo.convert %43 : (tensor<8x2048x51200xf32>) -> tensor<8x2048x51200xbf16>
    %45 = stablehlo.dot_general %44, %35#7, contracting_dims = [0, 1] x [0, 1], precision = [DEFAULT, DEFAULT] : (tensor<8x2048x51200xbf16>, tensor<8x2048x12288xbf16>) -> tensor<51200x12288xbf16>
    %46 = stablehlo.transpose %45, dims = [1, 0] : (tensor<51200x12288xbf16>) -> tensor<12288x51200xbf16>
    %47 = stablehlo.dot_general %44, %36, contracting_dims = [2] x [1], precision = [DEFAULT, DEFAULT] : (tensor<8x2048x51200xbf16>, tensor<12288x51200xbf16>) -> tensor<8x2048x12288xbf16>
    %48 = stablehlo.transpose %46, dims = [1, 0] : (tensor<12288x51200xbf16>) -> tensor<51200x12288xbf16>
    %cst_33 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %49 = stablehlo.broadcast_in_dim %cst_33, dims = [] : (tensor<bf16>) -> tensor<96x12288xbf16>
    %cst_34 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %50 = stablehlo.broadcast_in_dim %cst_34, dims = [] : (tensor<bf16>) -> tensor<96x12288xbf16>
    %cst_35 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %51 = stablehlo.broadcast_in_dim %cst_35, dims = [] : (tensor<bf16>) -> tensor<96x12288x49152xbf16>
    %cst_36 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %52 = stablehlo.broadcast_in_dim %cst_36, dims = [] : (tensor<bf16>) -> tensor<96x49152x12288xbf16>
    %cst_37 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %53 = stablehlo.broadcast_in_dim %cst_37, dims = [] : (tensor<bf16>) -> tensor<96x12288x12288xbf16>
    %cst_38 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %54 = stablehlo.broadcast_in_dim %cst_38, dims = [] : (tensor<bf16>) -> tensor<96x12288x36864xbf16>
    %c_39 = stablehlo.constant dense<0> : tensor<i32>
    %55:40 = stablehlo.while(%iterArg = %35#8, %iterArg_48 = %35#9, %iterArg_49 = %35#10, %iterArg_50 = %35#11, %iterArg_51 = %35#12, %iterArg_52 = %35#13, %iterArg_53 = %arg5, %iterArg_54 = %35#14, %iterArg_55 = %35#15, %iterArg_56 = %35#16, %iterArg_57 = %35#17, %iterArg_58 = %35#18, %iterArg_59 = %35#19, %iterArg_60 = %35#20, %iterArg_61 = %35#21, %iterArg_62 = %arg4, %iterArg_63 = %35#22, %iterArg_64 = %35#23, %iterArg_65 = %35#24, %iterArg_66 = %35#25, %iterArg_67 = %35#26, %iterArg_68 = %35#27, %iterArg_69 = %35#28, %iterArg_70 = %arg2, %iterArg_71 = %35#29, %iterArg_72 = %35#30, %iterArg_73 = %35#31, %iterArg_74 = %35#32, %iterArg_75 = %35#33, %iterArg_76 = %35#34, %iterArg_77 = %arg3, %iterArg_78 = %35#35, %iterArg_79 = %c_39, %iterArg_80 = %47, %iterArg_81 = %49, %iterArg_82 = %50, %iterArg_83 = %51, %iterArg_84 = %52, %iterArg_85 = %53, %iterArg_86 = %54) : tensor<96x8x2048x12288xbf16>, tensor<96x8x2048x1xbf16>, tensor<96x8x2048x1xbf16>, tensor<96x8x2048x12288xbf16>, tensor<96x1x1x12288xbf16>, tensor<96x8x2048x12288xbf16>, tensor<96x12288x36864xbf16>, tensor<96x8x2048x12288xbf16>, tensor<96x8x2048x96x128xbf16>, tensor<96x8x2048x96x128xbf16>, tensor<96x8x96x2048x2048xbf16>, tensor<96x8x96x2048x1xbf16>, tensor<96x8x96x2048x1xbf16>, tensor<96x8x96x2048x2048xbf16>, tensor<96x8x2048x96x128xbf16>, tensor<96x12288x12288xbf16>, tensor<96x8x2048x12288xbf16>, tensor<96x8x2048x12288xbf16>, tensor<96x8x2048x1xbf16>, tensor<96x8x2048x1xbf16>, tensor<96x8x2048x12288xbf16>, tensor<96x1x1x12288xbf16>, tensor<96x8x2048x12288xbf16>, tensor<96x12288x49152xbf16>, tensor<96x8x2048x12288xbf16>, tensor<96x8x2048x49152xbf16>, tensor<96x8x2048x49152xbf16>, tensor<96x8x2048x49152xbf16>, tensor<96x8x2048x49152xbf16>, tensor<96x8x2048x49152xbf16>, tensor<96x49152x12288xbf16>, tensor<96x8x2048x49152xbf16>, tensor<i32>, tensor<8x2048x12288xbf16>, tensor<96x12288xbf16>, tensor<96x12288xbf16>, tensor<96x12288x49152xbf16>, tensor<96x49152x12288xbf16>, tensor<96x12288x12288xbf16>, tensor<96x12288x36864xbf16>
    cond {
      %c_87 = stablehlo.constant dense<96> : tensor<i32>
      %80 = stablehlo.compare LT, %iterArg_79, %c_87, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %80 : tensor<i1>
    } do {
      %c_87 = stablehlo.constant dense<96> : tensor<i32>
      %80 = stablehlo.subtract %c_87, %iterArg_79 : tensor<i32>
      %c_88 = stablehlo.constant dense<1> : tensor<i32>
      %81 = stablehlo.subtract %80, %c_88 : tensor<i32>
      %82 = func.call @dynamic_index_in_dim_10(%iterArg, %81) : (tensor<96x8x2048x12288xbf16>, tensor<i32>) -> tensor<8x2048x12288xbf16>
      %83 = func.call @dynamic_index_in_dim_11(%iterArg_48, %81) : (tensor<96x8x2048x1xbf16>, tensor<i32>) -> tensor<8x2048x1xbf16>
      %84 = func.call @dynamic_index_in_dim_11(%iterArg_49, %81) : (tensor<96x8x2048x1xbf16>, tensor<i32>) -> tensor<8x2048x1xbf16>
      %85 = func.call @dynamic_index_in_dim_10(%iterArg_50, %81) : (tensor<96x8x2048x12288xbf16>, tensor<i32>) -> tensor<8x2048x12288xbf16>
      %86 = func.call @dynamic_index_in_dim_12(%iterArg_51, %81) : (tensor<96x1x1x12288xbf16>, tensor<i32>) -> tensor<1x1x12288xbf16>
      %87 = func.call @dynamic_index_in_dim_10(%iterArg_52, %81) : (tensor<96x8x2048x12288xbf16>, tensor<i32>) -> tensor<8x2048x12288xbf16>
      %88 = func.call @dynamic_index_in_dim_3(%iterArg_53, %81) : (tensor<96x12288x36864xbf16>, tensor<i32>) -> tensor<12288x36864xbf16>
      %89 = func.call @dynamic_index_in_dim_10(%iterArg_54, %81) : (tensor<96x8x2048x12288xbf16>, tensor<i32>) -> tensor<8x2048x12288xbf16>
      %90 = func.call @dynamic_index_in_dim_13(%iterArg_55, %81) : (tensor<96x8x2048x96x128xbf16>, tensor<i32>) -> tensor<8x2048x96x128xbf16>
      %91 = func.call @dynamic_index_in_dim_13(%iterArg_56, %81) : (tensor<96x8x2048x96x128xbf16>, tensor<i32>) -> tensor<8x2048x96x128xbf16>
      %92 = func.call @dynamic_index_in_dim_14(%iterArg_57, %81) : (tensor<96x8x96x2048x2048xbf16>, tensor<i32>) -> tensor<8x96x2048x2048xbf16>
      %93 = func.call @dynamic_index_in_dim_15(%iterArg_58, %81) : (tensor<96x8x96x2048x1xbf16>, tensor<i32>) -> tensor<8x96x2048x1xbf16>
      %94 = func.call @dynamic_index_in_dim_15(%iterArg_59, %81) : (tensor<96x8x96x2048x1xbf16>, tensor<i32>) -> tensor<8x96x2048x1xbf16>
      %95 = func.call @dynamic_index_in_dim_14(%iterArg_60, %81) : (tensor<96x8x96x2048x2048xbf16>, tensor<i32>) -> tensor<8x96x2048x2048xbf16>
      %96 = func.call @dynamic_index_in_dim_13(%iterArg_61, %81) : (tensor<96x8x2048x96x128xbf16>, tensor<i32>) -> tensor<8x2048x96x128xbf16>
      %97 = func.call @dynamic_index_in_dim_2(%iterArg_62, %81) : (tensor<96x12288x12288xbf16>, tensor<i32>) -> tensor<12288x12288xbf16>
      %98 = func.call @dynamic_index_in_dim_10(%iterArg_63, %81) : (tensor<96x8x2048x12288xbf16>, tensor<i32>) -> tensor<8x2048x12288xbf16>
      %99 = func.call @dynamic_index_in_dim_10(%iterArg_64, %81) : (tensor<96x8x2048x12288xbf16>, tensor<i32>) -> tensor<8x2048x12288xbf16>
      %100 = func.call @dynamic_index_in_dim_11(%iterArg_65, %81) : (tensor<96x8x2048x1xbf16>, tensor<i32>) -> tensor<8x2048x1xbf16>
      %101 = func.call @dynamic_index_in_dim_11(%iterArg_66, %81) : (tensor<96x8x2048x1xbf16>, tensor<i32>) -> tensor<8x2048x1xbf16>
      %102 = func.call @dynamic_index_in_dim_10(%iterArg_67, %81) : (tensor<96x8x2048x12288xbf16>, tensor<i32>) -> tensor<8x2048x12288xbf16>
      %103 = func.call @dynamic_index_in_dim_12(%iterArg_68, %81) : (tensor<96x1x1x12288xbf16>, tensor<i32>) -> tensor<1x1x12288xbf16>
      %104 = func.call @dynamic_index_in_dim_10(%iterArg_69, %81) : (tensor<96x8x2048x12288xbf16>, tensor<i32>) -> tensor<8x2048x12288xbf16>
      %105 = func.call @dynamic_index_in_dim_0(%iterArg_70, %81) : (tensor<96x12288x49152xbf16>, tensor<i32>) -> tensor<12288x49152xbf16>
      %106 = func.call @dynamic_index_in_dim_10(%iterArg_71, %81) : (tensor<96x8x2048x12288xbf16>, tensor<i32>) -> tensor<8x2048x12288xbf16>
      %107 = func.call @dynamic_index_in_dim_16(%iterArg_72, %81) : (tensor<96x8x2048x49152xbf16>, tensor<i32>) -> tensor<8x2048x49152xbf16>
      %108 = func.call @dynamic_index_in_dim_16(%iterArg_73, %81) : (tensor<96x8x2048x49152xbf16>, tensor<i32>) -> tensor<8x2048x49152xbf16>
      %109 = func.call @dynamic_index_in_dim_16(%iterArg_74, %81) : (tensor<96x8x2048x49152xbf16>, tensor<i32>) -> tensor<8x2048x49152xbf16>
      %110 = func.call @dynamic_index_in_dim_16(%iterArg_75, %81) : (tensor<96x8x2048x49152xbf16>, tensor<i32>) -> tensor<8x2048x49152xbf16>
      %111 = func.call @dynamic_index_in_dim_16(%iterArg_76, %81) : (tensor<96x8x2048x49152xbf16>, tensor<i32>) -> tensor<8x2048x49152xbf16>
      %112 = func.call @dynamic_index_in_dim_1(%iterArg_77, %81) : (tensor<96x49152x12288xbf16>, tensor<i32>) -> tensor<49152x12288xbf16>
      %113 = func.call @dynamic_index_in_dim_16(%iterArg_78, %81) : (tensor<96x8x2048x49152xbf16>, tensor<i32>) -> tensor<8x2048x49152xbf16>
      %114:7 = func.call @closed_call_17(%iterArg_80, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113) : (tensor<8x2048x12288xbf16>, tensor<8x2048x12288xbf16>, tensor<8x2048x1xbf16>, tensor<8x2048x1xbf16>, tensor<8x2048x12288xbf16>, tensor<1x1x12288xbf16>, tensor<8x2048x12288xbf16>, tensor<12288x36864xbf16>, tensor<8x2048x12288xbf16>, tensor<8x2048x96x128xbf16>, tensor<8x2048x96x128xbf16>, tensor<8x96x2048x2048xbf16>, tensor<8x96x2048x1xbf16>, tensor<8x96x2048x1xbf16>, tensor<8x96x2048x2048xbf16>, tensor<8x2048x96x128xbf16>, tensor<12288x12288xbf16>, tensor<8x2048x12288xbf16>, tensor<8x2048x12288xbf16>, tensor<8x2048x1xbf16>, tensor<8x2048x1xbf16>, tensor<8x2048x12288xbf16>, tensor<1x1x12288xbf16>, tensor<8x2048x12288xbf16>, tensor<12288x49152xbf16>, tensor<8x2048x12288xbf16>, tensor<8x2048x49152xbf16>, tensor<8x2048x49152xbf16>, tensor<8x2048x49152xbf16>, tensor<8x2048x49152xbf16>, tensor<8x2048x49152xbf16>, tensor<49152x12288xbf16>, tensor<8x2048x49152xbf16>) -> (tensor<8x2048x12288xbf16>, tensor<12288xbf16>, tensor<12288xbf16>, tensor<12288x49152xbf16>, tensor<49152x12288xbf16>, tensor<12288x12288xbf16>, tensor<12288x36864xbf16>)
      %115 = func.call @dynamic_update_index_in_dim_18(%iterArg_81, %114#1, %81) : (tensor<96x12288xbf16>, tensor<12288xbf16>, tensor<i32>) -> tensor<96x12288xbf16>
      %116 = func.call @dynamic_update_index_in_dim_18(%iterArg_82, %114#2, %81) : (tensor<96x12288xbf16>, tensor<12288xbf16>, tensor<i32>) -> tensor<96x12288xbf16>
      %117 = func.call @dynamic_update_index_in_dim_19(%iterArg_83, %114#3, %81) : (tensor<96x12288x49152xbf16>, tensor<12288x49152xbf16>, tensor<i32>) -> tensor<96x12288x49152xbf16>
      %118 = func.call @dynamic_update_index_in_dim_20(%iterArg_84, %114#4, %81) : (tensor<96x49152x12288xbf16>, tensor<49152x12288xbf16>, tensor<i32>) -> tensor<96x49152x12288xbf16>
      %119 = func.call @dynamic_update_index_in_dim_21(%iterArg_85, %114#5, %81) : (tensor<96x12288x12288xbf16>, tensor<12288x12288xbf16>, tensor<i32>) -> tensor<96x12288x12288xbf16>
      %120 = func.call @dynamic_update_index_in_dim_22(%iterArg_86, %114#6, %81) : (tensor<96x12288x36864xbf16>, tensor<12288x36864xbf16>, tensor<i32>) -> tensor<96x12288x36864xbf16>
      %c_89 = stablehlo.constant dense<1> : tensor<i32>
      %121 = stablehlo.add %iterArg_79, %c_89 : tensor<i32>
      stablehlo.return %iterArg, %iterArg_48, %iterArg_49, %iterArg_50, %iterArg_51, %iterArg_52, %iterArg_53, %iterArg_54, %iterArg_55, %iterArg_56, %iterArg_57, %iterArg_58, %iterArg_59, %iterArg_60, %iterArg_61, %iterArg_62, %iterArg_63, %iterArg_64, %iterArg_65, %iterArg_66, %iterArg_67, %iterArg_68, %iterArg_69, %iterArg_70, %iterArg_71, %iterArg_72, %iterArg_73, %iterArg_74, %iterArg_75, %iterArg_76, %iterArg_77, %iterArg_78, %121, %114#0, %115, %116, %117, %118, %119, %120 : tensor<96x8x2048x12288xbf16>, tensor<96x8x2048x1xbf16>, tensor<96x8x2048x1xbf16>, tensor<96x8x2048x12288xbf16>, tensor<96x1x1x12288xbf16>, tensor<96x8x2048x12288xbf16>, tensor<96x12288x36864xbf16>, tensor<96x8x2048x12288xbf16>, tensor<96x8x2048x96x128xbf16>, tensor<96x8x2048x96x128xbf16>, tensor<96x8x96x2048x2048xbf16>, tensor<96x8x96x2048x1xbf16>, tensor<96x8x96x2048x1xbf16>, tensor<96x8x96x2048x2048xbf16>, tensor<96x8x2048x96x128xbf16>, tensor<96x12288x12288xbf16>, tensor<96x8x2048x12288xbf16>, tensor<96x8x2048x12288xbf16>, tensor<96x8x2048x1xbf16>, tensor<96x8x2048x1xbf16>, tensor<96x8x2048x12288xbf16>, tensor<96x1x1x12288xbf16>, tensor<96x8x2048x12288xbf16>, tensor<96x12288x49152xbf16>, tensor<96x8x2048x12288xbf16>, tensor<96x8x2048x49152xbf16>, tensor<96x8x2048x49152xbf16>, tensor<96x8x2048x49152xbf16>, tensor<96x8x2048x49152xbf16>, tensor<96x8x2048x49152xbf16>, tensor<96x49152x12288xbf16>, tensor<96x8x2048x49152xbf16>, tensor<i32>, tensor<8x2048x12288xbf16>, tensor<96x12288xbf16>, tensor<96x12288xbf16>, tensor<96x12288x49152xbf16>, tensor<96x49152x12288xbf16>, tensor<96x12288x12288xbf16>, tensor<96x12288x36864xbf16>
    }
    %cst_40 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %56 = stablehlo.broadcast_in_dim %cst_40, dims = [] : (tensor<bf16>) -> tensor<51200x12288xbf16>
    %57 = "stablehlo.scatter"(%56, %5, %55#33) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [2], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 2>, unique_indices = false}> ({
    ^bb0(%arg8: tensor<bf16>, %arg9: tensor<bf16>):
      %80 = stablehlo.add %arg8, %arg9 : tensor<bf16>
      stablehlo.return %80 : tensor<bf16>
    }) : (tensor<51200x12288xbf16>, tensor<8x2048x1xi32>, tensor<8x2048x12288xbf16>) -> tensor<51200x12288xbf16>
    %58 = stablehlo.add %48, %57 : tensor<51200x12288xbf16>
    %cst_41 = stablehlo.constant dense<1.001360e-04> : tensor<bf16>
    %59 = stablehlo.broadcast_in_dim %cst_41, dims = [] : (tensor<bf16>) -> tensor<96x12288xbf16>
    %60 = stablehlo.multiply %59, %55#34 : tensor<96x12288xbf16>
    %61 = stablehlo.subtract %arg0, %60 : tensor<96x12288xbf16>
    %cst_42 = stablehlo.constant dense<1.001360e-04> : tensor<bf16>
    %62 = stablehlo.broadcast_in_dim %cst_42, dims = [] : (tensor<bf16>) -> tensor<96x12288xbf16>
    %63 = stablehlo.multiply %62, %55#35 : tensor<96x12288xbf16>
    %64 = stablehlo.subtract %arg1, %63 : tensor<96x12288xbf16>
    %cst_43 = stablehlo.constant dense<1.001360e-04> : tensor<bf16>
    %65 = stablehlo.broadcast_in_dim %cst_43, dims = [] : (tensor<bf16>) -> tensor<96x12288x49152xbf16>
    %66 = stablehlo.multiply %65, %55#36 : tensor<96x12288x49152xbf16>
    %67 = stablehlo.subtract %arg2, %66 : tensor<96x12288x49152xbf16>
    %cst_44 = stablehlo.constant dense<1.001360e-04> : tensor<bf16>
    %68 = stablehlo.broadcast_in_dim %cst_44, dims = [] : (tensor<bf16>) -> tensor<96x49152x12288xbf16>
    %69 = stablehlo.multiply %68, %55#37 : tensor<96x49152x12288xbf16>
    %70 = stablehlo.subtract %arg3, %69 : tensor<96x49152x12288xbf16>
    %cst_45 = stablehlo.constant dense<1.001360e-04> : tensor<bf16>
    %71 = stablehlo.broadcast_in_dim %cst_45, dims = [] : (tensor<bf16>) -> tensor<96x12288x12288xbf16>
    %72 = stablehlo.multiply %71, %55#38 : tensor<96x12288x12288xbf16>
    %73 = stablehlo.subtract %arg4, %72 : tensor<96x12288x12288xbf16>
    %cst_46 = stablehlo.constant dense<1.001360e-04> : tensor<bf16>
    %74 = stablehlo.broadcast_in_dim %cst_46, dims = [] : (tensor<bf16>) -> tensor<96x12288x36864xbf16>
    %75 = stablehlo.multiply %74, %55#39 : tensor<96x12288x36864xbf16>
    %76 = stablehlo.subtract %arg5, %75 : tensor<96x12288x36864xbf16>
    %cst_47 = stablehlo.constant dense<1.001360e-04> : tensor<bf16>
    %77 = stablehlo.broadcast_in_dim %cst_47, dims = [] : (tensor<bf16>) -> tensor<51200x12288xbf16>
    %78 = stablehlo.multiply %77, %58 : tensor<51200x12288xbf16>
    %79 = stablehlo.subtract %arg6, %78 : tensor<51200x12288xbf16>
    return %61, %64, %67, %70, %73, %76, %79, %41 : tensor<96x12288xbf16>, tensor<96x12288xbf16>, tensor<96x12288x49152xbf16>, tensor<96x49152x12288xbf16>, tensor<96x12288x12288xbf16>, tensor<96x12288x36864xbf16>, tensor<51200x12288xbf16>, tensor<bf16>
  }
  func.func private @dynamic_index_in_dim(%arg0: tensor<96x12288xbf16>, %arg1: tensor<i32>) -> tensor<12288xbf16> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.dynamic_slice %arg0, %arg1, %c, sizes = [1, 12288] : (tensor<96x12288xbf16>, tensor<i32>, tensor<i32>) -> tensor<1x12288xbf16>
    %1 = stablehlo.reshape %0 : (tensor<1x12288xbf16>) -> tensor<12288xbf16>
    return %1 : tensor<12288xbf16>
  }
  func.func private @dynamic_index_in_dim_0(%arg0: tensor<96x12288x49152xbf16>, %arg1: tensor<i32>) -> tensor<12288x49152xbf16> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.dynamic_slice %arg0, %arg1, %c, %c_0, sizes = [1, 12288, 49152] : (tensor<96x12288x49152xbf16>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x12288x49152xbf16>
    %1 = stablehlo.reshape %0 : (tensor<1x12288x49152xbf16>) -> tensor<12288x49152xbf16>
    return %1 : tensor<12288x49152xbf16>
  }
  func.func private @dynamic_index_in_dim_1(%arg0: tensor<96x49152x12288xbf16>, %arg1: tensor<i32>) -> tensor<49152x12288xbf16> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.dynamic_slice %arg0, %arg1, %c, %c_0, sizes = [1, 49152, 12288] : (tensor<96x49152x12288xbf16>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x49152x12288xbf16>
    %1 = stablehlo.reshape %0 : (tensor<1x49152x12288xbf16>) -> tensor<49152x12288xbf16>
    return %1 : tensor<49152x12288xbf16>
  }
  func.func private @dynamic_index_in_dim_2(%arg0: tensor<96x12288x12288xbf16>, %arg1: tensor<i32>) -> tensor<12288x12288xbf16> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.dynamic_slice %arg0, %arg1, %c, %c_0, sizes = [1, 12288, 12288] : (tensor<96x12288x12288xbf16>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x12288x12288xbf16>
    %1 = stablehlo.reshape %0 : (tensor<1x12288x12288xbf16>) -> tensor<12288x12288xbf16>
    return %1 : tensor<12288x12288xbf16>
  }
  func.func private @dynamic_index_in_dim_3(%arg0: tensor<96x12288x36864xbf16>, %arg1: tensor<i32>) -> tensor<12288x36864xbf16> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.dynamic_slice %arg0, %arg1, %c, %c_0, sizes = [1, 12288, 36864] : (tensor<96x12288x36864xbf16>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x12288x36864xbf16>
    %1 = stablehlo.reshape %0 : (tensor<1x12288x36864xbf16>) -> tensor<12288x36864xbf16>
    return %1 : tensor<12288x36864xbf16>
  }
  func.func private @closed_call(%arg0: tensor<8x2048x12288xbf16>, %arg1: tensor<12288xbf16>, %arg2: tensor<12288xbf16>, %arg3: tensor<12288x49152xbf16>, %arg4: tensor<49152x12288xbf16>, %arg5: tensor<12288x12288xbf16>, %arg6: tensor<12288x36864xbf16>) -> (tensor<8x2048x12288xbf16>, tensor<8x2048x12288xbf16>, tensor<8x2048x1xbf16>, tensor<8x2048x1xbf16>, tensor<8x2048x12288xbf16>, tensor<1x1x12288xbf16>, tensor<8x2048x12288xbf16>, tensor<8x2048x12288xbf16>, tensor<8x2048x96x128xbf16>, tensor<8x2048x96x128xbf16>, tensor<8x96x2048x2048xbf16>, tensor<8x96x2048x1xbf16>, tensor<8x96x2048x1xbf16>, tensor<8x96x2048x2048xbf16>, tensor<8x2048x96x128xbf16>, tensor<8x2048x12288xbf16>, tensor<8x2048x12288xbf16>, tensor<8x2048x1xbf16>, tensor<8x2048x1xbf16>, tensor<8x2048x12288xbf16>, tensor<1x1x12288xbf16>, tensor<8x2048x12288xbf16>, tensor<8x2048x12288xbf16>, tensor<8x2048x49152xbf16>, tensor<8x2048x49152xbf16>, tensor<8x2048x49152xbf16>, tensor<8x2048x49152xbf16>, tensor<8x2048x49152xbf16>, tensor<8x2048x49152xbf16>) {
    %0 = stablehlo.convert %arg0 : (tensor<8x2048x12288xbf16>) -> tensor<8x2048x12288xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = stablehlo.reduce(%0 init: %cst) applies stablehlo.add across dimensions = [2] : (tensor<8x2048x12288xf32>, tensor<f32>) -> tensor<8x2048xf32>
    %2 = stablehlo.broadcast_in_dim %1, dims = [0, 1] : (tensor<8x2048xf32>) -> tensor<8x2048x1xf32>
    %cst_0 = stablehlo.constant dense<1.228800e+04> : tensor<f32>
    %3 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<8x2048x1xf32>
    %4 = stablehlo.divide %2, %3 : tensor<8x2048x1xf32>
    %5 = stablehlo.convert %4 : (tensor<8x2048x1xf32>) -> tensor<8x2048x1xbf16>
    %6 = stablehlo.broadcast_in_dim %5, dims = [0, 1, 2] : (tensor<8x2048x1xbf16>) -> tensor<8x2048x12288xbf16>
    %7 = stablehlo.subtract %arg0, %6 : tensor<8x2048x12288xbf16>
    %8 = stablehlo.multiply %7, %7 : tensor<8x2048x12288xbf16>
    %cst_1 = stablehlo.constant dense<2.000000e+00> : tensor<bf16>
    %9 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<bf16>) -> tensor<8x2048x12288xbf16>
    %10 = stablehlo.multiply %9, %7 : tensor<8x2048x12288xbf16>
    %11 = stablehlo.convert %8 : (tensor<8x2048x12288xbf16>) -> tensor<8x2048x12288xf32>
    %cst_2 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %12 = stablehlo.reduce(%11 init: %cst_2) applies stablehlo.add across dimensions = [2] : (tensor<8x2048x12288xf32>, tensor<f32>) -> tensor<8x2048xf32>
    %13 = stablehlo.broadcast_in_dim %12, dims = [0, 1] : (tensor<8x2048xf32>) -> tensor<8x2048x1xf32>
    %cst_3 = stablehlo.constant dense<1.228800e+04> : tensor<f32>
    %14 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<8x2048x1xf32>
    %15 = stablehlo.divide %13, %14 : tensor<8x2048x1xf32>
    %16 = stablehlo.convert %15 : (tensor<8x2048x1xf32>) -> tensor<8x2048x1xbf16>
    %17 = stablehlo.broadcast_in_dim %5, dims = [0, 1, 2] : (tensor<8x2048x1xbf16>) -> tensor<8x2048x12288xbf16>
    %18 = stablehlo.subtract %arg0, %17 : tensor<8x2048x12288xbf16>
    %cst_4 = stablehlo.constant dense<1.001360e-05> : tensor<bf16>
    %19 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<bf16>) -> tensor<8x2048x1xbf16>
    %20 = stablehlo.add %16, %19 : tensor<8x2048x1xbf16>
    %21 = stablehlo.rsqrt %20 : tensor<8x2048x1xbf16>
    %22 = stablehlo.divide %21, %20 : tensor<8x2048x1xbf16>
    %cst_5 = stablehlo.constant dense<-5.000000e-01> : tensor<bf16>
    %23 = stablehlo.broadcast_in_dim %cst_5, dims = [] : (tensor<bf16>) -> tensor<8x2048x1xbf16>
    %24 = stablehlo.multiply %23, %22 : tensor<8x2048x1xbf16>
    %25 = stablehlo.broadcast_in_dim %21, dims = [0, 1, 2] : (tensor<8x2048x1xbf16>) -> tensor<8x2048x12288xbf16>
    %26 = stablehlo.multiply %18, %25 : tensor<8x2048x12288xbf16>
    %27 = stablehlo.broadcast_in_dim %arg1, dims = [2] : (tensor<12288xbf16>) -> tensor<1x1x12288xbf16>
    %28 = stablehlo.broadcast_in_dim %27, dims = [0, 1, 2] : (tensor<1x1x12288xbf16>) -> tensor<8x2048x12288xbf16>
    %29 = stablehlo.multiply %26, %28 : tensor<8x2048x12288xbf16>
    %30 = stablehlo.dot_general %29, %arg6, contracting_dims = [2] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x2048x12288xbf16>, tensor<12288x36864xbf16>) -> tensor<8x2048x36864xbf16>
    %31 = stablehlo.slice %30 [0:8, 0:2048, 0:12288] : (tensor<8x2048x36864xbf16>) -> tensor<8x2048x12288xbf16>
    %32 = stablehlo.slice %30 [0:8, 0:2048, 12288:24576] : (tensor<8x2048x36864xbf16>) -> tensor<8x2048x12288xbf16>
    %33 = stablehlo.slice %30 [0:8, 0:2048, 24576:36864] : (tensor<8x2048x36864xbf16>) -> tensor<8x2048x12288xbf16>
    %34 = stablehlo.reshape %31 : (tensor<8x2048x12288xbf16>) -> tensor<8x2048x96x128xbf16>
    %35 = stablehlo.reshape %32 : (tensor<8x2048x12288xbf16>) -> tensor<8x2048x96x128xbf16>
    %36 = stablehlo.reshape %33 : (tensor<8x2048x12288xbf16>) -> tensor<8x2048x96x128xbf16>
    %37 = stablehlo.dot_general %34, %35, batching_dims = [0, 2] x [0, 2], contracting_dims = [3] x [3], precision = [DEFAULT, DEFAULT] : (tensor<8x2048x96x128xbf16>, tensor<8x2048x96x128xbf16>) -> tensor<8x96x2048x2048xbf16>
    %cst_6 = stablehlo.constant dense<1.131250e+01> : tensor<bf16>
    %38 = stablehlo.broadcast_in_dim %cst_6, dims = [] : (tensor<bf16>) -> tensor<8x96x2048x2048xbf16>
    %39 = stablehlo.divide %37, %38 : tensor<8x96x2048x2048xbf16>
    %cst_7 = stablehlo.constant dense<0xFF80> : tensor<bf16>
    %40 = stablehlo.reduce(%39 init: %cst_7) applies stablehlo.maximum across dimensions = [3] : (tensor<8x96x2048x2048xbf16>, tensor<bf16>) -> tensor<8x96x2048xbf16>
    %cst_8 = stablehlo.constant dense<0xFF80> : tensor<bf16>
    %41 = stablehlo.broadcast_in_dim %cst_8, dims = [] : (tensor<bf16>) -> tensor<8x96x2048xbf16>
    %42 = stablehlo.maximum %41, %40 : tensor<8x96x2048xbf16>
    %43 = stablehlo.broadcast_in_dim %42, dims = [0, 1, 2] : (tensor<8x96x2048xbf16>) -> tensor<8x96x2048x1xbf16>
    %44 = stablehlo.broadcast_in_dim %43, dims = [0, 1, 2, 3] : (tensor<8x96x2048x1xbf16>) -> tensor<8x96x2048x2048xbf16>
    %45 = stablehlo.subtract %39, %44 : tensor<8x96x2048x2048xbf16>
    %46 = stablehlo.exponential %45 : tensor<8x96x2048x2048xbf16>
    %47 = stablehlo.convert %46 : (tensor<8x96x2048x2048xbf16>) -> tensor<8x96x2048x2048xf32>
    %cst_9 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %48 = stablehlo.reduce(%47 init: %cst_9) applies stablehlo.add across dimensions = [3] : (tensor<8x96x2048x2048xf32>, tensor<f32>) -> tensor<8x96x2048xf32>
    %49 = stablehlo.broadcast_in_dim %48, dims = [0, 1, 2] : (tensor<8x96x2048xf32>) -> tensor<8x96x2048x1xf32>
    %50 = stablehlo.convert %49 : (tensor<8x96x2048x1xf32>) -> tensor<8x96x2048x1xbf16>
    %51 = stablehlo.broadcast_in_dim %50, dims = [0, 1, 2, 3] : (tensor<8x96x2048x1xbf16>) -> tensor<8x96x2048x2048xbf16>
    %52 = stablehlo.divide %46, %51 : tensor<8x96x2048x2048xbf16>
    %53 = stablehlo.multiply %50, %50 : tensor<8x96x2048x1xbf16>
    %cst_10 = stablehlo.constant dense<1.000000e+00> : tensor<bf16>
    %54 = stablehlo.broadcast_in_dim %cst_10, dims = [] : (tensor<bf16>) -> tensor<8x96x2048x1xbf16>
    %55 = stablehlo.divide %54, %53 : tensor<8x96x2048x1xbf16>
    %56 = stablehlo.dot_general %36, %52, batching_dims = [0, 2] x [0, 1], contracting_dims = [1] x [3], precision = [DEFAULT, DEFAULT] : (tensor<8x2048x96x128xbf16>, tensor<8x96x2048x2048xbf16>) -> tensor<8x96x128x2048xbf16>
    %57 = stablehlo.transpose %56, dims = [0, 3, 1, 2] : (tensor<8x96x128x2048xbf16>) -> tensor<8x2048x96x128xbf16>
    %58 = stablehlo.reshape %57 : (tensor<8x2048x96x128xbf16>) -> tensor<8x2048x12288xbf16>
    %59 = stablehlo.dot_general %58, %arg5, contracting_dims = [2] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x2048x12288xbf16>, tensor<12288x12288xbf16>) -> tensor<8x2048x12288xbf16>
    %60 = stablehlo.add %arg0, %59 : tensor<8x2048x12288xbf16>
    %61 = stablehlo.convert %60 : (tensor<8x2048x12288xbf16>) -> tensor<8x2048x12288xf32>
    %cst_11 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %62 = stablehlo.reduce(%61 init: %cst_11) applies stablehlo.add across dimensions = [2] : (tensor<8x2048x12288xf32>, tensor<f32>) -> tensor<8x2048xf32>
    %63 = stablehlo.broadcast_in_dim %62, dims = [0, 1] : (tensor<8x2048xf32>) -> tensor<8x2048x1xf32>
    %cst_12 = stablehlo.constant dense<1.228800e+04> : tensor<f32>
    %64 = stablehlo.broadcast_in_dim %cst_12, dims = [] : (tensor<f32>) -> tensor<8x2048x1xf32>
    %65 = stablehlo.divide %63, %64 : tensor<8x2048x1xf32>
    %66 = stablehlo.convert %65 : (tensor<8x2048x1xf32>) -> tensor<8x2048x1xbf16>
    %67 = stablehlo.broadcast_in_dim %66, dims = [0, 1, 2] : (tensor<8x2048x1xbf16>) -> tensor<8x2048x12288xbf16>
    %68 = stablehlo.subtract %60, %67 : tensor<8x2048x12288xbf16>
    %69 = stablehlo.multiply %68, %68 : tensor<8x2048x12288xbf16>
    %cst_13 = stablehlo.constant dense<2.000000e+00> : tensor<bf16>
    %70 = stablehlo.broadcast_in_dim %cst_13, dims = [] : (tensor<bf16>) -> tensor<8x2048x12288xbf16>
    %71 = stablehlo.multiply %70, %68 : tensor<8x2048x12288xbf16>
    %72 = stablehlo.convert %69 : (tensor<8x2048x12288xbf16>) -> tensor<8x2048x12288xf32>
    %cst_14 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %73 = stablehlo.reduce(%72 init: %cst_14) applies stablehlo.add across dimensions = [2] : (tensor<8x2048x12288xf32>, tensor<f32>) -> tensor<8x2048xf32>
    %74 = stablehlo.broadcast_in_dim %73, dims = [0, 1] : (tensor<8x2048xf32>) -> tensor<8x2048x1xf32>
    %cst_15 = stablehlo.constant dense<1.228800e+04> : tensor<f32>
    %75 = stablehlo.broadcast_in_dim %cst_15, dims = [] : (tensor<f32>) -> tensor<8x2048x1xf32>
    %76 = stablehlo.divide %74, %75 : tensor<8x2048x1xf32>
    %77 = stablehlo.convert %76 : (tensor<8x2048x1xf32>) -> tensor<8x2048x1xbf16>
    %78 = stablehlo.broadcast_in_dim %66, dims = [0, 1, 2] : (tensor<8x2048x1xbf16>) -> tensor<8x2048x12288xbf16>
    %79 = stablehlo.subtract %60, %78 : tensor<8x2048x12288xbf16>
    %cst_16 = stablehlo.constant dense<1.001360e-05> : tensor<bf16>
    %80 = stablehlo.broadcast_in_dim %cst_16, dims = [] : (tensor<bf16>) -> tensor<8x2048x1xbf16>
    %81 = stablehlo.add %77, %80 : tensor<8x2048x1xbf16>
    %82 = stablehlo.rsqrt %81 : tensor<8x2048x1xbf16>
    %83 = stablehlo.divide %82, %81 : tensor<8x2048x1xbf16>
    %cst_17 = stablehlo.constant dense<-5.000000e-01> : tensor<bf16>
    %84 = stablehlo.broadcast_in_dim %cst_17, dims = [] : (tensor<bf16>) -> tensor<8x2048x1xbf16>
    %85 = stablehlo.multiply %84, %83 : tensor<8x2048x1xbf16>
    %86 = stablehlo.broadcast_in_dim %82, dims = [0, 1, 2] : (tensor<8x2048x1xbf16>) -> tensor<8x2048x12288xbf16>
    %87 = stablehlo.multiply %79, %86 : tensor<8x2048x12288xbf16>
    %88 = stablehlo.broadcast_in_dim %arg2, dims = [2] : (tensor<12288xbf16>) -> tensor<1x1x12288xbf16>
    %89 = stablehlo.broadcast_in_dim %88, dims = [0, 1, 2] : (tensor<1x1x12288xbf16>) -> tensor<8x2048x12288xbf16>
    %90 = stablehlo.multiply %87, %89 : tensor<8x2048x12288xbf16>
    %91 = stablehlo.dot_general %90, %arg3, contracting_dims = [2] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x2048x12288xbf16>, tensor<12288x49152xbf16>) -> tensor<8x2048x49152xbf16>
    %92 = stablehlo.multiply %91, %91 : tensor<8x2048x49152xbf16>
    %93 = stablehlo.multiply %92, %91 : tensor<8x2048x49152xbf16>
    %94 = stablehlo.multiply %91, %91 : tensor<8x2048x49152xbf16>
    %cst_18 = stablehlo.constant dense<3.000000e+00> : tensor<bf16>
    %95 = stablehlo.broadcast_in_dim %cst_18, dims = [] : (tensor<bf16>) -> tensor<8x2048x49152xbf16>
    %96 = stablehlo.multiply %95, %94 : tensor<8x2048x49152xbf16>
    %cst_19 = stablehlo.constant dense<4.467770e-02> : tensor<bf16>
    %97 = stablehlo.broadcast_in_dim %cst_19, dims = [] : (tensor<bf16>) -> tensor<8x2048x49152xbf16>
    %98 = stablehlo.multiply %97, %93 : tensor<8x2048x49152xbf16>
    %99 = stablehlo.add %91, %98 : tensor<8x2048x49152xbf16>
    %cst_20 = stablehlo.constant dense<7.968750e-01> : tensor<bf16>
    %100 = stablehlo.broadcast_in_dim %cst_20, dims = [] : (tensor<bf16>) -> tensor<8x2048x49152xbf16>
    %101 = stablehlo.multiply %100, %99 : tensor<8x2048x49152xbf16>
    %102 = stablehlo.tanh %101 : tensor<8x2048x49152xbf16>
    %cst_21 = stablehlo.constant dense<1.000000e+00> : tensor<bf16>
    %103 = stablehlo.broadcast_in_dim %cst_21, dims = [] : (tensor<bf16>) -> tensor<8x2048x49152xbf16>
    %104 = stablehlo.subtract %103, %102 : tensor<8x2048x49152xbf16>
    %cst_22 = stablehlo.constant dense<1.000000e+00> : tensor<bf16>
    %105 = stablehlo.broadcast_in_dim %cst_22, dims = [] : (tensor<bf16>) -> tensor<8x2048x49152xbf16>
    %106 = stablehlo.add %105, %102 : tensor<8x2048x49152xbf16>
    %cst_23 = stablehlo.constant dense<5.000000e-01> : tensor<bf16>
    %107 = stablehlo.broadcast_in_dim %cst_23, dims = [] : (tensor<bf16>) -> tensor<8x2048x49152xbf16>
    %108 = stablehlo.multiply %107, %106 : tensor<8x2048x49152xbf16>
    %109 = stablehlo.multiply %91, %108 : tensor<8x2048x49152xbf16>
    %110 = stablehlo.dot_general %109, %arg4, contracting_dims = [2] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x2048x49152xbf16>, tensor<49152x12288xbf16>) -> tensor<8x2048x12288xbf16>
    %111 = stablehlo.add %60, %110 : tensor<8x2048x12288xbf16>
    return %111, %10, %24, %21, %18, %27, %26, %29, %35, %34, %46, %50, %55, %52, %36, %58, %71, %85, %82, %79, %88, %87, %90, %96, %102, %104, %108, %91, %109 : tensor<8x2048x12288xbf16>, tensor<8x2048x12288xbf16>, tensor<8x2048x1xbf16>, tensor<8x2048x1xbf16>, tensor<8x2048x12288xbf16>, tensor<1x1x12288xbf16>, tensor<8x2048x12288xbf16>, tensor<8x2048x12288xbf16>, tensor<8x2048x96x128xbf16>, tensor<8x2048x96x128xbf16>, tensor<8x96x2048x2048xbf16>, tensor<8x96x2048x1xbf16>, tensor<8x96x2048x1xbf16>, tensor<8x96x2048x2048xbf16>, tensor<8x2048x96x128xbf16>, tensor<8x2048x12288xbf16>, tensor<8x2048x12288xbf16>, tensor<8x2048x1xbf16>, tensor<8x2048x1xbf16>, tensor<8x2048x12288xbf16>, tensor<1x1x12288xbf16>, tensor<8x2048x12288xbf16>, tensor<8x2048x12288xbf16>, tensor<8x2048x49152xbf16>, tensor<8x2048x49152xbf16>, tensor<8x2048x49152xbf16>, tensor<8x2048x49152xbf16>, tensor<8x2048x49152xbf16>, tensor<8x2048x49152xbf16>
  }
  func.func private @dynamic_update_index_in_dim(%arg0: tensor<96x8x2048x12288xbf16>, %arg1: tensor<8x2048x12288xbf16>, %arg2: tensor<i32>) -> tensor<96x8x2048x12288xbf16> {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [1, 2, 3] : (tensor<8x2048x12288xbf16>) -> tensor<1x8x2048x12288xbf16>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.dynamic_update_slice %arg0, %0, %arg2, %c, %c_0, %c_1 : (tensor<96x8x2048x12288xbf16>, tensor<1x8x2048x12288xbf16>, tensor<i32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<96x8x2048x12288xbf16>
    return %1 : tensor<96x8x2048x12288xbf16>
  }
  func.func private @dynamic_update_index_in_dim_4(%arg0: tensor<96x8x2048x1xbf16>, %arg1: tensor<8x2048x1xbf16>, %arg2: tensor<i32>) -> tensor<96x8x2048x1xbf16> {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [1, 2, 3] : (tensor<8x2048x1xbf16>) -> tensor<1x8x2048x1xbf16>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.dynamic_update_slice %arg0, %0, %arg2, %c, %c_0, %c_1 : (tensor<96x8x2048x1xbf16>, tensor<1x8x2048x1xbf16>, tensor<i32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<96x8x2048x1xbf16>
    return %1 : tensor<96x8x2048x1xbf16>
  }
  func.func private @dynamic_update_index_in_dim_5(%arg0: tensor<96x1x1x12288xbf16>, %arg1: tensor<1x1x12288xbf16>, %arg2: tensor<i32>) -> tensor<96x1x1x12288xbf16> {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [1, 2, 3] : (tensor<1x1x12288xbf16>) -> tensor<1x1x1x12288xbf16>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.dynamic_update_slice %arg0, %0, %arg2, %c, %c_0, %c_1 : (tensor<96x1x1x12288xbf16>, tensor<1x1x1x12288xbf16>, tensor<i32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<96x1x1x12288xbf16>
    return %1 : tensor<96x1x1x12288xbf16>
  }
  func.func private @dynamic_update_index_in_dim_6(%arg0: tensor<96x8x2048x96x128xbf16>, %arg1: tensor<8x2048x96x128xbf16>, %arg2: tensor<i32>) -> tensor<96x8x2048x96x128xbf16> {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [1, 2, 3, 4] : (tensor<8x2048x96x128xbf16>) -> tensor<1x8x2048x96x128xbf16>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.dynamic_update_slice %arg0, %0, %arg2, %c, %c_0, %c_1, %c_2 : (tensor<96x8x2048x96x128xbf16>, tensor<1x8x2048x96x128xbf16>, tensor<i32>, tensor<i32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<96x8x2048x96x128xbf16>
    return %1 : tensor<96x8x2048x96x128xbf16>
  }
  func.func private @dynamic_update_index_in_dim_7(%arg0: tensor<96x8x96x2048x2048xbf16>, %arg1: tensor<8x96x2048x2048xbf16>, %arg2: tensor<i32>) -> tensor<96x8x96x2048x2048xbf16> {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [1, 2, 3, 4] : (tensor<8x96x2048x2048xbf16>) -> tensor<1x8x96x2048x2048xbf16>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.dynamic_update_slice %arg0, %0, %arg2, %c, %c_0, %c_1, %c_2 : (tensor<96x8x96x2048x2048xbf16>, tensor<1x8x96x2048x2048xbf16>, tensor<i32>, tensor<i32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<96x8x96x2048x2048xbf16>
    return %1 : tensor<96x8x96x2048x2048xbf16>
  }
  func.func private @dynamic_update_index_in_dim_8(%arg0: tensor<96x8x96x2048x1xbf16>, %arg1: tensor<8x96x2048x1xbf16>, %arg2: tensor<i32>) -> tensor<96x8x96x2048x1xbf16> {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [1, 2, 3, 4] : (tensor<8x96x2048x1xbf16>) -> tensor<1x8x96x2048x1xbf16>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.dynamic_update_slice %arg0, %0, %arg2, %c, %c_0, %c_1, %c_2 : (tensor<96x8x96x2048x1xbf16>, tensor<1x8x96x2048x1xbf16>, tensor<i32>, tensor<i32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<96x8x96x2048x1xbf16>
    return %1 : tensor<96x8x96x2048x1xbf16>
  }
  func.func private @dynamic_update_index_in_dim_9(%arg0: tensor<96x8x2048x49152xbf16>, %arg1: tensor<8x2048x49152xbf16>, %arg2: tensor<i32>) -> tensor<96x8x2048x49152xbf16> {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [1, 2, 3] : (tensor<8x2048x49152xbf16>) -> tensor<1x8x2048x49152xbf16>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.dynamic_update_slice %arg0, %0, %arg2, %c, %c_0, %c_1 : (tensor<96x8x2048x49152xbf16>, tensor<1x8x2048x49152xbf16>, tensor<i32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<96x8x2048x49152xbf16>
    return %1 : tensor<96x8x2048x49152xbf16>
  }
  func.func private @dynamic_index_in_dim_10(%arg0: tensor<96x8x2048x12288xbf16>, %arg1: tensor<i32>) -> tensor<8x2048x12288xbf16> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.dynamic_slice %arg0, %arg1, %c, %c_0, %c_1, sizes = [1, 8, 2048, 12288] : (tensor<96x8x2048x12288xbf16>, tensor<i32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x8x2048x12288xbf16>
    %1 = stablehlo.reshape %0 : (tensor<1x8x2048x12288xbf16>) -> tensor<8x2048x12288xbf16>
    return %1 : tensor<8x2048x12288xbf16>
  }
  func.func private @dynamic_index_in_dim_11(%arg0: tensor<96x8x2048x1xbf16>, %arg1: tensor<i32>) -> tensor<8x2048x1xbf16> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.dynamic_slice %arg0, %arg1, %c, %c_0, %c_1, sizes = [1, 8, 2048, 1] : (tensor<96x8x2048x1xbf16>, tensor<i32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x8x2048x1xbf16>
    %1 = stablehlo.reshape %0 : (tensor<1x8x2048x1xbf16>) -> tensor<8x2048x1xbf16>
    return %1 : tensor<8x2048x1xbf16>
  }
  func.func private @dynamic_index_in_dim_12(%arg0: tensor<96x1x1x12288xbf16>, %arg1: tensor<i32>) -> tensor<1x1x12288xbf16> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.dynamic_slice %arg0, %arg1, %c, %c_0, %c_1, sizes = [1, 1, 1, 12288] : (tensor<96x1x1x12288xbf16>, tensor<i32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x1x1x12288xbf16>
    %1 = stablehlo.reshape %0 : (tensor<1x1x1x12288xbf16>) -> tensor<1x1x12288xbf16>
    return %1 : tensor<1x1x12288xbf16>
  }
  func.func private @dynamic_index_in_dim_13(%arg0: tensor<96x8x2048x96x128xbf16>, %arg1: tensor<i32>) -> tensor<8x2048x96x128xbf16> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.dynamic_slice %arg0, %arg1, %c, %c_0, %c_1, %c_2, sizes = [1, 8, 2048, 96, 128] : (tensor<96x8x2048x96x128xbf16>, tensor<i32>, tensor<i32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x8x2048x96x128xbf16>
    %1 = stablehlo.reshape %0 : (tensor<1x8x2048x96x128xbf16>) -> tensor<8x2048x96x128xbf16>
    return %1 : tensor<8x2048x96x128xbf16>
  }
  func.func private @dynamic_index_in_dim_14(%arg0: tensor<96x8x96x2048x2048xbf16>, %arg1: tensor<i32>) -> tensor<8x96x2048x2048xbf16> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.dynamic_slice %arg0, %arg1, %c, %c_0, %c_1, %c_2, sizes = [1, 8, 96, 2048, 2048] : (tensor<96x8x96x2048x2048xbf16>, tensor<i32>, tensor<i32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x8x96x2048x2048xbf16>
    %1 = stablehlo.reshape %0 : (tensor<1x8x96x2048x2048xbf16>) -> tensor<8x96x2048x2048xbf16>
    return %1 : tensor<8x96x2048x2048xbf16>
  }
  func.func private @dynamic_index_in_dim_15(%arg0: tensor<96x8x96x2048x1xbf16>, %arg1: tensor<i32>) -> tensor<8x96x2048x1xbf16> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.dynamic_slice %arg0, %arg1, %c, %c_0, %c_1, %c_2, sizes = [1, 8, 96, 2048, 1] : (tensor<96x8x96x2048x1xbf16>, tensor<i32>, tensor<i32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x8x96x2048x1xbf16>
    %1 = stablehlo.reshape %0 : (tensor<1x8x96x2048x1xbf16>) -> tensor<8x96x2048x1xbf16>
    return %1 : tensor<8x96x2048x1xbf16>
  }
  func.func private @dynamic_index_in_dim_16(%arg0: tensor<96x8x2048x49152xbf16>, %arg1: tensor<i32>) -> tensor<8x2048x49152xbf16> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.dynamic_slice %arg0, %arg1, %c, %c_0, %c_1, sizes = [1, 8, 2048, 49152] : (tensor<96x8x2048x49152xbf16>, tensor<i32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x8x2048x49152xbf16>
    %1 = stablehlo.reshape %0 : (tensor<1x8x2048x49152xbf16>) -> tensor<8x2048x49152xbf16>
    return %1 : tensor<8x2048x49152xbf16>
  }
  func.func private @closed_call_17(%arg0: tensor<8x2048x12288xbf16>, %arg1: tensor<8x2048x12288xbf16>, %arg2: tensor<8x2048x1xbf16>, %arg3: tensor<8x2048x1xbf16>, %arg4: tensor<8x2048x12288xbf16>, %arg5: tensor<1x1x12288xbf16>, %arg6: tensor<8x2048x12288xbf16>, %arg7: tensor<12288x36864xbf16>, %arg8: tensor<8x2048x12288xbf16>, %arg9: tensor<8x2048x96x128xbf16>, %arg10: tensor<8x2048x96x128xbf16>, %arg11: tensor<8x96x2048x2048xbf16>, %arg12: tensor<8x96x2048x1xbf16>, %arg13: tensor<8x96x2048x1xbf16>, %arg14: tensor<8x96x2048x2048xbf16>, %arg15: tensor<8x2048x96x128xbf16>, %arg16: tensor<12288x12288xbf16>, %arg17: tensor<8x2048x12288xbf16>, %arg18: tensor<8x2048x12288xbf16>, %arg19: tensor<8x2048x1xbf16>, %arg20: tensor<8x2048x1xbf16>, %arg21: tensor<8x2048x12288xbf16>, %arg22: tensor<1x1x12288xbf16>, %arg23: tensor<8x2048x12288xbf16>, %arg24: tensor<12288x49152xbf16>, %arg25: tensor<8x2048x12288xbf16>, %arg26: tensor<8x2048x49152xbf16>, %arg27: tensor<8x2048x49152xbf16>, %arg28: tensor<8x2048x49152xbf16>, %arg29: tensor<8x2048x49152xbf16>, %arg30: tensor<8x2048x49152xbf16>, %arg31: tensor<49152x12288xbf16>, %arg32: tensor<8x2048x49152xbf16>) -> (tensor<8x2048x12288xbf16>, tensor<12288xbf16>, tensor<12288xbf16>, tensor<12288x49152xbf16>, tensor<49152x12288xbf16>, tensor<12288x12288xbf16>, tensor<12288x36864xbf16>) {
    %0 = stablehlo.dot_general %arg0, %arg32, contracting_dims = [0, 1] x [0, 1], precision = [DEFAULT, DEFAULT] : (tensor<8x2048x12288xbf16>, tensor<8x2048x49152xbf16>) -> tensor<12288x49152xbf16>
    %1 = stablehlo.transpose %0, dims = [1, 0] : (tensor<12288x49152xbf16>) -> tensor<49152x12288xbf16>
    %2 = stablehlo.dot_general %arg0, %arg31, contracting_dims = [2] x [1], precision = [DEFAULT, DEFAULT] : (tensor<8x2048x12288xbf16>, tensor<49152x12288xbf16>) -> tensor<8x2048x49152xbf16>
    %3 = stablehlo.multiply %arg30, %2 : tensor<8x2048x49152xbf16>
    %4 = stablehlo.multiply %2, %arg29 : tensor<8x2048x49152xbf16>
    %cst = stablehlo.constant dense<5.000000e-01> : tensor<bf16>
    %5 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<bf16>) -> tensor<8x2048x49152xbf16>
    %6 = stablehlo.multiply %5, %3 : tensor<8x2048x49152xbf16>
    %7 = stablehlo.multiply %6, %arg28 : tensor<8x2048x49152xbf16>
    %8 = stablehlo.multiply %7, %arg27 : tensor<8x2048x49152xbf16>
    %9 = stablehlo.add %7, %8 : tensor<8x2048x49152xbf16>
    %cst_0 = stablehlo.constant dense<7.968750e-01> : tensor<bf16>
    %10 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<bf16>) -> tensor<8x2048x49152xbf16>
    %11 = stablehlo.multiply %10, %9 : tensor<8x2048x49152xbf16>
    %12 = stablehlo.add %4, %11 : tensor<8x2048x49152xbf16>
    %cst_1 = stablehlo.constant dense<4.467770e-02> : tensor<bf16>
    %13 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<bf16>) -> tensor<8x2048x49152xbf16>
    %14 = stablehlo.multiply %13, %11 : tensor<8x2048x49152xbf16>
    %15 = stablehlo.multiply %14, %arg26 : tensor<8x2048x49152xbf16>
    %16 = stablehlo.add %12, %15 : tensor<8x2048x49152xbf16>
    %17 = stablehlo.dot_general %16, %arg25, contracting_dims = [0, 1] x [0, 1], precision = [DEFAULT, DEFAULT] : (tensor<8x2048x49152xbf16>, tensor<8x2048x12288xbf16>) -> tensor<49152x12288xbf16>
    %18 = stablehlo.transpose %17, dims = [1, 0] : (tensor<49152x12288xbf16>) -> tensor<12288x49152xbf16>
    %19 = stablehlo.dot_general %16, %arg24, contracting_dims = [2] x [1], precision = [DEFAULT, DEFAULT] : (tensor<8x2048x49152xbf16>, tensor<12288x49152xbf16>) -> tensor<8x2048x12288xbf16>
    %20 = stablehlo.multiply %arg23, %19 : tensor<8x2048x12288xbf16>
    %cst_2 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %21 = stablehlo.reduce(%20 init: %cst_2) applies stablehlo.add across dimensions = [0, 1] : (tensor<8x2048x12288xbf16>, tensor<bf16>) -> tensor<12288xbf16>
    %22 = stablehlo.reshape %21 : (tensor<12288xbf16>) -> tensor<1x1x12288xbf16>
    %23 = stablehlo.broadcast_in_dim %arg22, dims = [0, 1, 2] : (tensor<1x1x12288xbf16>) -> tensor<8x2048x12288xbf16>
    %24 = stablehlo.multiply %19, %23 : tensor<8x2048x12288xbf16>
    %cst_3 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %25 = stablehlo.reduce(%22 init: %cst_3) applies stablehlo.add across dimensions = [0, 1] : (tensor<1x1x12288xbf16>, tensor<bf16>) -> tensor<12288xbf16>
    %26 = stablehlo.multiply %arg21, %24 : tensor<8x2048x12288xbf16>
    %cst_4 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %27 = stablehlo.reduce(%26 init: %cst_4) applies stablehlo.add across dimensions = [2] : (tensor<8x2048x12288xbf16>, tensor<bf16>) -> tensor<8x2048xbf16>
    %28 = stablehlo.reshape %27 : (tensor<8x2048xbf16>) -> tensor<8x2048x1xbf16>
    %29 = stablehlo.broadcast_in_dim %arg20, dims = [0, 1, 2] : (tensor<8x2048x1xbf16>) -> tensor<8x2048x12288xbf16>
    %30 = stablehlo.multiply %24, %29 : tensor<8x2048x12288xbf16>
    %31 = stablehlo.multiply %28, %arg19 : tensor<8x2048x1xbf16>
    %32 = stablehlo.negate %30 : tensor<8x2048x12288xbf16>
    %cst_5 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %33 = stablehlo.reduce(%32 init: %cst_5) applies stablehlo.add across dimensions = [2] : (tensor<8x2048x12288xbf16>, tensor<bf16>) -> tensor<8x2048xbf16>
    %34 = stablehlo.reshape %33 : (tensor<8x2048xbf16>) -> tensor<8x2048x1xbf16>
    %35 = stablehlo.add %arg0, %30 : tensor<8x2048x12288xbf16>
    %36 = stablehlo.convert %31 : (tensor<8x2048x1xbf16>) -> tensor<8x2048x1xf32>
    %cst_6 = stablehlo.constant dense<1.228800e+04> : tensor<f32>
    %37 = stablehlo.broadcast_in_dim %cst_6, dims = [] : (tensor<f32>) -> tensor<8x2048x1xf32>
    %38 = stablehlo.divide %36, %37 : tensor<8x2048x1xf32>
    %cst_7 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %39 = stablehlo.reduce(%38 init: %cst_7) applies stablehlo.add across dimensions = [2] : (tensor<8x2048x1xf32>, tensor<f32>) -> tensor<8x2048xf32>
    %40 = stablehlo.broadcast_in_dim %39, dims = [0, 1] : (tensor<8x2048xf32>) -> tensor<8x2048x12288xf32>
    %41 = stablehlo.convert %40 : (tensor<8x2048x12288xf32>) -> tensor<8x2048x12288xbf16>
    %42 = stablehlo.multiply %41, %arg18 : tensor<8x2048x12288xbf16>
    %43 = stablehlo.negate %42 : tensor<8x2048x12288xbf16>
    %cst_8 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %44 = stablehlo.reduce(%43 init: %cst_8) applies stablehlo.add across dimensions = [2] : (tensor<8x2048x12288xbf16>, tensor<bf16>) -> tensor<8x2048xbf16>
    %45 = stablehlo.reshape %44 : (tensor<8x2048xbf16>) -> tensor<8x2048x1xbf16>
    %46 = stablehlo.add %35, %42 : tensor<8x2048x12288xbf16>
    %47 = stablehlo.add %34, %45 : tensor<8x2048x1xbf16>
    %48 = stablehlo.convert %47 : (tensor<8x2048x1xbf16>) -> tensor<8x2048x1xf32>
    %cst_9 = stablehlo.constant dense<1.228800e+04> : tensor<f32>
    %49 = stablehlo.broadcast_in_dim %cst_9, dims = [] : (tensor<f32>) -> tensor<8x2048x1xf32>
    %50 = stablehlo.divide %48, %49 : tensor<8x2048x1xf32>
    %cst_10 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %51 = stablehlo.reduce(%50 init: %cst_10) applies stablehlo.add across dimensions = [2] : (tensor<8x2048x1xf32>, tensor<f32>) -> tensor<8x2048xf32>
    %52 = stablehlo.broadcast_in_dim %51, dims = [0, 1] : (tensor<8x2048xf32>) -> tensor<8x2048x12288xf32>
    %53 = stablehlo.convert %52 : (tensor<8x2048x12288xf32>) -> tensor<8x2048x12288xbf16>
    %54 = stablehlo.add %46, %53 : tensor<8x2048x12288xbf16>
    %55 = stablehlo.dot_general %54, %arg17, contracting_dims = [0, 1] x [0, 1], precision = [DEFAULT, DEFAULT] : (tensor<8x2048x12288xbf16>, tensor<8x2048x12288xbf16>) -> tensor<12288x12288xbf16>
    %56 = stablehlo.transpose %55, dims = [1, 0] : (tensor<12288x12288xbf16>) -> tensor<12288x12288xbf16>
    %57 = stablehlo.dot_general %54, %arg16, contracting_dims = [2] x [1], precision = [DEFAULT, DEFAULT] : (tensor<8x2048x12288xbf16>, tensor<12288x12288xbf16>) -> tensor<8x2048x12288xbf16>
    %58 = stablehlo.reshape %57 : (tensor<8x2048x12288xbf16>) -> tensor<8x2048x96x128xbf16>
    %59 = stablehlo.transpose %58, dims = [0, 2, 3, 1] : (tensor<8x2048x96x128xbf16>) -> tensor<8x96x128x2048xbf16>
    %60 = stablehlo.dot_general %59, %arg15, batching_dims = [0, 1] x [0, 2], contracting_dims = [2] x [3], precision = [DEFAULT, DEFAULT] : (tensor<8x96x128x2048xbf16>, tensor<8x2048x96x128xbf16>) -> tensor<8x96x2048x2048xbf16>
    %61 = stablehlo.dot_general %59, %arg14, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [2], precision = [DEFAULT, DEFAULT] : (tensor<8x96x128x2048xbf16>, tensor<8x96x2048x2048xbf16>) -> tensor<8x96x128x2048xbf16>
    %62 = stablehlo.transpose %61, dims = [0, 3, 1, 2] : (tensor<8x96x128x2048xbf16>) -> tensor<8x2048x96x128xbf16>
    %63 = stablehlo.broadcast_in_dim %arg13, dims = [0, 1, 2, 3] : (tensor<8x96x2048x1xbf16>) -> tensor<8x96x2048x2048xbf16>
    %64 = stablehlo.multiply %60, %63 : tensor<8x96x2048x2048xbf16>
    %65 = stablehlo.multiply %64, %arg11 : tensor<8x96x2048x2048xbf16>
    %cst_11 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %66 = stablehlo.reduce(%65 init: %cst_11) applies stablehlo.add across dimensions = [3] : (tensor<8x96x2048x2048xbf16>, tensor<bf16>) -> tensor<8x96x2048xbf16>
    %67 = stablehlo.reshape %66 : (tensor<8x96x2048xbf16>) -> tensor<8x96x2048x1xbf16>
    %68 = stablehlo.negate %67 : tensor<8x96x2048x1xbf16>
    %69 = stablehlo.broadcast_in_dim %arg12, dims = [0, 1, 2, 3] : (tensor<8x96x2048x1xbf16>) -> tensor<8x96x2048x2048xbf16>
    %70 = stablehlo.divide %60, %69 : tensor<8x96x2048x2048xbf16>
    %71 = stablehlo.convert %68 : (tensor<8x96x2048x1xbf16>) -> tensor<8x96x2048x1xf32>
    %cst_12 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %72 = stablehlo.reduce(%71 init: %cst_12) applies stablehlo.add across dimensions = [3] : (tensor<8x96x2048x1xf32>, tensor<f32>) -> tensor<8x96x2048xf32>
    %73 = stablehlo.broadcast_in_dim %72, dims = [0, 1, 2] : (tensor<8x96x2048xf32>) -> tensor<8x96x2048x2048xf32>
    %74 = stablehlo.convert %73 : (tensor<8x96x2048x2048xf32>) -> tensor<8x96x2048x2048xbf16>
    %75 = stablehlo.add %70, %74 : tensor<8x96x2048x2048xbf16>
    %76 = stablehlo.multiply %75, %arg11 : tensor<8x96x2048x2048xbf16>
    %cst_13 = stablehlo.constant dense<1.131250e+01> : tensor<bf16>
    %77 = stablehlo.broadcast_in_dim %cst_13, dims = [] : (tensor<bf16>) -> tensor<8x96x2048x2048xbf16>
    %78 = stablehlo.divide %76, %77 : tensor<8x96x2048x2048xbf16>
    %79 = stablehlo.dot_general %78, %arg10, batching_dims = [0, 1] x [0, 2], contracting_dims = [2] x [1], precision = [DEFAULT, DEFAULT] : (tensor<8x96x2048x2048xbf16>, tensor<8x2048x96x128xbf16>) -> tensor<8x96x2048x128xbf16>
    %80 = stablehlo.transpose %79, dims = [0, 2, 1, 3] : (tensor<8x96x2048x128xbf16>) -> tensor<8x2048x96x128xbf16>
    %81 = stablehlo.dot_general %78, %arg9, batching_dims = [0, 1] x [0, 2], contracting_dims = [3] x [1], precision = [DEFAULT, DEFAULT] : (tensor<8x96x2048x2048xbf16>, tensor<8x2048x96x128xbf16>) -> tensor<8x96x2048x128xbf16>
    %82 = stablehlo.transpose %81, dims = [0, 2, 1, 3] : (tensor<8x96x2048x128xbf16>) -> tensor<8x2048x96x128xbf16>
    %83 = stablehlo.reshape %62 : (tensor<8x2048x96x128xbf16>) -> tensor<8x2048x12288xbf16>
    %84 = stablehlo.reshape %80 : (tensor<8x2048x96x128xbf16>) -> tensor<8x2048x12288xbf16>
    %85 = stablehlo.reshape %82 : (tensor<8x2048x96x128xbf16>) -> tensor<8x2048x12288xbf16>
    %86 = stablehlo.concatenate %85, %84, %83, dim = 2 : (tensor<8x2048x12288xbf16>, tensor<8x2048x12288xbf16>, tensor<8x2048x12288xbf16>) -> tensor<8x2048x36864xbf16>
    %87 = stablehlo.dot_general %86, %arg8, contracting_dims = [0, 1] x [0, 1], precision = [DEFAULT, DEFAULT] : (tensor<8x2048x36864xbf16>, tensor<8x2048x12288xbf16>) -> tensor<36864x12288xbf16>
    %88 = stablehlo.transpose %87, dims = [1, 0] : (tensor<36864x12288xbf16>) -> tensor<12288x36864xbf16>
    %89 = stablehlo.dot_general %86, %arg7, contracting_dims = [2] x [1], precision = [DEFAULT, DEFAULT] : (tensor<8x2048x36864xbf16>, tensor<12288x36864xbf16>) -> tensor<8x2048x12288xbf16>
    %90 = stablehlo.multiply %arg6, %89 : tensor<8x2048x12288xbf16>
    %cst_14 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %91 = stablehlo.reduce(%90 init: %cst_14) applies stablehlo.add across dimensions = [0, 1] : (tensor<8x2048x12288xbf16>, tensor<bf16>) -> tensor<12288xbf16>
    %92 = stablehlo.reshape %91 : (tensor<12288xbf16>) -> tensor<1x1x12288xbf16>
    %93 = stablehlo.broadcast_in_dim %arg5, dims = [0, 1, 2] : (tensor<1x1x12288xbf16>) -> tensor<8x2048x12288xbf16>
    %94 = stablehlo.multiply %89, %93 : tensor<8x2048x12288xbf16>
    %cst_15 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %95 = stablehlo.reduce(%92 init: %cst_15) applies stablehlo.add across dimensions = [0, 1] : (tensor<1x1x12288xbf16>, tensor<bf16>) -> tensor<12288xbf16>
    %96 = stablehlo.multiply %arg4, %94 : tensor<8x2048x12288xbf16>
    %cst_16 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %97 = stablehlo.reduce(%96 init: %cst_16) applies stablehlo.add across dimensions = [2] : (tensor<8x2048x12288xbf16>, tensor<bf16>) -> tensor<8x2048xbf16>
    %98 = stablehlo.reshape %97 : (tensor<8x2048xbf16>) -> tensor<8x2048x1xbf16>
    %99 = stablehlo.broadcast_in_dim %arg3, dims = [0, 1, 2] : (tensor<8x2048x1xbf16>) -> tensor<8x2048x12288xbf16>
    %100 = stablehlo.multiply %94, %99 : tensor<8x2048x12288xbf16>
    %101 = stablehlo.multiply %98, %arg2 : tensor<8x2048x1xbf16>
    %102 = stablehlo.negate %100 : tensor<8x2048x12288xbf16>
    %cst_17 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %103 = stablehlo.reduce(%102 init: %cst_17) applies stablehlo.add across dimensions = [2] : (tensor<8x2048x12288xbf16>, tensor<bf16>) -> tensor<8x2048xbf16>
    %104 = stablehlo.reshape %103 : (tensor<8x2048xbf16>) -> tensor<8x2048x1xbf16>
    %105 = stablehlo.add %54, %100 : tensor<8x2048x12288xbf16>
    %106 = stablehlo.convert %101 : (tensor<8x2048x1xbf16>) -> tensor<8x2048x1xf32>
    %cst_18 = stablehlo.constant dense<1.228800e+04> : tensor<f32>
    %107 = stablehlo.broadcast_in_dim %cst_18, dims = [] : (tensor<f32>) -> tensor<8x2048x1xf32>
    %108 = stablehlo.divide %106, %107 : tensor<8x2048x1xf32>
    %cst_19 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %109 = stablehlo.reduce(%108 init: %cst_19) applies stablehlo.add across dimensions = [2] : (tensor<8x2048x1xf32>, tensor<f32>) -> tensor<8x2048xf32>
    %110 = stablehlo.broadcast_in_dim %109, dims = [0, 1] : (tensor<8x2048xf32>) -> tensor<8x2048x12288xf32>
    %111 = stablehlo.convert %110 : (tensor<8x2048x12288xf32>) -> tensor<8x2048x12288xbf16>
    %112 = stablehlo.multiply %111, %arg1 : tensor<8x2048x12288xbf16>
    %113 = stablehlo.negate %112 : tensor<8x2048x12288xbf16>
    %cst_20 = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %114 = stablehlo.reduce(%113 init: %cst_20) applies stablehlo.add across dimensions = [2] : (tensor<8x2048x12288xbf16>, tensor<bf16>) -> tensor<8x2048xbf16>
    %115 = stablehlo.reshape %114 : (tensor<8x2048xbf16>) -> tensor<8x2048x1xbf16>
    %116 = stablehlo.add %105, %112 : tensor<8x2048x12288xbf16>
    %117 = stablehlo.add %104, %115 : tensor<8x2048x1xbf16>
    %118 = stablehlo.convert %117 : (tensor<8x2048x1xbf16>) -> tensor<8x2048x1xf32>
    %cst_21 = stablehlo.constant dense<1.228800e+04> : tensor<f32>
    %119 = stablehlo.broadcast_in_dim %cst_21, dims = [] : (tensor<f32>) -> tensor<8x2048x1xf32>
    %120 = stablehlo.divide %118, %119 : tensor<8x2048x1xf32>
    %cst_22 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %121 = stablehlo.reduce(%120 init: %cst_22) applies stablehlo.add across dimensions = [2] : (tensor<8x2048x1xf32>, tensor<f32>) -> tensor<8x2048xf32>
    %122 = stablehlo.broadcast_in_dim %121, dims = [0, 1] : (tensor<8x2048xf32>) -> tensor<8x2048x12288xf32>
    %123 = stablehlo.convert %122 : (tensor<8x2048x12288xf32>) -> tensor<8x2048x12288xbf16>
    %124 = stablehlo.add %116, %123 : tensor<8x2048x12288xbf16>
    return %124, %95, %25, %18, %1, %56, %88 : tensor<8x2048x12288xbf16>, tensor<12288xbf16>, tensor<12288xbf16>, tensor<12288x49152xbf16>, tensor<49152x12288xbf16>, tensor<12288x12288xbf16>, tensor<12288x36864xbf16>
  }
  func.func private @dynamic_update_index_in_dim_18(%arg0: tensor<96x12288xbf16>, %arg1: tensor<12288xbf16>, %arg2: tensor<i32>) -> tensor<96x12288xbf16> {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [1] : (tensor<12288xbf16>) -> tensor<1x12288xbf16>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.dynamic_update_slice %arg0, %0, %arg2, %c : (tensor<96x12288xbf16>, tensor<1x12288xbf16>, tensor<i32>, tensor<i32>) -> tensor<96x12288xbf16>
    return %1 : tensor<96x12288xbf16>
  }
  func.func private @dynamic_update_index_in_dim_19(%arg0: tensor<96x12288x49152xbf16>, %arg1: tensor<12288x49152xbf16>, %arg2: tensor<i32>) -> tensor<96x12288x49152xbf16> {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [1, 2] : (tensor<12288x49152xbf16>) -> tensor<1x12288x49152xbf16>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.dynamic_update_slice %arg0, %0, %arg2, %c, %c_0 : (tensor<96x12288x49152xbf16>, tensor<1x12288x49152xbf16>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<96x12288x49152xbf16>
    return %1 : tensor<96x12288x49152xbf16>
  }
  func.func private @dynamic_update_index_in_dim_20(%arg0: tensor<96x49152x12288xbf16>, %arg1: tensor<49152x12288xbf16>, %arg2: tensor<i32>) -> tensor<96x49152x12288xbf16> {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [1, 2] : (tensor<49152x12288xbf16>) -> tensor<1x49152x12288xbf16>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.dynamic_update_slice %arg0, %0, %arg2, %c, %c_0 : (tensor<96x49152x12288xbf16>, tensor<1x49152x12288xbf16>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<96x49152x12288xbf16>
    return %1 : tensor<96x49152x12288xbf16>
  }
  func.func private @dynamic_update_index_in_dim_21(%arg0: tensor<96x12288x12288xbf16>, %arg1: tensor<12288x12288xbf16>, %arg2: tensor<i32>) -> tensor<96x12288x12288xbf16> {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [1, 2] : (tensor<12288x12288xbf16>) -> tensor<1x12288x12288xbf16>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.dynamic_update_slice %arg0, %0, %arg2, %c, %c_0 : (tensor<96x12288x12288xbf16>, tensor<1x12288x12288xbf16>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<96x12288x12288xbf16>
    return %1 : tensor<96x12288x12288xbf16>
  }
  func.func private @dynamic_update_index_in_dim_22(%arg0: tensor<96x12288x36864xbf16>, %arg1: tensor<12288x36864xbf16>, %arg2: tensor<i32>) -> tensor<96x12288x36864xbf16> {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [1, 2] : (tensor<12288x36864xbf16>) -> tensor<1x12288x36864xbf16>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.dynamic_update_slice %arg0, %0, %arg2, %c, %c_0 : (tensor<96x12288x36864xbf16>, tensor<1x12288x36864xbf16>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<96x12288x36864xbf16>
    return %1 : tensor<96x12288x36864xbf16>
  }
}
