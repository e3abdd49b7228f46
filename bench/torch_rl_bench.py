#!/usr/bin/python3
"""PyTorch side of `npm run bench:rl`: one agent's RL step on the same initial weights, timed as hacrl times its own.

Usage: torch_rl_bench.py INPUT_JSON  — prints one JSON object on stdout.

INPUT_JSON: {"checkpoint": dir, "threads": n, "prompts": [[ids]...] (batch·(steps+1) prompts, already rendered and
tokenized by the agent's tokenizer), "batch": B, "group_size": G, "max_new_tokens": N, "eos_id", "pad_id",
"mini_batches": M, "lr", "clip", "seed"}.

Per step, as hacrl's rlStep does: sample G responses per prompt (temperature 1, 64 sequences per generation call,
prompts left-padded and masked, a preallocated KV cache, stop at EOS) — the generate part; then the old log-probs of
every response from a no-grad forward pass (16 sequences at a time) and M mini-batch updates (forward, GRPO's clipped
token ratio loss averaged per sequence, backward, gradient-norm clip 1, AdamW) — the train part. Rewards are not
computed here (hacrl's score part is its reward functions): the advantages are seeded standard-normal draws, which
cost the update the same arithmetic. The first step warms up and is not counted.
"""

import json
import os
import resource
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "torch"))
import reference_model as ref  # noqa: E402
from torch_model_bench import Decoder, blas_description, load_qwen3, openblas_core, read_input, set_threads  # noqa: E402


@torch.no_grad()
def sample(decoder, prompts, max_new, eos, pad, gen):
    """Responses (token lists, ending at EOS or at max_new) to the prompts, sampled at temperature 1."""
    b = len(prompts)
    longest = max(len(p) for p in prompts)
    ids = torch.full((b, longest), pad, dtype=torch.int64)
    for i, p in enumerate(prompts):
        ids[i, longest - len(p) :] = torch.tensor(p)
    decoder.key_start = torch.tensor([longest - len(p) for p in prompts])
    cache = decoder.new_cache(b)
    hidden = decoder.forward(ids, 0, cache)[:, -1]
    out = [[] for _ in prompts]
    running = torch.ones(b, dtype=torch.bool)
    for step in range(max_new):
        logits = hidden @ decoder.head.t()
        token = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=gen).view(b)
        for i in range(b):
            if running[i]:
                out[i].append(int(token[i]))
        running &= token != eos
        if not running.any() or step == max_new - 1:
            break
        hidden = decoder.forward(token.view(b, 1), longest + step, cache)[:, 0]
    return out


def token_log_probs(cfg, p, prompts, responses, pad):
    """Per-response log-prob tensors (differentiable when p's tensors are) from one right-padded forward pass."""
    seqs = [pr + rs for pr, rs in zip(prompts, responses)]
    t = max(len(s) for s in seqs)
    b = len(seqs)
    ids = torch.full((b, t), pad, dtype=torch.int64)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
    positions = torch.arange(t).view(1, t).expand(b, t)
    logits = ref.llama_like_logits("qwen3", cfg, p, ids, positions, ref.attention_mask(b, t, [0] * b), ref.NO_LORA)
    logp = torch.log_softmax(logits, dim=-1)
    out = []
    for i, (pr, rs) in enumerate(zip(prompts, responses)):
        rows = torch.arange(len(pr) - 1, len(pr) - 1 + len(rs))
        out.append(logp[i, rows, torch.tensor(rs, dtype=torch.int64)])
    return out


def main(argv):
    spec = read_input(argv, __doc__)
    if spec is None:
        return 2
    set_threads(spec["threads"])
    cfg, tensors = load_qwen3(spec["checkpoint"], "the RL peer")
    p = ref.Params(tensors)
    params = list(p.tensors.values())
    opt = torch.optim.AdamW(params, lr=spec["lr"], weight_decay=0.01)
    gen = torch.Generator().manual_seed(spec["seed"])
    b, g, m = spec["batch"], spec["group_size"], spec["mini_batches"]
    eos, pad, clip = spec["eos_id"], spec["pad_id"], spec["clip"]
    all_prompts = spec["prompts"]
    steps = len(all_prompts) // b
    timings = []
    for step in range(steps):
        jobs = [q for q in all_prompts[step * b : (step + 1) * b] for _ in range(g)]
        capacity = max(len(q) for q in jobs) + spec["max_new_tokens"]
        # The decoder reads the current weights (no copies: detach shares storage).
        decoder = Decoder(cfg, {k: v.detach() for k, v in p.tensors.items()}, capacity)
        t0 = time.perf_counter()
        responses = []
        for i in range(0, len(jobs), 64):
            responses += sample(decoder, jobs[i : i + 64], spec["max_new_tokens"], eos, pad, gen)
        t1 = time.perf_counter()
        with torch.no_grad():
            old = []
            for i in range(0, len(jobs), 16):
                old += [x.detach() for x in token_log_probs(cfg, p, jobs[i : i + 16], responses[i : i + 16], pad)]
        adv = torch.randn(len(jobs), generator=gen)
        order = torch.randperm(len(jobs), generator=gen).tolist()
        size = -(-len(jobs) // m)
        for start in range(0, len(jobs), size):
            batch = order[start : start + size]
            lps = token_log_probs(cfg, p, [jobs[i] for i in batch], [responses[i] for i in batch], pad)
            losses = []
            for lp, i in zip(lps, batch):
                ratio = torch.exp(lp - old[i])
                surrogate = torch.minimum(ratio * adv[i], torch.clamp(ratio, 1 - clip, 1 + clip) * adv[i])
                losses.append(-surrogate.mean())
            loss = torch.stack(losses).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
        t2 = time.perf_counter()
        if step > 0:
            timings.append((t1 - t0, t2 - t1, sum(len(r) for r in responses)))
    n = max(1, len(timings))
    gen_s = sum(t[0] for t in timings) / n
    tokens = sum(t[2] for t in timings) / n
    print(
        json.dumps(
            {
                "torch": torch.__version__,
                "blas": blas_description(),
                "openblas_coretype": openblas_core(),
                "time_generate_s": gen_s,
                "time_score_s": 0.0,
                "time_train_s": sum(t[1] for t in timings) / n,
                "generated_tokens": tokens,
                "generate_tokens_per_s": tokens / gen_s if gen_s > 0 else None,
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
