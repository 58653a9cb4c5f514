//! A model definition as data (`models/*.toml`, unknown fields refused): the
//! transformer's shape and its block variants (GPT: layernorm, learned
//! positions, GeLU MLP, dropout; Llama: RMSNorm, RoPE, SwiGLU, grouped-query
//! attention; MoE: routed experts with top-k and optional shared experts).

use serde::{Deserialize, Serialize};

use super::ModelError;

/// The MLP of a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mlp {
    /// `gelu(x W1) W2`, `ffn_hidden` wide.
    Gelu,
    /// `(silu(x Wg) * x Wu) W2` (Llama): three matrices.
    Swiglu,
}

/// The normalization of a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Norm {
    Layernorm,
    Rmsnorm,
}

/// Mixture of experts replacing the MLP of every block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MoeSpec {
    /// Routed experts.
    pub experts: u64,
    /// Experts each token goes to.
    pub top_k: u64,
    /// Hidden width of one routed expert.
    pub expert_ffn_hidden: u64,
    /// Experts every token goes through (DeepSeek-style), each
    /// `expert_ffn_hidden` wide.
    #[serde(default)]
    pub shared_experts: u64,
    /// The first layers keep a dense MLP `ffn_hidden` wide (DeepSeek's
    /// `first_k_dense_replace`); the others are mixtures of experts.
    #[serde(default)]
    pub dense_layers: u64,
}

/// A transformer language model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub layers: u64,
    pub hidden: u64,
    pub heads: u64,
    /// Key/value heads (grouped-query attention); `heads` when absent.
    #[serde(default)]
    pub kv_heads: Option<u64>,
    /// Width of the MLP (of a dense block).
    pub ffn_hidden: u64,
    pub vocab: u64,
    /// Training sequence length.
    pub seq: u64,
    pub mlp: Mlp,
    pub norm: Norm,
    /// Rotary position embedding (else learned positions, added once).
    #[serde(default)]
    pub rope: bool,
    /// Dropout after attention probabilities, attention and MLP outputs
    /// (GPT-3, Megatron): masks kept for the backward pass.
    #[serde(default)]
    pub dropout: bool,
    #[serde(default)]
    pub moe: Option<MoeSpec>,
}

/// Model files compiled into the binary: `models/<name>.toml`.
pub const PRESETS: &[(&str, &str)] = &[
    ("gpt3-175b", include_str!("../../models/gpt3-175b.toml")),
    ("llama3-8b", include_str!("../../models/llama3-8b.toml")),
    ("llama3-70b", include_str!("../../models/llama3-70b.toml")),
    ("llama3-405b", include_str!("../../models/llama3-405b.toml")),
    (
        "mixtral-8x7b",
        include_str!("../../models/mixtral-8x7b.toml"),
    ),
    (
        "deepseek-moe-16b",
        include_str!("../../models/deepseek-moe-16b.toml"),
    ),
];

impl ModelSpec {
    /// Parse and check a model file.
    pub fn from_toml(text: &str) -> Result<ModelSpec, ModelError> {
        let spec: ModelSpec =
            toml::from_str(text).map_err(|e| ModelError::toml("model", &e, text))?;
        spec.check()?;
        Ok(spec)
    }

    /// A preset by name (see [`PRESETS`]).
    pub fn preset(name: &str) -> Result<ModelSpec, ModelError> {
        let (_, text) = PRESETS.iter().find(|(n, _)| *n == name).ok_or_else(|| {
            let names: Vec<&str> = PRESETS.iter().map(|p| p.0).collect();
            ModelError::Spec(format!(
                "no model preset `{name}` (presets: {})",
                names.join(", ")
            ))
        })?;
        ModelSpec::from_toml(text)
    }

    /// Key/value heads.
    pub fn kv_heads(&self) -> u64 {
        self.kv_heads.unwrap_or(self.heads)
    }

    /// Width of one head.
    pub fn head_dim(&self) -> u64 {
        self.hidden / self.heads
    }

    /// Shape rules every builder relies on.
    pub fn check(&self) -> Result<(), ModelError> {
        let bad = |m: String| Err(ModelError::Spec(format!("model `{}`: {m}", self.name)));
        for (what, v) in [
            ("layers", self.layers),
            ("hidden", self.hidden),
            ("heads", self.heads),
            ("ffn_hidden", self.ffn_hidden),
            ("vocab", self.vocab),
            ("seq", self.seq),
            ("kv_heads", self.kv_heads()),
        ] {
            if v == 0 {
                return bad(format!("{what} must be positive"));
            }
        }
        if self.hidden % self.heads != 0 {
            return bad(format!(
                "hidden {} is not a multiple of heads {}",
                self.hidden, self.heads
            ));
        }
        if self.heads % self.kv_heads() != 0 {
            return bad(format!(
                "heads {} is not a multiple of kv_heads {}",
                self.heads,
                self.kv_heads()
            ));
        }
        if let Some(m) = &self.moe {
            if m.experts == 0 || m.top_k == 0 || m.top_k > m.experts || m.expert_ffn_hidden == 0 {
                return bad(format!(
                    "moe needs 0 < top_k ({}) <= experts ({}) and expert_ffn_hidden > 0",
                    m.top_k, m.experts
                ));
            }
            if m.dense_layers >= self.layers {
                return bad(format!(
                    "moe dense_layers {} must leave an expert layer among {} layers",
                    m.dense_layers, self.layers
                ));
            }
            if self.mlp != Mlp::Swiglu {
                return bad("moe experts are SwiGLU MLPs: mlp must be \"swiglu\"".to_string());
            }
        }
        Ok(())
    }

    /// The mixture of experts of layer `layer` (counted from 0); none for
    /// a dense model and for its first `dense_layers`.
    pub fn moe_at(&self, layer: u64) -> Option<&MoeSpec> {
        self.moe.as_ref().filter(|m| layer >= m.dense_layers)
    }

    /// Layers whose MLP is a mixture of experts.
    pub fn moe_layers(&self) -> u64 {
        self.moe
            .as_ref()
            .map_or(0, |m| self.layers.saturating_sub(m.dense_layers))
    }

    /// Parameters of one block (weights of its matrices; norms and biases
    /// are a rounding error and left out, as the published counts do not):
    /// a mixture-of-experts block for a model with experts.
    pub fn block_params(&self) -> u64 {
        self.block_params_of(self.moe.as_ref())
    }

    /// Parameters of a block with the mixture of experts `moe` (dense MLP
    /// when none).
    fn block_params_of(&self, moe: Option<&MoeSpec>) -> u64 {
        let (h, d) = (self.hidden, self.head_dim());
        let attn = h * h * 2 + 2 * h * self.kv_heads() * d;
        let mlp_mats = match self.mlp {
            Mlp::Gelu => 2,
            Mlp::Swiglu => 3,
        };
        let mlp = match moe {
            None => mlp_mats * h * self.ffn_hidden,
            Some(m) => {
                mlp_mats * h * m.expert_ffn_hidden * (m.experts + m.shared_experts) + h * m.experts
            }
        };
        attn + mlp
    }

    /// Parameters one token goes through: every parameter but the routed
    /// experts it is not sent to (`experts - top_k` of them per block).
    pub fn active_params(&self) -> u64 {
        let idle = match &self.moe {
            Some(m) => {
                let mats = match self.mlp {
                    Mlp::Gelu => 2,
                    Mlp::Swiglu => 3,
                };
                self.moe_layers() * (m.experts - m.top_k) * mats * self.hidden * m.expert_ffn_hidden
            }
            None => 0,
        };
        self.params() - idle
    }

    /// Every parameter: blocks plus the embedding (tied to the output layer
    /// for GPT, separate for Llama-style models) and learned positions.
    pub fn params(&self) -> u64 {
        let embed = self.vocab * self.hidden;
        let (head, positions) = if self.rope {
            (embed, 0)
        } else {
            (0, self.seq * self.hidden)
        };
        let dense = self.layers - self.moe_layers();
        let blocks = dense * self.block_params_of(None)
            + self.moe_layers() * self.block_params_of(self.moe.as_ref());
        blocks + embed + head + positions
    }
}
