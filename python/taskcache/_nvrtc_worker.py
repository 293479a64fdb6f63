"""A compile worker of taskcache.warp: one process that runs NVIDIA Warp's
own NVRTC (inside Warp's native library) on the CUDA sources it is sent,
one after another, and answers with their PTX.

NVRTC calls from threads of one process barely overlap, so a module's
kernels compile in several such processes at once. The process keeps NVRTC's
precompiled header in memory between compiles (CUDA 13 keeps it nowhere
else), and never imports warp itself (0.3 s a process): it loads the
native library with ctypes and calls the function warp._src.build.build_cuda
calls, with the arguments build_cuda would pass.

Started as `python3 -m taskcache._nvrtc_worker WARP_NATIVE_LIBRARY`.
Protocol on standard input and output, all integers big-endian:
  request:  u32 header length, u32 source length, header (JSON), source
  response: u8 status (0 compiled, 1 failed), u32 length, PTX or message
Header fields: name, arch, arch_suffix, include_dir, include_dirs, debug,
optimization_level, verify_fp, fast_math, fuse_fp, lineinfo,
precompiled_headers, pch_dir. NVRTC's own messages go to standard error.
"""

import ctypes
import json
import os
import shutil
import struct
import sys
import tempfile

# the parameters of wp_cuda_compile_program in warp-lang 1.18 and 1.19
# (taskcache.warp checks the ones Warp itself declares against these)
ARGTYPES = [
    ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p,
    ctypes.c_int, ctypes.POINTER(ctypes.c_char_p), ctypes.c_bool, ctypes.c_int, ctypes.c_bool,
    ctypes.c_bool, ctypes.c_bool, ctypes.c_bool, ctypes.c_bool, ctypes.c_bool, ctypes.c_bool,
    ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_char_p),
    ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_int),
]


def _read_exactly(stream, n):
    data = stream.read(n)
    return data if data is not None and len(data) == n else None


def compile_program(entry, h, src, out_path):
    """Runs wp_cuda_compile_program as build_cuda would, PTX into out_path."""
    dirs = [d.encode() for d in h["include_dirs"]]
    arr = (ctypes.c_char_p * len(dirs))(*dirs) if dirs else None
    pch_dir = h["pch_dir"].encode() if h["pch_dir"] else None
    return entry(
        src, h["name"].encode(), h["arch"], h["arch_suffix"].encode(),
        h["include_dir"].encode(), len(dirs), arr, h["debug"], h["optimization_level"],
        False, h["verify_fp"], h["fast_math"], h["fuse_fp"], h["lineinfo"], False,
        h["precompiled_headers"], out_path.encode(), pch_dir, 0, None, None, None)


def main():
    # standard output is the protocol: the native library's prints go to
    # standard error instead
    reply = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    requests = sys.stdin.buffer
    lib = ctypes.CDLL(sys.argv[1])
    entry = lib.wp_cuda_compile_program
    entry.argtypes = ARGTYPES
    entry.restype = ctypes.c_size_t
    scratch = tempfile.mkdtemp(prefix="taskcache-nvrtc-")
    try:
        while True:
            sizes = _read_exactly(requests, 8)
            if sizes is None:
                return
            hlen, slen = struct.unpack(">II", sizes)
            header, src = _read_exactly(requests, hlen), _read_exactly(requests, slen)
            if header is None or src is None:
                return
            out_path = os.path.join(scratch, "kernel.ptx")  # .ptx: NVRTC writes PTX
            try:
                rc = compile_program(entry, json.loads(header), src, out_path)
                if rc == 0:
                    with open(out_path, "rb") as f:
                        status, data = 0, f.read()
                else:
                    status, data = 1, f"NVRTC failed ({rc}); its log is above".encode()
            except Exception as e:  # a malformed request: say so, keep serving
                status, data = 1, f"{type(e).__name__}: {e}".encode()
            reply.write(struct.pack(">BI", status, len(data)) + data)
            reply.flush()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
