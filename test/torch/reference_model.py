#!/usr/bin/python3
"""Independent PyTorch reference for hacrl's transformer: logits and parameter gradients of a Hugging Face checkpoint.

Written from the semantics of transformers' LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM and GPT2LMHeadModel
(eager attention, float32), without transformers or safetensors installed: only torch and numpy (Debian's
python3-torch). Nothing here is shared with hacrl's TypeScript, so agreement means both follow the published models.

Usage: reference_model.py [--precision=fp32|bf16|autocast] CHECKPOINT_DIR INPUT_JSON OUTPUT [ADAPTER_DIR]

CHECKPOINT_DIR holds config.json and model.safetensors (or shards with model.safetensors.index.json).
INPUT_JSON is {"ids": [B][T], "key_start": [B] (optional: keys before it are masked, positions are
max(0, t - key_start)), "targets": [B][T] (next token, -1 ignored), "weights": [B][T]}.
OUTPUT is a safetensors file (float32) holding "logits" [B, T, V] and, under each parameter's checkpoint name and
layout, the gradient of loss = sum(weights * log_softmax(logits)[target]); its metadata holds the loss. An OUTPUT
ending in .json gets the same as JSON ({"loss", "logits", "grads": {name: {"shape", "data"}}}) for reading by eye.
ADAPTER_DIR, a PEFT LoRA folder (adapter_config.json, adapter_model.safetensors), adds its adapters to the projections
it names, written from PEFT's LoRA semantics (no dropout); the gradients then include those of every lora_A/lora_B
tensor under its PEFT name.
--precision=bf16 rounds both operands of every projection and of the head to bfloat16 (round to nearest even, as
torch's .bfloat16() does) and multiplies in float32; the backward rounds each product's incoming gradient the same
way (hacrl's precision bf16, src/tensor/bf16.ts); the adapters' products stay float32. --precision=autocast runs the forward under
torch.autocast("cpu", dtype=torch.bfloat16) instead (PyTorch's mixed precision: bf16 outputs, attention products in
bf16 too) and writes only the logits, as float32.
"""

import json
import math
import os
import struct
import sys

import numpy as np
import torch

SUPPORTED = {
    "LlamaForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "GPT2LMHeadModel": "gpt2",
}
MODEL_TYPES = {"llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "gpt2": "gpt2"}


# ---------------------------------------------------------------------------------------------------------------
# safetensors, by hand


def _decode(dtype, raw, shape):
    """One tensor's little-endian bytes as a float32 torch tensor."""
    if dtype == "F32":
        arr = np.frombuffer(raw, dtype="<f4")
    elif dtype == "F64":
        arr = np.frombuffer(raw, dtype="<f8").astype(np.float32)
    elif dtype == "F16":
        arr = np.frombuffer(raw, dtype="<f2").astype(np.float32)
    elif dtype == "BF16":
        # bfloat16 is the top half of a float32.
        arr = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
    else:
        raise ValueError(f"unsupported safetensors dtype {dtype}")
    return torch.from_numpy(arr.astype(np.float32).copy()).reshape(shape)


def read_safetensors(path):
    """Every tensor of a safetensors file, as float32 torch tensors by name."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n].decode("utf-8"))
    start = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        out[name] = _decode(info["dtype"], blob[start + begin : start + end], info["shape"])
    return out


def write_safetensors(path, tensors, metadata):
    """Writes float32 tensors (name -> torch tensor) and a string metadata map as a safetensors file."""
    header = {"__metadata__": metadata}
    chunks = []
    offset = 0
    for name, t in tensors.items():
        raw = t.detach().contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    head = json.dumps(header).encode("utf-8")
    head += b" " * (-len(head) % 8)  # the format pads the header to 8 bytes
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for raw in chunks:
            f.write(raw)


def read_checkpoint(folder):
    """The weights of a checkpoint folder: model.safetensors, or the shards its index lists."""
    single = os.path.join(folder, "model.safetensors")
    if os.path.exists(single):
        return read_safetensors(single)
    with open(os.path.join(folder, "model.safetensors.index.json")) as f:
        index = json.load(f)
    out = {}
    for shard in sorted(set(index["weight_map"].values())):
        out.update(read_safetensors(os.path.join(folder, shard)))
    return out


# ---------------------------------------------------------------------------------------------------------------
# parameters


class Params:
    """The checkpoint's tensors as leaf tensors requiring gradients, looked up by their transformers name."""

    def __init__(self, tensors, prefix_alias=""):
        self.tensors = {k: v.clone().requires_grad_(True) for k, v in tensors.items()}
        # openai-community/gpt2 was saved from GPT2Model without the "transformer." prefix.
        self.prefix_alias = prefix_alias
        self.used = {}

    def __call__(self, name, shape):
        """The parameter `name`, checked against the shape the config implies."""
        found = name
        if found not in self.tensors and self.prefix_alias and name.startswith(self.prefix_alias):
            found = name[len(self.prefix_alias) :]
        if found not in self.tensors:
            raise KeyError(f"checkpoint lacks tensor {name!r} (shape {list(shape)})")
        t = self.tensors[found]
        if list(t.shape) != list(shape):
            raise ValueError(f"tensor {name!r} has shape {list(t.shape)}, the config needs {list(shape)}")
        self.used[found] = t
        return t

    def optional(self, name, shape, present):
        """The parameter when the config says it exists, else None."""
        return self(name, shape) if present else None


class Lora:
    """PEFT LoRA adapters by module: delta(x) = (x @ A^T) @ B^T * lora_alpha / r, A [r, in], B [out, r]."""

    def __init__(self, folder):
        with open(os.path.join(folder, "adapter_config.json")) as f:
            cfg = json.load(f)
        self.scale = cfg["lora_alpha"] / cfg["r"]
        self.tensors = {
            k: v.clone().requires_grad_(True)
            for k, v in read_safetensors(os.path.join(folder, "adapter_model.safetensors")).items()
        }

    def delta(self, x, module):
        """The adapter's update of module `module` (a state_dict path without .weight) on input x, or 0 without one."""
        a = self.tensors.get(f"base_model.model.{module}.lora_A.weight")
        if a is None:
            return 0
        b = self.tensors[f"base_model.model.{module}.lora_B.weight"]
        return (x @ a.t()) @ b.t() * self.scale


NO_LORA = type("NoLora", (), {"delta": staticmethod(lambda x, module: 0), "tensors": {}})()

# "fp32", "bf16" or "autocast" (see --precision).
PRECISION = "fp32"


class Bf16Product(torch.autograd.Function):
    """x @ w with both operands rounded to bfloat16 and the product in float32; the backward rounds the incoming
    gradient to bfloat16 too and multiplies it by the rounded operands (hacrl's precision bf16, whose backward
    products are bf16 as autocast's are)."""

    @staticmethod
    def forward(ctx, x, w):
        xr, wr = x.bfloat16().float(), w.bfloat16().float()
        ctx.save_for_backward(xr, wr)
        return xr @ wr

    @staticmethod
    def backward(ctx, grad):
        xr, wr = ctx.saved_tensors
        g = grad.bfloat16().float()
        dw = xr.reshape(-1, xr.shape[-1]).t() @ g.reshape(-1, g.shape[-1])
        return g @ wr.t(), dw


def product(x, w):
    """x @ w as a projection computes it: under --precision=bf16 a Bf16Product, else in float32."""
    return Bf16Product.apply(x, w) if PRECISION == "bf16" else x @ w


def linear(x, w, b=None):
    """nn.Linear: x @ W^T + b with W [out, in]."""
    y = product(x, w.t())
    return y if b is None else y + b


def conv1d(x, w, b):
    """GPT-2's Conv1D: x @ W + b with W [in, out]."""
    return product(x, w) + b


def rms_norm(x, w, eps):
    """LlamaRMSNorm / Qwen2RMSNorm / Qwen3RMSNorm: in float32, x * rsqrt(mean(x^2) + eps) * w."""
    xf = x.to(torch.float32)
    return w * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps))


def gelu_new(x):
    """transformers' NewGELUActivation (GPT-2): the tanh approximation."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


# ---------------------------------------------------------------------------------------------------------------
# attention


def attention_mask(batch, seq_len, key_start):
    """[B, 1, T, T] booleans, True where query i may see key j: j <= i and j >= key_start[b]."""
    i = torch.arange(seq_len).view(1, seq_len, 1)
    j = torch.arange(seq_len).view(1, 1, seq_len)
    ks = torch.tensor(key_start, dtype=torch.int64).view(batch, 1, 1)
    return ((j <= i) & (j >= ks)).unsqueeze(1)


def attend(q, k, v, mask):
    """Eager causal attention over [B, H, T, D] with grouped-query repeat_kv; returns [B, T, H*D]."""
    b, hq, t, d = q.shape
    groups = hq // k.shape[1]
    # repeat_kv: each key/value head serves `groups` consecutive query heads.
    k = k.repeat_interleave(groups, dim=1)
    v = v.repeat_interleave(groups, dim=1)
    scores = (q @ k.transpose(2, 3)) / math.sqrt(d)
    # transformers fills masked scores with the dtype's minimum, so a fully masked (padding) row stays finite.
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    probs = torch.softmax(scores.to(torch.float32), dim=-1)
    return (probs @ v).transpose(1, 2).reshape(b, t, hq * d)


def rotate_half(x):
    """[-x2, x1] of the two halves of the last dimension."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope_inv_freq(cfg, head_dim):
    """The rotary inverse frequencies, with transformers' linear or llama3 rope scaling when the config has one."""
    theta = cfg.get("rope_theta", 10000.0)
    scaling = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
    theta = scaling.get("rope_theta", theta)
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).to(torch.float32) / head_dim))
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind == "default":
        return inv_freq
    if kind == "linear":
        return inv_freq / scaling["factor"]
    if kind != "llama3":
        raise ValueError(f"unsupported rope scaling {kind!r}")
    factor = scaling["factor"]
    low, high = scaling["low_freq_factor"], scaling["high_freq_factor"]
    old = scaling["original_max_position_embeddings"]
    low_freq_wavelen = old / low
    high_freq_wavelen = old / high
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(medium, smoothed, scaled)


def rope_cos_sin(inv_freq, positions):
    """cos and sin [B, 1, T, D] of positions [B, T], as LlamaRotaryEmbedding forms them (float32 outer product)."""
    freqs = positions.to(torch.float32).unsqueeze(-1) * inv_freq.view(1, 1, -1)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().unsqueeze(1), emb.sin().unsqueeze(1)


# ---------------------------------------------------------------------------------------------------------------
# the families


def llama_like_logits(family, cfg, p, ids, positions, mask, lora):
    """LlamaForCausalLM / Qwen2ForCausalLM / Qwen3ForCausalLM forward: logits [B, T, V]."""
    if cfg.get("hidden_act", "silu") != "silu":
        raise ValueError("only hidden_act silu is supported")
    if cfg.get("use_sliding_window"):
        raise ValueError("sliding-window attention is not supported")
    h = cfg["hidden_size"]
    heads = cfg["num_attention_heads"]
    kv_heads = cfg.get("num_key_value_heads") or heads
    head_dim = cfg.get("head_dim") or (128 if family == "qwen3" else h // heads)
    inter = cfg["intermediate_size"]
    vocab = cfg["vocab_size"]
    eps = cfg.get("rms_norm_eps", 1e-6)
    attn_bias = cfg.get("attention_bias", False)
    qkv_bias = True if family == "qwen2" else attn_bias
    o_bias = False if family == "qwen2" else attn_bias
    mlp_bias = cfg.get("mlp_bias", False) if family == "llama" else False
    b, t = ids.shape
    cos, sin = rope_cos_sin(rope_inv_freq(cfg, head_dim), positions)

    def heads_of(x, n):
        return x.view(b, t, n, head_dim)

    x = p("model.embed_tokens.weight", (vocab, h))[ids]
    for layer in range(cfg["num_hidden_layers"]):
        pre = f"model.layers.{layer}."

        def proj(x, name, out_dim, in_dim, bias):
            w = p(f"{pre}{name}.weight", (out_dim, in_dim))
            y = linear(x, w, p.optional(f"{pre}{name}.bias", (out_dim,), bias))
            return y + lora.delta(x, f"{pre}{name}")

        a = rms_norm(x, p(f"{pre}input_layernorm.weight", (h,)), eps)
        q = heads_of(proj(a, "self_attn.q_proj", heads * head_dim, h, qkv_bias), heads)
        k = heads_of(proj(a, "self_attn.k_proj", kv_heads * head_dim, h, qkv_bias), kv_heads)
        v = heads_of(proj(a, "self_attn.v_proj", kv_heads * head_dim, h, qkv_bias), kv_heads)
        if family == "qwen3":
            # Qwen3 normalizes each head of q and k over head_dim before the rotation.
            q = rms_norm(q, p(f"{pre}self_attn.q_norm.weight", (head_dim,)), eps)
            k = rms_norm(k, p(f"{pre}self_attn.k_norm.weight", (head_dim,)), eps)
        q, k, v = (z.transpose(1, 2) for z in (q, k, v))
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        x = x + proj(attend(q, k, v, mask), "self_attn.o_proj", h, heads * head_dim, o_bias)
        m = rms_norm(x, p(f"{pre}post_attention_layernorm.weight", (h,)), eps)
        gate = proj(m, "mlp.gate_proj", inter, h, mlp_bias)
        up = proj(m, "mlp.up_proj", inter, h, mlp_bias)
        x = x + proj(torch.nn.functional.silu(gate) * up, "mlp.down_proj", h, inter, mlp_bias)
    x = rms_norm(x, p("model.norm.weight", (h,)), eps)
    tied = cfg.get("tie_word_embeddings", False)
    head = p("model.embed_tokens.weight", (vocab, h)) if tied else p("lm_head.weight", (vocab, h))
    return linear(x, head)


def gpt2_logits(cfg, p, ids, positions, mask, lora):
    """GPT2LMHeadModel forward: logits [B, T, V]."""
    if cfg.get("activation_function", "gelu_new") not in ("gelu_new", "gelu_pytorch_tanh"):
        raise ValueError("only the tanh GELU is supported")
    if cfg.get("scale_attn_weights") is False or cfg.get("scale_attn_by_inverse_layer_idx"):
        raise ValueError("only scale_attn_weights=True without per-layer scaling is supported")
    h = cfg["n_embd"]
    heads = cfg["n_head"]
    head_dim = h // heads
    inter = cfg.get("n_inner") or 4 * h
    vocab = cfg["vocab_size"]
    eps = cfg.get("layer_norm_epsilon", 1e-5)
    b, t = ids.shape

    def layer_norm(x, name):
        w, bias = p(f"{name}.weight", (h,)), p(f"{name}.bias", (h,))
        return torch.nn.functional.layer_norm(x, (h,), w, bias, eps)

    def conv(x, name, in_dim, out_dim):
        y = conv1d(x, p(f"{name}.weight", (in_dim, out_dim)), p(f"{name}.bias", (out_dim,)))
        return y + lora.delta(x, name)

    def split_heads(z):
        return z.view(b, t, heads, head_dim).transpose(1, 2)

    wte = p("transformer.wte.weight", (vocab, h))
    x = wte[ids] + p("transformer.wpe.weight", (cfg.get("n_positions", 1024), h))[positions]
    for layer in range(cfg["n_layer"]):
        pre = f"transformer.h.{layer}."
        qkv = conv(layer_norm(x, f"{pre}ln_1"), f"{pre}attn.c_attn", h, 3 * h)
        q, k, v = (split_heads(z) for z in qkv.split(h, dim=-1))
        x = x + conv(attend(q, k, v, mask), f"{pre}attn.c_proj", h, h)
        m = gelu_new(conv(layer_norm(x, f"{pre}ln_2"), f"{pre}mlp.c_fc", h, inter))
        x = x + conv(m, f"{pre}mlp.c_proj", inter, h)
    x = layer_norm(x, "transformer.ln_f")
    tied = cfg.get("tie_word_embeddings", True)
    return linear(x, wte if tied else p("lm_head.weight", (vocab, h)))


def family_of(cfg):
    """The family named by config.json's architectures (or, lacking them, model_type)."""
    names = cfg.get("architectures") or []
    for name in names:
        if name in SUPPORTED:
            return SUPPORTED[name]
    if not names and cfg.get("model_type") in MODEL_TYPES:
        return MODEL_TYPES[cfg["model_type"]]
    raise ValueError(f"unsupported architecture {names or cfg.get('model_type')}; supported: {', '.join(SUPPORTED)}")


def run(folder, inputs, lora=NO_LORA):
    """Logits, loss and gradients (by checkpoint name) of the checkpoint in `folder`, with `lora`, on `inputs`."""
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    family = family_of(cfg)
    p = Params(read_checkpoint(folder), "transformer." if family == "gpt2" else "")
    ids = torch.tensor(inputs["ids"], dtype=torch.int64)
    b, t = ids.shape
    key_start = inputs.get("key_start") or [0] * b
    positions = (torch.arange(t).view(1, t) - torch.tensor(key_start, dtype=torch.int64).view(b, 1)).clamp(min=0)
    mask = attention_mask(b, t, key_start)
    forward = gpt2_logits if family == "gpt2" else lambda *a: llama_like_logits(family, *a)
    if PRECISION == "autocast":
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            logits = forward(cfg, p, ids, positions, mask, lora)
        return logits.float(), float("nan"), {}
    logits = forward(cfg, p, ids, positions, mask, lora)
    targets = torch.tensor(inputs["targets"], dtype=torch.int64)
    weights = torch.tensor(inputs["weights"], dtype=torch.float32)
    logp = torch.log_softmax(logits, dim=-1).gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    loss = (torch.where(targets >= 0, weights, torch.zeros_like(weights)) * logp).sum()
    loss.backward()
    used = {**p.used, **lora.tensors}
    grads = {name: (w.grad if w.grad is not None else torch.zeros_like(w)) for name, w in used.items()}
    return logits.detach(), loss.item(), grads


def main(argv):
    """CLI entry point."""
    global PRECISION
    if len(argv) > 1 and argv[1].startswith("--precision="):
        PRECISION = argv[1][len("--precision=") :]
        argv = argv[:1] + argv[2:]
        if PRECISION not in ("fp32", "bf16", "autocast"):
            sys.stderr.write(f"--precision must be fp32, bf16 or autocast, got {PRECISION}\n")
            return 2
    if len(argv) not in (4, 5):
        sys.stderr.write(__doc__)
        return 2
    torch.set_default_dtype(torch.float32)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    folder, input_path, output_path = argv[1:4]
    with open(input_path) as f:
        inputs = json.load(f)
    logits, loss, grads = run(folder, inputs, Lora(argv[4]) if len(argv) == 5 else NO_LORA)
    if output_path.endswith(".json"):
        as_json = {n: {"shape": list(g.shape), "data": g.reshape(-1).tolist()} for n, g in grads.items()}
        with open(output_path, "w") as f:
            json.dump({"loss": loss, "logits": logits.tolist(), "grads": as_json}, f)
    else:
        write_safetensors(output_path, {"logits": logits, **grads}, {"loss": repr(loss), "torch": torch.__version__})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
