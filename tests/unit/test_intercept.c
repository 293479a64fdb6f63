/* Tests of the interceptor's decisions (src/intercept/jit.c) called
 * directly, against the fake driver (tests/intercept/fake_cuda.c), so that
 * they run under the sanitizers too: a preloaded library cannot be, inside
 * another program. tests/e2e/test_intercept.py drives the whole thing
 * through `taskcache run` on every path to the driver. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "intercept/intercept.h"

/* The real driver, as interpose.c would find it (its dlsym is not ours
 * here: this test runs without the interceptor preloaded), handed to the
 * builder as the preloaded part hands it. */
static const tc_real_driver *fake_real(void)
{
    static tc_real_driver d;
    static int loaded;
    if (!loaded) {
        loaded = 1;
        void *lib = dlopen("libcuda.so.1", RTLD_NOW);
        CHECK(lib != NULL);
#define GET(field, name)                                                                      \
    do {                                                                                      \
        void *p_ = dlsym(lib, name);                                                          \
        memcpy(&d.field, &p_, sizeof p_);                                                     \
    } while (0)
        GET(cuModuleLoadData, "cuModuleLoadData");
        GET(cuModuleLoadDataEx, "cuModuleLoadDataEx");
        GET(cuLibraryLoadData, "cuLibraryLoadData");
        GET(cuLinkCreate[0], "cuLinkCreate");
        GET(cuLinkCreate[1], "cuLinkCreate_v2");
        GET(cuLinkAddData[0], "cuLinkAddData");
        GET(cuLinkAddData[1], "cuLinkAddData_v2");
        GET(cuLinkAddFile[0], "cuLinkAddFile");
        GET(cuLinkAddFile[1], "cuLinkAddFile_v2");
        GET(cuLinkComplete, "cuLinkComplete");
        GET(cuLinkDestroy, "cuLinkDestroy");
        GET(cuCtxGetDevice, "cuCtxGetDevice");
        GET(cuDeviceGetAttribute, "cuDeviceGetAttribute");
        GET(cuDeviceGetCount, "cuDeviceGetCount");
        GET(cuDeviceGet, "cuDeviceGet");
#undef GET
    }
    return &d;
}

static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                          ".func (.param .b32 r) twice (.param .b32 x)\n{\n .reg .b32 %r<2>;\n"
                          " ld.param.b32 %r1, [x];\n add.s32 %r1, %r1, %r1;\n"
                          " st.param.b32 [r], %r1;\n ret;\n}\n"
                          ".visible .entry ka (.param .u64 o)\n{\n .reg .b32 %r<3>;\n"
                          " .reg .b64 %rd<2>;\n ld.param.u64 %rd1, [o];\n mov.u32 %r1, 7;\n"
                          " {\n .param .b32 a;\n .param .b32 b;\n st.param.b32 [a], %r1;\n"
                          " call.uni (b), twice, (a);\n ld.param.b32 %r2, [b];\n }\n"
                          " st.global.u32 [%rd1], %r2;\n ret;\n}\n";

static char fake_log[256];

/* The fake driver's log since the last call, one string. */
static char *calls(void)
{
    FILE *f = fopen(fake_log, "r");
    char *text = calloc(1, 65536);
    if (f) {
        size_t n = fread(text, 1, 65535, f);
        text[n] = '\0';
        fclose(f);
    }
    unlink(fake_log);
    return text;
}

static void test_module_loads(void)
{
    CUmodule m;
    CHECK(tc_jit_module_load(&m, ptx, 0, NULL, NULL, 0) == CUDA_SUCCESS);
    char *c = calls();
    CHECK_CONTAINS(c, "cuModuleLoadData ELF");
    free(c);
    /* a cubin goes to the driver untouched */
    static const char elf[64] = "\x7f" "ELF";
    tc_jit_module_load(&m, elf, 0, NULL, NULL, 0);
    c = calls();
    CHECK_CONTAINS(c, "cuModuleLoadData ELF");
    free(c);
    /* with options: reported back like the driver's; unknown ones pass */
    char info[256] = "x", error[256] = "x";
    CUjit_option o[6] = {CU_JIT_MAX_REGISTERS, CU_JIT_INFO_LOG_BUFFER,
                         CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER,
                         CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_WALL_TIME};
    void *v[6] = {(void *)(uintptr_t)32, info, (void *)(uintptr_t)sizeof info, error,
                  (void *)(uintptr_t)sizeof error, NULL};
    CHECK(tc_jit_module_load(&m, ptx, 6, o, v, 1) == CUDA_SUCCESS);
    float ms;
    memcpy(&ms, &v[5], sizeof ms);
    CHECK(ms > 0 && error[0] == '\0' && (uintptr_t)v[4] == 0);
    c = calls();
    CHECK_CONTAINS(c, "cuModuleLoadData ELF");
    free(c);
    CUjit_option threads = CU_JIT_THREADS_PER_BLOCK;
    void *tv = (void *)(uintptr_t)128;
    CHECK(tc_jit_module_load(&m, ptx, 1, &threads, &tv, 1) == CUDA_SUCCESS);
    c = calls();
    CHECK_CONTAINS(c, "cuModuleLoadDataEx PTX");
    free(c);
    /* a library: the preserve option is not passed on with our image */
    CUlibrary l;
    CUlibraryOption lo = CU_LIBRARY_BINARY_IS_PRESERVED;
    void *lv = (void *)(uintptr_t)1;
    CHECK(tc_jit_library_load(&l, ptx, NULL, NULL, 0, &lo, &lv, 1) == CUDA_SUCCESS);
    c = calls();
    CHECK_CONTAINS(c, "cuLibraryLoadData ELF");
    CHECK_CONTAINS(c, "liboptions=0");
    free(c);
}

static void test_links(void)
{
    CUlinkState s;
    void *cubin;
    size_t size;
    /* PTX becomes the relocatable object the driver would compile it to;
     * the driver links */
    char info[512] = "";
    CUjit_option lo[3] = {CU_JIT_MAX_REGISTERS, CU_JIT_INFO_LOG_BUFFER,
                          CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
    void *lv[3] = {(void *)(uintptr_t)16, info, (void *)(uintptr_t)sizeof info};
    CHECK(tc_jit_link_create(1, 3, lo, lv, &s) == CUDA_SUCCESS);
    CHECK(tc_jit_link_add_data(1, s, CU_JIT_INPUT_PTX, (void *)ptx, sizeof ptx, "a", 0, NULL,
                               NULL) == CUDA_SUCCESS);
    CHECK(tc_jit_link_complete(s, &cubin, &size) == CUDA_SUCCESS);
    CHECK(!strcmp(cubin, "FAKE LINKED IMAGE"));
    /* the compiler's warning, as the driver writes it */
    CHECK_CONTAINS(info, "ptxas warning : For profile sm_90 adjusting per thread register count");
    CHECK(strchr(info, '\n') == NULL && (uintptr_t)lv[2] == strlen(info) + 1);
    CHECK(tc_jit_link_destroy(s) == CUDA_SUCCESS);
    char *c = calls();
    CHECK_CONTAINS(c, "cuLinkCreate v2 options=3");
    CHECK_CONTAINS(c, "cuLinkAddData v2 type=0 ELF");
    CHECK_CONTAINS(c, "cuLinkComplete inputs=1");
    free(c);
    /* with another input, each as it is: the driver links both */
    CHECK(tc_jit_link_create(0, 0, NULL, NULL, &s) == CUDA_SUCCESS);
    CHECK(tc_jit_link_add_data(0, s, CU_JIT_INPUT_PTX, (void *)ptx, sizeof ptx, "a", 0, NULL,
                               NULL) == CUDA_SUCCESS);
    CHECK(tc_jit_link_add_data(0, s, CU_JIT_INPUT_LIBRARY, (void *)"lib", 3, "b", 0, NULL,
                               NULL) == CUDA_SUCCESS);
    CHECK(tc_jit_link_complete(s, &cubin, &size) == CUDA_SUCCESS);
    CHECK(tc_jit_link_destroy(s) == CUDA_SUCCESS);
    c = calls();
    CHECK_CONTAINS(c, "cuLinkAddData v1 type=0 ELF");
    CHECK_CONTAINS(c, "cuLinkAddData v1 type=4 OTHER");
    CHECK_CONTAINS(c, "cuLinkComplete inputs=2");
    free(c);
    /* options the driver refuses for an input: it gets the call, and says so */
    CHECK(tc_jit_link_create(1, 0, NULL, NULL, &s) == CUDA_SUCCESS);
    CUjit_option target = CU_JIT_TARGET;
    void *tv = (void *)(uintptr_t)80;
    CHECK(tc_jit_link_add_data(1, s, CU_JIT_INPUT_PTX, (void *)ptx, sizeof ptx, "a", 1, &target,
                               &tv) == CUDA_SUCCESS);
    CHECK(tc_jit_link_destroy(s) == CUDA_SUCCESS);
    c = calls();
    CHECK_CONTAINS(c, "cuLinkAddData v2 type=1 PTX");
    free(c);
    /* PTX that does not build goes to the driver, which reports it */
    CHECK(tc_jit_link_create(1, 0, NULL, NULL, &s) == CUDA_SUCCESS);
    static const char bad[] = ".version 8.0\n.target sm_90\nFAKE_INVALID\n";
    CHECK(tc_jit_link_add_data(1, s, CU_JIT_INPUT_PTX, (void *)bad, sizeof bad, "bad", 0, NULL,
                               NULL) == 218);
    CHECK(tc_jit_link_destroy(s) == CUDA_SUCCESS);
    c = calls();
    CHECK_CONTAINS(c, "cuLinkAddData v2 type=1 PTX");
    free(c);
}

/* The builder follows the mode the preloaded part read when the program
 * started, not the environment as the program has changed it since. */
static void test_the_mode_comes_from_the_preloaded_part(void)
{
    setenv("TASKCACHE_INTERCEPT", "0", 1);
    CHECK(tc_jit_bind(TC_JIT_ABI, fake_real, TC_INTERCEPT_MEASURE) != NULL);
    CUmodule m;
    CHECK(tc_jit_module_load(&m, ptx, 0, NULL, NULL, 0) == CUDA_SUCCESS);
    char *c = calls();
    CHECK_CONTAINS(c, "cuModuleLoadData PTX"); /* measured: the driver compiled it */
    free(c);
    CHECK(tc_jit_bind(TC_JIT_ABI, fake_real, TC_INTERCEPT_BUILD) != NULL);
    CHECK(tc_jit_module_load(&m, ptx, 0, NULL, NULL, 0) == CUDA_SUCCESS);
    c = calls();
    CHECK_CONTAINS(c, "cuModuleLoadData ELF");
    free(c);
    unsetenv("TASKCACHE_INTERCEPT");
}

/* The real dlsym, found without dlsym (which the interceptor replaces). */
static void test_libc_function(void)
{
    CHECK(tc_libc_function("dlsym") == dlsym(RTLD_DEFAULT, "dlsym"));
    CHECK(tc_libc_function("dlvsym") == dlsym(RTLD_DEFAULT, "dlvsym"));
    CHECK(tc_libc_function("no_such_function_anywhere") == NULL);
}

int main(void)
{
    char dir[] = "/tmp/taskcache-intercept-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    snprintf(fake_log, sizeof fake_log, "%s/fake.log", dir);
    setenv("FAKE_CUDA_LOG", fake_log, 1);
    char cache[300];
    snprintf(cache, sizeof cache, "%s/cache", dir);
    setenv("TASKCACHE_DIR", cache, 1);
    CHECK(tc_intercept_enabled());
    /* a preloaded part of another build is refused, not half served */
    CHECK(tc_jit_bind(TC_JIT_ABI + 1, fake_real, TC_INTERCEPT_BUILD) == NULL);
    CHECK(tc_jit_bind(TC_JIT_ABI, fake_real, TC_INTERCEPT_OFF) == NULL);
    const tc_jit_api *api = tc_jit_bind(TC_JIT_ABI, fake_real, TC_INTERCEPT_BUILD);
    CHECK(api != NULL && api->module_load == tc_jit_module_load &&
          api->link_destroy == tc_jit_link_destroy);
    test_libc_function();
    test_module_loads();
    test_links();
    test_the_mode_comes_from_the_preloaded_part();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    return check_report("test_intercept");
}
