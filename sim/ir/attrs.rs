//! Typed attributes of the structured ops real JAX programs use: gather and
//! scatter dimension numbers, convolution dimension numbers and window, and the
//! window of `reduce_window`. Field names follow the StableHLO spec.

/// `#stablehlo.gather<...>` plus `slice_sizes`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct GatherDims {
    pub offset_dims: Vec<u64>,
    pub collapsed_slice_dims: Vec<u64>,
    pub operand_batching_dims: Vec<u64>,
    pub start_indices_batching_dims: Vec<u64>,
    pub start_index_map: Vec<u64>,
    pub index_vector_dim: u64,
}

/// `#stablehlo.scatter<...>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ScatterDims {
    pub update_window_dims: Vec<u64>,
    pub inserted_window_dims: Vec<u64>,
    pub input_batching_dims: Vec<u64>,
    pub scatter_indices_batching_dims: Vec<u64>,
    pub scatter_dims_to_operand_dims: Vec<u64>,
    pub index_vector_dim: u64,
}

/// Which tensor dim plays which role in a convolution
/// (`[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ConvDims {
    pub input_batch: u64,
    pub input_feature: u64,
    pub input_spatial: Vec<u64>,
    pub kernel_input_feature: u64,
    pub kernel_output_feature: u64,
    pub kernel_spatial: Vec<u64>,
    pub output_batch: u64,
    pub output_feature: u64,
    pub output_spatial: Vec<u64>,
}

/// A convolution's `window = {...}`; absent entries keep their defaults (and
/// are printed only when they were written).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ConvWindow {
    pub stride: Option<Vec<i64>>,
    pub pad: Option<Vec<(i64, i64)>>,
    pub lhs_dilate: Option<Vec<i64>>,
    pub rhs_dilate: Option<Vec<i64>>,
    pub reverse: Option<Vec<bool>>,
}

impl ConvWindow {
    /// Strides per spatial dim (default 1).
    pub fn strides(&self, n: usize) -> Vec<i64> {
        self.stride.clone().unwrap_or_else(|| vec![1; n])
    }

    /// `(low, high)` padding per spatial dim (default 0).
    pub fn padding(&self, n: usize) -> Vec<(i64, i64)> {
        self.pad.clone().unwrap_or_else(|| vec![(0, 0); n])
    }

    /// Input dilation per spatial dim (default 1).
    pub fn lhs_dilation(&self, n: usize) -> Vec<i64> {
        self.lhs_dilate.clone().unwrap_or_else(|| vec![1; n])
    }

    /// Kernel dilation per spatial dim (default 1).
    pub fn rhs_dilation(&self, n: usize) -> Vec<i64> {
        self.rhs_dilate.clone().unwrap_or_else(|| vec![1; n])
    }

    /// Kernel reversal per spatial dim (default false).
    pub fn reversal(&self, n: usize) -> Vec<bool> {
        self.reverse.clone().unwrap_or_else(|| vec![false; n])
    }
}

/// The window of `stablehlo.reduce_window`; absent entries keep their
/// defaults (and are printed only when they were written).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct WindowAttrs {
    pub dimensions: Vec<u64>,
    pub strides: Option<Vec<u64>>,
    pub base_dilations: Option<Vec<u64>>,
    pub window_dilations: Option<Vec<u64>>,
    pub padding: Option<Vec<(i64, i64)>>,
}

impl WindowAttrs {
    /// Strides per dim (default 1).
    pub fn strides_or_default(&self) -> Vec<u64> {
        self.strides
            .clone()
            .unwrap_or_else(|| vec![1; self.dimensions.len()])
    }

    /// Base (input) dilations per dim (default 1).
    pub fn base_dilations_or_default(&self) -> Vec<u64> {
        self.base_dilations
            .clone()
            .unwrap_or_else(|| vec![1; self.dimensions.len()])
    }

    /// Window dilations per dim (default 1).
    pub fn window_dilations_or_default(&self) -> Vec<u64> {
        self.window_dilations
            .clone()
            .unwrap_or_else(|| vec![1; self.dimensions.len()])
    }

    /// `(low, high)` padding per dim (default 0).
    pub fn padding_or_default(&self) -> Vec<(i64, i64)> {
        self.padding
            .clone()
            .unwrap_or_else(|| vec![(0, 0); self.dimensions.len()])
    }
}

/// `stablehlo.rng_bit_generator` algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RngAlgorithm {
    Default,
    ThreeFry,
    Philox,
}

impl RngAlgorithm {
    pub const ALL: [RngAlgorithm; 3] = [
        RngAlgorithm::Default,
        RngAlgorithm::ThreeFry,
        RngAlgorithm::Philox,
    ];

    /// The spelling in `algorithm = THREE_FRY`.
    pub fn name(self) -> &'static str {
        match self {
            RngAlgorithm::Default => "DEFAULT",
            RngAlgorithm::ThreeFry => "THREE_FRY",
            RngAlgorithm::Philox => "PHILOX",
        }
    }
}

/// `stablehlo.custom_call` targets JAX emits around shardings and for host
/// offloading, which shardsim understands; every other target is refused by
/// the verifier unless the op carries its own custom sharding rule.
pub const KNOWN_CUSTOM_CALLS: [&str; 6] = [
    "Sharding",
    "SPMDFullToShardShape",
    "SPMDShardToFullShape",
    "MoveToHost",
    "MoveToDevice",
    "LayoutConstraint",
];

/// Custom calls that keep their one operand's value (memory-space moves and
/// layout pins): identities to the interpreter, pointwise to propagation,
/// element-wise to the op-priority schedule (as Shardy's host offloading).
pub const IDENTITY_CUSTOM_CALLS: [&str; 3] = ["MoveToHost", "MoveToDevice", "LayoutConstraint"];

/// Custom-call targets Shardy's registry maps every dim to one factor
/// (markers, element-wise math, x64 emulation halves, blockwise linear
/// algebra helpers): operands and results share one shape, element types
/// may differ.
pub const POINTWISE_CUSTOM_CALLS: [&str; 10] = [
    "annotate_device_placement",
    "Cholesky",
    "CompactWyHelper",
    "InspectSharding",
    "InvertDiagBlocksLowerTriangular",
    "InvertDiagBlocksUpperTriangular",
    "mhlo.erf",
    "X64SplitHigh",
    "X64SplitLow",
    "xla.megascale.provide_metadata",
];

/// Custom-call targets with a rule of their own in Shardy's registry
/// (`rules::custom_call`); the verifier checks the types that rule reads.
pub const RULED_CUSTOM_CALLS: [&str; 8] = [
    "X64Combine",
    "Eigh",
    "Qr",
    "QrDecompositionBlock",
    "ProductOfElementaryHouseholderReflectors",
    "mhlo.topk",
    "ApproxTopK",
    "PartialReduce",
];

/// Custom-call targets Shardy deliberately gives no rule (host callbacks,
/// debug logs, opaque kernels): accepted with their types as written,
/// propagation does not cross them, the interpreter refuses them.
pub const NO_RULE_CUSTOM_CALLS: [&str; 6] = [
    "tpu_custom_call",
    "xla_python_cpu_callback",
    "xla_python_gpu_callback",
    "xla_ffi_python_cpu_callback",
    "xla_ffi_python_gpu_callback",
    "xla.debug.Log",
];

/// Every custom call the rule registry knows, list by list (for messages).
pub const REGISTRY_CUSTOM_CALLS: [&[&str]; 3] = [
    &POINTWISE_CUSTOM_CALLS,
    &RULED_CUSTOM_CALLS,
    &NO_RULE_CUSTOM_CALLS,
];
