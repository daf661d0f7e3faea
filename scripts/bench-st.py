"""bench-st.py MODEL SENTENCES THREADS: seconds that sentence-transformers'
encode() takes for the file's lines (batch 32, its default), after loading the
model and one warm-up batch; the peer of tq-embed's BERT benchmark."""
import sys
import time

import torch
from sentence_transformers import SentenceTransformer

torch.set_num_threads(int(sys.argv[3]))
model = SentenceTransformer(sys.argv[1], device="cpu")
lines = [l.rstrip("\n") for l in open(sys.argv[2], encoding="utf-8")]
model.encode(lines[:32])
t0 = time.perf_counter()
model.encode(lines, batch_size=32)
print("%.3f" % (time.perf_counter() - t0))
