"""cross_ref.py FOLDER [--save-tokenizer] < pairs: the reference scores of a cross-encoder folder
(make_cross.py's kind: BERT, RoBERTa, XLM-RoBERTa or MPNet
...ForSequenceClassification) for lines QID<TAB>QUERY<TAB>DOCID<TAB>TEXT,
one line of space-separated scores (one per label) per pair, as
sentence-transformers' CrossEncoder.predict computes them. Independent of
tq: the pair's ids from transformers' fast tokenizers on the folder's
vocab.txt (BertTokenizerFast for BERT: [CLS] A [SEP] B [SEP], token types 0
then 1; MPNetTokenizerFast's layout for the others: [CLS] A [SEP][SEP] B
[SEP]), truncation=True (longest_first) to the window (tokenizer_config's
model_max_length, at most the positions past the padding id), the encoder of
encoder_ref.py in float64, the head tanh(W1 h_cls + b1) then W2 . + b2, and
CrossEncoder's activation (the config's activation_fn, else sigmoid for one
label, none for more). --save-tokenizer writes that fast tokenizer into the
folder as tokenizer.json instead (the library's own pair template then).
--classes: the encoder and head are transformers' own
AutoModelForSequenceClassification in float64 instead (for a transformers
that runs on this machine's torch: .venv-bench's 4.36)."""
import json, math, os, sys

import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from encoder_ref import encoder, safetensors  # noqa: E402

transformers.logging.set_verbosity_error()


def main():
    d = sys.argv[1]
    cfg = json.load(open(os.path.join(d, "config.json")))
    tc = json.load(open(os.path.join(d, "tokenizer_config.json")))
    arch = cfg.get("model_type", "bert")
    offset = 0 if arch == "bert" else cfg.get("pad_token_id", 1) + 1
    window = min(tc.get("model_max_length", 10 ** 9), cfg["max_position_embeddings"] - offset)
    v = os.path.join(d, "vocab.txt")
    if arch == "bert":
        tok = transformers.BertTokenizerFast(v)
    else:
        tok = transformers.MPNetTokenizerFast(v, bos_token="[CLS]", eos_token="[SEP]",
                                              sep_token="[SEP]", cls_token="[CLS]",
                                              unk_token="[UNK]", pad_token="[PAD]",
                                              mask_token="[MASK]")
    if len(sys.argv) > 2 and sys.argv[2] == "--save-tokenizer":  # the same as tokenizer.json
        tok.backend_tokenizer.save(os.path.join(d, "tokenizer.json"))
        return
    if "--classes" in sys.argv[2:]:
        m = transformers.AutoModelForSequenceClassification.from_pretrained(d).double().eval()

        def logits(e):
            kw = {"token_type_ids": torch.tensor([e["token_type_ids"]])} if arch == "bert" else {}
            with torch.no_grad():
                return m(input_ids=torch.tensor([e["input_ids"]]), **kw).logits[0]
    else:
        logits = None
    W = safetensors(os.path.join(d, "model.safetensors"))
    pre = {"bert": "bert.", "mpnet": "mpnet."}.get(arch, "roberta.")
    base = {k[len(pre):]: t for k, t in W.items() if k.startswith(pre)}
    run = encoder(cfg, base)
    n1, n2 = (("bert.pooler.dense", "classifier") if arch == "bert"
              else ("classifier.dense", "classifier.out_proj"))
    labels = len(cfg["id2label"])
    fn = cfg.get("sentence_transformers", {}).get("activation_fn")
    act = {None: torch.sigmoid if labels == 1 else (lambda x: x),
           "torch.nn.modules.activation.Sigmoid": torch.sigmoid,
           "torch.nn.modules.linear.Identity": lambda x: x}[fn]
    for line in open(sys.stdin.fileno(), encoding="utf-8", newline="\n").read().split("\n")[:-1]:
        _, q, _, t = line.split("\t", 3)
        e = tok(q, t, truncation=True, max_length=window)
        if logits:
            print(" ".join("%.17g" % z for z in act(logits(e)).tolist()))
            continue
        types = e["token_type_ids"] if arch == "bert" else None
        h = run(e["input_ids"], types)[0]
        x = torch.tanh(W[n1 + ".weight"] @ h + W[n1 + ".bias"])
        s = act(W[n2 + ".weight"] @ x + W[n2 + ".bias"])
        print(" ".join("%.17g" % z for z in s.tolist()))


main()
