#!/usr/bin/python3
"""PyTorch side of `npm run bench:model`: the same checkpoint, batch, optimizer and decode work as hacrl, timed here.

Usage: torch_model_bench.py INPUT_JSON  — prints one JSON object on stdout.
       torch_model_bench.py --probe THREADS  — times the benchmark's matrix products (THREADS: "1,2") on the OpenBLAS
       kernel this process loaded and prints {"core", "blas", "probe_s": {threads: seconds}}: bench/model.ts runs it
       once per OPENBLAS_CORETYPE to find PyTorch's fastest configuration on this machine.

INPUT_JSON: {"checkpoint": dir, "threads": [1, 2], "train": {"ids": [B][T], "prompt_len": P, "warmup": n,
"steps": n, "adamw": {"lr", "beta1", "beta2", "eps", "weight_decay"}}, "decode": {"prompts": [B][P],
"batches": [1, 16, 64], "new_tokens": N, "repeats": R}}. Either of "train" and "decode" may be missing. Each decode
case runs R times (default 1) and the fastest run (least decode-step time) is reported, as on hacrl's side.

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


def load_qwen3(folder, user):
    """The config and tensors of the Qwen3-style checkpoint in folder; `user` names the caller in the error."""
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    if ref.family_of(cfg) != "qwen3":
        raise ValueError(f"{user} builds Qwen3-style models only")
    return cfg, ref.read_checkpoint(folder)


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


def train(cfg, tensors, spec):
    """Seconds per SFT step (forward, backward, AdamW) after warm-up, and the loss of the first step."""
    ids = torch.tensor(spec["ids"], dtype=torch.int64)
    b, t = ids.shape
    prompt = spec["prompt_len"]
    targets = torch.full((b, t), -1, dtype=torch.int64)
    targets[:, prompt - 1 : t - 1] = ids[:, prompt:]
    valid = (targets >= 0).to(torch.float32)
    tokens = valid.sum()
    positions = torch.arange(t).view(1, t).expand(b, t)
    mask = ref.attention_mask(b, t, [0] * b)
    p = ref.Params(tensors)
    a = spec["adamw"]
    params = list(p.tensors.values())
    # The same split as hacrl's AdamW default: matrices decay, norm scales do not.
    groups = [
        {"params": [w for w in params if w.dim() >= 2], "weight_decay": a["weight_decay"]},
        {"params": [w for w in params if w.dim() < 2], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=a["lr"], betas=(a["beta1"], a["beta2"]), eps=a["eps"])

    def step():
        logits = ref.llama_like_logits("qwen3", cfg, p, ids, positions, mask, ref.NO_LORA)
        logp = torch.log_softmax(logits, dim=-1).gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
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
    """A Qwen3-style model reading and writing a preallocated KV cache [B, Hkv, capacity, D] per layer."""

    def __init__(self, cfg, tensors, capacity):
        self.heads = cfg["num_attention_heads"]
        self.kv_heads = cfg.get("num_key_value_heads") or self.heads
        self.head_dim = cfg["head_dim"]
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        self.capacity = capacity
        w = {k: v.detach() for k, v in tensors.items()}
        self.embed = w["model.embed_tokens.weight"]
        self.head = self.embed if cfg.get("tie_word_embeddings", False) else w["lm_head.weight"]
        self.norm = w["model.norm.weight"]
        self.layers = []
        for i in range(cfg["num_hidden_layers"]):
            pre = f"model.layers.{i}."
            names = ["input_layernorm", "post_attention_layernorm", "self_attn.q_norm", "self_attn.k_norm"]
            names += [f"self_attn.{n}_proj" for n in "qkvo"] + [f"mlp.{n}_proj" for n in ("gate", "up", "down")]
            self.layers.append({n.split(".")[-1]: w[f"{pre}{n}.weight"] for n in names})
        positions = torch.arange(capacity).view(1, capacity)
        self.cos, self.sin = ref.rope_cos_sin(ref.rope_inv_freq(cfg, self.head_dim), positions)

    def new_cache(self, batch):
        shape = (batch, self.kv_heads, self.capacity, self.head_dim)
        return [(torch.zeros(shape), torch.zeros(shape)) for _ in self.layers]

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
            q = ref.rms_norm(ref.linear(a, layer["q_proj"]).view(b, s, self.heads, d), layer["q_norm"], self.eps)
            k = ref.rms_norm(ref.linear(a, layer["k_proj"]).view(b, s, self.kv_heads, d), layer["k_norm"], self.eps)
            v = ref.linear(a, layer["v_proj"]).view(b, s, self.kv_heads, d)
            q, k = (z.transpose(1, 2) for z in (q, k))
            kc[:, :, start : start + s] = k * cos + ref.rotate_half(k) * sin
            vc[:, :, start : start + s] = v.transpose(1, 2)
            x = x + ref.linear(self.attend(q * cos + ref.rotate_half(q) * sin, kc, vc, start), layer["o_proj"])
            m = ref.rms_norm(x, layer["post_attention_layernorm"], self.eps)
            act = F.silu(ref.linear(m, layer["gate_proj"])) * ref.linear(m, layer["up_proj"])
            x = x + ref.linear(act, layer["down_proj"])
        return ref.rms_norm(x, self.norm, self.eps)

    def pick(self, hidden):
        """Greedy next tokens [B] of the last hidden rows [B, hidden], and their log-probs (what generate() keeps)."""
        logits = hidden @ self.head.t()
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


def main(argv):
    if len(argv) == 3 and argv[1] == "--probe":
        print(json.dumps(probe([int(n) for n in argv[2].split(",")])))
        return 0
    spec = read_input(argv, __doc__)
    if spec is None:
        return 2
    folder = spec["checkpoint"]
    cfg, tensors = load_qwen3(folder, "the model benchmark")
    result = {"torch": torch.__version__, "blas": blas_description(), "runs": []}
    for threads in spec["threads"]:
        set_threads(threads)
        run = {"threads": threads, "torch_threads": torch.get_num_threads()}
        if "train" in spec:
            run["train"] = train(cfg, tensors, spec["train"])
        if "decode" in spec:
            d = spec["decode"]
            decoder = Decoder(cfg, tensors, len(d["prompts"][0]) + d["new_tokens"])
            run["decode"] = []
            for b in d["batches"]:
                # A short untimed pass first, as on hacrl's side: first-call allocations and thread start-up.
                decode(decoder, d["prompts"][:b], 2)
                runs = [decode(decoder, d["prompts"][:b], d["new_tokens"]) for _ in range(d.get("repeats", 1))]
                run["decode"].append(min(runs, key=lambda r: sum(r["step_s"])))
        result["runs"].append(run)
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
