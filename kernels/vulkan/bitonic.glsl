// bitonic.glsl: a sort of S entries in shared memory by the ranking of the
// top-k ops: larger key first, ties to the lower index; a key is a float
// mapped to an unsigned order (NaN lowest, -0 as +0), an index 64 bits
// (hi, lo), padding (key 0, index all ones) after everything.
// The includer defines S (a power of two), declares the workgroup first (see
// common.glsl) and includes common.glsl (order_key) before this file.
shared uint s_key[S], s_lo[S], s_hi[S];

bool ranks_before(uint a, uint b)
{
    if (s_key[a] != s_key[b])
        return s_key[a] > s_key[b];
    if (s_hi[a] != s_hi[b])
        return s_hi[a] < s_hi[b];
    return s_lo[a] < s_lo[b];
}

// Sorts the first n entries (n a power of two, <= S).
void bitonic_sort(uint n)
{
    uint t = gl_LocalInvocationID.x, W = gl_WorkGroupSize.x;
    barrier();
    for (uint size = 2; size <= n; size <<= 1)
        for (uint stride = size >> 1; stride > 0; stride >>= 1) {
            for (uint p = t; p < n / 2; p += W) {
                uint i = 2 * p - (p & (stride - 1)); // first of the pair
                uint j = i + stride;
                bool first_half = (i & size) == 0;   // this block sorts best-first
                if (ranks_before(j, i) == first_half) {
                    uint k = s_key[i], l = s_lo[i], h = s_hi[i];
                    s_key[i] = s_key[j]; s_lo[i] = s_lo[j]; s_hi[i] = s_hi[j];
                    s_key[j] = k; s_lo[j] = l; s_hi[j] = h;
                }
            }
            barrier();
        }
}
