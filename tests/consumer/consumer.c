/* consumer: builds a one-kernel module through an installed taskcache,
 * twice, and checks that the second build is a cache hit. Usage:
 * consumer CACHE_DIR. Prints one line; exit 0 when all is as expected. */
#include <stdio.h>
#include <string.h>

#include <taskcache.h>

static const char ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                          ".visible .entry consumer_kernel() { ret; }\n";

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: consumer CACHE_DIR\n");
        return 2;
    }
    tc_cache *cache;
    tc_error err;
    if (tc_cache_open(argv[1], &cache, &err) != TC_OK) {
        fprintf(stderr, "consumer: %s\n", err.message);
        return 1;
    }
    tc_options *o = tc_options_new();
    tc_options_set_arch(o, "sm_90", NULL);
    int hits = 0, rc = 0;
    size_t size = 0;
    for (int i = 0; i < 2 && !rc; i++) {
        tc_result *r = NULL;
        tc_status st = tc_build(cache, o, ptx, strlen(ptx), "consumer.ptx", &r);
        if (st != TC_OK) {
            fprintf(stderr, "consumer: %s\n", r ? tc_result_diagnostics(r) : tc_status_name(st));
            rc = 1;
        } else {
            tc_report rep;
            tc_result_report(r, &rep);
            hits += rep.module_hit;
            tc_result_image(r, &size);
        }
        tc_result_free(r);
    }
    tc_options_free(o);
    tc_cache_close(cache);
    if (!rc && hits != 1) {
        fprintf(stderr, "consumer: expected one module hit in two builds, got %d\n", hits);
        rc = 1;
    }
    if (!rc)
        printf("consumer: taskcache %s built a %zu-byte cubin, then read it from the cache\n",
               tc_version(), size);
    return rc;
}
