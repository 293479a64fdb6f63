"""Reads the symbol table of a 64-bit little-endian ELF file (a cubin).

Used by the tests to check that a linked image holds every kernel and every
global variable of its input. Standard library only."""

import struct

STT_OBJECT, STT_FUNC = 1, 2
STO_CUDA_ENTRY = 0x10  # st_other bit nvlink/ptxas set on kernel symbols


def symbols(path_or_bytes):
    """Returns a list of (name, type, bind, other, section index)."""
    data = path_or_bytes
    if isinstance(path_or_bytes, str):
        with open(path_or_bytes, "rb") as f:
            data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    (e_shoff,) = struct.unpack_from("<Q", data, 0x28)
    e_shentsize, e_shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = []
    for i in range(e_shnum):
        off = e_shoff + i * e_shentsize
        name, typ, flags, addr, offset, size, link, info, align, entsize = struct.unpack_from(
            "<IIQQQQIIQQ", data, off)
        sections.append((typ, offset, size, link, entsize))
    out = []
    for typ, offset, size, link, entsize in sections:
        if typ != 2 or not entsize:  # SHT_SYMTAB
            continue
        str_off = sections[link][1]
        for k in range(size // entsize):
            st_name, st_info, st_other, st_shndx, _value, _size = struct.unpack_from(
                "<IBBHQQ", data, offset + k * entsize)
            end = data.index(b"\0", str_off + st_name)
            name = data[str_off + st_name:end].decode("utf-8", "replace")
            out.append((name, st_info & 15, st_info >> 4, st_other, st_shndx))
    return out


def kernels(path_or_bytes):
    """Names of the kernels (entry functions) defined in the image."""
    return sorted({n for n, t, _b, other, shndx in symbols(path_or_bytes)
                   if t == STT_FUNC and shndx != 0 and other & STO_CUDA_ENTRY})


def globals_(path_or_bytes):
    """Names of the variables defined in the image (any binding)."""
    return sorted({n for n, t, _b, _o, shndx in symbols(path_or_bytes)
                   if t == STT_OBJECT and shndx != 0 and not n.startswith(".")})
