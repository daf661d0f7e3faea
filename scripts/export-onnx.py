"""export-onnx.py MODEL OUT: the BERT encoder of a sentence-transformers model
folder as ONNX (opset 14, batch and length dynamic): what the ONNX Runtime peer
of `make bench` runs. Run by .venv-bench (PyTorch and transformers 4.36)."""
import sys
import torch
from transformers import AutoModel
model = AutoModel.from_pretrained(sys.argv[1]).eval()
ids = torch.ones((2, 8), dtype=torch.int64)
with torch.no_grad():
    torch.onnx.export(model, (ids, torch.ones_like(ids), torch.zeros_like(ids)), sys.argv[2],
                      input_names=["input_ids", "attention_mask", "token_type_ids"],
                      output_names=["last_hidden_state"], opset_version=14,
                      dynamic_axes={n: {0: "batch", 1: "len"} for n in
                                    ["input_ids", "attention_mask", "token_type_ids", "last_hidden_state"]})
