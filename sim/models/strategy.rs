//! A parallel strategy: how a model's training step is spread over devices
//! (data, tensor, pipeline, context and expert parallelism, ZeRO stage,
//! recomputation, pipeline schedule, overlap), checked against the model.

use serde::{Deserialize, Serialize};

use super::spec::ModelSpec;
use super::ModelError;

/// Most devices a strategy may use (a mesh's limit, 65,536).
pub const MAX_DEVICES: u64 = 1 << 16;

/// Most (microbatch, model chunk) forward passes one step schedules.
pub const MAX_PIPELINE_PASSES: u64 = 1 << 20;

/// Activation recomputation (Korthikanti et al. 2022).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Recompute {
    /// Every activation the backward pass needs is kept.
    #[default]
    None,
    /// The attention core (scores, softmax, its dropout) is recomputed.
    Selective,
    /// Only each layer's input is kept; the backward pass reruns the forward.
    Full,
}

/// The order of microbatches in a pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Schedule {
    /// All forwards, then all backwards (Huang et al. 2019).
    Gpipe,
    /// One forward, one backward in steady state (PipeDream-Flush).
    #[default]
    #[serde(rename = "1f1b")]
    OneFOneB,
    /// 1F1B over `virtual_stages` model chunks per device (Narayanan et al. 2021).
    Interleaved,
}

/// How a training step is parallelized.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Strategy {
    #[serde(default = "one")]
    pub tp: u64,
    #[serde(default = "one")]
    pub pp: u64,
    #[serde(default = "one")]
    pub dp: u64,
    /// Context parallelism: the sequence split over `cp` devices (ring attention).
    #[serde(default = "one")]
    pub cp: u64,
    /// Expert parallelism (MoE): experts split over `ep` devices of the data axis.
    #[serde(default = "one")]
    pub ep: u64,
    /// Model chunks per pipeline device (interleaved schedule).
    #[serde(default = "one")]
    pub virtual_stages: u64,
    /// Sequences per microbatch per data-parallel replica.
    #[serde(default = "one")]
    pub micro_batch: u64,
    /// Sequences per step over all replicas.
    pub global_batch: u64,
    /// ZeRO stage: 0 (replicated), 1 (optimizer states sharded over data),
    /// 2 (and gradients), 3 (and parameters: FSDP).
    #[serde(default)]
    pub zero: u8,
    #[serde(default)]
    pub recompute: Recompute,
    /// Megatron sequence parallelism: norms and dropouts split over `tp`.
    #[serde(default)]
    pub sequence_parallel: bool,
    #[serde(default)]
    pub schedule: Schedule,
    /// The distributed optimizer's parameter all-gather overlapped with the
    /// next step's forward passes (Megatron's `--overlap-param-gather`);
    /// needs `zero` 1 or 2.
    #[serde(default)]
    pub overlap_param_gather: bool,
    /// Tensor-parallel communication overlapped with the matmuls
    /// (Megatron-Core's `--tp-comm-overlap` with Transformer Engine); needs
    /// `sequence_parallel`.
    #[serde(default)]
    pub tp_comm_overlap: bool,
    /// Attention as one fused kernel (scores never reach memory).
    #[serde(default)]
    pub flash_attention: bool,
    /// Data-parallel gradient reduction overlapped with the last backward pass.
    #[serde(default)]
    pub overlap_grad_reduce: bool,
    /// Without flash attention: the attention probabilities' dropout runs as
    /// a kernel of its own, as in Megatron-LM's 2021 code (a batched matmul
    /// writes the scores, one fused scale-mask-softmax kernel writes the
    /// probabilities, PyTorch's dropout reads them and writes the dropped
    /// probabilities and the mask; the backward likewise applies the mask in
    /// a kernel before the fused softmax gradient). The probabilities, and
    /// in the backward their gradient, cross memory once more each (4 bytes
    /// per score in 16-bit types) than when a compiler fuses softmax and
    /// dropout into one kernel (off).
    #[serde(default)]
    pub separate_attention_dropout: bool,
    /// The loss as Megatron-LM's vocab-parallel cross-entropy computes it
    /// (`vocab_parallel_cross_entropy`, its default without a fused loss):
    /// the logits copied to fp32, then max, subtract, exp, sum and divide
    /// each a PyTorch kernel of its own over the fp32 copy (38 bytes per
    /// logit in 16-bit types), the fp32 softmax kept for the backward, which
    /// scales it in place and converts it back (14 bytes per logit). Off: a
    /// compiler's fused softmax in the compute type.
    #[serde(default)]
    pub unfused_cross_entropy: bool,
    /// Pipeline sends and receives block the stage, as in Megatron-LM's
    /// 2021 schedules (Narayanan et al.): `batch_isend_irecv`, a wait on
    /// every request and a device synchronize between passes, so a stage
    /// computes nothing while its activation or gradient travels. Off: the
    /// transfers only delay the receiver (Megatron-Core overlaps them).
    #[serde(default)]
    pub blocking_p2p: bool,
    /// Element type of parameters and activations: `bf16` (mixed precision,
    /// the default) or `f32`.
    #[serde(default)]
    pub precision: Precision,
    /// Gradients accumulated over microbatches and reduced over the data
    /// replicas in fp32 (Megatron-LM's `--accumulate-allreduce-grads-in-fp32`,
    /// which it turns on for bf16 unless `--grad-reduce-in-bf16`): 4 bytes
    /// per parameter in the accumulators and on the wire.
    #[serde(default)]
    pub accumulate_allreduce_grads_in_fp32: bool,
    /// Each weight-gradient matmul writes into its gradient accumulator in
    /// the accumulator's type (Megatron-LM's gradient-accumulation fusion,
    /// on by default since 2022: `wgrad_gemm_accum_fp32`, Transformer
    /// Engine's `fuse_wgrad_accumulation`): with fp32 accumulators the
    /// matmul reads and writes the accumulator in its epilogue
    /// (`C = A B + C`), no weight gradient is written apart and no add
    /// kernel runs (bf16 accumulators: no change). Off: the gradient is
    /// written in the compute type and added by a kernel of its own
    /// (`--no-gradient-accumulation-fusion`, and the 2021 code).
    #[serde(default)]
    pub gradient_accumulation_fusion: bool,
    /// Layers on the first pipeline stage, split evenly over its virtual
    /// stages; the stages between share what the first and last leave
    /// (Megatron-Core's `--decoder-first-pipeline-num-layers`). Unset: an
    /// even split.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_stage_layers: Option<u64>,
    /// Layers on the last pipeline stage (Megatron-Core's
    /// `--decoder-last-pipeline-num-layers`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_stage_layers: Option<u64>,
    /// The embedding counts as one layer where the layers are split into
    /// stages, so the first chunk holds one layer fewer (Megatron-Core's
    /// `--account-for-embedding-in-pipeline-split`; Llama 3 405B's 126
    /// layers on 16 stages).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub embedding_in_pipeline_split: bool,
    /// The output layer and loss count as one layer where the layers are
    /// split, so the last chunk holds one layer fewer
    /// (`--account-for-loss-in-pipeline-split`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub loss_in_pipeline_split: bool,
}

/// Element type of parameters and activations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Precision {
    #[default]
    Bf16,
    F32,
}

impl Precision {
    /// The element type.
    pub fn dtype(self) -> crate::base::DType {
        match self {
            Precision::Bf16 => crate::base::DType::BF16,
            Precision::F32 => crate::base::DType::F32,
        }
    }
}

fn one() -> u64 {
    1
}

impl Strategy {
    /// Parse a strategy table (`[strategy]` of a model run, or inline TOML).
    pub fn from_toml(text: &str) -> Result<Strategy, ModelError> {
        toml::from_str(text).map_err(|e| ModelError::toml("strategy", &e, text))
    }

    /// Parse a strategy file, where `global_batch` may be left out: it is
    /// then `dp x micro_batch x pp`, one microbatch per stage and replica,
    /// as `train` takes it without a file. Also says whether the file gave
    /// it (a flag may still set it or the sizes it defaults from).
    pub fn from_file_toml(text: &str) -> Result<(Strategy, bool), ModelError> {
        let table = text.parse::<toml::Table>().ok();
        let given = table
            .as_ref()
            .map_or(true, |t| t.contains_key("global_batch"));
        // Only plain keys may precede it (a table header would swallow
        // it, and is an unknown field anyway); appended at the end, every
        // located error of the file keeps its line and column.
        let plain = table
            .as_ref()
            .is_some_and(|t| t.values().all(|v| !v.is_table()));
        if given || !plain {
            return Ok((Strategy::from_toml(text)?, true));
        }
        let mut s = Strategy::from_toml(&format!("{text}\nglobal_batch = 1\n"))?;
        s.global_batch = s.default_global_batch()?;
        Ok((s, false))
    }

    /// `dp x micro_batch x pp`: one microbatch per stage and replica.
    pub fn default_global_batch(&self) -> Result<u64, ModelError> {
        self.dp
            .checked_mul(self.micro_batch)
            .and_then(|b| b.checked_mul(self.pp))
            .ok_or_else(|| {
                ModelError::Strategy(format!(
                    "the default global_batch dp x micro_batch x pp = {} x {} x {} overflows 64 bits",
                    self.dp, self.micro_batch, self.pp
                ))
            })
    }

    /// The element type of parameters and activations.
    pub fn dtype(&self) -> crate::base::DType {
        self.precision.dtype()
    }

    /// The element type of the gradient accumulators and their reduction.
    pub fn grad_dtype(&self) -> crate::base::DType {
        if self.accumulate_allreduce_grads_in_fp32 {
            crate::base::DType::F32
        } else {
            self.dtype()
        }
    }

    /// Devices the strategy uses.
    pub fn devices(&self) -> u64 {
        // Saturating: callers may ask before `check` bounds the product.
        self.tp
            .saturating_mul(self.pp)
            .saturating_mul(self.dp)
            .saturating_mul(self.cp)
    }

    /// The strategy the gradient reduction and the optimizer run under:
    /// Megatron-LM reduces gradients and shards the distributed optimizer
    /// over the data x context group (`dp x cp` ranks, context ranks
    /// fastest), so for them context ranks are more data replicas.
    pub fn reduction(&self) -> Strategy {
        Strategy {
            dp: self.dp * self.cp,
            cp: 1,
            ..self.clone()
        }
    }

    /// Microbatches each pipeline runs per step.
    pub fn microbatches(&self) -> u64 {
        self.global_batch / self.dp.saturating_mul(self.micro_batch).max(1)
    }

    /// Layers of each model chunk in model order (chunk `c` of stage `s`
    /// at `c x pp + s`), split as Megatron-Core splits them: each stage's
    /// layers evenly over its virtual stages; the stages evenly, or the first
    /// and last given their own counts, or the embedding and the loss each
    /// counted as a layer. Every error names the numbers.
    pub fn chunk_layers(&self, model: &ModelSpec) -> Result<Vec<u64>, ModelError> {
        let bad = |m: String| Err(ModelError::Strategy(m));
        let (p, v, l) = (self.pp.max(1), self.virtual_stages.max(1), model.layers);
        let uneven = self.first_stage_layers.is_some() || self.last_stage_layers.is_some();
        let counted = self.embedding_in_pipeline_split || self.loss_in_pipeline_split;
        if uneven && counted {
            return bad("first_stage_layers / last_stage_layers and embedding_in_pipeline_split / loss_in_pipeline_split do not go together (Megatron-Core refuses both)".into());
        }
        if (uneven || counted) && p == 1 {
            return bad(format!(
                "{} needs pipeline stages (pp above 1), not pp = 1",
                if uneven {
                    "first_stage_layers / last_stage_layers"
                } else {
                    "embedding_in_pipeline_split / loss_in_pipeline_split"
                }
            ));
        }
        let embed = u64::from(self.embedding_in_pipeline_split);
        let loss = u64::from(self.loss_in_pipeline_split);
        // Before anything is allocated: a chunk needs a layer, or the
        // embedding or the loss standing in for one.
        let chunks = p.checked_mul(v).filter(|&c| c <= l + embed + loss);
        let Some(chunks) = chunks else {
            return bad(format!(
                "{l} layers do not split into pp x virtual_stages = {p} x {v} chunks"
            ));
        };
        let stage_layers: Vec<u64> = if uneven {
            let (mut left, mut stages_left) = (l, p);
            for (what, n) in [
                ("first_stage_layers", self.first_stage_layers),
                ("last_stage_layers", self.last_stage_layers),
            ] {
                if let Some(n) = n {
                    left = match left.checked_sub(n) {
                        Some(left) => left,
                        None => {
                            return bad(format!(
                                "{what} = {n}: the model has {l} layers, {left} of them left for that stage"
                            ))
                        }
                    };
                    stages_left -= 1;
                }
            }
            let middle = match stages_left {
                0 if left == 0 => 0,
                0 => {
                    return bad(format!(
                        "first_stage_layers + last_stage_layers = {} of pp = 2 stages must be the model's {l} layers",
                        l - left
                    ))
                }
                n if left % n == 0 => left / n,
                n => {
                    return bad(format!(
                        "{left} layers left by first_stage_layers / last_stage_layers do not split over the {n} other stages"
                    ))
                }
            };
            (0..p)
                .map(
                    |s| match (s, self.first_stage_layers, self.last_stage_layers) {
                        (0, Some(n), _) => n,
                        (s, _, Some(n)) if s + 1 == p => n,
                        _ => middle,
                    },
                )
                .collect()
        } else {
            let slots = l + embed + loss;
            if !counted && l % chunks != 0 {
                return bad(format!(
                    "{l} layers do not split into pp x virtual_stages = {p} x {v} chunks (first_stage_layers / last_stage_layers or embedding_in_pipeline_split / loss_in_pipeline_split split them unevenly)"
                ));
            }
            if slots % p != 0 {
                return bad(format!(
                    "{l} layers + {} (embedding and loss counted as layers) = {slots} do not split over pp = {p} stages",
                    embed + loss
                ));
            }
            vec![slots / p; p as usize]
        };
        if let Some((s, n)) = stage_layers.iter().enumerate().find(|(_, &n)| n % v != 0) {
            return bad(format!(
                "stage {s}'s {n} layers do not split over virtual_stages = {v}"
            ));
        }
        let mut out: Vec<u64> = (0..chunks)
            .map(|c| stage_layers[(c % p) as usize] / v)
            .collect();
        // Even splits give every chunk at least one slot (`chunks` is at
        // most the slots), so the embedding or loss always has one to take.
        let last = out.len() - 1;
        out[0] -= embed;
        out[last] -= loss;
        // A chunk with nothing in it would be a stage that only forwards.
        let empty = (0..chunks as usize).find(|&c| {
            out[c] == 0
                && !(c == 0 && (embed == 1 || uneven))
                && !(c == last && (loss == 1 || uneven))
        });
        if let Some(c) = empty {
            return bad(format!(
                "model chunk {c} (stage {}, virtual stage {}) holds no layers",
                c as u64 % p,
                c as u64 / p
            ));
        }
        Ok(out)
    }

    /// Check that the strategy divides the model and the batch; every error
    /// names the numbers.
    pub fn check(&self, model: &ModelSpec) -> Result<(), ModelError> {
        let bad = |m: String| Err(ModelError::Strategy(m));
        for (what, v) in [
            ("tp", self.tp),
            ("pp", self.pp),
            ("dp", self.dp),
            ("cp", self.cp),
            ("ep", self.ep),
            ("virtual_stages", self.virtual_stages),
            ("micro_batch", self.micro_batch),
            ("global_batch", self.global_batch),
        ] {
            if v == 0 {
                return bad(format!("{what} must be positive"));
            }
        }
        if self.zero > 3 {
            return bad(format!("zero stage {} is not 0, 1, 2 or 3", self.zero));
        }
        // Products of the sizes are checked before anything divides by
        // them: a wrapped product was a division by zero (a panic) or a
        // count of 0 devices.
        let devices = [self.tp, self.pp, self.dp, self.cp]
            .into_iter()
            .try_fold(1u64, u64::checked_mul)
            .filter(|&d| d <= MAX_DEVICES);
        if devices.is_none() {
            return bad(format!(
                "tp x pp x dp x cp = {} x {} x {} x {} devices: at most {MAX_DEVICES} are supported",
                self.tp, self.pp, self.dp, self.cp
            ));
        }
        check_tensor_split(model, self.tp)?;
        let chunks = self.chunk_layers(model)?.len() as u64;
        if self.virtual_stages > 1 && self.schedule != Schedule::Interleaved {
            return bad(format!(
                "virtual_stages = {} needs schedule = \"interleaved\"",
                self.virtual_stages
            ));
        }
        // Model chunks interleave across pipeline stages: with one stage
        // there is nothing to interleave (Megatron-LM refuses it too).
        if self.virtual_stages > 1 && self.pp == 1 {
            return bad(format!(
                "virtual_stages = {} needs pipeline stages (pp above 1): with pp = 1 there is nothing to interleave",
                self.virtual_stages
            ));
        }
        let replica_batch = self.dp.checked_mul(self.micro_batch).unwrap_or(0);
        if replica_batch == 0 || self.global_batch % replica_batch != 0 {
            return bad(format!(
                "global_batch {} is not a multiple of dp x micro_batch = {} x {}",
                self.global_batch, self.dp, self.micro_batch
            ));
        }
        let m = self.microbatches();
        // The schedule times every microbatch on every chunk (about 170
        // bytes each): 2^20 of them take 0.2 GB and 1.8 s (loaded 2-core box),
        // while a global batch of 10^12 asked for 48 TB and aborted.
        if m.saturating_mul(chunks) > MAX_PIPELINE_PASSES {
            return bad(format!(
                "{m} microbatches (global_batch {} / (dp x micro_batch = {} x {})) on pp x virtual_stages = {} x {} chunks: at most {MAX_PIPELINE_PASSES} microbatch passes per chunk are simulated in all",
                self.global_batch, self.dp, self.micro_batch, self.pp, self.virtual_stages
            ));
        }
        if self.schedule == Schedule::Interleaved && m % self.pp != 0 {
            return bad(format!(
                "the interleaved schedule needs microbatches ({m}) to be a multiple of pp ({})",
                self.pp
            ));
        }
        if self.sequence_parallel && model.seq % self.tp != 0 {
            return bad(format!(
                "sequence {} does not split over tp = {} (sequence_parallel)",
                model.seq, self.tp
            ));
        }
        if self.overlap_param_gather && !matches!(self.zero, 1 | 2) {
            return bad(format!(
                "overlap_param_gather needs a distributed optimizer (zero 1 or 2), not zero {}",
                self.zero
            ));
        }
        if self.tp_comm_overlap && !self.sequence_parallel {
            return bad(format!(
                "tp_comm_overlap needs sequence_parallel (tp = {}): Transformer Engine overlaps the sequence-parallel all-gathers and reduce-scatters",
                self.tp
            ));
        }
        // Without context parallelism the sequence stays whole: any length.
        if self.cp > 1 && model.seq % (2 * self.cp) != 0 {
            return bad(format!(
                "sequence {} does not split into 2 x cp = 2 x {} chunks (context parallelism gives each rank two)",
                model.seq, self.cp
            ));
        }
        if self.cp > 1 && self.sequence_parallel && model.seq % (2 * self.cp * self.tp) != 0 {
            return bad(format!(
                "sequence {} does not split over 2 x cp x tp = 2 x {} x {} (context and sequence parallelism)",
                model.seq, self.cp, self.tp
            ));
        }
        if self.cp > 1 && self.tp_comm_overlap {
            return bad(format!(
                "tp_comm_overlap is not built with cp = {} (context parallelism)",
                self.cp
            ));
        }
        check_expert_split(model, self.tp, self.ep, self.dp)?;
        // Each context rank routes its own tokens through every expert;
        // expert parallelism carved from the data x context ranks
        // (Megatron-Core's expert-data group) is not built.
        if model.moe.is_some() && self.cp > 1 && self.ep > 1 {
            return bad(format!(
                "cp = {} with ep = {} (`{}`): expert parallelism over context-parallel ranks is not built; use ep = 1 with context parallelism",
                self.cp, self.ep, model.name
            ));
        }
        Ok(())
    }
}

/// A mixture-of-experts model's experts split over `ep` (which divides the
/// `dp` data replicas) and its expert FFNs over `tp`; `ep > 1` needs experts.
pub fn check_expert_split(model: &ModelSpec, tp: u64, ep: u64, dp: u64) -> Result<(), ModelError> {
    let bad = |m: String| Err(ModelError::Strategy(m));
    match &model.moe {
        Some(moe) if moe.experts % ep != 0 => {
            return bad(format!(
                "{} experts do not split over ep = {ep}",
                moe.experts
            ))
        }
        Some(moe) => {
            let shared = moe.shared_experts * moe.expert_ffn_hidden;
            if moe.expert_ffn_hidden % tp != 0 || shared % tp != 0 {
                return bad(format!(
                    "expert_ffn_hidden {} (shared {shared}) does not split over tp = {tp}",
                    moe.expert_ffn_hidden
                ));
            }
        }
        None if ep > 1 => return bad(format!("ep = {ep} needs a mixture-of-experts model")),
        None => {}
    }
    if dp % ep != 0 {
        return bad(format!(
            "ep = {ep} must divide dp = {dp} (experts split over data replicas)"
        ));
    }
    Ok(())
}

/// Heads, key/value heads, the MLP width and the vocabulary must split over
/// `tp` tensor-parallel ranks; the error names the numbers.
pub fn check_tensor_split(model: &ModelSpec, tp: u64) -> Result<(), ModelError> {
    if model.heads % tp != 0 || model.kv_heads() % tp != 0 {
        return Err(ModelError::Strategy(format!(
            "{} heads ({} key/value heads) do not split over tp = {tp}",
            model.heads,
            model.kv_heads(),
        )));
    }
    if model.ffn_hidden % tp != 0 || model.vocab % tp != 0 {
        return Err(ModelError::Strategy(format!(
            "ffn_hidden {} or vocab {} does not split over tp = {tp}",
            model.ffn_hidden, model.vocab
        )));
    }
    Ok(())
}
