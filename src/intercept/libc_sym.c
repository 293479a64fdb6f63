/* libc_sym: finds a function of the C library by reading its dynamic
 * symbol table. The interceptor replaces dlsym and dlvsym, so it cannot use
 * them to find the real ones: within the preloaded library every reference
 * to dlvsym, versioned or not, binds to its own replacement. */
#define _GNU_SOURCE
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <string.h>

#include "intercept/intercept.h"

typedef struct lookup {
    const char *library; /* the start of the file name: "libc.so" */
    const char *name;
    void *found;
} lookup;

/* Pointers in a loaded object's dynamic section: glibc adds the load
 * address to most of them when it maps the object, on some targets not. */
static uintptr_t at(const struct dl_phdr_info *info, uintptr_t p)
{
    return p < info->dlpi_addr ? p + info->dlpi_addr : p;
}

static uint32_t gnu_hash(const char *s)
{
    uint32_t h = 5381;
    for (; *s; s++)
        h = h * 33 + (unsigned char)*s;
    return h;
}

static uint32_t sysv_hash(const char *s)
{
    uint32_t h = 0;
    for (; *s; s++) {
        h = (h << 4) + (unsigned char)*s;
        uint32_t g = h & 0xf0000000u;
        if (g)
            h ^= g >> 24;
        h &= ~g;
    }
    return h;
}

static void *find_in(const struct dl_phdr_info *info, const ElfW(Dyn) *dyn, const char *name)
{
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const uint32_t *gnu = NULL, *sysv = NULL;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        if (dyn->d_tag == DT_SYMTAB)
            symtab = (const ElfW(Sym) *)at(info, dyn->d_un.d_ptr);
        else if (dyn->d_tag == DT_STRTAB)
            strtab = (const char *)at(info, dyn->d_un.d_ptr);
        else if (dyn->d_tag == DT_GNU_HASH)
            gnu = (const uint32_t *)at(info, dyn->d_un.d_ptr);
        else if (dyn->d_tag == DT_HASH)
            sysv = (const uint32_t *)at(info, dyn->d_un.d_ptr);
    }
    if (!symtab || !strtab)
        return NULL;
#define MATCH(i)                                                                              \
    (symtab[i].st_value && (symtab[i].st_info & 0xf) == STT_FUNC /* ST_TYPE */ &&                  \
     !strcmp(strtab + symtab[i].st_name, name))
    if (gnu) {
        uint32_t nbuckets = gnu[0], symoffset = gnu[1], bloom_size = gnu[2];
        const uint32_t *buckets = (const uint32_t *)((const ElfW(Addr) *)(gnu + 4) + bloom_size);
        const uint32_t *chain = buckets + nbuckets;
        uint32_t h = gnu_hash(name);
        for (uint32_t i = nbuckets ? buckets[h % nbuckets] : 0; i >= symoffset && i; i++) {
            uint32_t h2 = chain[i - symoffset];
            if ((h | 1) == (h2 | 1) && MATCH(i))
                return (void *)(info->dlpi_addr + symtab[i].st_value);
            if (h2 & 1)
                break;
        }
        return NULL;
    }
    if (sysv) {
        uint32_t nbucket = sysv[0];
        const uint32_t *bucket = sysv + 2, *chain = bucket + nbucket;
        for (uint32_t i = bucket[sysv_hash(name) % nbucket]; i; i = chain[i])
            if (MATCH(i))
                return (void *)(info->dlpi_addr + symtab[i].st_value);
    }
#undef MATCH
    return NULL;
}

static int visit(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    lookup *l = data;
    const char *base = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
    base = base ? base + 1 : info->dlpi_name;
    if (!base || strncmp(base, l->library, strlen(l->library)) != 0)
        return 0;
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) {
            const ElfW(Dyn) *dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
            l->found = find_in(info, dyn, l->name);
            return 1;
        }
    return 0;
}

void *tc_libc_function(const char *name)
{
    /* before glibc 2.34, dlsym and dlvsym were libdl's */
    lookup l = {"libc.so", name, NULL}, dl = {"libdl.so", name, NULL};
    dl_iterate_phdr(visit, &l);
    if (!l.found)
        dl_iterate_phdr(visit, &dl);
    return l.found ? l.found : dl.found;
}
