"""GPT-3 175B-shaped training step (bf16, Megatron data x model shardings, SGD), exported by JAX with
abstract shapes only (nothing is allocated): one version scanning over stacked layers (a while loop), one
unrolled. They are the inputs of `shardsim bench pipeline` (the scanned program must cost at most 1/10 of
the unrolled one).
Usage (a venv with jax, outside the build): python models/gpt3_175b_train.py [LAYERS=96]
writes gpt3_175b_train_scan_<L>.mlir and gpt3_175b_train_unrolled_<L>.mlir into the current directory."""
import os, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P, AxisType
L = int(sys.argv[1]) if len(sys.argv) > 1 else 96
D, H, F, S, B, V = 12288, 96, 49152, 2048, 8, 51200
mesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(AxisType.Auto,) * 2)
bf = jnp.bfloat16
def ln(x, g):
    m = jnp.mean(x, -1, keepdims=True); v = jnp.mean((x - m) ** 2, -1, keepdims=True)
    return (x - m) * jax.lax.rsqrt(v + 1e-5) * g
def layer(x, p):
    b, s, d = x.shape
    h = ln(x, p["g1"])
    q, k, v = jnp.split(h @ p["wqkv"], 3, -1)
    q, k, v = (t.reshape(b, s, H, d // H) for t in (q, k, v))
    att = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) / (d // H) ** 0.5, -1)
    x = x + jnp.einsum("bhqk,bkhd->bqhd", att, v).reshape(b, s, d) @ p["wo"]
    return x + jax.nn.gelu(ln(x, p["g2"]) @ p["w1"]) @ p["w2"]
def specs(lead):
    return dict(wqkv=P(*lead, None, "model"), wo=P(*lead, "model", None), w1=P(*lead, None, "model"),
                w2=P(*lead, "model", None), g1=P(*lead, None), g2=P(*lead, None))
def shapes(lead):
    sh = lambda *s: jax.ShapeDtypeStruct((*lead, *s), bf)
    return dict(wqkv=sh(D, 3 * D), wo=sh(D, D), w1=sh(D, F), w2=sh(F, D), g1=sh(D), g2=sh(D))
def step(scan):
    def loss(p, t):
        x = p["emb"][t]
        if scan:
            x, _ = jax.lax.scan(lambda c, lp: (layer(c, lp), None), x, p["blocks"])
        else:
            for lp in p["blocks"]:
                x = layer(x, lp)
        return jnp.mean(x @ p["emb"].T)
    def f(p, t):
        l, g = jax.value_and_grad(loss)(p, t)
        return jax.tree.map(lambda a, b: a - 1e-4 * b, p, g), l
    return f
for scan in (True, False):
    blocks = shapes((L,)) if scan else [shapes(()) for _ in range(L)]
    bspec = specs((None,)) if scan else [specs(())] * L
    p = dict(emb=jax.ShapeDtypeStruct((V, D), bf), blocks=blocks)
    ps = dict(emb=P("model", None), blocks=bspec)
    t = jax.ShapeDtypeStruct((B, S), jnp.int32)
    sh = lambda s: jax.tree.map(lambda x: NamedSharding(mesh, x), s, is_leaf=lambda x: isinstance(x, P))
    f = jax.jit(step(scan), in_shardings=(sh(ps), NamedSharding(mesh, P("data", None))))
    name = f"gpt3_175b_train_{'scan' if scan else 'unrolled'}_{L}.mlir"
    open(name, "w").write(f.lower(p, t).as_text())
    print(name, os.path.getsize(name))
