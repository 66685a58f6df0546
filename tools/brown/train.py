#!/usr/bin/env python3
"""Trains the small Qwen3-architecture model of data/brown/ on the Brown corpus (see README.md here).

The model is written out as it runs in zinc: the qwen3 forward pass of docs/models.md §3 (pre-norm decoder,
GQA attention with per-head Q/K RMSNorm and NeoX RoPE, SwiGLU FFN, the head tied to the embedding). Training
uses bf16 autocast on a GPU (f32 on a CPU, for a quick local run) with AdamW, a cosine schedule and dropout, and
keeps the weights of the step with the lowest validation loss. Those weights are rounded to bf16, so the BF16 GGUF
holds exactly the model that was evaluated.

usage: train.py --config config.json --train T.npy --valid V.npy --heldout H.npy --out DIR [--steps N] [--hf-check]
T, V, H: uint16 token ids (numpy .npy) of the training, validation and held-out documents. Writes DIR/weights.bin
(f32 values, GGUF names), DIR/weights.json (name -> offset, shape in ggml order), DIR/train_log.json and, with
--hf-check, DIR/hf_logits.npy and DIR/hf_ids.npy: transformers' float32 logits of the rounded weights on the first
positions of the held-out ids (a reference for zinc's engine).
"""
import argparse
import json
import math
import os
import time

import numpy as np
import torch
import torch.nn.functional as F


def attention(q, k, v, dropout):
    """Causal attention; torch's fused kernel where it has one."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=dropout)
    T = q.shape[-2]
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    s = s.masked_fill(torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return F.dropout(torch.softmax(s.float(), dim=-1).to(q.dtype), dropout) @ v


def rms_norm(x, w, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


class Qwen3(torch.nn.Module):
    def __init__(self, c, n_vocab, dropout):
        super().__init__()
        self.c, self.dropout = c, dropout
        d, hd, L = c["n_embd"], c["head_dim"], c["n_layer"]
        self.embd = torch.nn.Parameter(torch.randn(n_vocab, d) * 0.02)
        self.out_norm = torch.nn.Parameter(torch.ones(d))
        lin = lambda o, i, std=0.02: torch.nn.Parameter(torch.randn(o, i) * std)
        resid_std = 0.02 / math.sqrt(2 * L)
        self.layers = torch.nn.ModuleList()
        for _ in range(L):
            p = torch.nn.ParameterDict({
                "attn_norm": torch.nn.Parameter(torch.ones(d)),
                "q": lin(c["n_head"] * hd, d), "k": lin(c["n_head_kv"] * hd, d), "v": lin(c["n_head_kv"] * hd, d),
                "q_norm": torch.nn.Parameter(torch.ones(hd)), "k_norm": torch.nn.Parameter(torch.ones(hd)),
                "o": lin(d, c["n_head"] * hd, resid_std),
                "ffn_norm": torch.nn.Parameter(torch.ones(d)),
                "gate": lin(c["n_ff"], d), "up": lin(c["n_ff"], d), "down": lin(d, c["n_ff"], resid_std)})
            self.layers.append(p)
        inv = c["rope_base"] ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
        ang = torch.arange(c["n_ctx"], dtype=torch.float64)[:, None] * inv[None, :]
        self.register_buffer("cos", torch.cos(ang).float(), persistent=False)
        self.register_buffer("sin", torch.sin(ang).float(), persistent=False)

    def rope(self, x):  # x: B, H, T, hd; NeoX pairs (i, i + hd/2)
        T, half = x.shape[2], x.shape[3] // 2
        cos, sin = self.cos[:T].to(x.dtype), self.sin[:T].to(x.dtype)
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)

    def forward(self, ids):
        c, eps = self.c, self.c["rms_eps"]
        B, T = ids.shape
        H, Hkv, hd = c["n_head"], c["n_head_kv"], c["head_dim"]
        drop = self.dropout if self.training else 0.0
        x = self.embd[ids]
        for p in self.layers:
            h = rms_norm(x, p["attn_norm"], eps)
            q = (h @ p["q"].t()).view(B, T, H, hd)
            k = (h @ p["k"].t()).view(B, T, Hkv, hd)
            v = (h @ p["v"].t()).view(B, T, Hkv, hd)
            q = self.rope(rms_norm(q, p["q_norm"], eps).transpose(1, 2))
            k = self.rope(rms_norm(k, p["k_norm"], eps).transpose(1, 2))
            v = v.transpose(1, 2)
            k = k.repeat_interleave(H // Hkv, dim=1)
            v = v.repeat_interleave(H // Hkv, dim=1)
            a = attention(q, k, v, drop)
            a = a.transpose(1, 2).reshape(B, T, H * hd)
            x = x + F.dropout(a @ p["o"].t(), drop, self.training)
            h = rms_norm(x, p["ffn_norm"], eps)
            f = F.silu(h @ p["gate"].t()) * (h @ p["up"].t())
            x = x + F.dropout(f @ p["down"].t(), drop, self.training)
        return rms_norm(x, self.out_norm, eps) @ self.embd.t()

    def gguf_tensors(self):
        """(GGUF name, f32 array in torch layout) for every weight; ggml's order reverses the torch shape."""
        t = [("token_embd.weight", self.embd), ("output_norm.weight", self.out_norm)]
        names = {"attn_norm": "attn_norm", "q": "attn_q", "k": "attn_k", "v": "attn_v", "q_norm": "attn_q_norm",
                 "k_norm": "attn_k_norm", "o": "attn_output", "ffn_norm": "ffn_norm", "gate": "ffn_gate",
                 "up": "ffn_up", "down": "ffn_down"}
        for i, p in enumerate(self.layers):
            for key, name in names.items():
                t.append((f"blk.{i}.{name}.weight", p[key]))
        return [(n, w.detach().float().cpu().numpy()) for n, w in t]


def windows(ids, n, T, gen):
    starts = torch.randint(0, len(ids) - T - 1, (n,), generator=gen)
    x = torch.stack([ids[s:s + T + 1] for s in starts.tolist()])
    return x[:, :-1], x[:, 1:]


@torch.no_grad()
def mean_loss(model, ids, T, device, autocast):
    model.eval()
    n = (len(ids) - 1) // T
    total, count = 0.0, 0
    for i in range(0, n, 16):
        xs = [ids[j * T:(j + 1) * T + 1] for j in range(i, min(n, i + 16))]
        x = torch.stack(xs).to(device)
        with autocast():
            logits = model(x[:, :-1])
        total += F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1),
                                 reduction="sum").item()
        count += x[:, 1:].numel()
    model.train()
    return total / count


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--train", required=True)
    ap.add_argument("--valid", required=True)
    ap.add_argument("--heldout", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--hf-check", action="store_true")
    args = ap.parse_args()

    c = json.load(open(args.config))
    train = torch.from_numpy(np.load(args.train).astype(np.int64))
    valid = torch.from_numpy(np.load(args.valid).astype(np.int64))
    held = torch.from_numpy(np.load(args.heldout).astype(np.int64))
    n_vocab = int(max(train.max(), valid.max(), held.max())) + 1
    n_vocab = max(n_vocab, c.get("n_vocab", 0))
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    autocast = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if cuda else (lambda: torch.autocast("cpu", enabled=False))
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
    model = Qwen3(c, n_vocab, args.dropout).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), **({"fused": True} if cuda else {}))
    warmup = max(1, args.steps // 20)
    sched = lambda s: min(1.0, (s + 1) / warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, s / args.steps))))
    T = c["n_ctx"]
    print(f"model: {n_params} parameters, vocabulary {n_vocab}; tokens: train {len(train)}, validation "
          f"{len(valid)}, held out {len(held)}; {device}", flush=True)

    log, best, best_state = [], float("inf"), None
    t0 = time.time()
    for step in range(args.steps + 1):
        if step % args.eval_every == 0 or step == args.steps:
            loss = mean_loss(model, valid, T, device, autocast)
            log.append({"step": step, "valid_loss": loss, "seconds": time.time() - t0})
            print(f"step {step}: validation loss {loss:.4f} (ppl {math.exp(loss):.2f}), {time.time() - t0:.0f} s",
                  flush=True)
            if loss < best:
                best, best_state = loss, {k: v.detach().clone() for k, v in model.state_dict().items()}
        if step == args.steps:
            break
        for g in opt.param_groups:
            g["lr"] = args.lr * sched(step)
        x, y = windows(train, args.batch, T, gen)
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        with autocast():
            logits = model(x)
        loss = F.cross_entropy(logits.float().reshape(-1, n_vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    model.load_state_dict(best_state)
    with torch.no_grad():  # the model is its bf16 weights
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).float())
    model.eval()
    f32 = lambda: torch.autocast(device, enabled=False)
    final_valid, final_held = mean_loss(model, valid, T, device, f32), mean_loss(model, held, T, device, f32)
    print(f"best validation loss {best:.4f}; rounded to bf16, in f32: validation {final_valid:.4f}, held out "
          f"{final_held:.4f} (ppl {math.exp(final_held):.2f}, windows of {T} tokens)", flush=True)

    os.makedirs(args.out, exist_ok=True)
    index, offset = {}, 0
    with open(os.path.join(args.out, "weights.bin"), "wb") as f:
        for name, w in model.gguf_tensors():
            data = np.ascontiguousarray(w, dtype="<f4")
            f.write(data.tobytes())
            index[name] = {"offset": offset, "shape": list(reversed(w.shape))}
            offset += data.nbytes
    json.dump(index, open(os.path.join(args.out, "weights.json"), "w"), indent=1)
    json.dump({"parameters": n_params, "n_vocab": n_vocab, "args": vars(args), "log": log, "best_valid_loss": best,
               "rounded_valid_loss": final_valid, "rounded_heldout_loss": final_held},
              open(os.path.join(args.out, "train_log.json"), "w"), indent=1)

    if args.hf_check:
        hf_check(model, c, n_vocab, held, args.out)


def hf_check(model, c, n_vocab, held, out):
    """transformers' Qwen3 with the same weights: its float32 logits must be ours."""
    from transformers import Qwen3Config, Qwen3ForCausalLM
    cfg = Qwen3Config(vocab_size=n_vocab, hidden_size=c["n_embd"], intermediate_size=c["n_ff"],
                      num_hidden_layers=c["n_layer"], num_attention_heads=c["n_head"],
                      num_key_value_heads=c["n_head_kv"], head_dim=c["head_dim"], hidden_act="silu",
                      rope_parameters={"rope_type": "default", "rope_theta": c["rope_base"]},
                      rms_norm_eps=c["rms_eps"], max_position_embeddings=c["n_ctx"], tie_word_embeddings=True,
                      attention_bias=False)
    hf = Qwen3ForCausalLM(cfg).float().eval()
    sd = {"model.embed_tokens.weight": model.embd, "model.norm.weight": model.out_norm}
    names = {"attn_norm": "input_layernorm", "q": "self_attn.q_proj", "k": "self_attn.k_proj",
             "v": "self_attn.v_proj", "q_norm": "self_attn.q_norm", "k_norm": "self_attn.k_norm",
             "o": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm", "gate": "mlp.gate_proj",
             "up": "mlp.up_proj", "down": "mlp.down_proj"}
    for i, p in enumerate(model.layers):
        for key, name in names.items():
            sd[f"model.layers.{i}.{name}.weight"] = p[key]
    sd = {k: v.detach().float().cpu() for k, v in sd.items()}
    missing, unexpected = hf.load_state_dict(sd, strict=False)
    missing = [m for m in missing if m != "lm_head.weight"]
    if missing or unexpected:
        raise SystemExit(f"transformers state dict: missing {missing}, unexpected {unexpected}")
    ids = held[:64].view(1, -1)
    model.cpu().float().eval()
    with torch.no_grad():
        ref = hf(input_ids=ids, use_cache=False).logits[0].float()
        ours = model(ids)[0].float()
    rel = (ours - ref).norm() / ref.norm()
    print(f"transformers vs this model, f32, 64 positions: rel L2 {rel.item():.3e}, "
          f"argmax agree {(ours.argmax(-1) == ref.argmax(-1)).sum().item()}/64", flush=True)
    np.save(os.path.join(out, "hf_logits.npy"), ref[:32].numpy().astype("<f4"))
    np.save(os.path.join(out, "hf_ids.npy"), held[:32].numpy().astype("<i4"))


if __name__ == "__main__":
    main()
