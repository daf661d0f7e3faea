"""bench-encoders.py embed|cross FOLDER INPUT OUT.npy: the peer of bench-encoders.sh,
transformers' own model classes (.venv-bench's 4.36 on Debian's torch 1.13:
the most recent release that runs there) in f32 eager mode, as
sentence-transformers' encode() and CrossEncoder.predict() run them: ids
from the fast tokenizer of the folder's vocab.txt, batches of 32 texts
(pairs) padded to their longest, all of the machine's cores.
  embed  AutoModel, then mean pooling over the real tokens and Normalize
         (the folder's modules), INPUT one text a line;
  cross  AutoModelForSequenceClassification, then sigmoid (one label),
         INPUT lines QID<TAB>QUERY<TAB>DOCID<TAB>TEXT.
Prints the best of 2 seconds of the whole loop (tokenizing included); the
vectors or scores go to OUT.npy for their agreement with tq's.
bench-encoders.py tokjson FOLDER - OUT.json writes that fast tokenizer as a
tokenizer.json (for the ONNX Runtime peer, bench-ort.py: the same ids)."""
import json
import os
import sys
import time

import numpy as np
import torch
import transformers

transformers.logging.set_verbosity_error()
kind, folder, path, out = sys.argv[1:5]
torch.set_num_threads(os.cpu_count())
cfg = json.load(open(os.path.join(folder, "config.json")))
tc = json.load(open(os.path.join(folder, "tokenizer_config.json")))
vocab = os.path.join(folder, "vocab.txt")
if cfg.get("model_type", "bert") == "bert":
    tok = transformers.BertTokenizerFast(vocab)
else:  # [CLS] A [SEP][SEP] B [SEP], as tq-score lays out a pair of these families
    tok = transformers.MPNetTokenizerFast(vocab, bos_token="[CLS]", eos_token="[SEP]",
                                          sep_token="[SEP]", cls_token="[CLS]", unk_token="[UNK]",
                                          pad_token="[PAD]", mask_token="[MASK]")
if kind == "tokjson":
    tok.backend_tokenizer.save(out)
    sys.exit(0)
lines = open(path, encoding="utf-8").read().split("\n")[:-1]
if kind == "embed":
    sb = json.load(open(os.path.join(folder, "sentence_bert_config.json")))
    window = sb["max_seq_length"]
    model = transformers.AutoModel.from_pretrained(folder).eval()
else:
    window = tc.get("model_max_length", cfg["max_position_embeddings"] - 2)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(folder).eval()
    pairs = [line.split("\t", 3) for line in lines]


def run():
    res = []
    for i in range(0, len(lines), 32):
        if kind == "embed":
            e = tok(lines[i:i + 32], padding=True, truncation=True, max_length=window,
                    return_tensors="pt")
            h = model(**e).last_hidden_state
            m = e["attention_mask"].unsqueeze(-1).to(h.dtype)
            v = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
            res.append(torch.nn.functional.normalize(v, dim=1))
        else:
            p = pairs[i:i + 32]
            e = tok([q for _, q, _, _ in p], [t for _, _, _, t in p], padding=True,
                    truncation=True, max_length=window, return_tensors="pt")
            res.append(torch.sigmoid(model(**e).logits[:, 0]))
    return torch.cat(res).numpy()


with torch.no_grad():
    best = 1e9
    for _ in range(2):
        t0 = time.perf_counter()
        r = run()
        best = min(best, time.perf_counter() - t0)
np.save(out, r.astype(np.float64))
print("%.4f" % best)
