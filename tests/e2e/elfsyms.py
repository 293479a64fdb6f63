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


def variables_in(path_or_bytes, section):
    """{name: offset} of the variables defined in the named section (e.g.
    ".nv.constant3", the __constant__ bank)."""
    data = path_or_bytes
    if isinstance(path_or_bytes, str):
        with open(path_or_bytes, "rb") as f:
            data = f.read()
    (e_shoff,) = struct.unpack_from("<Q", data, 0x28)
    e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    heads = [struct.unpack_from("<IIQQQQIIQQ", data, e_shoff + i * e_shentsize)
             for i in range(e_shnum)]
    names_off = heads[e_shstrndx][4]

    def name_at(off):
        return data[off:data.index(b"\0", off)].decode("utf-8", "replace")
    wanted = {i for i, h in enumerate(heads) if name_at(names_off + h[0]) == section}
    out = {}
    for h in heads:
        if h[1] != 2 or not h[9]:  # SHT_SYMTAB
            continue
        str_off = heads[h[6]][4]
        for k in range(h[5] // h[9]):
            st_name, _info, _other, st_shndx, value, _size = struct.unpack_from(
                "<IBBHQQ", data, h[4] + k * h[9])
            name = name_at(str_off + st_name)
            if st_shndx in wanted and name and not name.startswith("."):
                out[name] = value
    return out


def _section_heads(path_or_bytes):
    """The file's bytes and its sections as (name, type, offset, size)."""
    data = path_or_bytes
    if isinstance(path_or_bytes, str):
        with open(path_or_bytes, "rb") as f:
            data = f.read()
    (e_shoff,) = struct.unpack_from("<Q", data, 0x28)
    e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    heads = [struct.unpack_from("<IIQQQQIIQQ", data, e_shoff + i * e_shentsize)
             for i in range(e_shnum)]
    names_off = heads[e_shstrndx][4]
    return data, [(data[names_off + h[0]:data.index(b"\0", names_off + h[0])]
                   .decode("utf-8", "replace"), h[1], h[4], h[5]) for h in heads]


def section_sizes(path_or_bytes):
    """{section name: size in bytes}."""
    return {name: size for name, _, _, size in _section_heads(path_or_bytes)[1]}


def sections(path_or_bytes):
    """{section name: its bytes} (b"" for one that takes no room in the file)."""
    SHT_NOBITS = 8
    data, heads = _section_heads(path_or_bytes)
    return {name: b"" if typ == SHT_NOBITS else data[off:off + size]
            for name, typ, off, size in heads}


def object_counts(path_or_bytes):
    """How many variables of each name the image defines. ptxas names a
    variable declared inside a function $__NAME__N, N a number of its own,
    and taskcache names compiler-named constants ($str, __unnamed_1) by
    content ($__tcA...): those are counted by kind instead of by name."""
    import collections
    import re
    out = collections.Counter()
    for n, t, _b, _o, shndx in symbols(path_or_bytes):
        if t != STT_OBJECT or shndx == 0 or n.startswith("."):
            continue
        m = re.fullmatch(r"\$__(.+)__\d+", n)
        if m and not n.startswith("$__tcA"):
            out["$__" + m.group(1) + "__N"] += 1
        elif n.startswith("$") or n.startswith("__unnamed_"):
            out["(compiler-named constant)"] += 1
        else:
            out[n] += 1
    return out
