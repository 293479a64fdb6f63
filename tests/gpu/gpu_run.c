/* gpu_run: runs the kernels of a PTX module on the GPU and records what
 * they computed, so that builds of the same module can be compared bit for
 * bit (whole-module ptxas, taskcache cold / warm / after an edit). Also
 * times kernels and the time to the first launch. Run by
 * scripts/gpu-check.sh; see tests/gpu/README.md.
 *
 * Usage
 * -----
 *   gpu_run --spec FILE.spec|auto --ptx IN.ptx --cache DIR [--compiler ptxas|inprocess]
 *           [--arch sm_90] [--jobs N] [--whole-program-units|--relocatable-units]
 *           [--unit-cost N]
 *           [--expect-compiled N|all] [--expect-module-hit 0|1]
 *           --seed S --out RESULT.txt           build with tc_build, load with tc_module_load, run
 *   gpu_run --spec FILE.spec|auto --image IN.cubin --seed S --out RESULT.txt
 *                                               load a prebuilt image with tc_module_load_image, run
 *   ... --time REPS [--compare IMAGE]...        instead of recording results: every kernel once,
 *                                               then per kernel 5 warm-up launches and REPS timed
 *                                               batches of 10 back-to-back launches (GPU time
 *                                               per launch): "time KERNEL MEDIAN_US MIN_US".
 *                                               Each --compare image (up to 8) is loaded into
 *                                               the same process, its globals copied from the
 *                                               first module, and timed interleaved with it,
 *                                               batch by batch in rotating order, so clock and
 *                                               process drift hit all alike:
 *                                               "time@J KERNEL MEDIAN_US MIN_US" (J = 1, 2, 3)
 *   ... --first-launch [--kernel NAME]          (--spec auto) time from after cuInit + context
 *                                               creation to the end of the first launch's
 *                                               synchronize (reading, building, loading included)
 *   gpu_run --spec auto --ptx-jit IN.ptx --first-launch   the same through the driver's PTX JIT
 *   gpu_run --spec FILE.spec --check-spec       parse the spec only (no GPU): one line per launch
 *   gpu_run --spec F --ptx IN.ptx --cache DIR --build-only [--write-image OUT.cubin]
 *   gpu_run --spec F --image IN.cubin --build-only
 *                                               no GPU: build and check the build expectations;
 *                                               check that the image has every kernel and
 *                                               global of the spec, that the spec covers every
 *                                               kernel, and that each launch's argument sizes
 *                                               match the image's .nv.info parameter records
 *   other options: --dump DIR (raw bytes of every recorded object), --allow-uncovered
 *   (do not fail when the image has kernels the spec never launches), --record-args
 *   (after a launch, record only the buffers passed to it, and the globals: for specs
 *   that give every launch buffers of its own), --pad-bytes N (allocate N bytes before
 *   the buffers, so that they lie elsewhere: a kernel whose results change reads or
 *   writes outside its buffers), --device N.
 *
 * Exit status: 0 success; 1 a check failed (build expectation, spec does not
 * match the kernels, a kernel of the image is not covered, build error);
 * 2 usage, spec syntax, environment or CUDA error (no driver, no device, a
 * failed CUDA call, a launch that faulted).
 *
 * Spec format (one directive per line; '#' starts a comment)
 * -----------------------------------------------------------
 *   stack BYTES                       set CU_LIMIT_STACK_SIZE (deep recursion)
 *   buf NAME TYPE COUNT ROLE [LO HI]  device buffer of COUNT elements. ROLE:
 *        in     random data once, before the first launch
 *        inout  random data once; kernels may update it (later launches see it)
 *        out    0xFF bytes ("poison") before EVERY launch
 *        zero   zero bytes before EVERY launch (accumulators)
 *   global NAME TYPE COUNT init|keep [LO HI]
 *        a __device__ or __constant__ variable (tc_module_global); its size
 *        must be COUNT * sizeof(TYPE). init: random data written once before
 *        the first launch; keep: the module's own initializer is kept.
 *        Read back and recorded after every launch either way. (Do not list
 *        variables holding addresses: their values differ between images.)
 *   blob NAME SIZE                    bytes of a by-value struct argument, zeroed
 *   set NAME OFFSET TYPE VALUE        one value in a blob
 *   fill NAME OFFSET TYPE COUNT [LO HI]  random values in a blob
 *   addr NAME OFFSET BUF              the device address of buffer BUF (declared
 *        before) in a blob: a struct that holds pointers (Warp's arrays)
 *   launch KERNEL grid=X[,Y[,Z]] block=X[,Y[,Z]] [shmem=BYTES] [coop] ARG...
 *        ARG:  @BUF           the buffer's device address
 *              TYPE:VALUE     a scalar (i8 u8 i16 u16 i32 u32 i64 u64 f32 f64)
 *              blob:NAME      a struct by value
 *              fnptr:GLOBAL[I]  8 bytes read from element I of a global (a
 *                             device function pointer) just before the launch
 *   TYPE: i8 u8 i16 u16 i32 u32 i64 u64 f32 f64. Random data: floats uniform
 *   in [LO, HI), default [-1, 1) (always finite); integers uniform in
 *   [LO, HI) when a range is given, else uniformly random bits.
 *   Random data depends only on --seed and the object's name.
 *
 *   `--spec auto` is for modules from bench/gen_module.py: every kernel in
 *   name order with (n=65536, dt=0.01[, ext, ext_stride=1]), grid 256 x
 *   block 256, ext a 65536-float buffer; globals found in the image's ELF
 *   symbol table are initialized by name: f_* g_* c_* floats in [-1,1),
 *   i_* c_i* ints in [0,64); others are left alone and not recorded.
 *
 * RESULT file: "key value" lines. Only the "after" lines are results:
 *   after LAUNCH# KERNEL buf|global NAME TYPE COUNT SHA256
 * The run ends with "status ok" (or "status FAIL ..."). Device printf output
 * goes to this process's stdout; gpu_run's own messages go to stderr.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "taskcache.h"

/* ---- messages and exits ------------------------------------------------------ */

static FILE *g_result;  /* RESULT file, or NULL */

static void result_line(const char *fmt, ...)
{
    if (!g_result)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(g_result, fmt, ap);
    va_end(ap);
    fputc('\n', g_result);
    fflush(g_result);
}

_Noreturn static void die(int code, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fflush(stdout);
    fprintf(stderr, "gpu_run: error: %s\n", msg);
    result_line("status FAIL %s", msg);
    exit(code);
}

static void note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("gpu_run: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        die(2, "out of memory");
    return p;
}

static char *xstrdup(const char *s)
{
    char *p = strdup(s);
    if (!p)
        die(2, "out of memory");
    return p;
}

/* ---- the CUDA driver, opened with dlopen -------------------------------------
 * The binary does not link libcuda: on a machine without a driver it starts
 * and says so (exit 2) instead of failing in the dynamic loader. Each entry
 * point is looked up under the name cuda.h maps it to (cuMemAlloc ->
 * cuMemAlloc_v2), with the prototype cuda.h declares for it. */

#define MAX_COMPARE 8 /* --compare images in one timing run */

#define TC_STR_(x) #x
#define TC_XSTR(x) TC_STR_(x)

#define DRIVER_FUNCS(X)                                                                        \
    X(cuInit) X(cuDriverGetVersion) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName)     \
    X(cuDeviceGetAttribute) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)          \
    X(cuCtxSetCurrent) X(cuCtxSynchronize) X(cuCtxSetLimit) X(cuGetErrorString)              \
    X(cuGetErrorName) X(cuMemAlloc) X(cuMemFree) X(cuMemcpyHtoD) X(cuMemcpyDtoH)            \
    X(cuMemsetD8) X(cuEventCreate) X(cuEventRecord) X(cuEventSynchronize)                   \
    X(cuEventElapsedTime) X(cuEventDestroy) X(cuFuncGetParamInfo)                           \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessor)

static struct {
#define DECLARE_FN(f) __typeof__(&f) p_##f;
    DRIVER_FUNCS(DECLARE_FN)
#undef DECLARE_FN
    int loaded;
} drv;

#define D(f) drv.p_##f

static void load_driver(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        die(2, "no CUDA driver: cannot load libcuda.so.1 (%s); this program needs a machine "
               "with an NVIDIA GPU and its driver",
            e ? e : "not found");
    }
#define LOOKUP_FN(f)                                                                           \
    {                                                                                          \
        void *sym = dlsym(lib, TC_XSTR(f));                                                    \
        if (!sym)                                                                              \
            die(2, "no usable CUDA driver: libcuda.so.1 lacks %s (driver too old?)",          \
                TC_XSTR(f));                                                                   \
        memcpy(&drv.p_##f, &sym, sizeof sym);                                                  \
    }
    DRIVER_FUNCS(LOOKUP_FN)
#undef LOOKUP_FN
    drv.loaded = 1;
}

static const char *cu_errstr(CUresult rc)
{
    static char buf[512];
    const char *name = NULL, *msg = NULL;
    if (drv.loaded) {
        D(cuGetErrorName)(rc, &name);
        D(cuGetErrorString)(rc, &msg);
    }
    if (!name && rc == 34) {
        name = "CUDA_ERROR_STUB_LIBRARY";
        msg = "the CUDA toolkit's stub libcuda was loaded instead of a real driver";
    }
    snprintf(buf, sizeof buf, "%s: %s (CUDA error %d)", name ? name : "?",
             msg ? msg : "unknown error", (int)rc);
    return buf;
}

/* Every CUDA call goes through CU(): on failure, file:line, the call and the
 * driver's message, then exit 2. */
#define CU(call)                                                                               \
    do {                                                                                       \
        CUresult cu_rc_ = (call);                                                              \
        if (cu_rc_ != CUDA_SUCCESS)                                                            \
            die(2, "%s:%d: %s failed: %s", __FILE__, __LINE__, #call, cu_errstr(cu_rc_));     \
    } while (0)

/* taskcache calls: status + message, exit 2 (driver) or 1 (anything else). */
static void tc_check(tc_status st, const tc_error *err, const char *what, const char *file,
                     int line)
{
    if (st == TC_OK)
        return;
    die(st == TC_ERR_DRIVER ? 2 : 1, "%s:%d: %s failed: %s: %s", file, line, what,
        tc_status_name(st), err && err->message[0] ? err->message : "(no message)");
}
#define TC(call, errp) tc_check((call), (errp), #call, __FILE__, __LINE__)

/* ---- files ---------------------------------------------------------------------- */

static unsigned char *read_file(const char *path, size_t *len, int add_nul)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        die(2, "cannot open %s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = xcalloc(cap, 1);
    for (;;) {
        if (n + 1 >= cap) {
            cap *= 2;
            unsigned char *nb = realloc(buf, cap);
            if (!nb)
                die(2, "out of memory reading %s", path);
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0)
            break;
    }
    if (ferror(f))
        die(2, "cannot read %s", path);
    fclose(f);
    if (add_nul)
        buf[n] = 0;
    *len = n;
    return buf;
}

/* ---- SHA-256 ---------------------------------------------------------------------- */

static void sha256_hex(const void *data, size_t len, char out[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1 ||
        EVP_DigestUpdate(ctx, data, len) != 1 || EVP_DigestFinal_ex(ctx, md, &mdlen) != 1 ||
        mdlen != 32)
        die(2, "SHA-256 (OpenSSL EVP) failed");
    EVP_MD_CTX_free(ctx);
    for (unsigned i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* ---- ELF symbol table of an image (cubin) ------------------------------------------ */

typedef struct name_list {
    char **v;
    size_t n, cap;
} name_list;

static void names_add(name_list *l, const char *s)
{
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->v[i], s))
            return;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 32;
        char **nv = realloc(l->v, l->cap * sizeof *nv);
        if (!nv)
            die(2, "out of memory");
        l->v = nv;
    }
    l->v[l->n++] = xstrdup(s);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void names_free(name_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static void names_sort(name_list *l)
{
    if (l->n > 1)
        qsort(l->v, l->n, sizeof(char *), cmp_str);
}

static int names_has(const name_list *l, const char *s)
{
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->v[i], s))
            return 1;
    return 0;
}

static uint64_t rd(const unsigned char *d, size_t off, int size)
{
    uint64_t v = 0;
    for (int i = size - 1; i >= 0; i--)
        v = (v << 8) | d[off + (size_t)i];
    return v;
}

static const char *str_at(const unsigned char *d, size_t len, uint64_t tab_off,
                          uint64_t tab_size, uint64_t idx)
{
    if (idx >= tab_size || tab_off + tab_size > len)
        return NULL;
    const char *s = (const char *)d + tab_off + idx;
    if (!memchr(s, 0, (size_t)(tab_size - idx)))
        return NULL;
    return s;
}

#define STT_OBJECT_ 1
#define STT_FUNC_ 2
#define STO_CUDA_ENTRY_ 0x10

/* Kernels (FUNC symbols marked as entries) and variables (OBJECT symbols in
 * .nv.global* / .nv.constant* sections) of a 64-bit little-endian ELF
 * image, each sorted by name. Returns NULL on success, else why not. */
static const char *elf_symbols(const unsigned char *d, size_t len, name_list *kernels,
                               name_list *globals)
{
    if (len < 64 || memcmp(d, "\x7f" "ELF", 4) != 0)
        return "not an ELF file";
    if (d[4] != 2 || d[5] != 1)
        return "not a 64-bit little-endian ELF file";
    uint64_t shoff = rd(d, 0x28, 8);
    uint64_t shentsize = rd(d, 0x3A, 2), shnum = rd(d, 0x3C, 2), shstrndx = rd(d, 0x3E, 2);
    if (shentsize < 64 || shnum == 0 || shoff > len || shnum * shentsize > len - shoff ||
        shstrndx >= shnum)
        return "bad section header table";
#define SH(i, field_off, size) rd(d, shoff + (uint64_t)(i) * shentsize + (field_off), (size))
    uint64_t shstr_off = SH(shstrndx, 24, 8), shstr_size = SH(shstrndx, 32, 8);
    if (shstr_off > len || shstr_size > len - shstr_off)
        return "bad section name table";
    int found_symtab = 0;
    for (uint64_t s = 0; s < shnum; s++) {
        if (SH(s, 4, 4) != 2) /* SHT_SYMTAB */
            continue;
        found_symtab = 1;
        uint64_t off = SH(s, 24, 8), size = SH(s, 32, 8), link = SH(s, 40, 4),
                 entsize = SH(s, 56, 8);
        if (entsize < 24 || off > len || size > len - off || link >= shnum)
            return "bad symbol table";
        uint64_t str_off = SH(link, 24, 8), str_size = SH(link, 32, 8);
        if (str_off > len || str_size > len - str_off)
            return "bad string table";
        for (uint64_t k = 0; k < size / entsize; k++) {
            size_t e = (size_t)(off + k * entsize);
            uint64_t name = rd(d, e, 4), info = d[e + 4], other = d[e + 5],
                     shndx = rd(d, e + 6, 2);
            if (shndx == 0 || shndx >= shnum)
                continue;
            const char *nm = str_at(d, len, str_off, str_size, name);
            if (!nm || !nm[0])
                continue;
            unsigned type = (unsigned)(info & 15);
            if (type == STT_FUNC_ && (other & STO_CUDA_ENTRY_)) {
                names_add(kernels, nm);
            } else if (type == STT_OBJECT_ && nm[0] != '.') {
                const char *sec = str_at(d, len, shstr_off, shstr_size, SH(shndx, 0, 4));
                if (sec && (!strncmp(sec, ".nv.global", 10) || !strncmp(sec, ".nv.constant", 12)))
                    names_add(globals, nm);
            }
        }
    }
#undef SH
    if (!found_symtab)
        return "no symbol table";
    names_sort(kernels);
    names_sort(globals);
    return NULL;
}

/* Parameter sizes of a kernel from the EIATTR_KPARAM_INFO records of its
 * .nv.info.NAME section (format 4 = size-prefixed value; the value is u32
 * index, u16 ordinal, u16 offset, u32 flags with the size in bits 18..31).
 * Returns the parameter count, or -1 when the section or the records cannot
 * be read (the caller then relies on the driver alone). */
static long elf_kernel_params(const unsigned char *d, size_t len, const char *kernel,
                              size_t *sizes, size_t max)
{
    if (!d || len < 64 || memcmp(d, "\x7f" "ELF", 4) != 0 || d[4] != 2 || d[5] != 1)
        return -1;
    uint64_t shoff = rd(d, 0x28, 8);
    uint64_t shentsize = rd(d, 0x3A, 2), shnum = rd(d, 0x3C, 2), shstrndx = rd(d, 0x3E, 2);
    if (shentsize < 64 || shoff > len || shnum * shentsize > len - shoff || shstrndx >= shnum)
        return -1;
#define SH(i, field_off, size) rd(d, shoff + (uint64_t)(i) * shentsize + (field_off), (size))
    uint64_t shstr_off = SH(shstrndx, 24, 8), shstr_size = SH(shstrndx, 32, 8);
    if (shstr_off > len || shstr_size > len - shstr_off)
        return -1;
    char want[1024];
    snprintf(want, sizeof want, ".nv.info.%s", kernel);
    for (uint64_t s = 0; s < shnum; s++) {
        const char *nm = str_at(d, len, shstr_off, shstr_size, SH(s, 0, 4));
        if (!nm || strcmp(nm, want))
            continue;
        uint64_t off = SH(s, 24, 8), size = SH(s, 32, 8);
        if (off > len || size > len - off)
            return -1;
        const unsigned char *p = d + off;
        long count = 0;
        unsigned char seen[1024];
        memset(seen, 0, sizeof seen);
        for (uint64_t i = 0; i + 2 <= size;) {
            unsigned fmt = p[i], attr = p[i + 1];
            if (fmt == 1) {
                i += 2;
            } else if (fmt == 2 || fmt == 3) {
                i += 4;
            } else if (fmt == 4) {
                if (i + 4 > size)
                    return -1;
                uint64_t vs = rd(p, (size_t)i + 2, 2);
                if (i + 4 + vs > size)
                    return -1;
                if (attr == 0x17 && vs >= 12) { /* EIATTR_KPARAM_INFO */
                    uint64_t ordinal = rd(p, (size_t)i + 8, 2), flags = rd(p, (size_t)i + 12, 4);
                    if (ordinal >= sizeof seen)
                        return -1;
                    seen[ordinal] = 1;
                    if (ordinal < max)
                        sizes[ordinal] = (size_t)((flags >> 18) & 0x3fff);
                    if ((long)ordinal + 1 > count)
                        count = (long)ordinal + 1;
                }
                i += 4 + vs;
            } else {
                return -1; /* unknown record format */
            }
        }
        for (long k = 0; k < count; k++)
            if (!seen[k])
                return -1;
        return count;
    }
#undef SH
    return -1;
}

/* Entry names of PTX text, sorted ("--ptx-jit" has no image to read). */
static void ptx_entries(const char *text, name_list *out)
{
    const char *p = text;
    while ((p = strstr(p, ".entry")) != NULL) {
        p += 6;
        if (*p != ' ' && *p != '\t')
            continue;
        while (*p == ' ' || *p == '\t')
            p++;
        const char *s = p;
        while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
               *p == '_' || *p == '$')
            p++;
        if (p > s) {
            char name[512];
            size_t n = (size_t)(p - s) < sizeof name - 1 ? (size_t)(p - s) : sizeof name - 1;
            memcpy(name, s, n);
            name[n] = 0;
            names_add(out, name);
        }
    }
    names_sort(out);
}

/* ---- element types and random data --------------------------------------------------- */

typedef struct type_info {
    const char *name;
    unsigned size;
    int is_float, is_signed;
} type_info;

static const type_info TYPES[] = {
    {"i8", 1, 0, 1},  {"u8", 1, 0, 0},  {"i16", 2, 0, 1}, {"u16", 2, 0, 0}, {"i32", 4, 0, 1},
    {"u32", 4, 0, 0}, {"i64", 8, 0, 1}, {"u64", 8, 0, 0}, {"f32", 4, 1, 1}, {"f64", 8, 1, 1},
};

static const type_info *find_type(const char *name)
{
    for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++)
        if (!strcmp(TYPES[i].name, name))
            return &TYPES[i];
    return NULL;
}

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* A random stream that depends only on the seed and the object. */
static uint64_t stream_for(uint64_t seed, const char *kind, const char *name, uint64_t extra)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const char *p = kind; *p; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
    h = (h ^ 0xff) * 0x100000001b3ULL;
    for (const char *p = name; *p; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
    uint64_t s = seed ^ h ^ (extra * 0x9e3779b97f4a7c15ULL);
    splitmix64(&s);
    return s;
}

typedef struct range {
    int given;
    double flo, fhi;      /* float types */
    int64_t ilo, ihi;     /* integer types: [ilo, ihi) */
} range;

static void store_value(unsigned char *dst, const type_info *t, double f, uint64_t bits)
{
    if (t->is_float && t->size == 4) {
        float v = (float)f;
        memcpy(dst, &v, 4);
    } else if (t->is_float) {
        memcpy(dst, &f, 8);
    } else {
        for (unsigned b = 0; b < t->size; b++)
            dst[b] = (unsigned char)(bits >> (8 * b));
    }
}

static void fill_random(unsigned char *dst, const type_info *t, size_t count, const range *r,
                        uint64_t stream)
{
    for (size_t i = 0; i < count; i++) {
        uint64_t u = splitmix64(&stream);
        if (t->is_float) {
            double lo = r->given ? r->flo : -1.0, hi = r->given ? r->fhi : 1.0;
            double unit = (double)(u >> 11) * 0x1.0p-53;
            double v = lo + (hi - lo) * unit;
            if (t->size == 4 && (float)v >= (float)hi)
                v = lo;
            if (!(v >= lo && v < hi))
                v = lo;
            store_value(dst + i * t->size, t, v, 0);
        } else if (r->given) {
            uint64_t span = (uint64_t)r->ihi - (uint64_t)r->ilo;
            uint64_t v = (uint64_t)r->ilo + (span ? u % span : 0);
            store_value(dst + i * t->size, t, 0, v);
        } else {
            store_value(dst + i * t->size, t, 0, u);
        }
    }
}

/* ---- the spec ------------------------------------------------------------------------ */

enum role { ROLE_IN, ROLE_INOUT, ROLE_OUT, ROLE_ZERO };

typedef struct buffer {
    char *name;
    const type_info *type;
    size_t count;
    enum role role;
    range r;
    CUdeviceptr dptr;
} buffer;

typedef struct global_var {
    char *name;
    const type_info *type;
    size_t count;
    int init;
    range r;
    CUdeviceptr dptr;
} global_var;

typedef struct blob {
    char *name;
    size_t size;
    unsigned char *bytes;
} blob;

enum arg_kind { ARG_BUF, ARG_SCALAR, ARG_BLOB, ARG_FNPTR };

typedef struct arg {
    enum arg_kind kind;
    size_t index;           /* buffer / blob */
    char *global;           /* fnptr */
    size_t element;         /* fnptr */
    unsigned char value[8]; /* scalar or fnptr value; buffer address */
    size_t size;
    char *text;             /* as written, for messages */
} arg;

typedef struct launch {
    char *kernel;
    unsigned grid[3], block[3];
    unsigned shmem;
    int coop;
    arg *args;
    size_t nargs;
    int line;
} launch;

typedef struct blob_fill {
    size_t blob, offset, count;
    const type_info *type;
    range r;
    char *name; /* "BLOB+OFFSET": names the random stream */
} blob_fill;

typedef struct blob_addr {
    size_t blob, offset, buf; /* the address of bufs[buf] at blobs[blob] + offset */
} blob_addr;

typedef struct spec {
    const char *path;
    size_t stack_bytes;
    buffer *bufs;
    size_t nbufs;
    global_var *globals;
    size_t nglobals;
    blob *blobs;
    size_t nblobs;
    blob_fill *fills;
    size_t nfills;
    blob_addr *addrs;
    size_t naddrs;
    launch *launches;
    size_t nlaunches;
} spec;

#define GROW(arr, n)                                                                           \
    do {                                                                                       \
        void *grow_p_ = realloc((arr), ((n) + 1) * sizeof *(arr));                             \
        if (!grow_p_)                                                                          \
            die(2, "out of memory");                                                           \
        (arr) = grow_p_;                                                                       \
        memset(&(arr)[(n)], 0, sizeof *(arr));                                                 \
    } while (0)

static const char *g_spec_path;
static int g_spec_line;

_Noreturn static void spec_error(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    die(2, "%s:%d: spec error: %s", g_spec_path, g_spec_line, msg);
}

static int64_t parse_i64(const char *s, const char *what)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 0);
    if (errno || end == s || *end)
        spec_error("bad %s '%s' (want an integer)", what, s);
    return (int64_t)v;
}

static uint64_t parse_u64_count(const char *s, const char *what)
{
    int64_t v = parse_i64(s, what);
    if (v <= 0)
        spec_error("bad %s '%s' (want a positive integer)", what, s);
    return (uint64_t)v;
}

static double parse_f64(const char *s, const char *what)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end)
        spec_error("bad %s '%s' (want a number)", what, s);
    return v;
}

static const type_info *parse_type(const char *s)
{
    const type_info *t = find_type(s);
    if (!t)
        spec_error("unknown type '%s' (i8 u8 i16 u16 i32 u32 i64 u64 f32 f64)", s);
    return t;
}

static void parse_range(range *r, const type_info *t, char **tok, int ntok)
{
    memset(r, 0, sizeof *r);
    if (ntok == 0)
        return;
    if (ntok != 2)
        spec_error("a range is two numbers: LO HI");
    r->given = 1;
    if (t->is_float) {
        r->flo = parse_f64(tok[0], "range start");
        r->fhi = parse_f64(tok[1], "range end");
        if (!(r->fhi > r->flo))
            spec_error("empty range [%s, %s)", tok[0], tok[1]);
    } else {
        r->ilo = parse_i64(tok[0], "range start");
        r->ihi = parse_i64(tok[1], "range end");
        if (!(r->ihi > r->ilo))
            spec_error("empty range [%s, %s)", tok[0], tok[1]);
    }
}

/* An integer or float constant of type t into dst (little endian). */
static void parse_scalar(unsigned char *dst, const type_info *t, const char *s)
{
    if (t->is_float) {
        store_value(dst, t, parse_f64(s, "value"), 0);
        return;
    }
    char *end;
    errno = 0;
    uint64_t bits;
    if (s[0] == '-') {
        long long v = strtoll(s, &end, 0);
        bits = (uint64_t)v;
        if (t->size < 8 && v < -(1LL << (8 * t->size - 1)))
            errno = ERANGE;
    } else {
        unsigned long long v = strtoull(s, &end, 0);
        bits = (uint64_t)v;
        if (t->size < 8 && v >= (1ULL << (8 * t->size)))
            errno = ERANGE;
    }
    if (errno || end == s || *end)
        spec_error("bad %s value '%s'", t->name, s);
    store_value(dst, t, 0, bits);
}

static size_t find_buf(const spec *sp, const char *name)
{
    for (size_t i = 0; i < sp->nbufs; i++)
        if (!strcmp(sp->bufs[i].name, name))
            return i;
    return (size_t)-1;
}

static size_t find_blob(const spec *sp, const char *name)
{
    for (size_t i = 0; i < sp->nblobs; i++)
        if (!strcmp(sp->blobs[i].name, name))
            return i;
    return (size_t)-1;
}

static int name_taken(const spec *sp, const char *name)
{
    if (find_buf(sp, name) != (size_t)-1 || find_blob(sp, name) != (size_t)-1)
        return 1;
    for (size_t i = 0; i < sp->nglobals; i++)
        if (!strcmp(sp->globals[i].name, name))
            return 1;
    return 0;
}

static void parse_dims(unsigned out[3], const char *s, const char *what)
{
    out[0] = out[1] = out[2] = 1;
    char tmp[128];
    snprintf(tmp, sizeof tmp, "%s", s);
    char *save = NULL;
    int k = 0;
    for (char *p = strtok_r(tmp, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        if (k == 3)
            spec_error("%s has more than 3 dimensions", what);
        int64_t v = parse_i64(p, what);
        if (v < 1 || v > 0x7fffffff)
            spec_error("bad %s '%s'", what, s);
        out[k++] = (unsigned)v;
    }
    if (k == 0)
        spec_error("empty %s", what);
}

static void parse_arg(spec *sp, arg *a, const char *tok)
{
    a->text = xstrdup(tok);
    if (tok[0] == '@') {
        a->kind = ARG_BUF;
        a->index = find_buf(sp, tok + 1);
        if (a->index == (size_t)-1)
            spec_error("argument %s: no buffer '%s' declared before", tok, tok + 1);
        a->size = 8;
        return;
    }
    const char *colon = strchr(tok, ':');
    if (!colon)
        spec_error("bad argument '%s' (@BUF, TYPE:VALUE, blob:NAME or fnptr:GLOBAL[I])", tok);
    char head[32];
    size_t hl = (size_t)(colon - tok);
    if (hl >= sizeof head)
        spec_error("bad argument '%s'", tok);
    memcpy(head, tok, hl);
    head[hl] = 0;
    const char *rest = colon + 1;
    if (!strcmp(head, "blob")) {
        a->kind = ARG_BLOB;
        a->index = find_blob(sp, rest);
        if (a->index == (size_t)-1)
            spec_error("argument %s: no blob '%s' declared before", tok, rest);
        a->size = sp->blobs[a->index].size;
    } else if (!strcmp(head, "fnptr")) {
        a->kind = ARG_FNPTR;
        a->size = 8;
        char name[256];
        snprintf(name, sizeof name, "%s", rest);
        char *br = strchr(name, '[');
        a->element = 0;
        if (br) {
            char *close = strchr(br, ']');
            if (!close || close[1])
                spec_error("bad argument '%s' (fnptr:GLOBAL[I])", tok);
            *close = 0;
            a->element = (size_t)parse_i64(br + 1, "element index");
            *br = 0;
        }
        if (!name[0])
            spec_error("bad argument '%s'", tok);
        a->global = xstrdup(name);
    } else {
        const type_info *t = parse_type(head);
        a->kind = ARG_SCALAR;
        a->size = t->size;
        parse_scalar(a->value, t, rest);
    }
}

static void parse_spec(spec *sp, const char *path)
{
    memset(sp, 0, sizeof *sp);
    sp->path = path;
    g_spec_path = path;
    size_t len;
    char *text = (char *)read_file(path, &len, 1);
    g_spec_line = 0;
    /* lines split by hand so that line numbers stay right */
    char *p = text;
    while (p && *p) {
        char *nl = strchr(p, '\n');
        if (nl)
            *nl = 0;
        g_spec_line++;
        char *hash = strchr(p, '#');
        if (hash)
            *hash = 0;
        char *tok[260]; /* a launch line: up to 256 arguments (argv_ in main) */
        int ntok = 0;
        char *save = NULL;
        for (char *t = strtok_r(p, " \t\r", &save); t; t = strtok_r(NULL, " \t\r", &save)) {
            if (ntok == 260)
                spec_error("too many words on one line");
            tok[ntok++] = t;
        }
        p = nl ? nl + 1 : NULL;
        if (ntok == 0)
            continue;
        const char *kw = tok[0];
        if (!strcmp(kw, "stack")) {
            if (ntok != 2)
                spec_error("stack BYTES");
            sp->stack_bytes = (size_t)parse_u64_count(tok[1], "stack size");
        } else if (!strcmp(kw, "buf")) {
            if (ntok != 5 && ntok != 7)
                spec_error("buf NAME TYPE COUNT in|inout|out|zero [LO HI]");
            if (name_taken(sp, tok[1]))
                spec_error("'%s' declared twice", tok[1]);
            GROW(sp->bufs, sp->nbufs);
            buffer *b = &sp->bufs[sp->nbufs];
            b->name = xstrdup(tok[1]);
            b->type = parse_type(tok[2]);
            b->count = (size_t)parse_u64_count(tok[3], "count");
            if (!strcmp(tok[4], "in"))
                b->role = ROLE_IN;
            else if (!strcmp(tok[4], "inout"))
                b->role = ROLE_INOUT;
            else if (!strcmp(tok[4], "out"))
                b->role = ROLE_OUT;
            else if (!strcmp(tok[4], "zero"))
                b->role = ROLE_ZERO;
            else
                spec_error("unknown role '%s' (in, inout, out, zero)", tok[4]);
            parse_range(&b->r, b->type, tok + 5, ntok - 5);
            if (b->r.given && (b->role == ROLE_OUT || b->role == ROLE_ZERO))
                spec_error("a range makes no sense for an '%s' buffer", tok[4]);
            sp->nbufs++;
        } else if (!strcmp(kw, "global")) {
            if (ntok != 5 && ntok != 7)
                spec_error("global NAME TYPE COUNT init|keep [LO HI]");
            if (name_taken(sp, tok[1]))
                spec_error("'%s' declared twice", tok[1]);
            GROW(sp->globals, sp->nglobals);
            global_var *g = &sp->globals[sp->nglobals];
            g->name = xstrdup(tok[1]);
            g->type = parse_type(tok[2]);
            g->count = (size_t)parse_u64_count(tok[3], "count");
            if (!strcmp(tok[4], "init"))
                g->init = 1;
            else if (strcmp(tok[4], "keep"))
                spec_error("global: want init or keep, not '%s'", tok[4]);
            parse_range(&g->r, g->type, tok + 5, ntok - 5);
            if (g->r.given && !g->init)
                spec_error("a range makes no sense for a 'keep' global");
            sp->nglobals++;
        } else if (!strcmp(kw, "blob")) {
            if (ntok != 3)
                spec_error("blob NAME SIZE");
            if (name_taken(sp, tok[1]))
                spec_error("'%s' declared twice", tok[1]);
            GROW(sp->blobs, sp->nblobs);
            blob *bl = &sp->blobs[sp->nblobs];
            bl->name = xstrdup(tok[1]);
            bl->size = (size_t)parse_u64_count(tok[2], "blob size");
            if (bl->size > 32768)
                spec_error("blob larger than 32 KiB");
            bl->bytes = xcalloc(bl->size, 1);
            sp->nblobs++;
        } else if (!strcmp(kw, "set") || !strcmp(kw, "fill")) {
            int is_set = !strcmp(kw, "set");
            if (is_set ? ntok != 5 : (ntok != 5 && ntok != 7))
                spec_error(is_set ? "set BLOB OFFSET TYPE VALUE"
                                  : "fill BLOB OFFSET TYPE COUNT [LO HI]");
            size_t bi = find_blob(sp, tok[1]);
            if (bi == (size_t)-1)
                spec_error("no blob '%s' declared before", tok[1]);
            blob *bl = &sp->blobs[bi];
            int64_t off = parse_i64(tok[2], "offset");
            const type_info *t = parse_type(tok[3]);
            size_t count = is_set ? 1 : (size_t)parse_u64_count(tok[4], "count");
            if (off < 0 || (size_t)off % t->size)
                spec_error("offset %s is not aligned for %s", tok[2], t->name);
            if ((size_t)off + count * t->size > bl->size)
                spec_error("%s beyond the end of blob '%s' (%zu bytes)", kw, bl->name, bl->size);
            if (is_set) {
                parse_scalar(bl->bytes + off, t, tok[4]);
            } else {
                /* random data needs the seed: applied by apply_blob_fills */
                GROW(sp->fills, sp->nfills);
                blob_fill *fl = &sp->fills[sp->nfills++];
                parse_range(&fl->r, t, tok + 5, ntok - 5);
                char nm[512];
                snprintf(nm, sizeof nm, "%s+%" PRId64, bl->name, off);
                fl->name = xstrdup(nm);
                fl->blob = bi;
                fl->offset = (size_t)off;
                fl->count = count;
                fl->type = t;
            }
        } else if (!strcmp(kw, "addr")) {
            if (ntok != 4)
                spec_error("addr BLOB OFFSET BUF");
            size_t bi = find_blob(sp, tok[1]), bu = find_buf(sp, tok[3]);
            if (bi == (size_t)-1)
                spec_error("no blob '%s' declared before", tok[1]);
            if (bu == (size_t)-1)
                spec_error("no buffer '%s' declared before", tok[3]);
            int64_t off = parse_i64(tok[2], "offset");
            if (off < 0 || off % 8 || (size_t)off + 8 > sp->blobs[bi].size)
                spec_error("addr: offset %s is not an aligned 8 bytes within blob '%s'", tok[2],
                           tok[1]);
            GROW(sp->addrs, sp->naddrs);
            sp->addrs[sp->naddrs++] = (blob_addr){bi, (size_t)off, bu};
        } else if (!strcmp(kw, "launch")) {
            if (ntok < 4)
                spec_error("launch KERNEL grid=.. block=.. [shmem=N] [coop] ARG...");
            GROW(sp->launches, sp->nlaunches);
            launch *l = &sp->launches[sp->nlaunches];
            l->kernel = xstrdup(tok[1]);
            l->line = g_spec_line;
            int have_grid = 0, have_block = 0;
            for (int i = 2; i < ntok; i++) {
                if (!strncmp(tok[i], "grid=", 5)) {
                    parse_dims(l->grid, tok[i] + 5, "grid");
                    have_grid = 1;
                } else if (!strncmp(tok[i], "block=", 6)) {
                    parse_dims(l->block, tok[i] + 6, "block");
                    have_block = 1;
                } else if (!strncmp(tok[i], "shmem=", 6)) {
                    int64_t v = parse_i64(tok[i] + 6, "shmem");
                    if (v < 0 || v > 48 * 1024)
                        spec_error("shmem must be 0..49152");
                    l->shmem = (unsigned)v;
                } else if (!strcmp(tok[i], "coop")) {
                    l->coop = 1;
                } else {
                    GROW(l->args, l->nargs);
                    parse_arg(sp, &l->args[l->nargs], tok[i]);
                    l->nargs++;
                }
            }
            if (!have_grid || !have_block)
                spec_error("launch needs grid= and block=");
            unsigned long long threads =
                (unsigned long long)l->block[0] * l->block[1] * l->block[2];
            if (threads > 1024)
                spec_error("more than 1024 threads per block");
            sp->nlaunches++;
        } else {
            spec_error("unknown directive '%s'", kw);
        }
    }
    free(text);
    g_spec_line = 0;
    if (sp->nlaunches == 0)
        die(2, "%s: the spec launches nothing", path);
}

static void spec_free(spec *sp)
{
    for (size_t i = 0; i < sp->nbufs; i++)
        free(sp->bufs[i].name);
    for (size_t i = 0; i < sp->nglobals; i++)
        free(sp->globals[i].name);
    for (size_t i = 0; i < sp->nblobs; i++) {
        free(sp->blobs[i].name);
        free(sp->blobs[i].bytes);
    }
    for (size_t i = 0; i < sp->nfills; i++)
        free(sp->fills[i].name);
    for (size_t i = 0; i < sp->nlaunches; i++) {
        launch *l = &sp->launches[i];
        for (size_t a = 0; a < l->nargs; a++) {
            free(l->args[a].text);
            free(l->args[a].global);
        }
        free(l->args);
        free(l->kernel);
    }
    free(sp->bufs);
    free(sp->globals);
    free(sp->blobs);
    free(sp->fills);
    free(sp->addrs);
    free(sp->launches);
    memset(sp, 0, sizeof *sp);
}

/* Random blob contents depend on the seed: applied once it is known. */
static void apply_blob_fills(spec *sp, uint64_t seed)
{
    for (size_t i = 0; i < sp->nfills; i++) {
        blob_fill *fl = &sp->fills[i];
        fill_random(sp->blobs[fl->blob].bytes + fl->offset, fl->type, fl->count, &fl->r,
                    stream_for(seed, "blob", fl->name, 0));
    }
}

/* ---- options ---------------------------------------------------------------------------- */

typedef struct options {
    const char *spec, *ptx, *image, *ptx_jit, *cache, *out, *arch, *kernel, *dump,
        *write_image;
    const char *expect_compiled; /* "all" or a number */
    int expect_module_hit;       /* -1 = not checked */
    int compiler;                /* -1 = default */
    int unit_code;               /* -1 = default, else tc_options_set_unit_code */
    unsigned unit_cost;          /* tc_options_set_unit_cost (0: the default) */
    int jobs;
    uint64_t seed;
    int have_seed;
    int time_reps;
    const char *compare[MAX_COMPARE]; /* --compare images, timed against the first module */
    int ncompare;
    int first_launch, check_spec, build_only, allow_uncovered, record_args, device;
    size_t pad_bytes; /* --pad-bytes: allocated before the buffers, to move them */
} options;

_Noreturn static void usage(void)
{
    fputs("usage:\n"
          "  gpu_run --spec FILE.spec|auto --ptx IN.ptx --cache DIR [--compiler ptxas|inprocess]\n"
          "          [--whole-program-units|--relocatable-units]\n"
          "          [--arch sm_90] [--jobs N] [--expect-compiled N|all] [--expect-module-hit 0|1]\n"
          "          --seed S --out RESULT.txt\n"
          "  gpu_run --spec FILE.spec|auto --image IN.cubin --seed S --out RESULT.txt\n"
          "  ... [--time REPS [--compare IMAGE]...] [--first-launch [--kernel NAME]] [--dump DIR] [--allow-uncovered]\n"
          "          [--record-args] [--pad-bytes N]\n"
          "  gpu_run --spec auto --ptx-jit IN.ptx --first-launch\n"
          "  gpu_run --spec FILE.spec --check-spec\n"
          "  gpu_run --spec F --ptx IN.ptx --cache DIR --build-only [--write-image OUT.cubin]\n"
          "  gpu_run --spec F --image IN.cubin --build-only\n"
          "see the comment at the top of tests/gpu/gpu_run.c and tests/gpu/README.md\n",
          stderr);
    exit(2);
}

static void parse_options(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->expect_module_hit = -1;
    o->compiler = -1;
    o->unit_code = -1;
    o->arch = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
#define NEXT()                                                                                 \
    (i + 1 < argc ? argv[++i] : (fprintf(stderr, "gpu_run: %s needs a value\n", a), usage(), ""))
        if (!strcmp(a, "--spec"))
            o->spec = NEXT();
        else if (!strcmp(a, "--ptx"))
            o->ptx = NEXT();
        else if (!strcmp(a, "--image"))
            o->image = NEXT();
        else if (!strcmp(a, "--ptx-jit"))
            o->ptx_jit = NEXT();
        else if (!strcmp(a, "--cache"))
            o->cache = NEXT();
        else if (!strcmp(a, "--out"))
            o->out = NEXT();
        else if (!strcmp(a, "--arch"))
            o->arch = NEXT();
        else if (!strcmp(a, "--kernel"))
            o->kernel = NEXT();
        else if (!strcmp(a, "--dump"))
            o->dump = NEXT();
        else if (!strcmp(a, "--write-image"))
            o->write_image = NEXT();
        else if (!strcmp(a, "--expect-compiled"))
            o->expect_compiled = NEXT();
        else if (!strcmp(a, "--expect-module-hit")) {
            const char *v = NEXT();
            if (strcmp(v, "0") && strcmp(v, "1"))
                usage();
            o->expect_module_hit = v[0] - '0';
        } else if (!strcmp(a, "--compiler")) {
            const char *v = NEXT();
            if (!strcmp(v, "ptxas"))
                o->compiler = TC_COMPILER_PTXAS;
            else if (!strcmp(v, "inprocess"))
                o->compiler = TC_COMPILER_INPROCESS;
            else if (!strcmp(v, "auto"))
                o->compiler = TC_COMPILER_AUTO;
            else {
                fprintf(stderr, "gpu_run: --compiler ptxas|inprocess|auto\n");
                usage();
            }
        } else if (!strcmp(a, "--whole-program-units")) {
            o->unit_code = TC_UNIT_CODE_WHOLE_PROGRAM;
        } else if (!strcmp(a, "--relocatable-units")) {
            o->unit_code = TC_UNIT_CODE_RELOCATABLE;
        } else if (!strcmp(a, "--unit-cost")) {
            o->unit_cost = (unsigned)strtoul(NEXT(), NULL, 10);
        } else if (!strcmp(a, "--jobs"))
            o->jobs = atoi(NEXT());
        else if (!strcmp(a, "--seed")) {
            const char *v = NEXT();
            char *end;
            errno = 0;
            o->seed = strtoull(v, &end, 0);
            if (errno || end == v || *end) {
                fprintf(stderr, "gpu_run: bad --seed '%s'\n", v);
                usage();
            }
            o->have_seed = 1;
        } else if (!strcmp(a, "--time")) {
            o->time_reps = atoi(NEXT());
            if (o->time_reps < 1) {
                fprintf(stderr, "gpu_run: --time needs a positive count\n");
                usage();
            }
        } else if (!strcmp(a, "--compare")) {
            if (o->ncompare == MAX_COMPARE) {
                fprintf(stderr, "gpu_run: at most %d --compare images\n", MAX_COMPARE);
                usage();
            }
            o->compare[o->ncompare++] = NEXT();
        } else if (!strcmp(a, "--first-launch"))
            o->first_launch = 1;
        else if (!strcmp(a, "--check-spec"))
            o->check_spec = 1;
        else if (!strcmp(a, "--build-only"))
            o->build_only = 1;
        else if (!strcmp(a, "--allow-uncovered"))
            o->allow_uncovered = 1;
        else if (!strcmp(a, "--record-args"))
            o->record_args = 1;
        else if (!strcmp(a, "--pad-bytes"))
            o->pad_bytes = (size_t)strtoull(NEXT(), NULL, 0);
        else if (!strcmp(a, "--device"))
            o->device = atoi(NEXT());
        else if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            usage();
        else {
            fprintf(stderr, "gpu_run: unknown argument '%s'\n", a);
            usage();
        }
#undef NEXT
    }
    if (!o->spec) {
        fprintf(stderr, "gpu_run: --spec is required\n");
        usage();
    }
    if (o->check_spec)
        return;
    int sources = !!o->ptx + !!o->image + !!o->ptx_jit;
    if (sources != 1) {
        fprintf(stderr, "gpu_run: give exactly one of --ptx, --image, --ptx-jit\n");
        usage();
    }
    if (o->ptx && !o->cache) {
        fprintf(stderr, "gpu_run: --ptx needs --cache DIR\n");
        usage();
    }
    if (o->build_only && o->ptx_jit) {
        fprintf(stderr, "gpu_run: --build-only needs --ptx or --image\n");
        usage();
    }
    if (!o->first_launch && !o->time_reps && !o->build_only && !o->have_seed) {
        fprintf(stderr, "gpu_run: --seed is required\n");
        usage();
    }
    if (o->first_launch && strcmp(o->spec, "auto")) {
        fprintf(stderr, "gpu_run: --first-launch needs --spec auto\n");
        usage();
    }
    if (o->ncompare && !o->time_reps) {
        fprintf(stderr, "gpu_run: --compare needs --time\n");
        usage();
    }
    if (o->first_launch && o->time_reps) {
        fprintf(stderr, "gpu_run: --first-launch and --time are separate runs\n");
        usage();
    }
}

/* ---- build ------------------------------------------------------------------------------- */

typedef struct build_out {
    tc_result *result;
    tc_report rep;
    int expectation_failed;
} build_out;

static void do_build(const options *o, const unsigned char *ptx, size_t ptx_len, build_out *b,
                     int quiet)
{
    tc_error err;
    tc_cache *cache = NULL;
    memset(b, 0, sizeof *b);
    TC(tc_cache_open(o->cache, &cache, &err), &err);
    if (!quiet && tc_cache_warning(cache))
        note("cache warning: %s", tc_cache_warning(cache));
    tc_options *to = tc_options_new();
    if (!to)
        die(2, "out of memory");
    TC(tc_options_set_arch(to, o->arch ? o->arch : "sm_90", &err), &err);
    if (o->jobs > 0 && tc_options_set_jobs(to, o->jobs) != TC_OK)
        die(2, "bad --jobs");
    if (o->compiler >= 0 && tc_options_set_compiler(to, (tc_compiler)o->compiler) != TC_OK)
        die(2, "tc_options_set_compiler refused the compiler");
    if (o->unit_code >= 0 && tc_options_set_unit_code(to, (tc_unit_code)o->unit_code) != TC_OK)
        die(2, "tc_options_set_unit_code refused unit code %d", o->unit_code);
    if (o->unit_cost && tc_options_set_unit_cost(to, o->unit_cost) != TC_OK)
        die(2, "tc_options_set_unit_cost refused %u", o->unit_cost);
    tc_status st = tc_build(cache, to, ptx, ptx_len, o->ptx, &b->result);
    if (!b->result)
        die(1, "tc_build(%s) failed without a result: %s", o->ptx, tc_status_name(st));
    const char *diag = tc_result_diagnostics(b->result);
    if (st != TC_OK) {
        fprintf(stderr, "%s", diag);
        die(1, "tc_build(%s) failed: %s", o->ptx, tc_status_name(st));
    }
    if (!quiet && diag[0])
        fprintf(stderr, "%s", diag);
    tc_result_report(b->result, &b->rep);
    tc_options_free(to);
    tc_cache_close(cache);
}

static void report_build(const options *o, build_out *b)
{
    const tc_report *r = &b->rep;
    result_line("build module_hit=%d split=%d entries=%u units=%u unit_hits=%u "
                "units_compiled=%u in_process=%d have_inprocess=%d seconds=%.3f",
                r->module_hit, r->split, r->entries, r->units, r->unit_hits, r->units_compiled,
                r->in_process, tc_have_inprocess_compiler(), r->seconds);
    note("build: module_hit=%d split=%d entries=%u units=%u unit_hits=%u units_compiled=%u "
         "in_process=%d (%.3f s)",
         r->module_hit, r->split, r->entries, r->units, r->unit_hits, r->units_compiled,
         r->in_process, r->seconds);
    const char *why = tc_result_whole_reason(b->result);
    if (why)
        result_line("whole_reason %s", why);
    if (o->expect_compiled) {
        uint32_t want;
        if (!strcmp(o->expect_compiled, "all"))
            want = r->units;
        else
            want = (uint32_t)strtoul(o->expect_compiled, NULL, 10);
        int ok = r->units_compiled == want && !r->module_hit;
        if (!strcmp(o->expect_compiled, "all"))
            ok = ok && r->unit_hits == 0;
        if (!strcmp(o->expect_compiled, "0"))
            ok = r->units_compiled == 0;
        else if (!r->split && !r->module_hit)
            /* compiled whole (a module that fits in one unit): there are no
             * units to count, and "compiled" is all the build could do */
            ok = want > 0 || !strcmp(o->expect_compiled, "all");
        if (!ok) {
            note("EXPECTATION FAILED: wanted %s unit(s) compiled (%u), got units_compiled=%u "
                 "unit_hits=%u module_hit=%d",
                 o->expect_compiled, want, r->units_compiled, r->unit_hits, r->module_hit);
            result_line("expectation FAIL compiled want=%s(%u) got=%u", o->expect_compiled, want,
                        r->units_compiled);
            b->expectation_failed = 1;
        } else {
            result_line("expectation ok compiled=%u", r->units_compiled);
        }
    }
    if (o->expect_module_hit >= 0) {
        if (r->module_hit != o->expect_module_hit) {
            note("EXPECTATION FAILED: wanted module_hit=%d, got %d", o->expect_module_hit,
                 r->module_hit);
            result_line("expectation FAIL module_hit want=%d got=%d", o->expect_module_hit,
                        r->module_hit);
            b->expectation_failed = 1;
        } else {
            result_line("expectation ok module_hit=%d", r->module_hit);
        }
    }
    if (o->compiler == TC_COMPILER_INPROCESS && !r->in_process && !r->module_hit &&
        r->units_compiled) {
        note("EXPECTATION FAILED: --compiler inprocess but the build did not compile in-process");
        result_line("expectation FAIL in_process want=1 got=0");
        b->expectation_failed = 1;
    }
}

/* ---- device ----------------------------------------------------------------------------- */

typedef struct device {
    CUdevice dev;
    CUcontext ctx;
    int sm_count;
    double init_us; /* cuInit + context creation */
} device;

static void open_device(const options *o, device *d)
{
    double t0 = now_us();
    load_driver();
    CU(D(cuInit)(0));
    int count = 0;
    CU(D(cuDeviceGetCount)(&count));
    if (count <= 0)
        die(2, "no CUDA device (cuDeviceGetCount returned 0)");
    if (o->device < 0 || o->device >= count)
        die(2, "--device %d: only %d device(s)", o->device, count);
    CU(D(cuDeviceGet)(&d->dev, o->device));
    CU(D(cuDevicePrimaryCtxRetain)(&d->ctx, d->dev));
    CU(D(cuCtxSetCurrent)(d->ctx));
    CU(D(cuCtxSynchronize)()); /* the context is really created now */
    d->init_us = now_us() - t0;
    char name[256] = "";
    int major = 0, minor = 0, drv_version = 0;
    CU(D(cuDeviceGetName)(name, (int)sizeof name, d->dev));
    CU(D(cuDeviceGetAttribute)(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d->dev));
    CU(D(cuDeviceGetAttribute)(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d->dev));
    CU(D(cuDeviceGetAttribute)(&d->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d->dev));
    CU(D(cuDriverGetVersion)(&drv_version));
    result_line("device %s sm_%d%d sms=%d driver=%d", name, major, minor, d->sm_count,
                drv_version);
}

/* ---- running a spec -------------------------------------------------------------------------- */

typedef struct module_info {
    tc_module *mod;
    name_list kernels; /* of the image (ELF), or of the PTX for --ptx-jit */
    name_list globals; /* of the image (ELF); empty for --ptx-jit */
    const tc_result *result; /* taskcache metadata, or NULL */
    const unsigned char *image; /* the loaded image (NULL for --ptx-jit) */
    size_t image_len;
} module_info;

static size_t param_count(CUfunction f, size_t *sizes, size_t max, int *supported)
{
    *supported = 1;
    for (size_t i = 0; i < 4096; i++) {
        size_t off = 0, size = 0;
        CUresult rc = D(cuFuncGetParamInfo)(f, i, &off, &size);
        if (rc == CUDA_ERROR_INVALID_VALUE)
            return i;
        if (rc == CUDA_ERROR_NOT_SUPPORTED) {
            *supported = 0;
            return 0;
        }
        CU(rc);
        if (i < max)
            sizes[i] = size;
    }
    die(2, "cuFuncGetParamInfo: more than 4096 parameters?");
    return 0;
}

static CUfunction kernel_function(module_info *mi, const char *name, tc_kernel *k)
{
    tc_error err;
    tc_status st = tc_module_kernel(mi->mod, name, k, &err);
    if (st == TC_ERR_NOT_FOUND)
        die(1, "the module has no kernel '%s' (spec and module disagree)", name);
    TC(st, &err);
    return (CUfunction)k->function;
}

/* Checks the spec's arguments against the image's own parameter layout. */
static int check_args_elf(const unsigned char *img, size_t len, const char *kernel,
                          const arg *args, size_t nargs, const char *where)
{
    size_t sizes[256];
    long n = elf_kernel_params(img, len, kernel, sizes, 256);
    if (n < 0)
        return -1;
    if ((size_t)n != nargs) {
        note("FAIL: %s: kernel %s takes %ld parameter(s) (image's .nv.info), the spec gives %zu",
             where, kernel, n, nargs);
        return 1;
    }
    for (long i = 0; i < n && i < 256; i++)
        if (sizes[i] != args[i].size) {
            note("FAIL: %s: kernel %s parameter %ld is %zu bytes (image's .nv.info), the spec's "
                 "'%s' is %zu",
                 where, kernel, i, sizes[i], args[i].text, args[i].size);
            return 1;
        }
    return 0;
}

/* Checks the launch's arguments against the kernel's parameter layout as the
 * driver reports it (and taskcache's metadata when there is some). */
static void check_args(module_info *mi, const launch *l, int line)
{
    tc_kernel k;
    CUfunction f = kernel_function(mi, l->kernel, &k);
    size_t sizes[256];
    int supported;
    size_t n = param_count(f, sizes, 256, &supported);
    if (!supported) {
        note("note: cuFuncGetParamInfo not supported: arguments of %s not checked", l->kernel);
        return;
    }
    if (n != l->nargs)
        die(1, "%s:%d: kernel %s takes %zu parameter(s), the spec gives %zu", g_spec_path, line,
            l->kernel, n, l->nargs);
    for (size_t i = 0; i < n && i < 256; i++)
        if (sizes[i] != l->args[i].size)
            die(1, "%s:%d: kernel %s parameter %zu is %zu bytes, the spec's '%s' is %zu",
                g_spec_path, line, l->kernel, i, sizes[i], l->args[i].text, l->args[i].size);
    if (mi->image) {
        size_t esizes[256];
        long en = elf_kernel_params(mi->image, mi->image_len, l->kernel, esizes, 256);
        if (en >= 0 && ((size_t)en != n || memcmp(esizes, sizes, (size_t)en * sizeof *sizes)))
            note("note: the image's .nv.info and cuFuncGetParamInfo disagree on %s's parameters "
                 "(the driver is trusted)",
                 l->kernel);
    }
    if (k.entry && k.entry->param_count != n)
        die(1, "taskcache metadata says %s has %u parameters, the driver says %zu", l->kernel,
            k.entry->param_count, n);
    unsigned threads = l->block[0] * l->block[1] * l->block[2];
    if (k.max_threads_per_block > 0 && threads > (unsigned)k.max_threads_per_block)
        die(1, "%s:%d: %s: block of %u threads, the kernel allows at most %d", g_spec_path, line,
            l->kernel, threads, k.max_threads_per_block);
}

static void check_coop(module_info *mi, const device *d, const launch *l)
{
    tc_kernel k;
    CUfunction f = kernel_function(mi, l->kernel, &k);
    int per_sm = 0;
    CU(D(cuOccupancyMaxActiveBlocksPerMultiprocessor)(
        &per_sm, f, (int)(l->block[0] * l->block[1] * l->block[2]), l->shmem));
    unsigned long long blocks = (unsigned long long)l->grid[0] * l->grid[1] * l->grid[2];
    if ((unsigned long long)per_sm * (unsigned long long)d->sm_count < blocks)
        die(1, "cooperative launch of %s: %llu blocks, but only %d per SM x %d SMs can be "
               "co-resident",
            l->kernel, blocks, per_sm, d->sm_count);
}

static size_t buf_bytes(const buffer *b) { return b->count * b->type->size; }
static size_t glob_bytes(const global_var *g) { return g->count * g->type->size; }

static void alloc_and_init(spec *sp, module_info *mi, uint64_t seed, int init_globals)
{
    for (size_t i = 0; i < sp->nbufs; i++) {
        buffer *b = &sp->bufs[i];
        size_t n = buf_bytes(b);
        CU(D(cuMemAlloc)(&b->dptr, n));
        if (b->role == ROLE_IN || b->role == ROLE_INOUT) {
            unsigned char *h = xcalloc(n, 1);
            fill_random(h, b->type, b->count, &b->r, stream_for(seed, "buf", b->name, 0));
            CU(D(cuMemcpyHtoD)(b->dptr, h, n));
            free(h);
        } else {
            CU(D(cuMemsetD8)(b->dptr, b->role == ROLE_OUT ? 0xFF : 0, n));
        }
    }
    for (size_t i = 0; i < sp->nglobals; i++) {
        global_var *g = &sp->globals[i];
        uint64_t dptr = 0;
        size_t bytes = 0;
        tc_error err;
        tc_status st = tc_module_global(mi->mod, g->name, &dptr, &bytes, &err);
        if (st == TC_ERR_NOT_FOUND)
            die(1, "the module has no global '%s' (spec and module disagree)", g->name);
        TC(st, &err);
        if (bytes != glob_bytes(g))
            die(1, "global %s is %zu bytes in the module; the spec says %zu x %s = %zu", g->name,
                bytes, g->count, g->type->name, glob_bytes(g));
        g->dptr = (CUdeviceptr)dptr;
        if (g->init && init_globals) {
            unsigned char *h = xcalloc(bytes, 1);
            fill_random(h, g->type, g->count, &g->r, stream_for(seed, "global", g->name, 0));
            CU(D(cuMemcpyHtoD)(g->dptr, h, bytes));
            free(h);
        }
    }
    CU(D(cuCtxSynchronize)());
}

static void prepare_args(spec *sp, module_info *mi, launch *l, void **argv)
{
    /* buffers have their addresses now (moved by --pad-bytes or not) */
    for (size_t i = 0; i < sp->naddrs; i++)
        memcpy(sp->blobs[sp->addrs[i].blob].bytes + sp->addrs[i].offset,
               &sp->bufs[sp->addrs[i].buf].dptr, 8);
    for (size_t i = 0; i < l->nargs; i++) {
        arg *a = &l->args[i];
        switch (a->kind) {
        case ARG_BUF:
            memcpy(a->value, &sp->bufs[a->index].dptr, 8);
            argv[i] = a->value;
            break;
        case ARG_SCALAR:
            argv[i] = a->value;
            break;
        case ARG_BLOB:
            argv[i] = sp->blobs[a->index].bytes;
            break;
        case ARG_FNPTR: {
            uint64_t dptr = 0;
            size_t bytes = 0;
            tc_error err;
            tc_status st = tc_module_global(mi->mod, a->global, &dptr, &bytes, &err);
            if (st == TC_ERR_NOT_FOUND)
                die(1, "argument %s: the module has no global '%s'", a->text, a->global);
            TC(st, &err);
            if ((a->element + 1) * 8 > bytes)
                die(1, "argument %s: global %s has only %zu bytes", a->text, a->global, bytes);
            CU(D(cuMemcpyDtoH)(a->value, (CUdeviceptr)(dptr + a->element * 8), 8));
            argv[i] = a->value;
            break;
        }
        }
    }
}

static void poison_outputs(spec *sp)
{
    for (size_t i = 0; i < sp->nbufs; i++) {
        buffer *b = &sp->bufs[i];
        if (b->role == ROLE_OUT)
            CU(D(cuMemsetD8)(b->dptr, 0xFF, buf_bytes(b)));
        else if (b->role == ROLE_ZERO)
            CU(D(cuMemsetD8)(b->dptr, 0, buf_bytes(b)));
    }
}

static void do_launch(module_info *mi, launch *l, void **argv)
{
    tc_launch cfg;
    memset(&cfg, 0, sizeof cfg);
    memcpy(cfg.grid, l->grid, sizeof cfg.grid);
    memcpy(cfg.block, l->block, sizeof cfg.block);
    cfg.shared_bytes = l->shmem;
    cfg.cooperative = l->coop;
    tc_error err;
    tc_status st = tc_module_launch(mi->mod, l->kernel, &cfg, l->nargs ? argv : NULL, NULL, 0,
                                    &err);
    if (st != TC_OK)
        die(2, "launch of %s (spec line %d) failed: %s: %s", l->kernel, l->line,
            tc_status_name(st), err.message);
}

static void sync_after(const launch *l, size_t idx)
{
    CUresult rc = D(cuCtxSynchronize)();
    if (rc != CUDA_SUCCESS)
        die(2, "launch %zu of %s (spec line %d) failed while running: cuCtxSynchronize: %s",
            idx, l->kernel, l->line, cu_errstr(rc));
}

static void dump_object(const char *dir, size_t idx, const char *kind, const char *name,
                        const void *data, size_t len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/L%03zu.%s.%s.bin", dir, idx, kind, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0)
        die(2, "cannot write %s: %s", path, strerror(errno));
}

/* Whether launch l passes buffer b as an argument, or in a blob it passes. */
static int launch_passes(const spec *sp, const launch *l, size_t b)
{
    for (size_t a = 0; a < l->nargs; a++) {
        if (l->args[a].kind == ARG_BUF && l->args[a].index == b)
            return 1;
        for (size_t k = 0; l->args[a].kind == ARG_BLOB && k < sp->naddrs; k++)
            if (sp->addrs[k].blob == l->args[a].index && sp->addrs[k].buf == b)
                return 1;
    }
    return 0;
}

static void record(spec *sp, const options *o, size_t idx, const launch *l)
{
    size_t cap = 0;
    unsigned char *h = NULL;
    char hex[65];
    for (int pass = 0; pass < 2; pass++) {
        size_t n = pass == 0 ? sp->nbufs : sp->nglobals;
        for (size_t i = 0; i < n; i++) {
            const char *name, *tname;
            size_t bytes, count;
            CUdeviceptr p;
            if (pass == 0 && o->record_args && !launch_passes(sp, l, i))
                continue;
            if (pass == 0) {
                buffer *b = &sp->bufs[i];
                name = b->name, tname = b->type->name, bytes = buf_bytes(b), count = b->count;
                p = b->dptr;
            } else {
                global_var *g = &sp->globals[i];
                name = g->name, tname = g->type->name, bytes = glob_bytes(g), count = g->count;
                p = g->dptr;
            }
            if (bytes > cap) {
                free(h);
                cap = bytes;
                h = xcalloc(cap, 1);
            }
            CU(D(cuMemcpyDtoH)(h, p, bytes));
            sha256_hex(h, bytes, hex);
            result_line("after %zu %s %s %s %s %zu %s", idx, l->kernel, pass ? "global" : "buf",
                        name, tname, count, hex);
            if (o->dump)
                dump_object(o->dump, idx, pass ? "global" : "buf", name, h, bytes);
        }
    }
    free(h);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#define TIME_BATCH 10

/* GPU time of one batch of TIME_BATCH back-to-back launches, per launch. */
static double time_batch(module_info *mi, launch *l, void **argv, CUevent e0, CUevent e1)
{
    CU(D(cuEventRecord)(e0, NULL));
    for (int b = 0; b < TIME_BATCH; b++)
        do_launch(mi, l, argv);
    CU(D(cuEventRecord)(e1, NULL));
    CU(D(cuEventSynchronize)(e1));
    float ms = 0;
    CU(D(cuEventElapsedTime)(&ms, e0, e1));
    return (double)ms * 1000.0 / TIME_BATCH;
}

/* Times every kernel of the spec in mis[0] and, interleaved, in the nm - 1
 * compared modules. */
static void time_kernels(spec *sp, module_info *mis, int nm, int reps)
{
    CUevent e0, e1;
    CU(D(cuEventCreate)(&e0, CU_EVENT_DEFAULT));
    CU(D(cuEventCreate)(&e1, CU_EVENT_DEFAULT));
    double *t = xcalloc((size_t)reps * (size_t)nm, sizeof *t);
    name_list done = {0};
    /* every kernel once in every module before anything is timed: clocks
     * up, code loaded */
    for (int m = 0; m < nm; m++)
        for (size_t li = 0; li < sp->nlaunches; li++) {
            void *argv[256];
            prepare_args(sp, &mis[m], &sp->launches[li], argv);
            do_launch(&mis[m], &sp->launches[li], argv);
        }
    sync_after(&sp->launches[0], 0);
    for (size_t li = 0; li < sp->nlaunches; li++) {
        launch *l = &sp->launches[li];
        if (names_has(&done, l->kernel))
            continue; /* time each kernel once, with its first launch line */
        names_add(&done, l->kernel);
        void *argv[256];
        for (int m = 0; m < nm; m++) {
            prepare_args(sp, &mis[m], l, argv);
            for (int w = 0; w < 5; w++)
                do_launch(&mis[m], l, argv);
        }
        sync_after(l, li + 1);
        for (int r = 0; r < reps; r++)
            for (int k = 0; k < nm; k++) {
                int m = (r + k) % nm; /* rotate which module goes first */
                prepare_args(sp, &mis[m], l, argv);
                t[(size_t)m * (size_t)reps + (size_t)r] = time_batch(&mis[m], l, argv, e0, e1);
            }
        sync_after(l, li + 1);
        for (int m = 0; m < nm; m++) {
            double *tm = t + (size_t)m * (size_t)reps;
            qsort(tm, (size_t)reps, sizeof *tm, cmp_double);
            double median = reps % 2 ? tm[reps / 2] : (tm[reps / 2 - 1] + tm[reps / 2]) / 2;
            if (m == 0)
                result_line("time %s %.3f %.3f", l->kernel, median, tm[0]);
            else
                result_line("time@%d %s %.3f %.3f", m, l->kernel, median, tm[0]);
        }
    }
    free(t);
    names_free(&done);
    CU(D(cuEventDestroy)(e0));
    CU(D(cuEventDestroy)(e1));
}

/* ---- the auto spec (bench/gen_module.py modules) -------------------------------------------- */

#define AUTO_N 65536

static int has_prefix(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }

/* Fills sp from the module: every kernel in name order, globals by prefix. */
static void make_auto_spec(spec *sp, module_info *mi, int with_globals, const char *only)
{
    memset(sp, 0, sizeof *sp);
    sp->path = "auto";
    g_spec_path = "auto";
    GROW(sp->bufs, sp->nbufs);
    sp->bufs[0].name = xstrdup("ext");
    sp->bufs[0].type = find_type("f32");
    sp->bufs[0].count = AUTO_N;
    sp->bufs[0].role = ROLE_INOUT;
    sp->nbufs = 1;
    if (with_globals) {
        for (size_t i = 0; i < mi->globals.n; i++) {
            const char *g = mi->globals.v[i];
            const type_info *t;
            range r;
            memset(&r, 0, sizeof r);
            r.given = 1;
            if (has_prefix(g, "i_") || has_prefix(g, "c_i")) {
                t = find_type("i32");
                r.ilo = 0, r.ihi = 64;
            } else if (has_prefix(g, "f_") || has_prefix(g, "g_") || has_prefix(g, "c_")) {
                t = find_type("f32");
                r.flo = -1, r.fhi = 1;
            } else {
                result_line("global-skipped %s", g);
                continue;
            }
            uint64_t dptr;
            size_t bytes;
            tc_error err;
            TC(tc_module_global(mi->mod, g, &dptr, &bytes, &err), &err);
            if (bytes % 4 || bytes == 0)
                die(1, "auto: global %s is %zu bytes, not a multiple of 4", g, bytes);
            GROW(sp->globals, sp->nglobals);
            global_var *gv = &sp->globals[sp->nglobals++];
            gv->name = xstrdup(g);
            gv->type = t;
            gv->count = bytes / 4;
            gv->init = 1;
            gv->r = r;
        }
    }
    for (size_t i = 0; i < mi->kernels.n; i++) {
        const char *kn = mi->kernels.v[i];
        if (only && strcmp(only, kn))
            continue;
        tc_kernel k;
        CUfunction f = kernel_function(mi, kn, &k);
        size_t sizes[8];
        int supported;
        size_t n = param_count(f, sizes, 8, &supported);
        if (!supported)
            die(2, "auto: cuFuncGetParamInfo is not supported by this driver");
        int four = n == 4 && sizes[0] == 4 && sizes[1] == 4 && sizes[2] == 8 && sizes[3] == 4;
        int two = n == 2 && sizes[0] == 4 && sizes[1] == 4;
        if (!four && !two)
            die(1, "auto: kernel %s has %zu parameters, not (int n, float dt[, float *ext, int "
                   "ext_stride]): not a bench/gen_module.py module?",
                kn, n);
        GROW(sp->launches, sp->nlaunches);
        launch *l = &sp->launches[sp->nlaunches++];
        l->kernel = xstrdup(kn);
        l->grid[0] = AUTO_N / 256, l->grid[1] = l->grid[2] = 1;
        l->block[0] = 256, l->block[1] = l->block[2] = 1;
        l->nargs = n;
        l->args = xcalloc(n, sizeof *l->args);
        const type_info *ti = find_type("i32"), *tf = find_type("f32");
        parse_scalar(l->args[0].value, ti, "65536");
        l->args[0].kind = ARG_SCALAR, l->args[0].size = 4, l->args[0].text = xstrdup("i32:65536");
        parse_scalar(l->args[1].value, tf, "0.01");
        l->args[1].kind = ARG_SCALAR, l->args[1].size = 4, l->args[1].text = xstrdup("f32:0.01");
        if (four) {
            l->args[2].kind = ARG_BUF, l->args[2].index = 0, l->args[2].size = 8;
            l->args[2].text = xstrdup("@ext");
            parse_scalar(l->args[3].value, ti, "1");
            l->args[3].kind = ARG_SCALAR, l->args[3].size = 4, l->args[3].text = xstrdup("i32:1");
        }
    }
    if (sp->nlaunches == 0)
        die(1, "auto: no kernel%s%s found in the module", only ? " named " : "", only ? only : "");
}

/* ---- main ------------------------------------------------------------------------------------ */

static void check_spec_only(const char *path)
{
    spec sp;
    parse_spec(&sp, path);
    for (size_t i = 0; i < sp.nlaunches; i++) {
        launch *l = &sp.launches[i];
        printf("launch %s", l->kernel);
        for (size_t a = 0; a < l->nargs; a++)
            printf("%s%zu", a ? "," : " ", l->args[a].size);
        if (!l->nargs)
            printf(" -");
        printf("%s\n", l->coop ? " coop" : "");
    }
    for (size_t i = 0; i < sp.nglobals; i++)
        printf("global %s %zu\n", sp.globals[i].name, glob_bytes(&sp.globals[i]));
    spec_free(&sp);
}

static void load_module(const unsigned char *data, size_t len, build_out *b, module_info *mi)
{
    tc_error err;
    memset(mi, 0, sizeof *mi);
    if (b) {
        TC(tc_module_load(b->result, &mi->mod, &err), &err);
        mi->result = b->result;
    } else {
        TC(tc_module_load_image(data, len, &mi->mod, &err), &err);
    }
}

static void read_symbols(const options *o, const unsigned char *image, size_t len,
                         const char *text, module_info *mi)
{
    if (o->ptx_jit) {
        ptx_entries(text, &mi->kernels);
        return;
    }
    const char *why = elf_symbols(image, len, &mi->kernels, &mi->globals);
    if (why)
        die(1, "cannot read the image's symbol table: %s", why);
    if (mi->result) {
        /* taskcache's metadata and the image must name the same kernels */
        size_t n = tc_result_entry_count(mi->result);
        if (n != mi->kernels.n)
            die(1, "taskcache reports %zu kernels, the image's symbol table has %zu", n,
                mi->kernels.n);
        for (size_t i = 0; i < n; i++) {
            tc_entry_info e;
            if (tc_result_entry(mi->result, i, &e) != TC_OK || !names_has(&mi->kernels, e.name))
                die(1, "kernel %zu of taskcache's metadata is not in the image", i);
        }
    }
}

/* A module timed against the first one: the same kernels, every argument
 * independent of the module, and the spec's globals holding the same bytes. */
static void prepare_compared(spec *sp, module_info *first, module_info *other, const char *path)
{
    if (other->kernels.n != first->kernels.n)
        die(1, "--compare %s: %zu kernels, the first module has %zu", path, other->kernels.n,
            first->kernels.n);
    for (size_t i = 0; i < first->kernels.n; i++)
        if (!names_has(&other->kernels, first->kernels.v[i]))
            die(1, "--compare %s has no kernel %s", path, first->kernels.v[i]);
    for (size_t li = 0; li < sp->nlaunches; li++)
        for (size_t a = 0; a < sp->launches[li].nargs; a++)
            if (sp->launches[li].args[a].kind == ARG_FNPTR)
                die(2, "--compare: spec line %d passes a function pointer of the module",
                    sp->launches[li].line);
    unsigned char *h = NULL;
    for (size_t i = 0; i < sp->nglobals; i++) {
        uint64_t d0, d1;
        size_t n0, n1;
        tc_error err;
        TC(tc_module_global(first->mod, sp->globals[i].name, &d0, &n0, &err), &err);
        tc_status st = tc_module_global(other->mod, sp->globals[i].name, &d1, &n1, &err);
        if (st == TC_ERR_NOT_FOUND || (st == TC_OK && n0 != n1))
            die(1, "--compare %s: global %s is missing or of another size", path,
                sp->globals[i].name);
        TC(st, &err);
        h = realloc(h, n0 ? n0 : 1);
        if (!h)
            die(2, "out of memory");
        CU(D(cuMemcpyDtoH)(h, (CUdeviceptr)d0, n0));
        CU(D(cuMemcpyHtoD)((CUdeviceptr)d1, h, n0));
    }
    free(h);
}

int main(int argc, char **argv)
{
    options o;
    parse_options(argc, argv, &o);
    setvbuf(stderr, NULL, _IOLBF, 0);
    if (o.check_spec) {
        check_spec_only(o.spec);
        return 0;
    }
    int is_auto = !strcmp(o.spec, "auto");
    spec sp;
    memset(&sp, 0, sizeof sp);
    if (!is_auto)
        parse_spec(&sp, o.spec);
    if (o.out) {
        g_result = fopen(o.out, "w");
        if (!g_result)
            die(2, "cannot write %s: %s", o.out, strerror(errno));
    }
    result_line("gpu_run spec=%s source=%s seed=%" PRIu64, o.spec,
                o.ptx ? o.ptx : o.image ? o.image : o.ptx_jit, o.seed);
    if (!is_auto)
        apply_blob_fills(&sp, o.seed);

    /* ---- build only / check an image (no GPU) ---- */
    if (o.build_only) {
        size_t len, ilen;
        unsigned char *input = read_file(o.ptx ? o.ptx : o.image, &len, 0);
        build_out b;
        memset(&b, 0, sizeof b);
        const unsigned char *img = input;
        ilen = len;
        if (o.ptx) {
            do_build(&o, input, len, &b, 0);
            report_build(&o, &b);
            if (o.write_image) {
                tc_error err;
                TC(tc_result_write_image(b.result, o.write_image, &err), &err);
            }
            img = (const unsigned char *)tc_result_image(b.result, &ilen);
        }
        name_list k = {0}, g = {0};
        const char *why = elf_symbols(img, ilen, &k, &g);
        if (why)
            die(1, "cannot read the image's symbol table: %s", why);
        result_line("image kernels=%zu globals=%zu bytes=%zu", k.n, g.n, ilen);
        int bad = b.expectation_failed;
        if (!is_auto) {
            int checked = 0;
            for (size_t l = 0; l < sp.nlaunches; l++) {
                launch *la = &sp.launches[l];
                if (!names_has(&k, la->kernel)) {
                    note("FAIL: %s:%d: the image has no kernel %s", sp.path, la->line, la->kernel);
                    result_line("missing-kernel %s", la->kernel);
                    bad = 1;
                    continue;
                }
                char where[512];
                snprintf(where, sizeof where, "%s:%d", sp.path, la->line);
                int r = check_args_elf(img, ilen, la->kernel, la->args, la->nargs, where);
                if (r > 0) {
                    result_line("param-mismatch %s", la->kernel);
                    bad = 1;
                }
                checked += r == 0;
            }
            for (size_t i = 0; i < sp.nglobals; i++)
                if (!names_has(&g, sp.globals[i].name)) {
                    note("FAIL: %s: the image has no global %s", sp.path, sp.globals[i].name);
                    result_line("missing-global %s", sp.globals[i].name);
                    bad = 1;
                }
            result_line("param-checks %d of %zu launches", checked, sp.nlaunches);
        }
        if (!is_auto) {
            for (size_t i = 0; i < k.n; i++) {
                int found = 0;
                for (size_t l = 0; l < sp.nlaunches; l++)
                    found |= !strcmp(sp.launches[l].kernel, k.v[i]);
                if (!found && !o.allow_uncovered) {
                    note("kernel %s of the image is not launched by the spec", k.v[i]);
                    result_line("uncovered %s", k.v[i]);
                    bad = 1;
                }
            }
        }
        result_line(bad ? "status FAIL checks" : "status ok");
        if (b.result)
            tc_result_free(b.result);
        names_free(&k);
        names_free(&g);
        free(input);
        spec_free(&sp);
        if (g_result)
            fclose(g_result);
        return bad ? 1 : 0;
    }

    /* ---- first launch: the clock starts after cuInit + context ---- */
    device dev;
    memset(&dev, 0, sizeof dev);
    if (o.first_launch) {
        double t_start = now_us();
        open_device(&o, &dev);
        CUdeviceptr ext = 0;
        CU(D(cuMemAlloc)(&ext, AUTO_N * sizeof(float)));
        CU(D(cuMemsetD8)(ext, 0, AUTO_N * sizeof(float)));
        size_t len = 0;
        unsigned char *src = NULL;
        build_out b;
        module_info mi;
        const char *path = o.ptx ? o.ptx : o.image ? o.image : o.ptx_jit;
        /* which kernel: --kernel, else the first in name order; found before the
         * clock starts (a host knows its kernels' names) */
        const char *kname = o.kernel;
        char *found = NULL;
        if (!kname) {
            name_list k = {0}, g = {0};
            src = read_file(path, &len, 1);
            if (o.image) {
                const char *why = elf_symbols(src, len, &k, &g);
                if (why)
                    die(1, "cannot read the symbol table of %s: %s", path, why);
            } else {
                ptx_entries((const char *)src, &k);
            }
            if (!k.n)
                die(1, "no kernel in %s", path);
            kname = found = xstrdup(k.v[0]);
            names_free(&k);
            names_free(&g);
            free(src);
        }
        double t0 = now_us(), t_built = 0, t_loaded = 0;
        src = read_file(path, &len, o.ptx_jit != NULL);
        if (o.ptx) {
            do_build(&o, src, len, &b, 1);
            t_built = now_us();
            load_module(NULL, 0, &b, &mi);
        } else {
            t_built = now_us();
            load_module(src, o.ptx_jit ? len + 1 : len, NULL, &mi);
        }
        t_loaded = now_us();
        spec one;
        char *kname_copy = xstrdup(kname);
        kname = kname_copy;
        name_list only = {0};
        names_add(&only, kname);
        mi.kernels = only;
        make_auto_spec(&one, &mi, 0, NULL);
        one.bufs[0].dptr = ext;
        launch *l = &one.launches[0];
        void *argv_[256];
        prepare_args(&one, &mi, l, argv_);
        do_launch(&mi, l, argv_);
        sync_after(l, 1);
        double t1 = now_us();
        result_line("first_launch_us %.0f", t1 - t0);
        result_line("init_us %.0f", dev.init_us);
        result_line("process_to_ready_us %.0f", t0 - t_start);
        result_line("build_us %.0f", t_built - t0);
        result_line("load_us %.0f", t_loaded - t_built);
        result_line("launch_us %.0f", t1 - t_loaded);
        result_line("kernel %s", kname);
        if (o.ptx)
            result_line("build module_hit=%d units_compiled=%u", b.rep.module_hit,
                        b.rep.units_compiled);
        printf("first_launch_us %.0f\ninit_us %.0f\n", t1 - t0, dev.init_us);
        note("first launch of %s: %.0f us (build %.0f, load %.0f, launch+sync %.0f); cuInit + "
             "context %.0f us",
             kname, t1 - t0, t_built - t0, t_loaded - t_built, t1 - t_loaded, dev.init_us);
        result_line("status ok");
        fflush(stdout);
        tc_module_unload(mi.mod);
        if (o.ptx)
            tc_result_free(b.result);
        names_free(&mi.kernels);
        spec_free(&one);
        spec_free(&sp);
        free(found);
        free(kname_copy);
        free(src);
        if (g_result)
            fclose(g_result);
        return 0;
    }

    /* ---- build / load ---- */
    open_device(&o, &dev);
    if (sp.stack_bytes)
        CU(D(cuCtxSetLimit)(CU_LIMIT_STACK_SIZE, sp.stack_bytes));
    size_t len;
    const char *path = o.ptx ? o.ptx : o.image ? o.image : o.ptx_jit;
    unsigned char *src = read_file(path, &len, o.ptx_jit != NULL);
    build_out b;
    memset(&b, 0, sizeof b);
    module_info mi;
    const unsigned char *image = src;
    size_t image_len = len;
    if (o.ptx) {
        do_build(&o, src, len, &b, 0);
        report_build(&o, &b);
        load_module(NULL, 0, &b, &mi);
        image = tc_result_image(b.result, &image_len);
    } else {
        load_module(src, o.ptx_jit ? len + 1 : len, NULL, &mi);
    }
    if (!o.ptx_jit) {
        mi.image = image;
        mi.image_len = image_len;
    }
    read_symbols(&o, image, image_len, (const char *)src, &mi);
    if (is_auto)
        make_auto_spec(&sp, &mi, 1, o.kernel);

    /* coverage: every kernel of the module is launched by the spec */
    int failed = b.expectation_failed;
    for (size_t i = 0; i < mi.kernels.n; i++) {
        int found = 0;
        for (size_t l = 0; l < sp.nlaunches; l++)
            found |= !strcmp(sp.launches[l].kernel, mi.kernels.v[i]);
        if (!found && !o.allow_uncovered && !o.kernel) {
            note("FAIL: kernel %s of the module is not launched by the spec", mi.kernels.v[i]);
            result_line("uncovered %s", mi.kernels.v[i]);
            failed = 1;
        }
    }
    for (size_t l = 0; l < sp.nlaunches; l++) {
        check_args(&mi, &sp.launches[l], sp.launches[l].line);
        if (sp.launches[l].coop)
            check_coop(&mi, &dev, &sp.launches[l]);
        int first = 1;
        for (size_t e = 0; e < l; e++)
            first &= strcmp(sp.launches[e].kernel, sp.launches[l].kernel) != 0;
        if (first) {
            tc_kernel k;
            kernel_function(&mi, sp.launches[l].kernel, &k);
            result_line("kernel %s regs=%d shared=%d local=%d const=%d", sp.launches[l].kernel,
                        k.registers, k.shared_bytes, k.local_bytes, k.const_bytes);
        }
    }
    if (o.dump) {
        mkdir(o.dump, 0777);
        struct stat st;
        if (stat(o.dump, &st) != 0 || !S_ISDIR(st.st_mode))
            die(2, "cannot create --dump directory %s", o.dump);
    }
    CUdeviceptr pad = 0;
    if (o.pad_bytes)
        CU(D(cuMemAlloc)(&pad, o.pad_bytes));
    alloc_and_init(&sp, &mi, o.seed, 1);

    if (o.time_reps) {
        module_info mis[MAX_COMPARE + 1];
        unsigned char *cmp_img[MAX_COMPARE];
        mis[0] = mi;
        for (int j = 0; j < o.ncompare; j++) {
            size_t clen;
            cmp_img[j] = read_file(o.compare[j], &clen, 0);
            load_module(cmp_img[j], clen, NULL, &mis[j + 1]);
            mis[j + 1].image = cmp_img[j];
            mis[j + 1].image_len = clen;
            read_symbols(&o, cmp_img[j], clen, NULL, &mis[j + 1]);
            prepare_compared(&sp, &mi, &mis[j + 1], o.compare[j]);
        }
        time_kernels(&sp, mis, o.ncompare + 1, o.time_reps);
        for (int j = 0; j < o.ncompare; j++) {
            tc_module_unload(mis[j + 1].mod);
            names_free(&mis[j + 1].kernels);
            names_free(&mis[j + 1].globals);
            free(cmp_img[j]);
        }
    } else {
        for (size_t li = 0; li < sp.nlaunches; li++) {
            launch *l = &sp.launches[li];
            void *argv_[256];
            poison_outputs(&sp);
            prepare_args(&sp, &mi, l, argv_);
            result_line("launch %zu %s grid=%u,%u,%u block=%u,%u,%u shmem=%u%s", li + 1, l->kernel,
                        l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2],
                        l->shmem, l->coop ? " coop" : "");
            do_launch(&mi, l, argv_);
            sync_after(l, li + 1);
            fflush(stdout); /* keep device printf output in launch order */
            record(&sp, &o, li + 1, l);
        }
    }
    fflush(stdout);
    result_line(failed ? "status FAIL checks" : "status ok");
    for (size_t i = 0; i < sp.nbufs; i++)
        CU(D(cuMemFree)(sp.bufs[i].dptr));
    if (pad)
        CU(D(cuMemFree)(pad));
    tc_module_unload(mi.mod);
    if (b.result)
        tc_result_free(b.result);
    names_free(&mi.kernels);
    names_free(&mi.globals);
    spec_free(&sp);
    free(src);
    if (g_result)
        fclose(g_result);
    return failed ? 1 : 0;
}
