"""bert_ref.py FOLDER < lines: the reference sentence vectors of a
sentence-transformers BERT folder, one line of space-separated floats per input
line. Independent of tq: tokens from transformers' BertTokenizer, weights read
from model.safetensors here, and the BertModel forward pass written out in
float64 PyTorch, one sentence at a time (so no padding or mask is involved)."""
import json, math, os, struct, sys

import numpy as np
import torch
import transformers

transformers.logging.set_verbosity_error()


def load_safetensors(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    hdr = json.loads(raw[8:8 + n])
    dt = {"F32": np.float32, "F16": np.float16}
    out = {}
    for name, e in hdr.items():
        if name == "__metadata__" or e["dtype"] not in ("F32", "F16", "BF16"):
            continue  # e.g. the I64 buffer embeddings.position_ids
        a, b = e["data_offsets"]
        buf = raw[8 + n + a:8 + n + b]
        if e["dtype"] == "BF16":
            x = np.frombuffer(buf, np.uint16).astype(np.uint32) << 16
            x = x.view(np.float32)
        else:
            x = np.frombuffer(buf, dt[e["dtype"]])
        name = name[5:] if name.startswith("bert.") else name
        out[name] = torch.from_numpy(x.astype(np.float64).reshape(e["shape"]))
    return out


def jload(*p):
    p = os.path.join(*p)
    return json.load(open(p)) if os.path.exists(p) else {}


def main():
    folder = sys.argv[1]
    mods = jload(folder, "modules.json")
    tdir = os.path.join(folder, next(m["path"] for m in mods if m["type"].endswith("Transformer")))
    pdir = os.path.join(folder, next(m["path"] for m in mods if m["type"].endswith("Pooling")))
    normalize = any(m["type"].endswith("Normalize") for m in mods)
    cfg, tc, sb, pc = (jload(tdir, "config.json"), jload(tdir, "tokenizer_config.json"),
                       jload(tdir, "sentence_bert_config.json"), jload(pdir, "config.json"))
    tok = transformers.BertTokenizer(os.path.join(tdir, "vocab.txt"),
                                     do_lower_case=tc.get("do_lower_case", True),
                                     strip_accents=tc.get("strip_accents"),
                                     tokenize_chinese_chars=tc.get("tokenize_chinese_chars", True))
    max_len = min(sb.get("max_seq_length", cfg["max_position_embeddings"]),
                  cfg["max_position_embeddings"])
    W = load_safetensors(os.path.join(tdir, "model.safetensors"))
    H, nh, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg.get("layer_norm_eps", 1e-12)
    dh = H // nh

    def ln(x, p):
        mu = x.mean(-1, keepdim=True)
        var = ((x - mu) ** 2).mean(-1, keepdim=True)
        return (x - mu) / torch.sqrt(var + eps) * W[p + ".weight"] + W[p + ".bias"]

    def lin(x, p):
        return x @ W[p + ".weight"].T + W[p + ".bias"]

    def gelu(x):
        return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))

    def encode(ids):
        L = len(ids)
        x = (W["embeddings.word_embeddings.weight"][ids]
             + W["embeddings.position_embeddings.weight"][:L]
             + W["embeddings.token_type_embeddings.weight"][0])
        x = ln(x, "embeddings.LayerNorm")
        for l in range(cfg["num_hidden_layers"]):
            p = "encoder.layer.%d." % l
            q = lin(x, p + "attention.self.query").view(L, nh, dh).transpose(0, 1)
            k = lin(x, p + "attention.self.key").view(L, nh, dh).transpose(0, 1)
            v = lin(x, p + "attention.self.value").view(L, nh, dh).transpose(0, 1)
            a = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(dh), -1) @ v
            a = a.transpose(0, 1).reshape(L, H)
            x = ln(lin(a, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
            f = lin(gelu(lin(x, p + "intermediate.dense")), p + "output.dense")
            x = ln(f + x, p + "output.LayerNorm")
        return x

    for line in open(sys.stdin.fileno(), encoding="utf-8", newline="\n").read().split("\n")[:-1]:
        ids = tok(line, truncation=True, max_length=max_len)["input_ids"]
        hs = encode(torch.tensor(ids))
        if pc.get("pooling_mode_cls_token"):
            v = hs[0]
        elif pc.get("pooling_mode_max_tokens"):
            v = hs.max(0).values
        else:
            v = hs.mean(0)
        if normalize:
            v = v / max(v.norm().item(), 1e-12)
        print(" ".join("%.17g" % t for t in v.tolist()))


main()
