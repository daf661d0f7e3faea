#!/usr/bin/env bats
# tq-bench: the reports parse (Python's csv and json modules), their numbers
# agree with each other (rates recomputed here from the sizes and the times,
# the statistics from the repetitions), every op of lib/tq.h is in the table,
# --check passes on every device here and fails on a perturbed op, --compare
# flags a planted slowdown and not noise, the SVG is well-formed with one
# series per op and device. Tiny sizes and 1 ms repetitions: the figures
# themselves are not judged here (scripts/bench.sh prints them).
load helpers
bats_require_minimum_version 1.5.0

FAST="--min-time 1 -r 3"

has_vulkan() { tq-cat --list-devices | grep -q '^vulkan:0 '; }

@test "--op list: every op of the op API (lib/tq.h), and nothing else" {
    run tq-bench --op list
    assert_success
    want=$(sed -n 's/^tq_status tq_op_\([a-z0-9_]*\)(.*/\1/p' "$ROOT_DIR/lib/tq.h" | sort)
    [ -n "$want" ]
    # matmul_f16: matmul with f16 operands, the op's other dtype;
    # attention_bf16: attention with its bf16 products allowed;
    # attention_causal: attention with its causal mask
    got=$(printf '%s\n' "$output" | awk '{print $1}' | sed 's/_b\{0,1\}f16$//; s/_causal$//' | sort -u)
    [ "$got" = "$want" ] || { diff <(echo "$want") <(echo "$got") >&2; false; }
}

@test "json: every repetition; median, min, max, spread and rates recomputed from the times and sizes" {
    needs_numpy
    TQ_THREADS=2 run --separate-stderr tq-bench --device cpu --op matmul,matmul_f16,scale,add,convert,attention \
        -n 32-128*2 $FAST --format json -o "$BATS_TEST_TMPDIR/r.json"
    assert_success
    [ -z "$output" ]
    py - "$BATS_TEST_TMPDIR/r.json" <<'EOF'
import json, sys, numpy as np
d = json.load(open(sys.argv[1]))
ctx = d["context"]
for k in ("tq", "commit", "compiler", "flags", "date", "host", "cpu", "cores", "threads"):
    assert ctx[k], k
assert ctx["threads"] == "2" and ctx["env"]["TQ_THREADS"] == "2", ctx
assert ctx["devices"][0].startswith("cpu: "), ctx["devices"]
ceil = {c["device"]: c for c in d["ceilings"]}
c = ceil["cpu"]
assert c["fma_gflops"] > 0 and c["sgemm_gflops"] > 0 and c["triad_gbs"] > 0, c
rows = d["results"]
assert [(r["op"], r["n"]) for r in rows] == [(o, n) for o in
        ("matmul", "matmul_f16", "scale", "add", "convert", "attention") for n in (32, 64, 128)], rows
for r in rows:
    t = np.array(r["times_s"])
    assert len(t) == r["reps"] == 3 and r["iters"] >= 1
    med = np.median(t)
    # the report prints 6 significant digits
    assert abs(r["median_s"] - med) <= 1e-5 * med and abs(r["min_s"] - t.min()) <= 1e-5 * med
    assert abs(r["max_s"] - t.max()) <= 1e-5 * med
    mad = 100 * np.median(np.abs(t - med)) / med
    assert abs(r["mad_pct"] - mad) <= 1e-3 * max(mad, 1), (r["mad_pct"], mad)
    n = r["n"]
    # work and traffic from the sizes, independently of the tool's table
    if r["op"] == "matmul":
        flops, nbytes = 2 * n**3, 12 * n * n
    elif r["op"] == "matmul_f16":  # two f16 operands, an f32 result
        flops, nbytes = 2 * n**3, 8 * n * n
    elif r["op"] == "attention":
        flops, nbytes = 4 * n * n * 512, 16 * n * 512
    else:
        per = {"scale": 8, "add": 12, "convert": 6}[r["op"]]
        flops, nbytes = 0, per * n
    assert r["flops"] == flops and r["bytes"] == nbytes, r
    compute = flops > 0 and flops / c["fma_gflops"] > nbytes / c["triad_gbs"]
    want_unit, work, ceiling = (("GFLOP/s", flops, c["fma_gflops"]) if compute
                                else ("GB/s", nbytes, c["triad_gbs"]))
    assert r["unit"] == want_unit and r["bound"] == ("fma" if compute else "triad"), r
    rate = work / r["median_s"] / 1e9
    assert abs(r["rate"] - rate) <= 1e-4 * rate, (r["rate"], rate)
    assert abs(r["frac"] - rate / ceiling) <= 1e-3 * rate / ceiling, (r["frac"], rate / ceiling)
    assert r["dtype"] == {"convert": "f32>f16", "matmul_f16": "f16>f32"}.get(r["op"], "f32")
EOF
}

@test "csv and jsonl parse, with the same columns and the context first" {
    run --separate-stderr tq-bench --device cpu --op softmax,topk -n 1024,2048 $FAST --format csv
    assert_success
    printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/r.csv"
    run --separate-stderr tq-bench --device cpu --op softmax,topk -n 1024,2048 $FAST --format jsonl
    assert_success
    printf '%s\n' "$output" > "$BATS_TEST_TMPDIR/r.jsonl"
    py - "$BATS_TEST_TMPDIR/r.csv" "$BATS_TEST_TMPDIR/r.jsonl" <<'EOF'
import csv, json, sys
lines = open(sys.argv[1]).read().splitlines()
head = [l for l in lines if l.startswith("#")]
assert lines[: len(head)] == head and any(l.startswith("# commit: ") for l in head), head
assert any(l.startswith("# ceiling cpu: FMA peak ") for l in head), head
rows = list(csv.DictReader(l for l in lines if not l.startswith("#")))
assert [(r["op"], r["n"], r["shape"]) for r in rows] == [
    ("softmax", "1024", "[1,1024]"), ("softmax", "2048", "[2,1024]"),
    ("topk", "1024", "[1,1024]"), ("topk", "2048", "[2,1024]")], rows
for r in rows:
    rate = float(r["bytes"]) / float(r["median_s"]) / 1e9
    assert r["unit"] == "GB/s" and abs(float(r["rate"]) - rate) <= 1e-4 * rate, r
    assert float(r["min_s"]) <= float(r["median_s"]) <= float(r["max_s"])
objs = [json.loads(l) for l in open(sys.argv[2])]
assert [o["type"] for o in objs] == ["context", "ceiling"] + ["result"] * 4, objs
assert objs[0]["context"]["commit"] and objs[1]["ceiling"]["device"] == "cpu"
assert [o["result"]["shape"] for o in objs[2:]] == [r["shape"] for r in rows]
assert all(len(o["result"]["times_s"]) == 3 for o in objs[2:])
EOF
}

@test "markdown: the context, the ceilings, a row per op and size" {
    run --separate-stderr tq-bench --device cpu --op gelu,gather -n 4096 $FAST
    assert_success
    assert_line --index 0 "# tq-bench"
    assert_line --regexp '^- commit: [0-9a-f]{7,}(-dirty)?$|^- commit: unknown$'
    assert_line --regexp '^- device: cpu: '
    assert_line --regexp '^- cpu: FMA peak [0-9.]+ GFLOP/s \((avx512|avx2\+fma|portable), [0-9]+ threads\), sgemm [0-9.]+ GFLOP/s'
    assert_line "| device | op | shape | dtype | time | min | max | rate | of ceiling | spread |"
    assert_line --regexp '^\| cpu \| gelu \| \[4,1024\] \| f32 \| .* GB/s \| [0-9]+% triad \| '
    assert_line --regexp '^\| cpu \| gather \| \[4,1024\] \| f32 \| '
}

@test "sizes: lists and ranges; bad lists, ops and devices are one-line usage errors" {
    run --separate-stderr tq-bench --device cpu --op scale -n 1k,3000-12000*2,100-300+100 $FAST --format csv
    assert_success
    got=$(printf '%s\n' "$output" | grep -v '^#' |
        py -c 'import csv, sys; print(" ".join(r["n"] for r in csv.DictReader(sys.stdin)), end=" ")')
    [ "$got" = "1024 3000 6000 12000 100 200 300 " ] || { echo "$got" >&2; false; }
    for bad in "-n 0" "-n 10-5" "-n 4-64*1" "-n 1,,2" "--op nosuch" "--format xml" "--device gpu"; do
        run --separate-stderr tq-bench $bad
        [ "$status" -eq 2 ] || { echo "$bad: status $status" >&2; false; }
        [ "${#stderr_lines[@]}" -eq 1 ] && [[ "$stderr" == "tq-bench: error: "* ]] ||
            { echo "$bad: $stderr" >&2; false; }
    done
    run --separate-stderr tq-bench --device cpu -o /nonexistent/dir/r.md --op scale -n 64 $FAST
    [ "$status" -eq 73 ]
}

@test "--ceilings: the ceilings alone, of every device named" {
    devs=cpu
    has_vulkan && devs=cpu,vulkan:0
    run --separate-stderr tq-bench --ceilings --device "$devs" --min-time 1 --format json
    assert_success
    printf '%s' "$output" | py -c '
import json, sys
d = json.load(sys.stdin)
want = sys.argv[1].split(",")
assert [c["device"] for c in d["ceilings"]] == want, d["ceilings"]
assert d["results"] == []
for c in d["ceilings"]:
    assert c["sgemm_gflops"] > 0 and (c.get("triad_gbs") or c.get("copy_gbs")) > 0, c
    # on a GPU, the f16-operand GEMM rate (tensor cores); none on the CPU
    assert (c.get("f16_gflops", 0) > 0 and c["f16_n"] > 0) == (c["device"] != "cpu"), c
' "$devs"
}

# AMX tiles (a Xeon's amx_bf16, amx_int8): their peaks are ceilings of their
# own, far above the FMA peak (one TDPBF16PS is 8192 multiply-adds, one
# VDPBF16PS 32), and bound the bf16 and int8 products; TQ_AMX=0 has none.
# matmul_bf16 must stay below its ceiling, and its C agree with the CPU's f32
# run of the same rounded operands is what --check holds (TOL_MM).
@test "ceilings: AMX bf16 and int8 peaks where the CPU has the tiles; matmul_bf16 and matmul_i8 held to them" {
    grep -qw amx_bf16 /proc/cpuinfo && grep -qw amx_int8 /proc/cpuinfo ||
        skip "this CPU has no AMX tiles"
    tq-cat --list-devices | grep -q '^cpu .*; AMX bf16 and int8 tiles$' ||
        skip "AMX present but not permitted here: $(tq-cat --list-devices | grep '^cpu')"
    needs_numpy
    # 4096: compute bound by the roofline in a plain build; each row's bound
    # recomputed here from the ceilings (a sanitizer build's triad, 5 GB/s,
    # makes both the triad's), the AMX one where it is compute bound
    run --separate-stderr tq-bench --device cpu --op matmul_bf16,matmul_i8 -n 4096 $FAST --format json
    assert_success
    printf '%s' "$output" | py -c '
import json, sys
d = json.load(sys.stdin)
c = d["ceilings"][0]
assert c["amx_bf16_gflops"] > 4 * c["fma_gflops"], c
assert c["amx_int8_gops"] > 1.5 * c["amx_bf16_gflops"], c
rows = {r["op"]: r for r in d["results"]}
for op, bound, peak in (("matmul_bf16", "amx_bf16", c["amx_bf16_gflops"]),
                        ("matmul_i8", "amx_int8", c["amx_int8_gops"])):
    r = rows[op]
    compute = r["flops"] / (peak * 1e9) > r["bytes"] / (c["triad_gbs"] * 1e9)
    if compute:
        assert r["bound"] == bound, r
        # (the report prints 6 significant digits)
        assert 0 < r["frac"] < 1 and abs(r["rate"] / peak - r["frac"]) < 1e-4 * r["frac"], r
    else:
        assert r["bound"] == "triad", r
'
    TQ_AMX=0 run --separate-stderr tq-bench --device cpu --ceilings --min-time 1 --format json
    assert_success
    printf '%s' "$output" | py -c '
import json, sys
c = json.load(sys.stdin)["ceilings"][0]
assert "amx_bf16_gflops" not in c and "amx_int8_gops" not in c, c
'
    TQ_AMX=0 run tq-cat --list-devices
    assert_line --regexp '^cpu .*; AMX off \(TQ_AMX=0\): AVX-512$'
}

@test "--device vulkan:0 (lavapipe): its rows, smaller default sizes said under the table" {
    has_vulkan || skip "no Vulkan device here"
    run --separate-stderr tq-bench --device vulkan:0 --op scale,matmul,matmul_f16 $FAST
    assert_success
    assert_line --regexp '^- device: vulkan:0: '
    assert_line --regexp '^- vulkan:0: FMA peak [0-9.]+ GFLOP/s \(4096 threads x 64 rounds\), sgemm [0-9.]+ GFLOP/s .*, f16 GEMM [0-9.]+ GFLOP/s \(256\^3, f16 operands\), copy [0-9.]+ GB/s$'
    # 64^3 does 10.7 flops a byte, near lavapipe's ridge (FMA peak over copy,
    # ~15): either bound; the roofline itself is checked at 256^3 below
    assert_line --regexp '^\| vulkan:0 \| matmul \| \[64,64\]x\[64,64\] \| f32 \| .*(fma|copy)'
    # f16 products on a GPU have their own ceiling (tensor cores), never the
    # f32 FMA peak; 64^3 is near lavapipe's ridge for them too (under the
    # sanitizers its copy ceiling measured 0.1 GB/s and the row was copy bound)
    assert_line --regexp '^\| vulkan:0 \| matmul_f16 \| \[64,64\]x\[64,64\] \| f16>f32 \| .*(f16gemm|copy)'
    refute_line --regexp '^\| vulkan:0 \| matmul_f16 \| .*fma'
    assert_line --regexp '^\| vulkan:0 \| scale \| \[4,1024\] \| f32 \| .*copy'
    assert_line "vulkan:0 is a CPU-type device: its default sizes are the smaller ones."
}

@test "--check: every op on the CPU and on Vulkan agrees with the CPU" {
    devs=cpu
    has_vulkan && devs=cpu,vulkan:0
    run --separate-stderr tq-bench --check --device "$devs" -n 64
    assert_success
    nops=$(tq-bench --op list | wc -l)
    ndev=$(tr , '\n' <<< "$devs" | wc -l)
    [ "${#lines[@]}" -eq $((nops * ndev)) ]
    run grep -vE ' ok: (bit-identical to the CPU|NMSE [0-9.e+-]+ <= [0-9e-]+)$' <<< "$output"
    assert_failure
}

@test "--check fails on the perturbed op and device only (TQ_BENCH_PERTURB)" {
    dev=cpu
    has_vulkan && dev=vulkan:0
    for case in "softmax:nmse" "topk:bits" "simtopk:bits" "matmul:nmse"; do
        op=${case%%:*}
        TQ_BENCH_PERTURB=$op:$dev run --separate-stderr tq-bench --check --device "$dev" \
            --op "softmax,topk,simtopk,matmul" -n 64
        [ "$status" -eq 1 ] || { echo "$op: status $status" >&2; false; }
        [ "$stderr" = "tq-bench: error: 1 op differs from the CPU" ]
        run grep -c MISMATCH <<< "$output"
        [ "$output" = 1 ]
        TQ_BENCH_PERTURB=$op:$dev run --separate-stderr tq-bench --check --device "$dev" --op "$op" -n 64
        assert_output --regexp "^$dev +$op .* MISMATCH: "
    done
    # perturbing another device leaves this one passing
    TQ_BENCH_PERTURB=softmax:cuda:0 run tq-bench --check --device "$dev" --op softmax -n 64
    assert_success
}

# A report of three rows from times, as tq-bench writes them.
report() {
    py - "$@" <<'EOF'
import json, sys, statistics as st
out, rows = sys.argv[1], []
for spec in sys.argv[2:]:
    op, times = spec.split("=")
    t = [float(x) for x in times.split(",")]
    med = st.median(t)
    rows.append({"device": "cpu", "op": op, "shape": "[4,1024]", "dtype": "f32", "n": 4096,
                 "reps": len(t), "iters": 1, "median_s": med, "min_s": min(t), "max_s": max(t),
                 "mad_pct": 100 * st.median(abs(x - med) for x in t) / med, "times_s": t})
json.dump({"context": {}, "ceilings": [], "results": rows}, open(out, "w"))
EOF
}

@test "--compare: a planted slowdown is flagged, noise is not; --fail-slower is the exit status" {
    cd "$BATS_TEST_TMPDIR"
    report old.json "gelu=1.00,1.01,0.99,1.00,1.02" "scale=1.00,1.10,0.90,1.05,0.95" \
        "add=1.00,1.01,0.99,1.00,1.00"
    report new.json "gelu=1.50,1.51,1.49,1.50,1.52" "scale=1.08,0.98,1.20,1.00,1.12" \
        "add=0.50,0.51,0.49,0.50,0.50"
    run tq-bench --compare old.json new.json
    assert_success
    assert_line --regexp '^\| cpu \| gelu \| \[4,1024\] \| f32 \| 1 s \| 1\.5 s \| 1\.500 \| slower \|$'
    assert_line --regexp '^\| cpu \| scale \| .* \| ~ \|$'
    assert_line --regexp '^\| cpu \| add \| .* \| 0\.500 \| faster \|$'
    run tq-bench --compare old.json new.json --fail-slower 10
    assert_failure 1
    assert_line "1 slower by more than 10%."
    run tq-bench --compare old.json new.json --fail-slower 60
    assert_success
    # the same report against itself: nothing moves
    run tq-bench --compare old.json old.json --fail-slower 0
    assert_success
    assert_line "3 rows compared (3 old, 3 new): 0 slower, 0 faster, 3 within the noise."
    # bad reports
    echo '{"results": 3}' > bad.json
    run --separate-stderr tq-bench --compare old.json bad.json
    [ "$status" -eq 65 ] && [[ "$stderr" == *"bad.json: not a tq-bench JSON report"* ]]
    run --separate-stderr tq-bench --compare old.json missing.json
    [ "$status" -eq 66 ]
    run --separate-stderr tq-bench --compare old.json
    [ "$status" -eq 2 ]
}

@test "--baseline: this run against an old report, on stderr; --fail-slower fails on the slowdown" {
    cd "$BATS_TEST_TMPDIR"
    run --separate-stderr tq-bench --device cpu --op scale -n 65536 $FAST --format json -o base.json
    assert_success
    # the same rows made 100 times faster: this run is far slower than that
    py -c '
import json
d = json.load(open("base.json"))
for r in d["results"]:
    for k in ("median_s", "min_s", "max_s"):
        r[k] /= 100
json.dump(d, open("fast.json", "w"))'
    run --separate-stderr tq-bench --device cpu --op scale -n 65536 $FAST --baseline fast.json \
        --fail-slower 50 -o now.md
    assert_failure 1
    [[ "$stderr" == *"| cpu | scale | [64,1024] | f32 |"*"| slower |"* ]] || { echo "$stderr" >&2; false; }
    grep -q '^| cpu | scale | \[64,1024\] | f32 |' now.md
}

@test "--svg: well-formed XML, a title, a description, labelled axes, one series per op and device" {
    command -v xmllint >/dev/null || skip "xmllint is not installed (libxml2-utils)"
    devs=cpu
    has_vulkan && devs=cpu,vulkan:0
    cd "$BATS_TEST_TMPDIR"
    run --separate-stderr tq-bench --device "$devs" --op scale,matmul -n 32,64 $FAST --format json \
        -o r.json --svg r.svg
    assert_success
    xmllint --noout r.svg
    py - r.svg r.json <<'EOF'
import json, sys, xml.etree.ElementTree as ET
ns = {"s": "http://www.w3.org/2000/svg"}
root = ET.parse(sys.argv[1]).getroot()
assert root.find("s:title", ns).text.startswith("tq-bench")
assert "percentage of the measured ceiling" in root.find("s:desc", ns).text
texts = [t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text")]
assert any(t.startswith("size n") for t in texts) and any("% of the bounding ceiling" in t for t in texts), texts
series = [(g.get("data-op"), g.get("data-device")) for g in root.iter("{http://www.w3.org/2000/svg}g")
          if g.get("class") == "series"]
rows = json.load(open(sys.argv[2]))["results"]
want = []
for r in rows:
    if (r["op"], r["device"]) not in want:
        want.append((r["op"], r["device"]))
assert series == want, (series, want)
for g in root.iter("{http://www.w3.org/2000/svg}g"):
    if g.get("class") == "series":
        assert len(g.findall("s:circle", ns)) == 2  # one point per size
        assert g.find("s:text", ns).text.startswith(g.get("data-op") + " on " + g.get("data-device"))
EOF
}

@test "samples/bench-two-builds.sh: two builds benchmarked and compared" {
    cd "$BATS_TEST_TMPDIR"
    TQ_BENCH_ARGS="--device cpu --op scale,gelu -n 4096 --min-time 1 -r 3" \
        run --separate-stderr bash "$ROOT_DIR/samples/bench-two-builds.sh" "$TQ_BIN" "$TQ_BIN" out
    assert_success
    [ -s out/old.json ] && [ -s out/new.json ]
    assert_line --regexp '^\| cpu \| scale \| \[4,1024\] \| f32 \| .* \| [0-9.]+ \| (slower|faster|~) \|$'
    assert_line --regexp '^2 rows compared \(2 old, 2 new\)'
}

@test "--tools: each pipeline timed as a process, its rate the lines over the median time" {
    cd "$BATS_TEST_TMPDIR"
    mkdir tmp
    TMPDIR=$PWD/tmp TQ_BENCH_TOOLS_ROWS=500 run --separate-stderr tq-bench --device cpu --op scale -n 1024 \
        --min-time 1 -r 2 --tools --format json -o r.json
    assert_success
    py - r.json "$TQ_BIN" <<'EOF2'
import json, os, sys
rows = [r for r in json.load(open(sys.argv[1]))["results"] if r["device"] == "process"]
got = [(r["op"], r["n"]) for r in rows]
want = [("tq-embed hash:384", 500), ("tq-embed hash:384", 100), ("tq-simmat top-10", 500),
        ("tq-simmat threshold 0.9", 500), ("tq-simmat dedup 0.95", 500),
        ("tq-simmat full matrix", 100), ("tq-attend 8 heads", 100)]
# the tools that exist only in some trees, timed when they lie beside tq-bench
for tool, row in (("tq-quantize", ("tq-quantize int8", 500)),
                  ("tq-train", ("tq-train linear 2 epochs", 500))):
    if os.access(os.path.join(sys.argv[2], tool), os.X_OK):
        want.append(row)
assert got == want, got
for r in rows:
    assert r["unit"] == "rows/s" and len(r["times_s"]) == 2 and r["shape"] == "%d lines" % r["n"]
    assert abs(r["rate"] - r["n"] / r["median_s"]) <= 1e-4 * r["rate"], r
EOF2
    [ -z "$(ls -A tmp)" ] # the scratch folder is gone
}

@test "--check: cuda and hip through the stand-in driver agree with the CPU" {
    [ -n "${TQ_STANDIN_LIB:-}" ] && [ -f "$TQ_STANDIN_LIB" ] ||
        skip "no stand-in driver (TQ_STANDIN_LIB; see tests/bats/gpu.bats)"
    export TQ_CUDA_DRIVER="$TQ_STANDIN_LIB" TQ_CUBLAS="$TQ_STANDIN_LIB"
    export TQ_HIP_RUNTIME="$TQ_STANDIN_LIB" TQ_ROCBLAS="$TQ_STANDIN_LIB"
    ran=0
    for b in cuda hip; do
        tq-cat --list-devices | grep -q "^$b:0 " || continue
        run --separate-stderr tq-bench --check --device "$b:0" -n 64
        assert_success
        [ "${#lines[@]}" -eq "$(tq-bench --op list | wc -l)" ]
        ran=1
    done
    [ "$ran" = 1 ] || skip "the stand-in opened neither cuda:0 nor hip:0"
}

# standin_env: the CUDA and HIP backends on the stand-in driver; its GPU
# sizes (2048^3 ceilings) would take minutes there: TQ_BENCH_SMALL gives the
# CPU-type ones.
standin_env() {
    [ -n "${TQ_STANDIN_LIB:-}" ] && [ -f "$TQ_STANDIN_LIB" ] ||
        skip "no stand-in driver (TQ_STANDIN_LIB; see tests/bats/gpu.bats)"
    export TQ_CUDA_DRIVER="$TQ_STANDIN_LIB" TQ_CUBLAS="$TQ_STANDIN_LIB"
    export TQ_HIP_RUNTIME="$TQ_STANDIN_LIB" TQ_ROCBLAS="$TQ_STANDIN_LIB" TQ_BENCH_SMALL=1
    export TQ_AUTO_MIN_FLOPS=0 # auto takes the GPU for the tests' small work
}

@test "timers: every format says which clock timed each device: the host's on the CPU, timestamp queries on Vulkan; TQ_BENCH_TIMER=host forces the host's" {
    devs=cpu want='{"cpu": "host clock"}'
    has_vulkan && devs=cpu,vulkan:0 want='{"cpu": "host clock", "vulkan:0": "timestamp queries"}'
    run --separate-stderr tq-bench --device "$devs" --op scale -n 64 --min-time 1 -r 2
    assert_success
    assert_line "- timer: cpu: host clock"
    if has_vulkan; then assert_line "- timer: vulkan:0: timestamp queries"; fi
    run --separate-stderr tq-bench --device "$devs" --op scale -n 64 --min-time 1 -r 2 --format csv
    assert_success
    assert_line "# timer: cpu: host clock"
    TQ_BENCH_TIMER=host run --separate-stderr tq-bench --device "$devs" --op scale -n 64 \
        --min-time 1 -r 2 --format json
    assert_success
    printf '%s' "$output" | py -c '
import json, sys
want = json.loads(sys.argv[1])
t = json.load(sys.stdin)["context"]["timers"]
forced = {d: w if w == "host clock" else "host clock (TQ_BENCH_TIMER=host)" for d, w in want.items()}
assert t == forced, t
' "$want"
}

# timed DEV NAME: tq-bench's JSON report of matmul n=64 on DEV in NAME.json,
# and the process's start and end (seconds) in NAME.wall.
timed() {
    date +%s.%N > "$2.wall"
    tq-bench --device "$1" --op matmul -n 64 --min-time 1 -r 2 --format json -o "$2.json"
    date +%s.%N >> "$2.wall"
}

# device_vs_host DEV TIMER: DEV's row timed on its own clock (TIMER) fits in
# the wall time of its process, and is not far below the host clock's time
# of the same op: a device time in the wrong unit fails one or the other.
device_vs_host() {
    cd "$BATS_TEST_TMPDIR"
    timed "$1" dev
    TQ_BENCH_TIMER=host timed "$1" host
    py - "$1" "$2" <<'EOF'
import json, sys
dev, timer = sys.argv[1], sys.argv[2]
d, h = json.load(open("dev.json")), json.load(open("host.json"))
assert d["context"]["timers"][dev] == timer, d["context"]["timers"]
assert h["context"]["timers"][dev].startswith("host clock"), h["context"]["timers"]
(rd,), (rh,) = d["results"], h["results"]
# every repetition's calls ran inside the process
busy = sum(t * rd["iters"] for t in rd["times_s"])
t0, t1 = map(float, open("dev.wall").read().split())
assert 0 < busy <= t1 - t0, (busy, t1 - t0)
# the device's time leaves out the host's submission and wait, not the work
assert rd["median_s"] >= 0.1 * rh["median_s"], (rd["median_s"], rh["median_s"])
print(dev, timer, rd["median_s"], "host clock", rh["median_s"], file=sys.stderr)
EOF
}

@test "timers: Vulkan's timestamp queries agree with the host's clock" {
    has_vulkan || skip "no Vulkan device here"
    device_vs_host vulkan:0 "timestamp queries"
}

@test "timers: CUDA's and HIP's events (stand-in driver) agree with the host's clock" {
    standin_env
    # both named in one context (jsonl: as in the JSON)
    run --separate-stderr tq-bench --device cuda:0,hip:0 --op scale -n 64 --min-time 1 -r 2 \
        --format jsonl
    assert_success
    printf '%s\n' "$output" | head -n 1 | py -c '
import json, sys
t = json.load(sys.stdin)["context"]["timers"]
assert t == {"cuda:0": "device events", "hip:0": "device events"}, t
'
    device_vs_host cuda:0 "device events"
    device_vs_host hip:0 "device events"
}

@test "timers: a driver without cuEventElapsedTime: the host's clock, and the report says why" {
    standin_env
    TQ_STANDIN_HIDE=cuEventElapsedTime run --separate-stderr tq-bench --device cuda:0 --op scale \
        -n 64 --min-time 1 -r 2
    assert_success
    assert_line "- timer: cuda:0: host clock (device events unavailable: cuda: the runtime has no timing events)"
    assert_line --regexp '^\| cuda:0 \| scale \| \[1,64\] \| f32 \| '
}

@test "--tools: a tool that fails is a warning and exit 1, the others' rows stay" {
    cd "$BATS_TEST_TMPDIR"
    mkdir b tmp
    cp "$TQ_BIN/tq-bench" "$TQ_BIN/tq-embed" b/
    printf '#!/bin/sh\necho "tq-simmat: error: planted failure" >&2\nexit 3\n' > b/tq-simmat
    chmod +x b/tq-simmat
    TMPDIR=$PWD/tmp TQ_BENCH_TOOLS_ROWS=200 run --separate-stderr b/tq-bench --device cpu --op scale \
        -n 64 --min-time 1 -r 2 --tools --format csv
    assert_failure 1
    [[ "$stderr" == *"warning: --tools: "*"/b/tq-simmat failed (status 3): tq-simmat: error: planted failure"* ]]
    [[ "$stderr" == *"warning: --tools: tq-attend is not beside tq-bench: not timed"* ]]
    [[ "$stderr" == *"tq-bench: error: 4 measurements failed" ]]
    [ "$(grep -c '^process,tq-embed' <<< "$output")" -eq 2 ]
    [ "$(grep -c '^process,tq-simmat' <<< "$output")" -eq 0 ]
    [ -z "$(ls -A tmp)" ]
}

# gpu_peak DEVS: tq-bench's JSON of matmul at 256^3 on DEVS (GPUs measured
# at the small sizes); each device's ceilings carry an FMA peak by tq's own
# kernel (4096 threads x 64 rounds), its compute ceiling is that peak
# ("fma"), the sgemm rate of the same run is under 1.5 times it, and the
# matmul row (256^3: 43 flops a byte) is held to it where the roofline,
# recomputed here from the run's ceilings, says compute bound. A GEMM cannot beat the
# FMA units it runs on; the margin only absorbs timing noise on two loaded
# cores. Measured here: lavapipe FMA peak ~18 GFLOP/s, sgemm ~0.7 (matmul.comp
# at 256^3 is far from peak); the stand-in's own kernels ~1.1 against ~0.7
# (both fibers on one core; the probe's fmaf is a libm call there).
gpu_peak() {
    run --separate-stderr tq-bench --device "$1" --op matmul -n 256 --min-time 1 -r 2 --format json
    assert_success
    printf '%s' "$output" | py -c '
import json, sys
d = json.load(sys.stdin)
ceil = {c["device"]: c for c in d["ceilings"]}
assert sorted(ceil) == sorted(sys.argv[1].split(",")), ceil
for c in ceil.values():
    assert c["fma_gflops"] > 0 and c["fma_threads"] == 4096 and c["fma_iters"] == 64, c
    assert c["compute"] == "fma" and c["memory"] == "copy", c
    assert c["sgemm_gflops"] <= 1.5 * c["fma_gflops"], ("a GEMM above the FMA peak", c)
    print(c["device"], "FMA peak", c["fma_gflops"], "sgemm", c["sgemm_gflops"], file=sys.stderr)
for r in d["results"]:
    c = ceil[r["device"]]
    # the roofline from the ceilings of this run (under the sanitizers the copy
    # rate is so low that 256^3 can come out bandwidth bound)
    assert r["op"] == "matmul", r
    if r["flops"] / c["fma_gflops"] > r["bytes"] / c["copy_gbs"]:
        assert r["unit"] == "GFLOP/s" and r["bound"] == "fma", r
        assert abs(r["frac"] - r["rate"] / c["fma_gflops"]) <= 1e-3 * r["frac"], (r, c)
    else:
        assert r["unit"] == "GB/s" and r["bound"] == "copy", r
        assert abs(r["frac"] - r["rate"] / c["copy_gbs"]) <= 1e-3 * r["frac"], (r, c)
' "$1"
}

@test "ceilings: vulkan:0 (lavapipe): an FMA peak by tq's own kernel, above its sgemm; compute-bound rows held to it" {
    has_vulkan || skip "no Vulkan device here"
    gpu_peak vulkan:0
}

@test "ceilings: cuda:0 and hip:0 (stand-in): an FMA peak by tq's own kernel, above their own GEMM kernel; compute-bound rows held to it" {
    standin_env
    # the stand-in's cuBLAS is host code outside the emulated device, not
    # bound by its FMA rate: the line and JSON only (markdown) ...
    run --separate-stderr tq-bench --ceilings --device cuda:0,hip:0 --min-time 1
    assert_success
    assert_line --regexp '^- cuda:0: FMA peak [0-9.]+ GFLOP/s \(4096 threads x 64 rounds\), sgemm '
    assert_line --regexp '^- hip:0: FMA peak [0-9.]+ GFLOP/s \(4096 threads x 64 rounds\), sgemm '
    # ... and the bound against the backends' own matmul kernels, which run
    # on the emulated threads as the probe does (BLAS hidden)
    TQ_CUBLAS=/nonexistent/libblas-hidden.so TQ_ROCBLAS=/nonexistent/libblas-hidden.so \
        gpu_peak cuda:0,hip:0
}
