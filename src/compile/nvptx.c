/* nvptx: in-process compilation with nvPTXCompiler (see nvptx.h). */
#include "compile/nvptx.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef TC_HAVE_NVPTXCOMPILER
#include <nvPTXCompiler.h>

#ifndef TC_NVPTXCOMPILER_SHA256
#define TC_NVPTXCOMPILER_SHA256 "unknown"
#endif

int tc_nvptx_available(void) { return 1; }

static char identity[160];
static pthread_once_t identity_once = PTHREAD_ONCE_INIT;

static void make_identity(void)
{
    unsigned major = 0, minor = 0;
    nvPTXCompilerGetVersion(&major, &minor);
    snprintf(identity, sizeof identity, "nvPTXCompiler %u.%u %s", major, minor,
             TC_NVPTXCOMPILER_SHA256);
}

const char *tc_nvptx_identity(void)
{
    /* threads of several builds ask at once; once, not a racy lazy write */
    pthread_once(&identity_once, make_identity);
    return identity;
}

#ifndef TC_NVPTXCOMPILER_RELEASE
#define TC_NVPTXCOMPILER_RELEASE ""
#endif

const char *tc_nvptx_release(void) { return TC_NVPTXCOMPILER_RELEASE; }

static void append_log(nvPTXCompilerHandle h, int errors, tc_sb *log)
{
    size_t n = 0;
    nvPTXCompileResult rc = errors ? nvPTXCompilerGetErrorLogSize(h, &n)
                                   : nvPTXCompilerGetInfoLogSize(h, &n);
    if (rc != NVPTXCOMPILE_SUCCESS || n <= 1 || tc_sb_reserve(log, n) != 0)
        return;
    rc = errors ? nvPTXCompilerGetErrorLog(h, log->data + log->len)
                : nvPTXCompilerGetInfoLog(h, log->data + log->len);
    if (rc == NVPTXCOMPILE_SUCCESS) {
        while (n && log->data[log->len + n - 1] == '\0')
            n--;
        log->len += n;
        log->data[log->len] = '\0';
        if (log->len && log->data[log->len - 1] != '\n')
            tc_sb_putc(log, '\n');
    }
}

/* nvPTXCompiler's info log (--verbose) corrupts the heap and aborts the
 * whole process on a function name of about 100 KB (CUDA 13.0: 90 KB
 * passes, 100 KB aborts; the library does it on its own when asked for
 * verbose output), and a host embedding taskcache must not die of an
 * input. A text with a name past this bound is compiled without the info
 * log: its kernels' resource report reads unknown (-1). */
#define VERBOSE_NAME_MAX 16384

static int has_long_name(const char *ptx, size_t len)
{
    size_t run = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)ptx[i];
        int name_char = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        (c >= '0' && c <= '9') || c == '_' || c == '$' || c == '.' || c == '%';
        run = name_char ? run + 1 : 0;
        if (run > VERBOSE_NAME_MAX)
            return 1;
    }
    return 0;
}

/* What a failed nvPTXCompiler call means, in words. */
static const char *failure_name(nvPTXCompileResult rc)
{
    switch (rc) {
    case NVPTXCOMPILE_ERROR_INVALID_INPUT: return "invalid input";
    case NVPTXCOMPILE_ERROR_INTERNAL: return "internal error";
    case NVPTXCOMPILE_ERROR_OUT_OF_MEMORY: return "out of memory";
    case NVPTXCOMPILE_ERROR_UNSUPPORTED_PTX_VERSION: return "unsupported PTX version";
    default: return "unexpected result";
    }
}

int tc_nvptx_compile(const char *arch, char *const *opts, size_t nopts, tc_out_kind kind,
                     const char *ptx, size_t len, tc_sb *output, tc_sb *log, int *exit_code)
{
    const char **argv = calloc(nopts + 4, sizeof *argv);
    if (!argv)
        return -1;
    char gpu[64];
    snprintf(gpu, sizeof gpu, "--gpu-name=%s", arch);
    int argc = 0;
    argv[argc++] = gpu;
    if (kind != TC_OUT_CUBIN)
        argv[argc++] = tc_out_option(kind);
    if (!has_long_name(ptx, len))
        argv[argc++] = "--verbose";
    for (size_t i = 0; i < nopts; i++)
        argv[argc++] = opts[i];
    nvPTXCompilerHandle h = NULL;
    nvPTXCompileResult rc = nvPTXCompilerCreate(&h, len, ptx);
    if (rc == NVPTXCOMPILE_SUCCESS)
        rc = nvPTXCompilerCompile(h, argc, argv);
    free(argv);
    size_t explained = 0; /* bytes of the error log: the compiler said why */
    if (h) {
        append_log(h, 0, log);
        explained = log->len;
        append_log(h, 1, log);
        explained = log->len - explained;
    }
    size_t size = 0;
    if (rc == NVPTXCOMPILE_SUCCESS)
        rc = nvPTXCompilerGetCompiledProgramSize(h, &size);
    if (rc == NVPTXCOMPILE_SUCCESS && tc_sb_reserve(output, size) == 0 &&
        nvPTXCompilerGetCompiledProgram(h, output->data + output->len) == NVPTXCOMPILE_SUCCESS) {
        output->len += size;
        *exit_code = 0;
    } else {
        if (rc == NVPTXCOMPILE_SUCCESS)
            rc = NVPTXCOMPILE_ERROR_OUT_OF_MEMORY;
        /* a failure its error log explains (a compile error, a PTX version
         * newer than the compiler) needs no second line */
        if (rc != NVPTXCOMPILE_ERROR_COMPILATION_FAILURE && !explained)
            tc_sb_printf(log,
                         "ptxas fatal   : in-process compiler failed: %s (nvPTXCompile error %d)\n",
                         failure_name(rc), (int)rc);
        *exit_code = 1;
    }
    if (h)
        nvPTXCompilerDestroy(&h);
    return 0;
}

#else /* built without nvPTXCompiler */

int tc_nvptx_available(void) { return 0; }

const char *tc_nvptx_identity(void) { return ""; }

const char *tc_nvptx_release(void) { return ""; }

int tc_nvptx_compile(const char *arch, char *const *opts, size_t nopts, tc_out_kind kind,
                     const char *ptx, size_t len, tc_sb *output, tc_sb *log, int *exit_code)
{
    (void)arch, (void)opts, (void)nopts, (void)kind, (void)ptx, (void)len;
    (void)output, (void)log;
    *exit_code = -1;
    return -1;
}

#endif
