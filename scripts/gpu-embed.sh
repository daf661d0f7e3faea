#!/bin/sh
# gpu-embed.sh SYMBOL IMAGE OUT.S: an assembler file that puts IMAGE's bytes in
# libtq.a as SYMBOL[] with SYMBOL_size, aligned for the driver's loader.
set -eu
sym=$1 img=$2 out=$3
mkdir -p "$(dirname "$out")"
cat > "$out" <<ASM
    .section .rodata
    .balign 64
    .globl $sym
$sym:
    .incbin "$(cd "$(dirname "$img")" && pwd)/$(basename "$img")"
    .byte 0
${sym}_end:
    .balign 8
    .globl ${sym}_size
${sym}_size:
    .quad ${sym}_end - $sym - 1
    .section .note.GNU-stack,"",@progbits
ASM
