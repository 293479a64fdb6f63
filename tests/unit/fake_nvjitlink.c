/* fake_nvjitlink: a stand-in for libnvJitLink whose first use is slow on
 * purpose (nvJitLinkCreate sleeps $FAKE_NVJITLINK_DELAY_MS, default 500
 * ms), so that a test can fork while taskcache's prewarm thread is inside
 * it, and which counts its creates (fake_nvjitlink_creates) and the
 * objects added (fake_nvjitlink_adds). It links nothing:
 * nvJitLinkComplete fails with a message. */
#define _POSIX_C_SOURCE 200809L
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int nvJitLinkCreate(void **h, uint32_t n, const char **opts);
int nvJitLinkDestroy(void **h);
int nvJitLinkAddData(void *h, int kind, const void *data, size_t size, const char *name);
int nvJitLinkComplete(void *h);
int nvJitLinkGetLinkedCubinSize(void *h, size_t *size);
int nvJitLinkGetLinkedCubin(void *h, void *cubin);
int nvJitLinkGetErrorLogSize(void *h, size_t *size);
int nvJitLinkGetErrorLog(void *h, char *log);

int fake_nvjitlink_creates(void);
int fake_nvjitlink_adds(void);

static const char message[] = "fake nvJitLink: links nothing";
enum { FAKE_ERROR = 6 };
static int creates, adds;

/* nvJitLinkCreate calls so far, in this process */
int fake_nvjitlink_creates(void) { return __atomic_load_n(&creates, __ATOMIC_SEQ_CST); }

/* nvJitLinkAddData calls so far, in this process */
int fake_nvjitlink_adds(void) { return __atomic_load_n(&adds, __ATOMIC_SEQ_CST); }

int nvJitLinkCreate(void **h, uint32_t n, const char **opts)
{
    (void)n;
    (void)opts;
    const char *e = getenv("FAKE_NVJITLINK_DELAY_MS");
    long ms = e ? atol(e) : 500;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    __atomic_add_fetch(&creates, 1, __ATOMIC_SEQ_CST);
    *h = malloc(1);
    return *h ? 0 : FAKE_ERROR;
}

int nvJitLinkDestroy(void **h)
{
    free(*h);
    *h = NULL;
    return 0;
}

int nvJitLinkAddData(void *h, int kind, const void *data, size_t size, const char *name)
{
    (void)h, (void)kind, (void)data, (void)size, (void)name;
    __atomic_add_fetch(&adds, 1, __ATOMIC_SEQ_CST);
    return 0;
}

int nvJitLinkComplete(void *h)
{
    (void)h;
    return FAKE_ERROR;
}

int nvJitLinkGetLinkedCubinSize(void *h, size_t *size)
{
    (void)h;
    *size = 0;
    return FAKE_ERROR;
}

int nvJitLinkGetLinkedCubin(void *h, void *cubin)
{
    (void)h, (void)cubin;
    return FAKE_ERROR;
}

int nvJitLinkGetErrorLogSize(void *h, size_t *size)
{
    (void)h;
    *size = sizeof message;
    return 0;
}

int nvJitLinkGetErrorLog(void *h, char *log)
{
    (void)h;
    memcpy(log, message, sizeof message);
    return 0;
}
