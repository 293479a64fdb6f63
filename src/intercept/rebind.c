/* rebind: points the dlsym and dlvsym imports of every loaded library at
 * the interceptor's. A library loaded with RTLD_DEEPBIND (Quadrants and
 * Taichi load their core that way) resolves its own imports in its own
 * dependencies first, so its dlsym is the C library's and the preloaded
 * one never sees its lookups of driver functions. Its GOT slots for dlsym
 * and dlvsym are rewritten instead, as the dynamic linker would have
 * written them without RTLD_DEEPBIND; nothing else of the library changes.
 *
 * New libraries are noticed through the count of loaded objects, checked
 * on every dlsym: Python looks up PyInit_<module> with dlsym right after it
 * loads an extension, before any of its code runs. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "intercept/intercept.h"

#if defined(__x86_64__)
enum { JUMP_SLOT = R_X86_64_JUMP_SLOT, GLOB_DAT = R_X86_64_GLOB_DAT };
#elif defined(__aarch64__)
enum { JUMP_SLOT = R_AARCH64_JUMP_SLOT, GLOB_DAT = R_AARCH64_GLOB_DAT };
#else
enum { JUMP_SLOT = -1, GLOB_DAT = -1 };
#endif

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long seen_adds, seen_subs;
/* load addresses of the objects already looked at */
static uintptr_t done[1024];
static size_t ndone;

typedef struct targets {
    void *dlsym, *dlvsym;
    uintptr_t self; /* the interceptor's load address: left alone */
} targets;

static uintptr_t at(const struct dl_phdr_info *info, uintptr_t p)
{
    return p < info->dlpi_addr ? p + info->dlpi_addr : p;
}

/* Writes fn into a GOT slot. The pages of the object's RELRO segment
 * became read-only after relocation: such a page is opened for the one
 * write and closed again. The loader protects whole pages only: the
 * segment's last page, when it ends inside one, stays writable and may
 * hold the object's data (64 KiB pages make that likely), so it, like any
 * slot outside the segment, is written as it is. */
static void set_slot(const struct dl_phdr_info *info, uintptr_t slot, void *fn)
{
    void **p = (void **)slot;
    if (*p == fn)
        return;
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t mask = ~(uintptr_t)(page - 1);
    int read_only = 0;
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_GNU_RELRO && slot >= (lo & mask) &&
            slot < ((lo + ph->p_memsz) & mask))
            read_only = 1;
    }
    if (!read_only) {
        *p = fn;
        return;
    }
    uintptr_t start = slot & mask;
    if (mprotect((void *)start, (size_t)page, PROT_READ | PROT_WRITE) != 0)
        return; /* left as it is: the library's lookups then pass us by */
    *p = fn;
    mprotect((void *)start, (size_t)page, PROT_READ);
}

static void rebind_object(const struct dl_phdr_info *info, const targets *t)
{
    const ElfW(Dyn) *dyn = NULL;
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (!dyn)
        return;
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const ElfW(Rela) *rel[2] = {NULL, NULL};
    size_t relsz[2] = {0, 0};
    int rela = 1;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        switch (dyn->d_tag) {
        case DT_SYMTAB: symtab = (const ElfW(Sym) *)at(info, dyn->d_un.d_ptr); break;
        case DT_STRTAB: strtab = (const char *)at(info, dyn->d_un.d_ptr); break;
        case DT_JMPREL: rel[0] = (const ElfW(Rela) *)at(info, dyn->d_un.d_ptr); break;
        case DT_PLTRELSZ: relsz[0] = dyn->d_un.d_val; break;
        case DT_RELA: rel[1] = (const ElfW(Rela) *)at(info, dyn->d_un.d_ptr); break;
        case DT_RELASZ: relsz[1] = dyn->d_un.d_val; break;
        case DT_PLTREL: rela = dyn->d_un.d_val == DT_RELA; break;
        default: break;
        }
    }
    if (!symtab || !strtab || !rela) /* REL (32-bit targets) is not handled */
        return;
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; rel[k] && i < relsz[k] / sizeof *rel[k]; i++) {
            const ElfW(Rela) *r = &rel[k][i];
            long type = (long)ELF64_R_TYPE(r->r_info);
            if (type != JUMP_SLOT && type != GLOB_DAT)
                continue;
            const char *name = strtab + symtab[ELF64_R_SYM(r->r_info)].st_name;
            if (name[0] != 'd' || name[1] != 'l')
                continue;
            if (!strcmp(name, "dlsym"))
                set_slot(info, info->dlpi_addr + r->r_offset, t->dlsym);
            else if (!strcmp(name, "dlvsym"))
                set_slot(info, info->dlpi_addr + r->r_offset, t->dlvsym);
        }
}

static int visit(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    const targets *t = data;
    __atomic_store_n(&seen_adds, info->dlpi_adds, __ATOMIC_RELAXED);
    /* an object unloaded since: another may now sit at its address (a
     * library loaded again after dlclose), so every one is looked at anew
     * (those already pointed here cost a comparison each) */
    if (info->dlpi_subs != seen_subs) {
        seen_subs = info->dlpi_subs;
        ndone = 0;
    }
    for (size_t i = 0; i < ndone; i++)
        if (done[i] == info->dlpi_addr)
            return 0;
    if (ndone < sizeof done / sizeof done[0])
        done[ndone++] = info->dlpi_addr;
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    /* the C library and the dynamic linker define dlsym; the interceptor
     * finds the real one itself */
    if (!strncmp(base, "libc.so", 7) || !strncmp(base, "ld-linux", 8) ||
        info->dlpi_addr == t->self)
        return 0;
    rebind_object(info, t);
    return 0;
}

static int count_adds(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    *(unsigned long long *)data = info->dlpi_adds;
    return 1; /* any object tells */
}

void tc_rebind_lookups(void *our_dlsym, void *our_dlvsym)
{
    if (JUMP_SLOT < 0)
        return;
    /* dlpi_adds counts every object ever loaded: nothing new, nothing to do */
    unsigned long long adds = 0;
    dl_iterate_phdr(count_adds, &adds);
    if (__atomic_load_n(&seen_adds, __ATOMIC_RELAXED) == adds)
        return;
    Dl_info self;
    targets t = {our_dlsym, our_dlvsym, 0};
    if (dladdr((const void *)tc_rebind_lookups, &self))
        t.self = (uintptr_t)self.dli_fbase;
    pthread_mutex_lock(&lock);
    dl_iterate_phdr(visit, &t);
    pthread_mutex_unlock(&lock);
}
