"""make_encoder.py OUT --arch mpnet|roberta|xlm-roberta|bert [--pool MODE[,MODE..]]
[--dense OUT:ACT[,OUT:ACT..]] [--normalize] [--prompts] [--exclude-prompt]
[--hidden 32 --layers 2 --heads 4 --inter 64 --max-pos 66 --max-seq 24] [--seed 1]
[--legacy-pool] [--prefix]

Writes a small randomly initialised encoder of another family than BERT (or
BERT itself, for the pooling and Dense modules) in the folder layout
sentence-transformers saves, for tq-embed's tests: config.json as
transformers writes it for MPNetModel, RobertaModel, XLMRobertaModel or
BertModel, model.safetensors with those classes' tensor names (optionally
inside a task model's prefix), weights at scales large enough that every
part shows in the output (MPNet's relative position bias with a spread of
1.5 per bucket); a WordPiece vocab.txt whose id 1 is the padding token, as in
the real MPNet and RoBERTa vocabularies (their position ids count the tokens
that are not id 1); the Pooling module with any of its six modes (the
"pooling_mode" list, or with --legacy-pool the older boolean keys), Dense
modules (ACT tanh, identity, relu or sigmoid), Normalize, and with --prompts
a config_sentence_transformers.json with "query" and "passage" prompts."""
import argparse, json, os, sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_bert import vocab, write_safetensors  # noqa: E402

ACTS = {"tanh": "torch.nn.modules.activation.Tanh",
        "identity": "torch.nn.modules.linear.Identity",
        "relu": "torch.nn.modules.activation.ReLU",
        "sigmoid": "torch.nn.modules.activation.Sigmoid"}
LEGACY = {"cls": "pooling_mode_cls_token", "max": "pooling_mode_max_tokens",
          "mean": "pooling_mode_mean_tokens",
          "mean_sqrt_len_tokens": "pooling_mode_mean_sqrt_len_tokens",
          "weightedmean": "pooling_mode_weightedmean_tokens",
          "lasttoken": "pooling_mode_lasttoken"}


def config(a, V):
    c = {"hidden_size": a.hidden, "num_hidden_layers": a.layers, "num_attention_heads": a.heads,
         "intermediate_size": a.inter, "max_position_embeddings": a.max_pos,
         "hidden_act": "gelu", "vocab_size": V}
    if a.arch == "mpnet":
        c.update(architectures=["MPNetModel"], model_type="mpnet", layer_norm_eps=1e-5,
                 relative_attention_num_buckets=32, pad_token_id=1, bos_token_id=0,
                 eos_token_id=2)
    elif a.arch in ("roberta", "xlm-roberta"):
        c.update(architectures=["XLMRobertaModel" if a.arch == "xlm-roberta" else "RobertaModel"],
                 model_type=a.arch, layer_norm_eps=1e-5, type_vocab_size=1, pad_token_id=1,
                 position_embedding_type="absolute")
    else:
        c.update(architectures=["BertModel"], model_type="bert", layer_norm_eps=1e-12,
                 type_vocab_size=2, pad_token_id=0, position_embedding_type="absolute")
    return c


def weights(a, V):
    g = torch.Generator().manual_seed(a.seed)
    H, I = a.hidden, a.inter

    def rnd(*shape, scale=1.0):
        return torch.randn(*shape, generator=g, dtype=torch.float64) * scale

    def lin(t, name, o, i):  # [out, in]: activations of order one
        t[name + ".weight"] = rnd(o, i, scale=1 / i ** 0.5)
        t[name + ".bias"] = rnd(o, scale=0.1)

    def ln(t, name):
        t[name + ".weight"] = 1 + rnd(H, scale=0.1)
        t[name + ".bias"] = rnd(H, scale=0.1)

    mp = a.arch == "mpnet"
    t = {"embeddings.word_embeddings.weight": rnd(V, H, scale=0.5),
         "embeddings.position_embeddings.weight": rnd(a.max_pos, H, scale=0.5)}
    if not mp:
        types = 2 if a.arch == "bert" else 1
        t["embeddings.token_type_embeddings.weight"] = rnd(types, H, scale=0.2)
    ln(t, "embeddings.LayerNorm")
    for l in range(a.layers):
        p = "encoder.layer.%d." % l
        if mp:
            for n in "qkvo":
                lin(t, p + "attention.attn." + n, H, H)
            ln(t, p + "attention.LayerNorm")
        else:
            for n in ("query", "key", "value"):
                lin(t, p + "attention.self." + n, H, H)
            lin(t, p + "attention.output.dense", H, H)
            ln(t, p + "attention.output.LayerNorm")
        lin(t, p + "intermediate.dense", I, H)
        lin(t, p + "output.dense", H, I)
        ln(t, p + "output.LayerNorm")
    if mp:
        t["encoder.relative_attention_bias.weight"] = rnd(32, a.heads, scale=1.5)
    pre = {"mpnet": "mpnet.", "bert": "bert."}.get(a.arch, "roberta.") if a.prefix else ""
    return {pre + k: v for k, v in t.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--arch", default="mpnet", choices=["mpnet", "roberta", "xlm-roberta", "bert"])
    ap.add_argument("--pool", default="mean")
    ap.add_argument("--legacy-pool", action="store_true")
    ap.add_argument("--dense", default="")
    ap.add_argument("--normalize", action="store_true")
    ap.add_argument("--prompts", action="store_true")
    ap.add_argument("--exclude-prompt", action="store_true")
    ap.add_argument("--prefix", action="store_true")
    for k, d in (("hidden", 32), ("layers", 2), ("heads", 4), ("inter", 64),
                 ("max-pos", 66), ("max-seq", 24), ("seed", 1)):
        ap.add_argument("--" + k, type=int, default=d)
    a = ap.parse_args()
    # id 1 the padding token (MPNet's and RoBERTa's padding_idx), never
    # produced by tokenizing
    v = [t for t in vocab() if t not in ("[CLS]", "[PAD]", "[SEP]")]
    v = ["[CLS]", "[PAD]", "[SEP]"] + v
    os.makedirs(a.out, exist_ok=True)
    json.dump(config(a, len(v)), open(os.path.join(a.out, "config.json"), "w"), indent=2)
    write_safetensors(os.path.join(a.out, "model.safetensors"), weights(a, len(v)), "f32")
    with open(os.path.join(a.out, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in v))
    json.dump({"do_lower_case": True, "strip_accents": None, "tokenize_chinese_chars": True},
              open(os.path.join(a.out, "tokenizer_config.json"), "w"))
    json.dump({"max_seq_length": a.max_seq, "do_lower_case": False},
              open(os.path.join(a.out, "sentence_bert_config.json"), "w"))
    mods = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    modes = a.pool.split(",")
    pc = {"word_embedding_dimension": a.hidden}
    if a.legacy_pool:
        pc.update({k: m in modes for m, k in LEGACY.items()})
    else:
        pc = {"embedding_dimension": a.hidden, "pooling_mode": modes[0] if len(modes) == 1 else modes}
    pc["include_prompt"] = not a.exclude_prompt
    os.makedirs(os.path.join(a.out, "1_Pooling"), exist_ok=True)
    json.dump(pc, open(os.path.join(a.out, "1_Pooling", "config.json"), "w"), indent=2)
    width = a.hidden * len(modes)
    g = torch.Generator().manual_seed(a.seed + 7)
    for i, spec in enumerate(x for x in a.dense.split(",") if x):
        out, act = spec.split(":")
        out = int(out)
        d = os.path.join(a.out, "%d_Dense" % (2 + i))
        os.makedirs(d, exist_ok=True)
        json.dump({"in_features": width, "out_features": out, "bias": True,
                   "activation_function": ACTS[act]}, open(os.path.join(d, "config.json"), "w"))
        w = {"linear.weight": torch.randn(out, width, generator=g, dtype=torch.float64) / width ** 0.5 * 2,
             "linear.bias": 0.2 * torch.randn(out, generator=g, dtype=torch.float64)}
        write_safetensors(os.path.join(d, "model.safetensors"), w, "f32")
        mods.append({"idx": len(mods), "name": str(len(mods)), "path": "%d_Dense" % (2 + i),
                     "type": "sentence_transformers.models.Dense"})
        width = out
    if a.normalize:
        os.makedirs(os.path.join(a.out, "9_Normalize"), exist_ok=True)
        mods.append({"idx": len(mods), "name": str(len(mods)), "path": "9_Normalize",
                     "type": "sentence_transformers.models.Normalize"})
    json.dump(mods, open(os.path.join(a.out, "modules.json"), "w"), indent=2)
    if a.prompts:
        json.dump({"prompts": {"query": "query: ", "passage": "passage: "},
                   "default_prompt_name": None},
                  open(os.path.join(a.out, "config_sentence_transformers.json"), "w"))


if __name__ == "__main__":
    main()
