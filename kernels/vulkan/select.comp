#version 450
// select.comp: simtopk's candidates, one workgroup a row of a score tile:
// the best K of the row's m scores and the K entries kept in vals/idx from
// the tiles before (when kept is set), by a radix select on the order keys
// (four passes of 8 bits find the K-th key exactly), written back in no
// particular order. Entries tied at the K-th key are taken in whatever order
// the atomics give: any choice among them keeps what the host relies on,
// that every entry left out scores at most the least one taken. The host
// sorts what it gets. A handful of barriers a row, where a full sort would
// take dozens a round (lavapipe, a CPU driver, pays dearly for each).
#extension GL_GOOGLE_include_directive : enable
layout(local_size_x_id = 0) in; // before the includes: see common.glsl
#include "common.glsl"

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) buffer V { float vals[]; };
layout(std430, binding = 2) buffer I { uint idx[]; }; // i64 as (low, high)

layout(push_constant) uniform PC {
    uint x_off, v_off, i_off, rows, m, k; // x [rows, m], vals and idx [rows, k], k <= KMAX
    uint kept;                            // 1: vals and idx hold K entries to carry on
    uint base_lo, base_hi;                // column j enters as index base + j
} pc;

#define KMAX 512
shared uint s_key[KMAX], s_lo[KMAX], s_hi[KMAX];
shared uint hist[256];
shared uint s_prefix, s_need, s_gt, s_eq;

void main()
{
    uint r = flat_group();
    if (r >= pc.rows)
        return; // the whole workgroup: control flow stays uniform
    uint t = gl_LocalInvocationID.x, W = gl_WorkGroupSize.x;
    uint out0 = r * pc.k, xr = pc.x_off + r * pc.m;
    uint kept = pc.kept != 0u ? pc.k : 0u, n = kept + pc.m;
    // the kept entries move to shared memory: their places get rewritten
    for (uint s = t; s < kept; s += W) {
        s_key[s] = order_key(vals[pc.v_off + out0 + s]);
        s_lo[s] = idx[pc.i_off + 2 * (out0 + s)];
        s_hi[s] = idx[pc.i_off + 2 * (out0 + s) + 1];
    }
    // the K-th largest key, 8 bits a pass: prefix holds the bits found, need
    // the rank still sought among the keys that share them (n >= K: the host
    // sees to it)
    uint prefix = 0u, mask = 0u, need = pc.k;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (uint b = t; b < 256u; b += W)
            hist[b] = 0u;
        barrier();
        for (uint s = t; s < n; s += W) {
            uint key = s < kept ? s_key[s] : order_key(x[xr + s - kept]);
            if ((key & mask) == prefix)
                atomicAdd(hist[(key >> shift) & 255u], 1u);
        }
        barrier();
        if (t == 0u) {
            uint cum = 0u, b = 256u;
            while (b > 0u) {
                b--;
                if (cum + hist[b] >= need)
                    break;
                cum += hist[b];
            }
            s_prefix = prefix | (b << shift);
            s_need = need - cum;
        }
        barrier();
        prefix = s_prefix;
        need = s_need;
        mask |= 255u << shift;
    }
    // prefix is the K-th key: every larger key goes, and `need` of those equal
    if (t == 0u) {
        s_gt = 0u;
        s_eq = 0u;
    }
    barrier();
    uint ngt = pc.k - need;
    for (uint s = t; s < n; s += W) {
        uint key, lo, hi;
        if (s < kept) {
            key = s_key[s];
            lo = s_lo[s];
            hi = s_hi[s];
        } else {
            uint j = s - kept;
            key = order_key(x[xr + j]);
            lo = pc.base_lo + j;
            hi = pc.base_hi + (lo < j ? 1u : 0u);
        }
        uint slot = 0xffffffffu;
        if (key > prefix) {
            slot = atomicAdd(s_gt, 1u);
        } else if (key == prefix) {
            uint e = atomicAdd(s_eq, 1u);
            if (e < need)
                slot = ngt + e;
        }
        if (slot != 0xffffffffu) {
            vals[pc.v_off + out0 + slot] = key_value(key);
            idx[pc.i_off + 2 * (out0 + slot)] = lo;
            idx[pc.i_off + 2 * (out0 + slot) + 1] = hi;
        }
    }
}
