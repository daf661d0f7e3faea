"""make_cross.py OUT --arch bert|roberta|xlm-roberta|mpnet [--labels 1]
[--activation sigmoid|identity|none] [--max-len N] [--words FILE] [--hidden 32
--layers 2 --heads 4 --inter 64 --max-pos 66] [--seed 1]

Writes a small randomly initialised cross-encoder as Hugging Face saves a
...ForSequenceClassification model (the folder a sentence-transformers
CrossEncoder loads): config.json with architectures, id2label and, unless
--activation none, "sentence_transformers": {"activation_fn"};
model.safetensors with the base model's names under its prefix ("bert.",
"roberta.", "mpnet.") and the head's (BERT: bert.pooler.dense and
classifier; the others: classifier.dense and classifier.out_proj);
make_encoder.py's vocab.txt (with --words, also every lower-cased word of
FILE) and weights; tokenizer_config.json with model_max_length when
--max-len is given."""
import argparse, json, os, sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_bert import vocab, write_safetensors  # noqa: E402
import make_encoder  # noqa: E402

ACTS = {"sigmoid": "torch.nn.modules.activation.Sigmoid",
        "identity": "torch.nn.modules.linear.Identity"}
ARCH = {"bert": "BertForSequenceClassification", "roberta": "RobertaForSequenceClassification",
        "xlm-roberta": "XLMRobertaForSequenceClassification",
        "mpnet": "MPNetForSequenceClassification"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--arch", default="bert", choices=list(ARCH))
    ap.add_argument("--labels", type=int, default=1)
    ap.add_argument("--activation", default="none", choices=["sigmoid", "identity", "none"])
    ap.add_argument("--max-len", type=int, default=0)
    ap.add_argument("--words")
    for k, d in (("hidden", 32), ("layers", 2), ("heads", 4), ("inter", 64),
                 ("max-pos", 66), ("seed", 1)):
        ap.add_argument("--" + k, type=int, default=d)
    a = ap.parse_args()
    a.prefix = True
    v = [t for t in vocab() if t not in ("[CLS]", "[PAD]", "[SEP]")]
    v = ["[CLS]", "[PAD]", "[SEP]"] + v
    if a.words:
        import re
        seen = set(v)
        for w in re.findall(r"[a-z]+", open(a.words, encoding="utf-8").read().lower()):
            if w not in seen:
                seen.add(w)
                v.append(w)
    os.makedirs(a.out, exist_ok=True)
    cfg = make_encoder.config(a, len(v))
    cfg["architectures"] = [ARCH[a.arch]]
    cfg["id2label"] = {str(i): "LABEL_%d" % i for i in range(a.labels)}
    cfg["label2id"] = {"LABEL_%d" % i: i for i in range(a.labels)}
    if a.activation != "none":
        cfg["sentence_transformers"] = {"activation_fn": ACTS[a.activation], "version": "6.2.0"}
    json.dump(cfg, open(os.path.join(a.out, "config.json"), "w"), indent=2)
    w = make_encoder.weights(a, len(v))
    g = torch.Generator().manual_seed(a.seed + 11)
    H = a.hidden
    n1, n2 = (("bert.pooler.dense", "classifier") if a.arch == "bert"
              else ("classifier.dense", "classifier.out_proj"))
    w[n1 + ".weight"] = torch.randn(H, H, generator=g, dtype=torch.float64) / H ** 0.5 * 2
    w[n1 + ".bias"] = 0.1 * torch.randn(H, generator=g, dtype=torch.float64)
    w[n2 + ".weight"] = torch.randn(a.labels, H, generator=g, dtype=torch.float64) / H ** 0.5 * 2
    w[n2 + ".bias"] = 0.1 * torch.randn(a.labels, generator=g, dtype=torch.float64)
    write_safetensors(os.path.join(a.out, "model.safetensors"), w, "f32")
    with open(os.path.join(a.out, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in v))
    tc = {"do_lower_case": True, "strip_accents": None, "tokenize_chinese_chars": True}
    if a.max_len:
        tc["model_max_length"] = a.max_len
    json.dump(tc, open(os.path.join(a.out, "tokenizer_config.json"), "w"))


if __name__ == "__main__":
    main()
