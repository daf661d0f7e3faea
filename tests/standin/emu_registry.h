/* emu_registry.h: turns a kernel function into a registry entry (emu_state.h)
 * at compile time. The parameter types come from the function's own type, so
 * the stand-in knows each argument's size and offset in a packed argument
 * buffer, as the real driver knows them from the compiled kernel, and checks
 * the launch's buffer size against them. Included by the generated
 * registry-*.cpp files (gen-registry.sh). */
#ifndef TQ_EMU_REGISTRY_H
#define TQ_EMU_REGISTRY_H

#include <stddef.h>
#include <string.h>
#include <utility>

#include "emu_state.h"

template <typename... A> struct tq_emu_sig {
    static constexpr size_t n = sizeof...(A);
    /* offsets[0..n-1] as CUDA packs a kernel's parameters, each at its natural
     * alignment; offsets[n] = the end of the last one, not rounded up to the
     * largest alignment: the size the driver wants in the `extra` form (an
     * H200 refused (ptr, ptr, u64, float) passed as 32 bytes: 28 it is) */
    struct layout {
        size_t off[n + 1];
        size_t size[n + 1];
    };
    static constexpr layout make()
    {
        layout l{};
        const size_t sz[] = {sizeof(A)..., 0};
        const size_t al[] = {alignof(A)..., 1};
        size_t pos = 0;
        for (size_t i = 0; i < n; i++) {
            pos = (pos + al[i] - 1) / al[i] * al[i];
            l.off[i] = pos;
            l.size[i] = sz[i];
            pos += sz[i];
        }
        l.off[n] = pos;
        return l;
    }
    static constexpr layout L = make();

    template <typename T> static T load(const unsigned char *p)
    {
        T v;
        memcpy((void *)&v, p, sizeof v);
        return v;
    }
    template <size_t... I>
    static void call(void (*f)(A...), const unsigned char *b, std::index_sequence<I...>)
    {
        f(load<A>(b + L.off[I])...);
    }
    static void invoke(tq_emu_fn raw, const unsigned char *args)
    {
        call(reinterpret_cast<void (*)(A...)>(raw), args, std::index_sequence_for<A...>{});
    }
};

template <typename... A>
static tq_emu_kernel tq_emu_entry(const char *name, void (*f)(A...))
{
    typedef tq_emu_sig<A...> S;
    return tq_emu_kernel{name, reinterpret_cast<tq_emu_fn>(f), &S::invoke, S::L.off[S::n],
                         (unsigned)S::n, S::L.off, S::L.size};
}

#define TQ_EMU_KERNEL(ns, fn) tq_emu_entry(#fn, &ns::fn)

#endif
