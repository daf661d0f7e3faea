"""bench-st.py [--bf16] MODEL SENTENCES THREADS [OUT.npy]: seconds that
sentence-transformers' encode() takes for the file's lines (batch 32, its
default), after loading the model and one warm-up batch; the peer of tq-embed's
BERT benchmark. --bf16 runs both under torch.autocast("cpu", dtype=
torch.bfloat16), PyTorch's own way to bf16 on a CPU (its linear layers and
matmuls in bf16 through oneDNN, which uses AMX where the CPU has it; layer norm
and softmax stay f32). OUT.npy keeps the vectors."""
import contextlib
import sys
import time

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

args = sys.argv[1:]
bf16 = "--bf16" in args
if bf16:
    args.remove("--bf16")
torch.set_num_threads(int(args[2]))
model = SentenceTransformer(args[0], device="cpu")
lines = [l.rstrip("\n") for l in open(args[1], encoding="utf-8")]
cast = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
with cast:
    model.encode(lines[:32])
    t0 = time.perf_counter()
    v = model.encode(lines, batch_size=32)
    print("%.3f" % (time.perf_counter() - t0))
if len(args) > 3:
    np.save(args[3], np.asarray(v, dtype=np.float32))
