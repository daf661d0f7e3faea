"""bench-ort.py ONNX TOKENIZER SENTENCES THREADS [OUT.npy [--pairs WINDOW]]:
seconds that ONNX Runtime (CPU provider, all graph optimizations) takes to
embed the file's lines as sentence-transformers does (batch 32, padded to the
batch's longest, at most 256 tokens, mean pooling over real tokens, unit
length), after one warm-up batch; the peer of tq-embed's benchmarks. OUT.npy
keeps the vectors. With --pairs, lines QID<TAB>QUERY<TAB>DOCID<TAB>TEXT
scored as CrossEncoder.predict does (pairs cut longest-first to WINDOW
tokens, the logit's sigmoid) by a model of export-onnx.py's `cross`. A
model without a token_type_ids input (MPNet, RoBERTa) is given none."""
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
pairs = "--pairs" in sys.argv[6:]
tok.enable_truncation(int(sys.argv[7]) if pairs else 256)
tok.enable_padding()
lines = [l.rstrip("\n") for l in open(sent_path, encoding="utf-8")]
types = any(i.name == "token_type_ids" for i in sess.get_inputs())
if pairs:
    lines = [tuple(l.split("\t", 3)[1::2]) for l in lines]


def encode(batch):
    enc = tok.encode_batch(batch)
    ids = np.array([e.ids for e in enc], dtype=np.int64)
    mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
    feed = {"input_ids": ids, "attention_mask": mask}
    if types:
        feed["token_type_ids"] = np.array([e.type_ids for e in enc], dtype=np.int64)
    h = sess.run(None, feed)[0]
    if pairs:
        return 1 / (1 + np.exp(-h[:, 0].astype(np.float64)))
    m = mask[:, :, None].astype(np.float32)
    v = (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


encode(lines[:32])
t0 = time.perf_counter()
out = [encode(lines[i:i + 32]) for i in range(0, len(lines), 32)]
print("%.3f" % (time.perf_counter() - t0))
if len(sys.argv) > 5:
    np.save(sys.argv[5], np.concatenate(out))
