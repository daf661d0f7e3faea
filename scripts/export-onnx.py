"""export-onnx.py MODEL OUT [cross]: the encoder of a sentence-transformers
model folder as ONNX (opset 14, batch and length dynamic), or with `cross`
a ...ForSequenceClassification folder's logits: what the ONNX Runtime peer
of `make bench` runs. Inputs input_ids and attention_mask, and
token_type_ids for BERT (MPNet and the RoBERTa family take none). Run by
.venv-bench (PyPI transformers 4.36 on Debian's PyTorch)."""
import json
import os
import sys

import torch
from transformers import AutoModel, AutoModelForSequenceClassification

cross = len(sys.argv) > 3 and sys.argv[3] == "cross"
model = (AutoModelForSequenceClassification if cross else AutoModel).from_pretrained(sys.argv[1]).eval()
bert = json.load(open(os.path.join(sys.argv[1], "config.json"))).get("model_type", "bert") == "bert"
ids = torch.ones((2, 8), dtype=torch.int64)
names = ["input_ids", "attention_mask"] + (["token_type_ids"] if bert else [])
args = (ids, torch.ones_like(ids)) + ((torch.zeros_like(ids),) if bert else ())
out = "logits" if cross else "last_hidden_state"
axes = {n: {0: "batch", 1: "len"} for n in names}
axes[out] = {0: "batch"} if cross else {0: "batch", 1: "len"}
with torch.no_grad():
    torch.onnx.export(model, args, sys.argv[2], input_names=names, output_names=[out],
                      opset_version=14, dynamic_axes=axes)
