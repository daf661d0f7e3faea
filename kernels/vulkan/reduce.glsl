// reduce.glsl: sums and maxima over a workgroup, for the row shaders (one
// workgroup a row). With SUBGROUP, each subgroup reduces in registers and the
// partials are added in subgroup order; without, a tree in shared memory.
// Either way the order is fixed by the workgroup size: the same bits on
// every run. Call from uniform control flow only.
#ifdef SUBGROUP
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable
#endif

shared float red[256];

float wg_sum(float v)
{
#ifdef SUBGROUP
    v = subgroupAdd(v);
    if (subgroupElect())
        red[gl_SubgroupID] = v;
    barrier();
    float s = 0.0;
    for (uint i = 0; i < gl_NumSubgroups; i++)
        s += red[i];
    barrier();
    return s;
#else
    uint t = gl_LocalInvocationID.x;
    red[t] = v;
    barrier();
    for (uint s = gl_WorkGroupSize.x / 2; s > 0; s >>= 1) {
        if (t < s)
            red[t] += red[t + s];
        barrier();
    }
    float r = red[0];
    barrier();
    return r;
#endif
}

// v must not be NaN (callers count NaNs apart)
float wg_max(float v)
{
#ifdef SUBGROUP
    v = subgroupMax(v);
    if (subgroupElect())
        red[gl_SubgroupID] = v;
    barrier();
    float s = -1.0 / 0.0;
    for (uint i = 0; i < gl_NumSubgroups; i++)
        s = max(s, red[i]);
    barrier();
    return s;
#else
    uint t = gl_LocalInvocationID.x;
    red[t] = v;
    barrier();
    for (uint s = gl_WorkGroupSize.x / 2; s > 0; s >>= 1) {
        if (t < s)
            red[t] = max(red[t], red[t + s]);
        barrier();
    }
    float r = red[0];
    barrier();
    return r;
#endif
}
