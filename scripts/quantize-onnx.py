"""quantize-onnx.py F32.onnx INT8.onnx: ONNX Runtime's dynamic int8 quantization
of the model exported by export-onnx.py, as its docs tell a user on a CPU to do
it for a transformer (onnxruntime.ai/docs/performance/model-optimizations/
quantization.html): quantize_dynamic (dynamic, their advice for transformers),
int8 weights (QuantType.QInt8) against uint8 activations (U8S8). Prints how it
quantized, for the bench line. Run by .venv-ort (onnxruntime and onnx).

  per_channel=True: quantize_dynamic's default is per-tensor (False), and the
    docs' FAQ says to try per-channel "if the accuracy loss is large": per
    tensor, the min cosine of all-MiniLM-L6-v2's vectors to its f32 ones was
    0.939 on the bench's sentences, per channel 0.987, at the same speed.
  reduce_range (default False): the docs want it (7-bit weights) for U8S8 on
    x86 without VNNI, where VPMADDUBSW saturates, and generally with
    per-channel there; not needed with VNNI (nor on ARM). So: on where an x86
    CPU has neither AVX512-VNNI nor AVX-VNNI, off elsewhere.
  No Transformer Model Optimization Tool pass first (the docs' route to
    QAttention): with ONNX Runtime 1.32 it needs sympy, and the quantizer then
    fails on the fused graph without extra_options DefaultTensorType; done so
    (QAttention, QEmbedLayerNormalization), it ran 5-8% slower than this on 2
    threads of a Xeon with AMX, with min cosine 0.983 to f32 against
    0.987 (the session's ORT_ENABLE_ALL fuses the plain graph its own way).
  sentence-transformers' own export_dynamic_quantized_onnx_model (optimum's
    "avx512_vnni" configuration) sets per_channel=True, reduce_range=False too."""
import platform
import sys

from onnxruntime.quantization import QuantType, quantize_dynamic

flags = set()
try:
    for line in open("/proc/cpuinfo"):
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
except OSError:
    pass
x86 = platform.machine().lower() in ("x86_64", "amd64", "i686", "i386")
vnni = bool(flags & {"avx512_vnni", "avx_vnni"})
reduce_range = x86 and not vnni
quantize_dynamic(sys.argv[1], sys.argv[2], weight_type=QuantType.QInt8, per_channel=True,
                 reduce_range=reduce_range)
print("quantize_dynamic QInt8 per-channel, reduce_range %s" %
      ("on (x86 without VNNI)" if reduce_range else
       "off (%s)" % ("VNNI" if vnni else "not x86")))
