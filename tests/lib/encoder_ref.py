"""encoder_ref.py FOLDER [--prompt TEXT | --prompt-name NAME] [--chunk] [--classes] < lines

The reference sentence vectors of a sentence-transformers folder of any
family tq-embed reads (BERT, RoBERTa, XLM-RoBERTa, MPNet), one line of
space-separated floats per input line. Independent of tq: token ids from
transformers' BertTokenizer on the folder's vocab.txt; the encoder written
out in float64 PyTorch from transformers' modeling_bert/_roberta/_mpnet.py
(.venv's transformers refuses this machine's torch 1.13; with --classes,
under .venv-bench's transformers 4.36, its own model classes), one text
at a time (no padding): RoBERTa's and MPNet's position ids from their
create_position_ids_from_input_ids (padding_idx + 1 onwards), MPNet's
relative position bias from MPNetEncoder.compute_position_bias with the same
torch ops (its f32 logarithm included); then sentence-transformers' Pooling
(its six modes, concatenated; the prompt's tokens left out when
include_prompt is false, as its _exclude_prompt_from_mask does), Dense
(act(W x + b)) and Normalize from their definitions. --chunk: a text longer
than the window is embedded as tq-embed.1 defines --long chunk (windows of the
window's size, [CLS] and [SEP] kept, pieces overlapping by a quarter of a
window's, the pooled vectors averaged before Dense and Normalize; a prompt
the pooling leaves out is left out of the first window only)."""
import argparse, json, math, os, struct, sys

import numpy as np
import torch
import transformers

transformers.logging.set_verbosity_error()

ACTS = {"torch.nn.modules.activation.Tanh": torch.tanh,
        "torch.nn.modules.linear.Identity": lambda x: x,
        "torch.nn.modules.activation.ReLU": torch.relu,
        "torch.nn.modules.activation.Sigmoid": torch.sigmoid}
LEGACY = [("pooling_mode_cls_token", "cls"), ("pooling_mode_max_tokens", "max"),
          ("pooling_mode_mean_tokens", "mean"),
          ("pooling_mode_mean_sqrt_len_tokens", "mean_sqrt_len_tokens"),
          ("pooling_mode_weightedmean_tokens", "weightedmean"),
          ("pooling_mode_lasttoken", "lasttoken")]


def jload(*p):
    p = os.path.join(*p)
    return json.load(open(p)) if os.path.exists(p) else {}


def safetensors(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    hdr = json.loads(raw[8:8 + n])
    out = {}
    for name, e in hdr.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        x = np.frombuffer(raw[8 + n + a:8 + n + b], np.float32).astype(np.float64)
        out[name] = torch.from_numpy(x.reshape(e["shape"]))
    return out


def pool(hs, modes, skip):
    n = hs.shape[0]
    t0 = min(skip, n - 1)
    keep = hs[t0:]
    outs = []
    for m in modes:
        if m == "cls":
            outs.append(hs[t0])
        elif m == "lasttoken":
            outs.append(hs[n - 1])
        elif m == "max":
            outs.append(keep.max(0).values)
        elif m == "mean":
            outs.append(keep.sum(0) / keep.shape[0])
        elif m == "mean_sqrt_len_tokens":
            outs.append(keep.sum(0) / math.sqrt(keep.shape[0]))
        elif m == "weightedmean":
            w = torch.arange(t0 + 1, n + 1, dtype=torch.float64)[:, None]
            outs.append((keep * w).sum(0) / w.sum())
    return torch.cat(outs)


def relative_position_bucket(relative_position, num_buckets=32, max_distance=128):
    """MPNetEncoder.relative_position_bucket, op for op"""
    ret = 0
    n = -relative_position
    num_buckets //= 2
    ret += (n < 0).to(torch.long) * num_buckets
    n = torch.abs(n)
    max_exact = num_buckets // 2
    is_small = n < max_exact
    val_if_large = max_exact + (
        torch.log(n.float() / max_exact) / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)).to(torch.long)
    val_if_large = torch.min(val_if_large, torch.full_like(val_if_large, num_buckets - 1))
    ret += torch.where(is_small, n, val_if_large)
    return ret


def encoder(cfg, W):
    arch = cfg.get("model_type", "bert")
    H, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    eps, dh = cfg.get("layer_norm_eps", 1e-12), H // nh
    mp = arch == "mpnet"
    pad = 1 if mp else cfg.get("pad_token_id", 1)

    def ln(x, p):
        mu = x.mean(-1, keepdim=True)
        var = ((x - mu) ** 2).mean(-1, keepdim=True)
        return (x - mu) / torch.sqrt(var + eps) * W[p + ".weight"] + W[p + ".bias"]

    def lin(x, p):
        return x @ W[p + ".weight"].T + W[p + ".bias"]

    def gelu(x):
        return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))

    def run(ids, types=None):
        ids = torch.tensor(ids)
        L = len(ids)
        if arch == "bert":
            pos = torch.arange(L)
        else:  # create_position_ids_from_input_ids
            mask = ids.ne(pad).int()
            pos = torch.cumsum(mask, 0) * mask + pad
        x = W["embeddings.word_embeddings.weight"][ids] + W["embeddings.position_embeddings.weight"][pos]
        if not mp:
            x = x + W["embeddings.token_type_embeddings.weight"][torch.tensor(types or [0] * L)]
        x = ln(x, "embeddings.LayerNorm")
        bias = 0
        if mp:
            rel = torch.arange(L)[None, :] - torch.arange(L)[:, None]
            bias = W["encoder.relative_attention_bias.weight"][relative_position_bucket(rel)]
            bias = bias.permute(2, 0, 1)  # [heads, L, L]
        for l in range(cfg["num_hidden_layers"]):
            p = "encoder.layer.%d." % l
            names = ((p + "attention.attn.q", p + "attention.attn.k", p + "attention.attn.v",
                      p + "attention.attn.o", p + "attention.LayerNorm") if mp else
                     (p + "attention.self.query", p + "attention.self.key",
                      p + "attention.self.value", p + "attention.output.dense",
                      p + "attention.output.LayerNorm"))
            q, k, v = (lin(x, n).view(L, nh, dh).transpose(0, 1) for n in names[:3])
            a = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(dh) + bias, -1) @ v
            a = a.transpose(0, 1).reshape(L, H)
            x = ln(lin(a, names[3]) + x, names[4])
            f = lin(gelu(lin(x, p + "intermediate.dense")), p + "output.dense")
            x = ln(f + x, p + "output.LayerNorm")
        return x

    return run


def classes(tdir):
    """transformers' own model class for the folder (AutoModel: BertModel,
    RobertaModel, XLMRobertaModel, MPNetModel), in float64: the tokens'
    last hidden states of one text. For a transformers that runs on this
    machine's torch (.venv-bench's 4.36; .venv's is too new for it)."""
    m = transformers.AutoModel.from_pretrained(tdir).double().eval()

    def run(ids, types=None):
        with torch.no_grad():
            return m(input_ids=torch.tensor([ids])).last_hidden_state[0]
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("--prompt")
    ap.add_argument("--prompt-name")
    ap.add_argument("--chunk", action="store_true")
    ap.add_argument("--classes", action="store_true")
    a = ap.parse_args()
    mods = jload(a.folder, "modules.json")
    tdir = os.path.join(a.folder, next(m["path"] for m in mods if m["type"].endswith("Transformer")))
    pdir = os.path.join(a.folder, next(m["path"] for m in mods if m["type"].endswith("Pooling")))
    dense = [os.path.join(a.folder, m["path"]) for m in mods if m["type"].endswith("Dense")]
    normalize = any(m["type"].endswith("Normalize") for m in mods)
    cfg, tc, sb, pc = (jload(tdir, "config.json"), jload(tdir, "tokenizer_config.json"),
                       jload(tdir, "sentence_bert_config.json"), jload(pdir, "config.json"))
    if "pooling_mode" in pc:
        modes = pc["pooling_mode"]
        modes = [modes] if isinstance(modes, str) else modes
    else:
        modes = [name for key, name in LEGACY if pc.get(key)]
    tok = transformers.BertTokenizer(os.path.join(tdir, "vocab.txt"),
                                     do_lower_case=tc.get("do_lower_case", True),
                                     strip_accents=tc.get("strip_accents"),
                                     tokenize_chinese_chars=tc.get("tokenize_chinese_chars", True))
    offset = 0 if cfg.get("model_type", "bert") == "bert" else cfg.get("pad_token_id", 1) + 1
    window = min(sb.get("max_seq_length", 10 ** 9), cfg["max_position_embeddings"] - offset)
    W = safetensors(os.path.join(tdir, "model.safetensors"))
    for pre in ("bert.", "roberta.", "mpnet."):  # a task model's names
        if "embeddings.word_embeddings.weight" not in W and pre + "embeddings.word_embeddings.weight" in W:
            W = {k[len(pre):]: t for k, t in W.items() if k.startswith(pre)}
    encode = classes(tdir) if a.classes else encoder(cfg, W)
    heads = []
    for d in dense:
        dc, w = jload(d, "config.json"), safetensors(os.path.join(d, "model.safetensors"))
        act = ACTS[dc.get("activation_function", "torch.nn.modules.activation.Tanh")]
        heads.append((w["linear.weight"], w.get("linear.bias"), act))
    prompt = a.prompt
    if a.prompt_name:
        prompt = jload(a.folder, "config_sentence_transformers.json")["prompts"][a.prompt_name]
    skip = 0
    if prompt and not pc.get("include_prompt", True):
        skip = len(tok(prompt)["input_ids"]) - 1

    run = encode
    for line in open(sys.stdin.fileno(), encoding="utf-8", newline="\n").read().split("\n")[:-1]:
        text = (prompt or "") + line
        full = tok(text)["input_ids"]
        if len(full) <= window or not a.chunk:
            ids = full[:window - 1] + [full[-1]] if len(full) > window else full
            v = pool(run(ids), modes, skip)
        else:
            body = window - 2
            stride = max(body - body // 4, 1)
            pieces, vs, at = full[1:-1], [], 0
            while True:
                vs.append(pool(run([full[0]] + pieces[at:at + body] + [full[-1]]), modes,
                               skip if at == 0 else 0))
                if at + body >= len(pieces):
                    break
                at += stride
            v = torch.stack(vs).mean(0)
        for w, b, act in heads:
            v = act(w @ v + (b if b is not None else 0))
        if normalize:
            v = v / max(v.norm().item(), 1e-12)
        print(" ".join("%.17g" % t for t in v.tolist()))


if __name__ == "__main__":
    main()
