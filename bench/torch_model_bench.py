#!/usr/bin/python3
"""PyTorch side of `npm run bench:model`: the same checkpoint, batch, optimizer and decode work as hacrl, timed here.

Usage: torch_model_bench.py INPUT_JSON  — prints one JSON object on stdout.
       torch_model_bench.py --probe THREADS  — times the benchmark's matrix products (THREADS: "1,2") on the OpenBLAS
       kernel this process loaded and prints {"core", "blas", "probe_s": {threads: seconds}}: bench/model.ts runs it
       once per OPENBLAS_CORETYPE to find PyTorch's fastest configuration on this machine.

INPUT_JSON: {"checkpoint": dir, "threads": [1, 2], "precision": "fp32", "train": {"ids": [B][T], "prompt_len": P,
"warmup": n, "steps": n, "adamw": {"lr", "beta1", "beta2", "eps", "weight_decay"}}, "decode": {"prompts": [B][P],
"batches": [1, 16, 64], "new_tokens": N, "repeats": R}}. Either of "train" and "decode" may be missing. Each decode
case runs R times (default 1) and the fastest run (least decode-step time) is reported, as on hacrl's side. The
checkpoint is a Llama-, Qwen2- or Qwen3-style one (tied or untied embeddings, grouped-query attention).

"precision" (default "fp32"): "bf16" runs the training forward and loss, and all of decoding, under
torch.autocast("cpu", dtype=torch.bfloat16), PyTorch's mixed precision as its users run it: fp32 master weights and
AdamW state, the products cast to bfloat16 on oneDNN's bf16 kernels (AVX512_BF16 or AMX where the CPU has them), the
loss in fp32; the decoder's KV cache is then bfloat16 too.

Per thread count, decoding runs first, on the checkpoint's weights, then training, which changes them in place: a
copy is trained while another thread count still needs the original weights, the checkpoint itself for the last one
(no second copy of a 0.5B model beside its gradients and AdamW state).

Training is test/torch/reference_model.py's eager forward (transformers' eager attention with repeat_kv) with the
masked-mean SFT loss, backward and torch.optim.AdamW. Decoding is a greedy loop over a preallocated KV cache written
in plain torch under no_grad, grouped-query attention by reshaping the queries (no repeat_kv copies), doing per step
what hacrl's generate() does: one token through the model, the head, the argmax and the log-prob of that token.
Torch 1.13 has no scaled_dot_product_attention, so eager attention is the fast path here.
"""

import ctypes
import json
import os
import resource
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "torch"))
import reference_model as ref  # noqa: E402


def loaded_openblas():
    """The OpenBLAS this process loaded (through libblas.so.3, torch's BLAS on Debian), or None."""
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if "blas" in line and line.split()[-1].startswith("/")}
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            lib.openblas_get_config.restype = ctypes.c_char_p
            return lib
        except (OSError, AttributeError):
            continue
    return None


OPENBLAS = loaded_openblas()


def blas_description():
    """What torch multiplies matrices with, in words."""
    if OPENBLAS is None:
        return "torch BLAS (not OpenBLAS)"
    config = OPENBLAS.openblas_get_config().decode()
    return f"OpenBLAS (kernel {OPENBLAS.openblas_get_corename().decode()}; {config})"


def openblas_core():
    """The kernel OpenBLAS reports it uses (e.g. "SkylakeX"), or None when torch does not multiply with OpenBLAS."""
    return OPENBLAS.openblas_get_corename().decode() if OPENBLAS is not None else None


# The families the trainer and the decoder here build (ref.llama_like_logits's); GPT-2 is not one of them.
LLAMA_LIKE = ("llama", "qwen2", "qwen3")


def load_model(folder, user):
    """The family, config and tensors of the Llama-, Qwen2- or Qwen3-style checkpoint in folder; `user` names the
    caller in the error."""
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    family = ref.family_of(cfg)
    if family not in LLAMA_LIKE:
        raise ValueError(f"{user} builds {', '.join(LLAMA_LIKE)} models, not {family}")
    return family, cfg, ref.read_checkpoint(folder)


def load_qwen3(folder, user):
    """The config and tensors of the Qwen3-style checkpoint in folder; `user` names the caller in the error."""
    family, cfg, tensors = load_model(folder, user)
    if family != "qwen3":
        raise ValueError(f"{user} builds Qwen3-style models only")
    return cfg, tensors


def params_of(tensors):
    """A ref.Params looking up `tensors` themselves: its constructor clones every tensor, a second copy of the model
    (2 GiB at 0.5B) where the caller needs no original."""
    p = ref.Params({})
    p.tensors = dict(tensors)
    return p


def autocast(precision):
    """PyTorch's mixed precision for `precision` ("fp32": none)."""
    if precision not in ("fp32", "bf16"):
        raise ValueError(f"precision must be fp32 or bf16, got {precision!r}")
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16")


def read_input(argv, usage):
    """The INPUT_JSON named by argv [script, path], with float32 as torch's default dtype; None (and `usage` on
    stderr) for any other argv."""
    if len(argv) != 2:
        sys.stderr.write(usage)
        return None
    with open(argv[1]) as f:
        spec = json.load(f)
    torch.set_default_dtype(torch.float32)
    return spec


def set_threads(n):
    # torch.set_num_threads sizes the OpenMP team only; the pthreads OpenBLAS behind fp32 matmul has its own count.
    torch.set_num_threads(n)
    if OPENBLAS is not None:
        OPENBLAS.openblas_set_num_threads(n)


def train(family, cfg, p, spec, precision="fp32"):
    """Seconds per SFT step (forward, backward, AdamW) of the Params p after warm-up, and the loss of the first step;
    p's tensors are trained in place."""
    ids = torch.tensor(spec["ids"], dtype=torch.int64)
    b, t = ids.shape
    prompt = spec["prompt_len"]
    targets = torch.full((b, t), -1, dtype=torch.int64)
    targets[:, prompt - 1 : t - 1] = ids[:, prompt:]
    valid = (targets >= 0).to(torch.float32)
    tokens = valid.sum()
    positions = torch.arange(t).view(1, t).expand(b, t)
    mask = ref.attention_mask(b, t, [0] * b)
    a = spec["adamw"]
    params = list(p.tensors.values())
    # The same split as hacrl's AdamW default: matrices decay, norm scales do not.
    groups = [
        {"params": [w for w in params if w.dim() >= 2], "weight_decay": a["weight_decay"]},
        {"params": [w for w in params if w.dim() < 2], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=a["lr"], betas=(a["beta1"], a["beta2"]), eps=a["eps"])

    def step():
        with autocast(precision):
            logits = ref.llama_like_logits(family, cfg, p, ids, positions, mask, ref.NO_LORA)
            # The loss from fp32 logits, as autocast users take it: bf16 keeps 3 digits of a log-prob over 50–150k.
            logp = torch.log_softmax(logits.float(), dim=-1)
            logp = logp.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
            loss = -(logp * valid).sum() / tokens
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    first_loss = step()
    for _ in range(spec["warmup"] - 1):
        step()
    times = []
    for _ in range(spec["steps"]):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return {"step_s": times, "tokens": b * t, "first_loss": first_loss}


class Decoder:
    """A Llama-, Qwen2- or Qwen3-style model reading and writing a preallocated KV cache [B, Hkv, capacity, D] per
    layer, multiplying by the given tensors themselves (no copies).

    The checkpoint says what each layer has, as ref.llama_like_logits reads it: a projection has a bias when the
    checkpoint holds one (Qwen2's q/k/v), Qwen3 normalizes q and k per head, and head_dim is the q projection's rows
    per head (Qwen3-0.6B: 128 with 16 heads, wider than hidden / heads). Every product is F.linear on the weight
    itself, as nn.Linear calls it: under autocast that casts each weight that is a leaf requiring grad to bfloat16 once
    per autocast region and reuses the cast, where a product with a view such as w.t() would cast it again every
    step. The cache holds `cache_dtype` (bfloat16 under autocast: its products read it without a cast per step)."""

    def __init__(self, cfg, tensors, capacity, cache_dtype=torch.float32):
        family = ref.family_of(cfg)
        if family not in LLAMA_LIKE:
            raise ValueError(f"the decoder builds {', '.join(LLAMA_LIKE)} models, not {family}")
        p = params_of(tensors)
        h = cfg["hidden_size"]
        inter = cfg["intermediate_size"]
        self.heads = cfg["num_attention_heads"]
        self.kv_heads = cfg.get("num_key_value_heads") or self.heads
        self.head_dim = d = tensors["model.layers.0.self_attn.q_proj.weight"].shape[0] // self.heads
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        self.capacity = capacity
        self.cache_dtype = cache_dtype
        vocab = cfg["vocab_size"]
        self.embed = p("model.embed_tokens.weight", (vocab, h))
        tied = cfg.get("tie_word_embeddings", False)
        self.head = self.embed if tied else p("lm_head.weight", (vocab, h))
        self.norm = p("model.norm.weight", (h,))
        self.layers = []
        for i in range(cfg["num_hidden_layers"]):
            pre = f"model.layers.{i}."

            def proj(name, out_dim, in_dim):
                bias = f"{pre}{name}.bias"
                return p(f"{pre}{name}.weight", (out_dim, in_dim)), p.optional(bias, (out_dim,), bias in tensors)

            self.layers.append(
                {
                    "input_layernorm": p(f"{pre}input_layernorm.weight", (h,)),
                    "post_attention_layernorm": p(f"{pre}post_attention_layernorm.weight", (h,)),
                    "q_norm": p.optional(f"{pre}self_attn.q_norm.weight", (d,), family == "qwen3"),
                    "k_norm": p.optional(f"{pre}self_attn.k_norm.weight", (d,), family == "qwen3"),
                    "q": proj("self_attn.q_proj", self.heads * d, h),
                    "k": proj("self_attn.k_proj", self.kv_heads * d, h),
                    "v": proj("self_attn.v_proj", self.kv_heads * d, h),
                    "o": proj("self_attn.o_proj", h, self.heads * d),
                    "gate": proj("mlp.gate_proj", inter, h),
                    "up": proj("mlp.up_proj", inter, h),
                    "down": proj("mlp.down_proj", h, inter),
                }
            )
        positions = torch.arange(capacity).view(1, capacity)
        self.cos, self.sin = ref.rope_cos_sin(ref.rope_inv_freq(cfg, d), positions)

    def new_cache(self, batch):
        shape = (batch, self.kv_heads, self.capacity, self.head_dim)
        return [tuple(torch.zeros(shape, dtype=self.cache_dtype) for _ in "kv") for _ in self.layers]

    # [B] tensor: each sequence's first real position (left padding before it is masked); None: no padding.
    key_start = None

    def attend(self, q, kc, vc, start):
        """q [B, Hq, S, D] at positions start.. against the cache's first start+S keys; returns [B, S, Hq·D]."""
        b, hq, s, d = q.shape
        hkv = self.kv_heads
        g = hq // hkv
        length = start + s
        # Query head h reads kv head h // g, so the g heads of a group stack as rows of one product.
        scores = q.reshape(b, hkv, g * s, d) @ kc[:, :, :length].transpose(2, 3) / d**0.5
        keys = torch.arange(length).view(1, length)
        if s > 1:
            row = torch.arange(s).repeat(g).view(g * s, 1) + start
            scores = scores.masked_fill(keys > row, float("-inf"))
        if self.key_start is not None:
            scores = scores.masked_fill(keys.view(1, 1, 1, length) < self.key_start.view(b, 1, 1, 1), float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        if self.key_start is not None:  # a padding query sees no key at all: 0, not NaN
            probs = torch.nan_to_num(probs)
        out = probs @ vc[:, :, :length]
        return out.view(b, hkv, g, s, d).permute(0, 3, 1, 2, 4).reshape(b, s, hq * d)

    def forward(self, ids, start, cache):
        """Final hidden states [B, S, hidden] of ids [B, S] at positions start.., writing their keys and values."""
        b, s = ids.shape
        d = self.head_dim
        cos, sin = self.cos[:, :, start : start + s], self.sin[:, :, start : start + s]
        x = F.embedding(ids, self.embed)
        for layer, (kc, vc) in zip(self.layers, cache):
            a = ref.rms_norm(x, layer["input_layernorm"], self.eps)
            q = F.linear(a, *layer["q"]).view(b, s, self.heads, d)
            k = F.linear(a, *layer["k"]).view(b, s, self.kv_heads, d)
            v = F.linear(a, *layer["v"]).view(b, s, self.kv_heads, d)
            if layer["q_norm"] is not None:
                q = ref.rms_norm(q, layer["q_norm"], self.eps)
                k = ref.rms_norm(k, layer["k_norm"], self.eps)
            q, k = (z.transpose(1, 2) for z in (q, k))
            kc[:, :, start : start + s] = k * cos + ref.rotate_half(k) * sin
            vc[:, :, start : start + s] = v.transpose(1, 2)
            x = x + F.linear(self.attend(q * cos + ref.rotate_half(q) * sin, kc, vc, start), *layer["o"])
            m = ref.rms_norm(x, layer["post_attention_layernorm"], self.eps)
            act = F.silu(F.linear(m, *layer["gate"])) * F.linear(m, *layer["up"])
            x = x + F.linear(act, *layer["down"])
        return ref.rms_norm(x, self.norm, self.eps)

    def pick(self, hidden):
        """Greedy next tokens [B] of the last hidden rows [B, hidden], and their log-probs (what generate() keeps)."""
        # fp32 logits under autocast too, as generate loops take them: the log-prob over 50–150k bf16 logits is coarse.
        logits = F.linear(hidden, self.head).float()
        token = logits.argmax(dim=-1)
        log_prob = logits.gather(-1, token.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)
        return token, log_prob


@torch.no_grad()
def decode(decoder, prompts, new_tokens):
    """Prefill seconds, the seconds of each decode step and the greedy tokens [B][new_tokens]: the first token comes
    from the prefill, each of the other new_tokens − 1 from one decode step."""
    ids = torch.tensor(prompts, dtype=torch.int64)
    b, p = ids.shape
    cache = decoder.new_cache(b)
    t0 = time.perf_counter()
    token, _ = decoder.pick(decoder.forward(ids, 0, cache)[:, -1])
    t1 = time.perf_counter()
    out = [token]
    step_s = []
    for step in range(new_tokens - 1):
        s0 = time.perf_counter()
        token, _ = decoder.pick(decoder.forward(token.view(b, 1), p + step, cache)[:, 0])
        step_s.append(time.perf_counter() - s0)
        out.append(token)
    return {"prefill_s": t1 - t0, "step_s": step_s, "tokens": torch.stack(out, dim=1).tolist()}


# The products of the 10M model's training step (B·T = 2048 rows) and of its decode steps (16 and 64 rows), as
# (rows, in, out): q, k/v, o, gate/up, down and the head.
PROBE_SHAPES = [(r, i, o) for r in (2048, 64, 16) for (i, o) in ((320, 256), (320, 128), (256, 320), (320, 960),
                                                                   (960, 320), (320, 8192))]


def probe(threads):
    """Seconds of one pass over PROBE_SHAPES (x @ W^T and the two backward products at 2048 rows), best of 5, per
    thread count."""
    torch.manual_seed(0)
    data = [(torch.randn(r, i), torch.randn(o, i), torch.randn(r, o)) for r, i, o in PROBE_SHAPES]
    out = {}
    for n in threads:
        set_threads(n)
        best = float("inf")
        for _ in range(6):
            t0 = time.perf_counter()
            for x, w, dy in data:
                x @ w.t()
                if x.shape[0] > 64:
                    dy @ w
                    dy.t() @ x
            best = min(best, time.perf_counter() - t0)
        out[str(n)] = best
    return {"core": openblas_core(), "blas": blas_description(), "probe_s": out}


def decode_runs(cfg, tensors, spec, precision):
    """The fastest of spec["repeats"] timed runs per batch of spec["batches"], after an untimed short run each."""
    decoder = Decoder(
        cfg,
        tensors,
        len(spec["prompts"][0]) + spec["new_tokens"],
        torch.bfloat16 if precision == "bf16" else torch.float32,
    )
    out = []
    # One autocast region for all the runs, as a user generating under it: each weight is cast to bf16 once, in the
    # first prefill (hacrl rounds its bf16 copies before its timed runs too), not again in every run's prefill.
    with autocast(precision):
        for b in spec["batches"]:
            # A short untimed pass first, as on hacrl's side: first-call allocations and thread start-up.
            decode(decoder, spec["prompts"][:b], 2)
            runs = [decode(decoder, spec["prompts"][:b], spec["new_tokens"]) for _ in range(spec.get("repeats", 1))]
            out.append(min(runs, key=lambda r: sum(r["step_s"])))
    return out


def main(argv):
    if len(argv) == 3 and argv[1] == "--probe":
        print(json.dumps(probe([int(n) for n in argv[2].split(",")])))
        return 0
    spec = read_input(argv, __doc__)
    if spec is None:
        return 2
    precision = spec.get("precision", "fp32")
    autocast(precision)  # an unknown precision fails before the checkpoint is read
    family, cfg, tensors = load_model(spec["checkpoint"], "the model benchmark")
    # Leaves requiring grad, as a model's parameters are: autocast caches its bf16 casts of such tensors only.
    tensors = {k: v.requires_grad_(True) for k, v in tensors.items()}
    result = {"torch": torch.__version__, "blas": blas_description(), "precision": precision, "runs": []}
    for i, threads in enumerate(spec["threads"]):
        set_threads(threads)
        run = {"threads": threads, "torch_threads": torch.get_num_threads()}
        # Training changes the weights in place: a copy while a later thread count still needs the original ones
        # (of detached tensors: Params clones, and a clone of a leaf requiring grad is no leaf for AdamW).
        last = i == len(spec["threads"]) - 1
        p = params_of(tensors) if last else ref.Params({k: v.detach() for k, v in tensors.items()})
        if "decode" in spec:
            run["decode"] = decode_runs(cfg, p.tensors, spec["decode"], precision)
        if "train" in spec:
            run["train"] = train(family, cfg, p, spec["train"], precision)
        del p
        result["runs"].append(run)
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
