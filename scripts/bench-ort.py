"""bench-ort.py ONNX TOKENIZER SENTENCES THREADS [OUT.npy]: seconds that ONNX
Runtime (CPU provider, all graph optimizations) takes to embed the file's lines
as sentence-transformers does (batch 32, padded to the batch's longest, at most
256 tokens, mean pooling over real tokens, unit length), after one warm-up
batch; the peer of tq-embed's BERT benchmark. OUT.npy keeps the vectors."""
import sys
import time

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

onnx, tok_path, sent_path, threads = sys.argv[1:5]
opts = ort.SessionOptions()
opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
opts.intra_op_num_threads = int(threads)
opts.inter_op_num_threads = 1
sess = ort.InferenceSession(onnx, opts, providers=["CPUExecutionProvider"])
tok = Tokenizer.from_file(tok_path)
tok.enable_truncation(256)
tok.enable_padding()
lines = [l.rstrip("\n") for l in open(sent_path, encoding="utf-8")]


def encode(batch):
    enc = tok.encode_batch(batch)
    ids = np.array([e.ids for e in enc], dtype=np.int64)
    mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
    h = sess.run(None, {"input_ids": ids, "attention_mask": mask,
                        "token_type_ids": np.zeros_like(ids)})[0]
    m = mask[:, :, None].astype(np.float32)
    v = (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


encode(lines[:32])
t0 = time.perf_counter()
out = [encode(lines[i:i + 32]) for i in range(0, len(lines), 32)]
print("%.3f" % (time.perf_counter() - t0))
if len(sys.argv) > 5:
    np.save(sys.argv[5], np.concatenate(out))
