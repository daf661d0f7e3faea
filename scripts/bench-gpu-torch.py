"""bench-gpu-torch.py WHAT ...: PyTorch's side of scripts/bench-gpu.sh, on the
GPU that tq names BACKEND:INDEX (PyTorch calls CUDA and ROCm devices both
"cuda"). Timings with CUDA events around the work, the best of 3 after a
warm-up.
  check BACKEND INDEX       exit 0 when this PyTorch runs on that GPU, else
                            print why and exit 1
  gemm INDEX N f32|f16      GFLOP/s of torch.mm at N^3 (cuBLAS or hipBLAS;
                            TF32 off for f32; for f16, f16 operands and result
                            with f32 sums, cuBLAS's default: tq's matmul_f16
                            writes f32, at n^2 of n^3 work)
  topk INDEX Q DB D         seconds of the exact top-10 of Q queries against DB
                            rows of D by dot product: torch.mm + torch.topk over
                            slices of the rows, the slices' lists merged
  sdpa INDEX N H D [causal] seconds of scaled_dot_product_attention, f32
                            [1, H, N, D], no mask (is_causal=True with
                            causal: key j > query i masked, as tq's --causal)
  st INDEX MODEL FILE       sentences/s of sentence-transformers' encode() of
                            FILE's lines on the GPU (batch 32)"""
import sys


def fail(why):
    print(why)
    sys.exit(1)


def timed(fn):
    import torch
    fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(3):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        best = min(best, a.elapsed_time(b) / 1000.0)
    return best


def check(backend, index):
    try:
        import torch
    except ImportError as e:
        fail("no PyTorch (%s)" % e)
    if not torch.cuda.is_available():
        fail("PyTorch %s has no GPU support here (a CPU-only build, or no driver)" % torch.__version__)
    if backend not in ("cuda", "hip"):
        fail("PyTorch runs on CUDA and ROCm devices, not %s" % backend)
    hip = getattr(torch.version, "hip", None)
    if (backend == "hip") != bool(hip):
        fail("PyTorch %s is built for %s, not %s" % (torch.__version__, "ROCm" if hip else "CUDA",
                                                      backend))
    if int(index) >= torch.cuda.device_count():
        fail("PyTorch sees %d GPU(s), not %s:%s" % (torch.cuda.device_count(), backend, index))


def gemm(index, n, kind):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    dev, n = "cuda:%s" % index, int(n)
    dt = torch.float16 if kind == "f16" else torch.float32
    a = torch.rand(n, n, device=dev, dtype=dt)
    b = torch.rand(n, n, device=dev, dtype=dt)
    out = torch.empty(n, n, device=dev, dtype=dt)
    run = lambda: torch.mm(a, b, out=out)
    print("%.1f" % (2.0 * n ** 3 / timed(run) / 1e9))


def topk(index, q, db, d):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    dev, q, db, d = "cuda:%s" % index, int(q), int(db), int(d)
    x = torch.rand(q, d, device=dev) - 0.5
    y = torch.rand(db, d, device=dev) - 0.5
    step = max(1, min(db, (1 << 30) // (4 * q)))  # a slice of scores of at most 1 GiB

    def run():
        vals, idx = [], []
        for s in range(0, db, step):
            v, i = torch.topk(torch.mm(x, y[s:s + step].T), 10, dim=1)
            vals.append(v)
            idx.append(i + s)
        v, j = torch.topk(torch.cat(vals, 1), 10, dim=1)
        return torch.gather(torch.cat(idx, 1), 1, j)
    print("%.6f" % timed(run))


def sdpa(index, n, h, d, mask="none"):
    import torch
    dev = "cuda:%s" % index
    q, k, v = (torch.rand(1, int(h), int(n), int(d), device=dev) for _ in range(3))
    f = torch.nn.functional.scaled_dot_product_attention
    causal = mask == "causal"
    print("%.6f" % timed(lambda: f(q, k, v, is_causal=causal)))


def st(index, model, path):
    import time
    import torch
    from sentence_transformers import SentenceTransformer
    lines = [l.rstrip("\n") for l in open(path, encoding="utf-8")]
    m = SentenceTransformer(model, device="cuda:%s" % index)
    m.encode(lines[:64], batch_size=32)
    best = float("inf")
    for _ in range(3):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        m.encode(lines, batch_size=32)
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    print("%.1f" % (len(lines) / best))


if __name__ == "__main__":
    what, args = sys.argv[1], sys.argv[2:]
    {"check": check, "gemm": gemm, "topk": topk, "sdpa": sdpa, "st": st}[what](*args)
