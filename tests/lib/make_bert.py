"""make_bert.py OUT [--pool mean|cls|max] [--normalize] [--dtype f32|f16|bf16]
[--hidden 32 --layers 2 --heads 4 --inter 64 --max-pos 64 --max-seq 24]
[--seed 1] [--prefix] [--no-tokenizer-config] [--cased]

Writes a small randomly initialised BERT sentence encoder in the folder layout
sentence-transformers saves (config.json, model.safetensors, vocab.txt,
tokenizer_config.json, sentence_bert_config.json, modules.json,
1_Pooling/config.json, 2_Normalize/), for the tests of tq's BERT embedder.
The safetensors file is written by hand (u64 header size, JSON, data)."""
import argparse, json, os, struct
import torch

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = """the a an of to and in is it that for on with as was he she they we you
i be at by this had not are but from or have one all were her his there can
their what so if out about who get which go me when make like time no just him
know take people into year your good some could them see other than then now
look only come its over think also back after use two how our work first well
way even new want because any these give day most us man woman food eating
playing guitar horse riding cat dog sat mat running quickly house city world
hello night music book read write cafe naive resume paris london tokyo model
vector search embedding sentence""".split()
PIECES = "##s ##ing ##ed ##er ##ly ##es ##tion ##al ##ment ##ness ##y ##e ##a ##i ##o ##n ##t".split()


def vocab():
    v = list(SPECIALS) + ["[unused%d]" % i for i in range(5)]
    v += list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
    v += [chr(c) for c in range(ord("a"), ord("z") + 1)]
    v += [chr(c) for c in range(ord("A"), ord("Z") + 1)]
    v += [str(d) for d in range(10)]
    v += ["é", "ü", "ß", "中", "国", "日", "本", "語", "人"]
    v += ["##" + chr(c) for c in range(ord("a"), ord("z") + 1)]
    v += WORDS + ["The", "Hello", "Paris", "café", "naïve"]
    v += PIECES
    seen, out = set(), []
    for t in v:
        if t not in seen:
            seen.add(t)
            out.append(t)
    return out


def write_safetensors(path, tensors, dtype):
    st = {"f32": ("F32", torch.float32), "f16": ("F16", torch.float16),
          "bf16": ("BF16", torch.bfloat16)}[dtype]
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors.items():
        t = t.to(st[1]).contiguous()
        b = t.view(torch.int16).numpy().tobytes() if st[1] == torch.bfloat16 else t.numpy().tobytes()
        header[name] = {"dtype": st[0], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def weights(a, V):
    g = torch.Generator().manual_seed(a.seed)
    H, I = a.hidden, a.inter

    def rnd(*shape, scale=0.3):
        return torch.randn(*shape, generator=g, dtype=torch.float64) * scale

    p = "bert." if a.prefix else ""
    t = {p + "embeddings.word_embeddings.weight": rnd(V, H, scale=0.5),
         p + "embeddings.position_embeddings.weight": rnd(a.max_pos, H, scale=0.2),
         p + "embeddings.token_type_embeddings.weight": rnd(2, H, scale=0.2),
         p + "embeddings.LayerNorm.weight": 1 + rnd(H, scale=0.1),
         p + "embeddings.LayerNorm.bias": rnd(H, scale=0.1)}
    for l in range(a.layers):
        q = p + "encoder.layer.%d." % l
        for n in ("query", "key", "value"):
            t[q + "attention.self.%s.weight" % n] = rnd(H, H, scale=0.5 / H ** 0.5 * 2)
            t[q + "attention.self.%s.bias" % n] = rnd(H, scale=0.1)
        t[q + "attention.output.dense.weight"] = rnd(H, H, scale=1 / H ** 0.5)
        t[q + "attention.output.dense.bias"] = rnd(H, scale=0.05)
        t[q + "attention.output.LayerNorm.weight"] = 1 + rnd(H, scale=0.1)
        t[q + "attention.output.LayerNorm.bias"] = rnd(H, scale=0.1)
        t[q + "intermediate.dense.weight"] = rnd(I, H, scale=1 / H ** 0.5)
        t[q + "intermediate.dense.bias"] = rnd(I, scale=0.1)
        t[q + "output.dense.weight"] = rnd(H, I, scale=1 / I ** 0.5)
        t[q + "output.dense.bias"] = rnd(H, scale=0.05)
        t[q + "output.LayerNorm.weight"] = 1 + rnd(H, scale=0.1)
        t[q + "output.LayerNorm.bias"] = rnd(H, scale=0.1)
    # pooler weights are in real checkpoints; the embedder must ignore them
    t[p + "pooler.dense.weight"] = rnd(H, H, scale=0.1)
    t[p + "pooler.dense.bias"] = rnd(H, scale=0.1)
    return t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--pool", default="mean", choices=["mean", "cls", "max"])
    ap.add_argument("--normalize", action="store_true")
    ap.add_argument("--dtype", default="f32", choices=["f32", "f16", "bf16"])
    for k, d in (("hidden", 32), ("layers", 2), ("heads", 4), ("inter", 64),
                 ("max-pos", 64), ("max-seq", 24), ("seed", 1), ("vocab-size", 0)):
        ap.add_argument("--" + k, type=int, default=d)
    ap.add_argument("--prefix", action="store_true")
    ap.add_argument("--no-tokenizer-config", action="store_true")
    ap.add_argument("--cased", action="store_true")
    a = ap.parse_args()
    v = vocab()
    if a.vocab_size:  # a realistic-size model for benchmarks: pad with tokens
        v += ["tok%d" % i for i in range(a.vocab_size - len(v))]
    os.makedirs(os.path.join(a.out, "1_Pooling"), exist_ok=True)
    with open(os.path.join(a.out, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in v))
    cfg = {"architectures": ["BertModel"], "model_type": "bert", "hidden_act": "gelu",
           "hidden_size": a.hidden, "num_hidden_layers": a.layers,
           "num_attention_heads": a.heads, "intermediate_size": a.inter,
           "layer_norm_eps": 1e-12, "max_position_embeddings": a.max_pos,
           "type_vocab_size": 2, "vocab_size": len(v), "pad_token_id": 0,
           "position_embedding_type": "absolute"}
    json.dump(cfg, open(os.path.join(a.out, "config.json"), "w"), indent=2)
    if not a.no_tokenizer_config:
        json.dump({"do_lower_case": not a.cased, "strip_accents": None,
                   "tokenize_chinese_chars": True, "tokenizer_class": "BertTokenizer"},
                  open(os.path.join(a.out, "tokenizer_config.json"), "w"))
    json.dump({"max_seq_length": a.max_seq, "do_lower_case": False},
              open(os.path.join(a.out, "sentence_bert_config.json"), "w"))
    mods = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    if a.normalize:
        os.makedirs(os.path.join(a.out, "2_Normalize"), exist_ok=True)
        mods.append({"idx": 2, "name": "2", "path": "2_Normalize",
                     "type": "sentence_transformers.models.Normalize"})
    json.dump(mods, open(os.path.join(a.out, "modules.json"), "w"), indent=2)
    json.dump({"word_embedding_dimension": a.hidden,
               "pooling_mode_cls_token": a.pool == "cls",
               "pooling_mode_mean_tokens": a.pool == "mean",
               "pooling_mode_max_tokens": a.pool == "max",
               "pooling_mode_mean_sqrt_len_tokens": False},
              open(os.path.join(a.out, "1_Pooling", "config.json"), "w"), indent=2)
    write_safetensors(os.path.join(a.out, "model.safetensors"), weights(a, len(v)), a.dtype)


if __name__ == "__main__":
    main()
