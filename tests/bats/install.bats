#!/usr/bin/env bats
# make install: the tools, man pages, libtq.a, tq.h and tq.pc land under PREFIX,
# and a program built with pkg-config against them writes a stream that the
# independent Python reader decodes to the values it was given.
load helpers

@test "make install gives a usable library, header, pkg-config file, tools and man pages" {
    needs_numpy
    prefix="$BATS_TEST_TMPDIR/prefix"
    # a plain build, even when the suite runs under `make SAN=1` (MAKEFLAGS carries SAN)
    run env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u SAN make -s -C "$ROOT_DIR" install PREFIX="$prefix"
    assert_success
    for f in bin/tq-cat lib/libtq.a include/tq.h lib/pkgconfig/tq.pc \
             share/man/man1/tq-cat.1 share/man/man5/tq-format.5 share/man/man7/tq.7; do
        [ -s "$prefix/$f" ] || fail "missing $prefix/$f"
    done
    # bash completion, one file per tool name (bash-completion loads them by name)
    for t in tq-cat tq-embed tq-simmat tq-attend tq-score; do
        [ -s "$prefix/share/bash-completion/completions/$t" ] || fail "no completion for $t"
    done
    run bash -c ". '$prefix/share/bash-completion/completions/tq-simmat'
        COMP_WORDS=(tq-simmat --metric ''); COMP_CWORD=2; _tq tq-simmat; echo \"\${COMPREPLY[*]}\""
    assert_output "cosine dot l2"
    run "$prefix/bin/tq-cat" --version
    assert_output "tq-cat $(sed -n 's/^#define TQ_VERSION "\(.*\)"/\1/p' "$ROOT_DIR/lib/tq.h")"

    cat > "$BATS_TEST_TMPDIR/prog.c" <<'C'
#include <tq.h>
#include <stdio.h>
int main(void) {
    float x[6] = {1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, 7.0f};
    int64_t dims[2] = {2, 3};
    tq_writer *w;
    if (tq_writer_open_fd(&w, 1, "stdout") ||
        tq_writer_write(w, "emb", TQ_DTYPE_F32, 2, dims, NULL, 0, x, sizeof x) ||
        tq_writer_close(w, 1)) {
        fprintf(stderr, "%s\n", tq_errmsg());
        return 1;
    }
    return 0;
}
C
    export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
    run bash -c "cc -std=c11 \$(pkg-config --cflags tq) '$BATS_TEST_TMPDIR/prog.c' \
        \$(pkg-config --libs --static tq) -o '$BATS_TEST_TMPDIR/prog'"
    assert_success
    "$BATS_TEST_TMPDIR/prog" > "$BATS_TEST_TMPDIR/out.tq"
    run py -c "
import sys, tqstream as t, numpy as np
fr = t.read(open('$BATS_TEST_TMPDIR/out.tq','rb').read())
assert len(fr) == 1 and fr[0]['name'] == 'emb' and fr[0]['dims'] == [2, 3], fr
want = np.array([1.5, -2.0, 3.25, 0.0, 1e-3, 7.0], dtype=np.float32).reshape(2, 3)
assert (t.to_numpy(fr[0]) == want).all()
print('ok')"
    assert_output "ok"
}
