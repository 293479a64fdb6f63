/* deep_lookup: looks driver functions up the way Quadrants' core does:
 * from a library that jit_client loads with RTLD_DEEPBIND, whose own dlsym
 * import therefore binds to the C library, past the interceptor. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

__attribute__((visibility("default"))) void *deep_lookup(const char *name);

void *deep_lookup(const char *name)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    return lib ? dlsym(lib, name) : NULL;
}
