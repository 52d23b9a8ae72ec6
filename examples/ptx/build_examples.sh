#!/bin/sh
# Regenerate the .ptx beside each .cu example: nvcc -ptx for sm_90a, with a header that says where
# it came from and the .cu's launch block copied in front (the PTX submission carries its spec).
set -e
cd "$(dirname "$0")"
for cu in gemm_bf16_mma.cu gemm_bf16_wgmma_tma.cu; do
    [ -f "$cu" ] || continue
    ptx="${cu%.cu}.ptx"
    nvcc -ptx -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 "$cu" -o "$ptx.body"
    {
        echo "// Generated from $cu by: nvcc -ptx -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17"
        echo "//"
        sed -n '/^\/\/ solboard-launch:/,/^[^\/]/p' "$cu" | grep '^//'
        echo
        cat "$ptx.body"
    } > "$ptx"
    rm "$ptx.body"
done
