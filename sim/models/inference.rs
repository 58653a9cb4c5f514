//! Inference of a model: the prefill of a batch of prompts (which fills the
//! key/value cache and gives the first token) and the decode steps that
//! follow, one token per sequence each, reading the whole cache. Both are
//! programs in this project's IR on a `data x tensor` mesh (Megatron's
//! tensor-parallel shardings, the cache split by key/value head), timed on
//! the topology like a training step's chunks; pipeline stages run one
//! after another for the one batch in flight.
//!
//! A decode step attends to the cache and to its own new key and value
//! (which it returns, to be appended in place): the cache is read once,
//! never copied, as a serving engine's paged cache is.

use serde::{Deserialize, Serialize};

use crate::base::DType;
use crate::exec::timed::TimedOptions;
use crate::topology::Topology;

use super::block::{
    attention_inputs, block_forward, block_tail, block_weight_args, block_weight_shapes,
    heads_to_hidden, norm, Acts, BlockWeights, Ctx,
};
use super::emit::{Emitter, Val};
use super::moe::{layer_ctx, EXPERT_AXIS};
use super::spec::ModelSpec;
use super::step::{device_capacity, partitioned, route_time, timed, TimedProgram};
use super::ModelError;

/// How a model is served.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Serving {
    #[serde(default = "one")]
    pub tp: u64,
    #[serde(default = "one")]
    pub pp: u64,
    /// Independent replicas (each serves its own batch).
    #[serde(default = "one")]
    pub dp: u64,
    /// Expert parallelism: groups of `ep` replicas (of the `dp`) each hold
    /// `experts / ep` of every expert layer's routed experts and exchange
    /// their tokens by all-to-all (attention stays data-parallel).
    #[serde(default = "one")]
    pub ep: u64,
    /// Sequences decoded together on one replica.
    #[serde(default = "one")]
    pub batch: u64,
    /// Prompt tokens per sequence.
    pub prompt: u64,
    /// Tokens generated per sequence (the first comes from the prefill).
    #[serde(default = "one")]
    pub generate: u64,
    /// Element type of weights, activations and the cache.
    #[serde(default)]
    pub precision: super::strategy::Precision,
    /// How decode steps run the routed experts of an MoE model.
    #[serde(default)]
    pub routed: RoutedExperts,
}

/// How a decode step runs an MoE layer's routed experts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RoutedExperts {
    /// Gather when it reads fewer weights ([`super::moe::MoeCtx::routed_gather`]:
    /// fewer token slots than experts, no expert parallelism), else dispatch.
    #[default]
    Auto,
    /// GShard's capacity dispatch through every local expert (a grouped
    /// matmul over all of them), as in training.
    Dispatch,
    /// Each token slot's expert matrices gathered by index: only the routed
    /// experts' weights are read (vLLM's and SGLang's fused MoE kernels).
    Gather,
}

impl RoutedExperts {
    /// The name tables and `--routed` use (serde's).
    pub fn name(self) -> &'static str {
        match self {
            RoutedExperts::Auto => "auto",
            RoutedExperts::Dispatch => "dispatch",
            RoutedExperts::Gather => "gather",
        }
    }
}

fn one() -> u64 {
    1
}

impl Serving {
    pub fn dtype(&self) -> DType {
        self.precision.dtype()
    }

    /// Devices of all replicas.
    pub fn devices(&self) -> u64 {
        // Saturating: `check` bounds the product.
        self.tp.saturating_mul(self.pp).saturating_mul(self.dp)
    }

    /// Tokens in the cache at the last decode step, before its own.
    pub fn final_context(&self) -> u64 {
        self.prompt + self.generate.saturating_sub(2)
    }

    /// Check that the serving layout divides the model; errors name the
    /// numbers.
    pub fn check(&self, model: &ModelSpec) -> Result<(), ModelError> {
        let bad = |m: String| Err(ModelError::Strategy(m));
        for (what, v) in [
            ("tp", self.tp),
            ("pp", self.pp),
            ("dp", self.dp),
            ("ep", self.ep),
            ("batch", self.batch),
            ("prompt", self.prompt),
            ("generate", self.generate),
        ] {
            if v == 0 {
                return bad(format!("{what} must be positive"));
            }
        }
        super::strategy::check_tensor_split(model, self.tp)?;
        super::strategy::check_expert_split(model, self.tp, self.ep, self.dp)?;
        if self.routed != RoutedExperts::Auto && model.moe.is_none() {
            return bad(format!(
                "routed = \"{}\" needs a mixture-of-experts model ({} has no experts)",
                self.routed.name(),
                model.name
            ));
        }
        let devices = self.devices();
        if devices > super::strategy::MAX_DEVICES {
            return bad(format!(
                "tp x pp x dp = {} x {} x {} devices: at most {} are supported",
                self.tp,
                self.pp,
                self.dp,
                super::strategy::MAX_DEVICES
            ));
        }
        if self.routed == RoutedExperts::Gather && self.ep > 1 {
            // With expert parallelism the token slots reach their experts'
            // replicas by all-to-all, and the dispatch reads each local
            // expert once: gathering by index would read no fewer weights
            // unless a replica received fewer slots than it holds experts.
            let experts = model.moe.as_ref().map_or(0, |m| m.experts);
            return bad(format!(
                "routed = \"gather\" with ep = {}: each replica's {} local experts ({experts} experts / ep {}) get their token slots by all-to-all and are each read once by the dispatch; gathering experts by index is built only for ep = 1",
                self.ep,
                experts / self.ep,
                self.ep
            ));
        }
        if model.layers % self.pp != 0 {
            return bad(format!(
                "{} layers do not split over pp = {}",
                model.layers, self.pp
            ));
        }
        // The largest tensors (the prefill's attention scores, the cache at
        // the last step) must have sizes a program can state: refuse here,
        // naming the flags, rather than in a generated program's text.
        let context = self.prompt.checked_add(self.generate);
        let scores = context.and_then(|c| {
            [
                self.batch,
                model.heads,
                self.prompt,
                c,
                self.dtype().size_bytes(),
            ]
            .into_iter()
            .try_fold(1u64, u64::checked_mul)
        });
        if scores.map_or(true, |b| b > i64::MAX as u64) {
            return bad(format!(
                "batch {} with prompt {} and generate {}: the attention scores (batch x {} heads x prompt x context) overflow 64-bit sizes",
                self.batch, self.prompt, self.generate, model.heads
            ));
        }
        Ok(())
    }
}

/// Which pass a serving program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The whole prompt at once; returns each layer's keys and values.
    Prefill,
    /// One token per sequence with `context` tokens already cached.
    Decode { context: u64 },
}

impl Phase {
    /// Tokens per sequence the pass computes.
    fn tokens(self, serving: &Serving) -> u64 {
        match self {
            Phase::Prefill => serving.prompt,
            Phase::Decode { .. } => 1,
        }
    }
}

/// What a serving program holds: layers, and whether it embeds the tokens
/// and ends in the head (the logits of each sequence's last token).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    pub layers: u64,
    pub embed: bool,
    pub head: bool,
}

fn ctx(model: &ModelSpec, serving: &Serving, phase: Phase) -> Ctx {
    let tokens = phase.tokens(serving);
    let decode = matches!(phase, Phase::Decode { .. });
    let moe = super::moe::MoeCtx::new(model, serving.batch, tokens, serving.ep).map(|m| {
        let gather = decode
            && match serving.routed {
                RoutedExperts::Auto => m.routed_gather(),
                RoutedExperts::Dispatch => false,
                RoutedExperts::Gather => true,
            };
        super::moe::MoeCtx { gather, ..m }
    });
    Ctx {
        dropout: false,
        moe,
        ..Ctx::of(model, serving.batch, tokens, serving.dtype())
    }
}

const KV_DIMS: [&str; 4] = ["", "tensor", "", ""];

/// The program of `part` for `phase`. Arguments: tokens (`[b, s]`) or the
/// previous stage's activations, each layer's weights (then, decoding, its
/// key and value caches `[b, kv, context, d]`), the embedding and head
/// tables, learned positions or RoPE tables for the tokens' positions.
/// Results: the activations or, with the head, the last token's logits
/// (gathered, for sampling); then each layer's new keys and values.
pub fn serving_program(model: &ModelSpec, serving: &Serving, phase: Phase, part: Part) -> String {
    // A model's layers after its first dense ones stand for every layer.
    let first = model.moe.as_ref().map_or(0, |m| m.dense_layers);
    serving_program_from(model, serving, phase, part, first)
}

/// [`serving_program`] whose layers are the model's from `first_layer` on
/// (dense or with experts as the model says).
pub fn serving_program_from(
    model: &ModelSpec,
    serving: &Serving,
    phase: Phase,
    part: Part,
    first_layer: u64,
) -> String {
    let c = ctx(model, serving, phase);
    // With expert parallelism, one replica's program manual over `expert`
    // (its arguments and results the replica's block), as in training.
    let mut e = if serving.ep > 1 {
        let mut e = Emitter::new(&[(EXPERT_AXIS, serving.ep), ("tensor", serving.tp)]);
        e.manual_over(EXPERT_AXIS);
        e
    } else {
        Emitter::new(&[("data", 1), ("tensor", serving.tp)])
    };
    let input = if part.embed {
        e.arg(&[c.b, c.s], DType::I32, &["", ""])
    } else {
        e.arg(&c.act(), c.dtype, &c.act_dims())
    };
    let mut layers: Vec<(BlockWeights, Option<(Val, Val)>)> = Vec::new();
    for l in 0..part.layers {
        let ws = block_weight_args(&mut e, &layer_ctx(model, &c, first_layer + l));
        let cache = match phase {
            Phase::Prefill => None,
            Phase::Decode { context } => {
                let shape = [c.b, c.kv, context, c.d];
                Some((
                    e.arg(&shape, c.dtype, &KV_DIMS),
                    e.arg(&shape, c.dtype, &KV_DIMS),
                ))
            }
        };
        layers.push((ws, cache));
    }
    let table_dims = ["tensor", ""];
    let embed_table = part
        .embed
        .then(|| e.arg(&[c.vocab, c.h], c.dtype, &table_dims));
    // Tied embeddings (models without RoPE) share one table when a program
    // has both ends.
    let head_table = match (&embed_table, part.head) {
        (Some(t), true) if !model.rope => Some(t.clone()),
        (_, true) => Some(e.arg(&[c.vocab, c.h], c.dtype, &table_dims)),
        _ => None,
    };
    let positions = (part.embed && !model.rope).then(|| e.arg(&[c.s, c.h], c.dtype, &["", ""]));
    let rope = (model.rope && part.layers > 0).then(|| {
        (
            e.arg(&[c.s, c.d], c.dtype, &["", ""]),
            e.arg(&[c.s, c.d], c.dtype, &["", ""]),
        )
    });
    let mut x = match &embed_table {
        Some(table) => {
            let ids = e.reshape(&input, &[c.b, c.s, 1]);
            let x = e.take_rows(table, &ids);
            let x = match &positions {
                Some(p) => {
                    let pb = e.broadcast(p, &[1, 2], &c.act());
                    e.binary("add", &x, &pb)
                }
                None => x,
            };
            e.constrain(&x, &c.act_dims())
        }
        None => input,
    };
    let mut kv_out: Vec<(Val, Vec<&str>)> = Vec::new();
    for (l, (ws, cache)) in layers.iter().enumerate() {
        let lc = layer_ctx(model, &c, first_layer + l as u64);
        let (y, k, v) = match cache {
            None => {
                let (y, acts) = block_forward(&mut e, &lc, &x, ws, rope.as_ref(), 0);
                (y, acts["k"].0.clone(), acts["v"].0.clone())
            }
            Some(cache) => decode_block(&mut e, &lc, &x, ws, rope.as_ref(), cache),
        };
        kv_out.push((k, KV_DIMS.to_vec()));
        kv_out.push((v, KV_DIMS.to_vec()));
        x = y;
    }
    let mut results: Vec<(Val, Vec<&str>)> = Vec::new();
    match &head_table {
        Some(table) => {
            let logits = head_logits(&mut e, &c, &x, table);
            results.push((logits, vec!["", "", ""]));
        }
        None => results.push((x, c.act_dims())),
    }
    results.extend(kv_out);
    let name = match phase {
        Phase::Prefill => "prefill",
        Phase::Decode { .. } => "decode",
    };
    e.finish(name, &results)
}

/// One block decoding one token per sequence against its cache: attention
/// over the cached keys and the token's own, then the rest of the block.
/// Returns the output and the token's key and value (`[b, kv, 1, d]`).
fn decode_block(
    e: &mut Emitter,
    c: &Ctx,
    x: &Val,
    ws: &BlockWeights,
    rope: Option<&(Val, Val)>,
    cache: &(Val, Val),
) -> (Val, Val, Val) {
    let (_, q, k, v) = attention_inputs(e, c, x, ws, rope);
    let (kc, vc) = cache;
    let context = kc.shape[2];
    let batch = (&[0usize, 1][..], &[0usize, 1][..]);
    let cached = e.dot(&q, kc, batch, (&[4], &[3]));
    let own = e.dot(&q, &k, batch, (&[4], &[3]));
    let scores = e.concatenate(&[&cached, &own], 4);
    let scores = e.binary_scalar("multiply", &scores, 1.0 / (c.d as f64).sqrt());
    let mx = e.reduce_last_keep("maximum", &scores, f64::NEG_INFINITY);
    let z = e.binary("subtract", &scores, &mx);
    let ez = e.unary("exponential", &z);
    let se = e.reduce_last_keep("add", &ez, 0.0);
    let p = e.binary("divide", &ez, &se);
    let p_cached = e.slice(&p, 4, 0, context);
    let p_own = e.slice(&p, 4, context, context + 1);
    let from_cache = e.dot(&p_cached, vc, batch, (&[4], &[2]));
    let from_own = e.dot(&p_own, &v, batch, (&[4], &[2]));
    let ctx = e.binary("add", &from_cache, &from_own);
    let ctx = e.constrain(&ctx, &["", "tensor", "", "", ""]);
    let ctx = heads_to_hidden(e, c, &ctx);
    let mut acts = Acts::new();
    let y = block_tail(e, c, x, &ctx, ws, 0, &mut acts);
    (y, k, v)
}

/// Final norm and the vocabulary-parallel logits of each sequence's last
/// token, gathered whole for sampling: `[b, 1, vocab]`.
fn head_logits(e: &mut Emitter, c: &Ctx, x: &Val, table: &Val) -> Val {
    let last = e.slice(x, 1, c.s - 1, c.s);
    let (xf, _) = norm(e, c, &last);
    let logits = e.dot(&xf, table, (&[], &[]), (&[2], &[1]));
    let logits = e.constrain(&logits, &["", "", "tensor"]);
    e.constrain(&logits, &["", "", ""])
}

/// Time of one pass (prefill or one decode step) over the whole model.
#[derive(Debug, Clone, Serialize)]
pub struct PassTiming {
    pub time_ps: u64,
    /// One layer (from programs of one and two layers).
    pub layer: TimedProgram,
    pub embed: TimedProgram,
    pub head: TimedProgram,
    /// Sending one stage's output to the next.
    pub transfer_ps: u64,
}

/// Memory of the fullest device (a first or last pipeline stage).
#[derive(Debug, Clone, Serialize)]
pub struct ServingMemory {
    pub weight_bytes: u64,
    /// Keys and values of the stage's layers at the last decode step.
    pub kv_cache_bytes: u64,
    /// The largest transient of a pass over what it takes and returns.
    pub transient_bytes: u64,
    pub peak_bytes: u64,
    pub capacity_bytes: u64,
    pub fits: bool,
}

/// A simulated generation: prefill, then decode steps to `generate` tokens.
#[derive(Debug, Clone, Serialize)]
pub struct InferenceReport {
    pub model: String,
    pub gpus: u64,
    pub serving: Serving,
    /// Time to first token: the prefill with its head.
    pub ttft_ps: u64,
    pub prefill: PassTiming,
    /// The first decode step (the cache holds the prompt).
    pub decode_first: PassTiming,
    /// The last decode step (the cache holds the prompt and the tokens
    /// generated before it).
    pub decode_last: PassTiming,
    /// Prefill and every decode step (decode time is linear in the cache
    /// length, so the steps sum to their count times the mean of the first
    /// and the last).
    pub generation_ps: u64,
    /// Prompt tokens per second over all replicas during the prefill.
    pub prefill_tokens_per_s: f64,
    /// Generated tokens per second over all replicas at the first decode step.
    pub decode_tokens_per_s: f64,
    /// Generated tokens per second over all replicas, prefill included.
    pub throughput_tokens_per_s: f64,
    pub memory: ServingMemory,
}

/// Simulate serving `model` as `serving` says on `topo` (replica 0 on the
/// first `tp x pp` devices, tensor-parallel ranks fastest).
pub fn simulate_inference(
    model: &ModelSpec,
    serving: &Serving,
    topo: &Topology,
    base: &TimedOptions,
) -> Result<InferenceReport, ModelError> {
    model.check()?;
    serving.check(model)?;
    let gpus = serving.devices();
    if u64::from(topo.num_devices()) < gpus {
        return Err(ModelError::Strategy(format!(
            "tp x pp x dp = {} x {} x {} = {gpus} devices, the topology has {}",
            serving.tp,
            serving.pp,
            serving.dp,
            topo.num_devices()
        )));
    }
    let opts = TimedOptions {
        on_oom: crate::exec::timed::OomPolicy::Continue,
        record_memory: false,
        fuse_attention: base.fusion,
        ..base.clone()
    };
    let prefill = time_pass(model, serving, Phase::Prefill, topo, &opts)?;
    // Serving engines capture decode steps in CUDA graphs.
    let mut opts = opts;
    for p in opts.roofline.values_mut() {
        p.launch_us = p.graph_launch_us.unwrap_or(p.launch_us);
    }
    let context = serving.prompt;
    let last_context = serving.final_context();
    let decode_first = time_pass(model, serving, Phase::Decode { context }, topo, &opts)?;
    let decode_last = if last_context == context {
        decode_first.clone()
    } else {
        time_pass(
            model,
            serving,
            Phase::Decode {
                context: last_context,
            },
            topo,
            &opts,
        )?
    };
    let steps = serving.generate - 1;
    let decode_total =
        steps as u128 * (decode_first.time_ps as u128 + decode_last.time_ps as u128) / 2;
    let ttft_ps = prefill.time_ps;
    // A figure past the time range was printed as u64::MAX ps, with a
    // tokens/s made from it: refuse it instead.
    let generation = ttft_ps as u128 + decode_total;
    if generation >= u128::from(super::pipeline::MAX_STEP_PS) {
        return Err(super::pipeline::too_long("the generation", generation));
    }
    let generation_ps = generation as u64;
    let per_s = |tokens: u64, ps: u64| {
        if ps == 0 {
            0.0
        } else {
            tokens as f64 / (ps as f64 * 1e-12)
        }
    };
    let sequences = serving.dp * serving.batch;
    let memory = serving_memory(model, serving, &prefill, &decode_last, topo)?;
    Ok(InferenceReport {
        model: model.name.clone(),
        gpus,
        serving: serving.clone(),
        ttft_ps,
        prefill_tokens_per_s: per_s(sequences * serving.prompt, prefill.time_ps),
        decode_tokens_per_s: per_s(sequences, decode_first.time_ps),
        throughput_tokens_per_s: per_s(sequences * serving.generate, generation_ps),
        prefill,
        decode_first,
        decode_last,
        generation_ps,
        memory,
    })
}

/// Time one pass: a layer from programs of one and two layers (each adds the
/// same), the embedding and the head alone; stages one after another.
fn time_pass(
    model: &ModelSpec,
    serving: &Serving,
    phase: Phase,
    topo: &Topology,
    opts: &TimedOptions,
) -> Result<PassTiming, ModelError> {
    let time = |part: Part, what: &str| -> Result<TimedProgram, ModelError> {
        let p = partitioned(&serving_program(model, serving, phase, part), what)?;
        timed(&p, topo, opts, what)
    };
    let layers = |n: u64| Part {
        layers: n,
        embed: false,
        head: false,
    };
    let one = time(layers(1), "serving layer")?;
    let two = time(layers(2), "serving layers")?;
    let embed = time(
        Part {
            layers: 0,
            embed: true,
            head: false,
        },
        "embedding",
    )?;
    let head = time(
        Part {
            layers: 0,
            embed: false,
            head: true,
        },
        "head",
    )?;
    let per_layer = |a: u64, b: u64| b.saturating_sub(a);
    let layer = TimedProgram {
        time_ps: per_layer(one.time_ps, two.time_ps),
        arg_bytes: per_layer(one.arg_bytes, two.arg_bytes),
        result_bytes: per_layer(one.result_bytes, two.result_bytes),
        peak_bytes: one.peak_bytes,
        collective_bytes: per_layer(one.collective_bytes, two.collective_bytes),
        compute_ps: per_layer(one.compute_ps, two.compute_ps),
        exposed_comm_ps: per_layer(one.exposed_comm_ps, two.exposed_comm_ps),
    };
    let dtype_bytes = serving.dtype().size_bytes();
    // Each tensor-parallel rank sends its share of the (replicated)
    // activations, as Megatron-LM's scatter-gather does.
    let act_bytes = serving.batch * phase.tokens(serving) * model.hidden * dtype_bytes / serving.tp;
    let transfer_ps = if serving.pp > 1 {
        route_time(topo, 0, serving.tp, act_bytes, "pipeline transfer")?
    } else {
        0
    };
    // `L` layers take `one + (L - 1) x layer`; each of the first dense
    // layers (a model with experts) takes what a dense one adds instead.
    let dense = model.moe.as_ref().map_or(0, |m| m.dense_layers);
    let dense_extra: i128 = if dense > 0 {
        let p = serving_program_from(model, serving, phase, layers(1), 0);
        let d = timed(&partitioned(&p, "dense layer")?, topo, opts, "dense layer")?;
        dense as i128 * (d.time_ps as i128 - one.time_ps as i128)
    } else {
        0
    };
    let layers_time =
        ((one.time_ps + (model.layers - 1) * layer.time_ps) as i128 + dense_extra).max(0) as u64;
    let time_ps = embed.time_ps + layers_time + head.time_ps + (serving.pp - 1) * transfer_ps;
    Ok(PassTiming {
        time_ps,
        layer,
        embed,
        head,
        transfer_ps,
    })
}

/// Weights, the cache at the last decode step and the largest transient on
/// the fullest stage.
fn serving_memory(
    model: &ModelSpec,
    serving: &Serving,
    prefill: &PassTiming,
    decode: &PassTiming,
    topo: &Topology,
) -> Result<ServingMemory, ModelError> {
    let c = ctx(model, serving, Phase::Decode { context: 0 });
    let bytes = serving.dtype().size_bytes();
    let weights_of = |c: &Ctx| -> u64 {
        block_weight_shapes(c)
            .iter()
            .map(|(shape, dims)| {
                let n: u64 = shape.iter().product();
                let split = if dims.contains(&"tensor") {
                    serving.tp
                } else {
                    1
                };
                n / split * bytes
            })
            .sum()
    };
    let layer_weights = weights_of(&c);
    let stage_layers = model.layers / serving.pp;
    // The last stage's dense layers (all of them with one stage).
    let dense = model
        .moe
        .as_ref()
        .map_or(0, |m| m.dense_layers)
        .saturating_sub(model.layers - stage_layers);
    let dense_weights = weights_of(&Ctx {
        moe: None,
        ..c.clone()
    });
    let table = model.vocab / serving.tp * model.hidden * bytes;
    // The fullest stage: with one stage it holds both tables (one when tied).
    let tables = if serving.pp == 1 && model.rope {
        2 * table
    } else {
        table
    };
    let weight_bytes = (stage_layers - dense) * layer_weights + dense * dense_weights + tables;
    let kv_cache_bytes =
        stage_layers * kv_cache_bytes_per_layer(model, serving, serving.final_context() + 1);
    let transient = |t: &TimedProgram| t.peak_bytes.saturating_sub(t.arg_bytes);
    let transient_bytes = [prefill, decode]
        .iter()
        .flat_map(|p| [transient(&p.embed), transient(&p.head)])
        .chain([
            prefill.layer.peak_bytes.saturating_sub(layer_weights),
            decode.layer.peak_bytes.saturating_sub(
                layer_weights + kv_cache_bytes_per_layer(model, serving, serving.final_context()),
            ),
        ])
        .max()
        .unwrap_or(0);
    let capacity_bytes = device_capacity(topo);
    let peak_bytes = weight_bytes + kv_cache_bytes + transient_bytes;
    Ok(ServingMemory {
        weight_bytes,
        kv_cache_bytes,
        transient_bytes,
        peak_bytes,
        capacity_bytes,
        fits: capacity_bytes == 0 || peak_bytes <= capacity_bytes,
    })
}

/// Bytes of one layer's keys and values for `tokens` tokens of every
/// sequence on one device: `2 b tokens (kv / tp) d` elements.
pub fn kv_cache_bytes_per_layer(model: &ModelSpec, serving: &Serving, tokens: u64) -> u64 {
    2 * serving.batch
        * tokens
        * (model.kv_heads() / serving.tp)
        * model.head_dim()
        * serving.dtype().size_bytes()
}
