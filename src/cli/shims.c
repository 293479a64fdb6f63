/* shims: `taskcache shims DIR` lays out a directory that tools which look
 * for ptxas by name find taskcache in:
 *
 *   DIR/bin/ptxas         a symbolic link to this program: run under that
 *                         name, it is `taskcache ptxas` (main.c)
 *   DIR/bin/nvcc          a symbolic link to NVIDIA's nvcc, and beside it
 *   DIR/bin/nvcc.profile  nvcc's profile, rewritten to put DIR/bin first on
 *                         the PATH nvcc gives its steps
 *   DIR/bin/...           links to the rest of nvcc's directory (crt/, which
 *                         nvcc finds beside itself, cudafe++, fatbinary, ...)
 *   DIR/nvvm              a link to the toolkit's nvvm (libdevice), so that
 *                         DIR can stand as a CUDA directory (XLA)
 *
 * Why a profile: nvcc reads nvcc.profile from the directory it was run
 * from (not the one its link points to), and the toolkit's own profile
 * prepends the toolkit's bin to PATH for every step, so a ptxas earlier on
 * the user's PATH is never run. The copy names the toolkit by absolute
 * paths, so everything but ptxas still comes from it, and pins
 * TASKCACHE_PTXAS to that toolkit's ptxas (the one its cicc's PTX is for). */
#define _GNU_SOURCE /* realpath */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/common.h"
#include "cli/ptxas.h"

const char cli_usage_shims[] =
    "usage: taskcache shims DIR [--nvcc NVCC]\n"
    "\n"
    "Makes DIR a directory where tools that run ptxas find `taskcache ptxas`\n"
    "(see 'taskcache help ptxas'): DIR/bin/ptxas (a link to taskcache), and,\n"
    "when NVIDIA's nvcc is found (--nvcc, else beside NVIDIA's ptxas),\n"
    "DIR/bin/nvcc with an nvcc.profile that makes nvcc run DIR/bin/ptxas, plus\n"
    "DIR/nvvm (a link to the toolkit's). Run it again after moving taskcache or\n"
    "the toolkit; it replaces only the links and the profile it made.\n"
    "\n"
    "Then, for\n"
    "  nvcc (and make)     PATH=DIR/bin:$PATH, or call DIR/bin/nvcc\n"
    "  CMake               cmake -DCMAKE_CUDA_COMPILER=DIR/bin/nvcc (a fresh build dir)\n"
    "  clang CUDA          clang++ --ptxas-path=DIR/bin/ptxas ...\n"
    "  Triton              TRITON_PTXAS_PATH=DIR/bin/ptxas\n"
    "  XLA (JAX, TF)       XLA_FLAGS='--xla_gpu_cuda_data_dir=DIR\n"
    "                      --xla_gpu_enable_libnvptxcompiler=false'\n"
    "\n"
    "Why nvcc needs its own copy: nvcc puts its own bin first on the PATH of\n"
    "every step, so a ptxas placed earlier on PATH is never run; nvcc reads\n"
    "its profile from the directory it is run from, and this one keeps the\n"
    "toolkit's paths but puts DIR/bin first.\n";

/* out = a + b; -1 (and a message) when that is longer than a path can be. */
static int join(char *out, const char *a, const char *b)
{
    int n = snprintf(out, PATH_MAX, "%s%s", a, b);
    if (n < 0 || n >= PATH_MAX) {
        fprintf(stderr, "%s: error: path too long: %s%s\n", cli_prog, a, b);
        return -1;
    }
    return 0;
}

/* path -> target as a symbolic link, replacing a link already there (never
 * a file: a real ptxas in DIR stays). */
static int place_link(const char *path, const char *target)
{
    struct stat st;
    if (lstat(path, &st) == 0 && !S_ISLNK(st.st_mode)) {
        fprintf(stderr, "%s: error: %s exists and is not a link: not replacing it\n", cli_prog,
                path);
        return -1;
    }
    char tmp[PATH_MAX];
    if (join(tmp, path, ".tmp") != 0)
        return -1;
    unlink(tmp);
    if (symlink(target, tmp) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "%s: error: cannot make %s: %s\n", cli_prog, path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* Writes text to path through a temporary file and a rename. */
static int write_file(const char *path, const char *text, size_t len)
{
    char tmp[PATH_MAX];
    if (join(tmp, path, ".tmp") != 0)
        return -1;
    FILE *f = fopen(tmp, "w");
    int ok = f && fwrite(text, 1, len, f) == len;
    if (f && fclose(f) != 0)
        ok = 0;
    if (!ok || rename(tmp, path) != 0) {
        fprintf(stderr, "%s: error: cannot write %s: %s\n", cli_prog, path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* The toolkit's profile with $(_HERE_) spelled out as its directory, DIR/bin
 * first on PATH and TASKCACHE_PTXAS set before it. NULL (and a message)
 * when the profile has no PATH line to extend. */
static char *rewrite_profile(const char *text, const char *nvcc_dir, const char *bin,
                             const char *ptxas)
{
    char *out = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&out, &size);
    if (!f)
        return NULL;
    int path_done = 0;
    for (const char *line = text; *line;) {
        size_t len = strcspn(line, "\n");
        const char *end = line + len, *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        const char *op = strstr(p, "+=");
        if (!path_done && !strncmp(p, "PATH", 4) && strchr(" \t+", p[4]) && p[4] && op &&
            op < end) {
            fprintf(f, "# taskcache shims: the ptxas of DIR/bin is taskcache\n"
                       "TASKCACHE_PTXAS = %s\n%.*s %s:", ptxas, (int)(op + 2 - line), line, bin);
            for (line = op + 2; *line == ' ' || *line == '\t';)
                line++;
            path_done = 1;
        }
        for (const char *c = line; c < end; c++) {
            if (!strncmp(c, "$(_HERE_)", 9)) {
                fputs(nvcc_dir, f);
                c += 8;
            } else {
                fputc(*c, f);
            }
        }
        if (*end)
            fputc('\n', f);
        line = end + (*end == '\n');
    }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || !path_done) {
        if (!path_done)
            fprintf(stderr, "%s: error: the toolkit's nvcc.profile has no 'PATH +=' line to "
                            "extend; run DIR/bin/ptxas from the build instead\n", cli_prog);
        free(out);
        return NULL;
    }
    return out;
}

static int make_dir(const char *path)
{
    if (mkdir(path, 0755) == 0 || errno == EEXIST)
        return 0;
    fprintf(stderr, "%s: error: cannot create %s: %s\n", cli_prog, path, strerror(errno));
    return -1;
}

/* Links in DIR/bin to everything else in nvcc's directory: nvcc finds
 * some files beside itself, not through PATH (crt/link.stub, which every
 * link of an executable needs: CMake's compiler check does one), and
 * DIR/bin on PATH should offer the toolkit's other programs too. */
static int link_toolkit_bin(const char *bin, const char *ndir)
{
    DIR *d = opendir(ndir);
    if (!d) {
        fprintf(stderr, "%s: error: cannot list %s: %s\n", cli_prog, ndir, strerror(errno));
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        const char *n = e->d_name;
        if (!strcmp(n, ".") || !strcmp(n, "..") || !strcmp(n, "nvcc") ||
            !strcmp(n, "nvcc.profile") || !strncmp(n, "ptxas", 5))
            continue; /* made above, or taskcache's */
        char path[PATH_MAX], target[PATH_MAX], name[NAME_MAX + 2];
        snprintf(name, sizeof name, "/%s", n);
        if (join(target, ndir, name) != 0 || join(path, bin, name) != 0)
            rc = -1;
        else
            rc = place_link(path, target);
    }
    closedir(d);
    return rc;
}

/* DIR/bin/nvcc, its profile, links to the rest of its directory, and
 * DIR/nvvm. */
static int shim_nvcc(const char *dir, const char *bin, const char *nvcc, const char *real_ptxas)
{
    char real[PATH_MAX], ndir[PATH_MAX], path[PATH_MAX], ptxas[PATH_MAX];
    if (!realpath(nvcc, real)) {
        fprintf(stderr, "%s: error: cannot find nvcc at %s: %s\n", cli_prog, nvcc,
                strerror(errno));
        return -1;
    }
    memcpy(ndir, real, sizeof ndir);
    *strrchr(ndir, '/') = '\0';
    /* nvcc's own toolkit's ptxas: the PTX its cicc writes is for that one */
    if (join(ptxas, ndir, "/ptxas") != 0 || join(path, ndir, "/nvcc.profile") != 0)
        return -1;
    if (access(ptxas, X_OK) != 0)
        memcpy(ptxas, real_ptxas, strlen(real_ptxas) + 1);
    size_t len;
    char *text = cli_read_file(path, &len);
    if (!text) {
        fprintf(stderr, "%s: error: cannot read %s: %s\n", cli_prog, path, strerror(errno));
        return -1;
    }
    char *profile = rewrite_profile(text, ndir, bin, ptxas);
    free(text);
    if (!profile)
        return -1;
    int rc = join(path, bin, "/nvcc.profile");
    if (rc == 0)
        rc = write_file(path, profile, strlen(profile));
    free(profile);
    if (rc == 0 && (rc = join(path, bin, "/nvcc")) == 0)
        rc = place_link(path, real);
    if (rc == 0)
        rc = link_toolkit_bin(bin, ndir);
    /* the toolkit's nvvm beside bin, for tools that take DIR as a CUDA directory */
    char nvvm[PATH_MAX], target[PATH_MAX];
    if (rc == 0 && join(nvvm, ndir, "/../nvvm") == 0 && realpath(nvvm, target) &&
        (rc = join(path, dir, "/nvvm")) == 0)
        rc = place_link(path, target);
    if (rc == 0)
        printf("%s/nvcc -> %s (its profile runs %s/ptxas; NVIDIA's is %s)\n", bin, real, bin,
               ptxas);
    return rc;
}

int cli_shims(int argc, char **argv)
{
    const char *dir = NULL, *nvcc = NULL, *v;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(cli_usage_shims, stdout);
            return EXIT_OK;
        } else if ((v = cli_value_of(argc, argv, &i, "--nvcc", 0))) {
            if (!*v)
                return cli_usage_error("%s needs a path", "--nvcc");
            nvcc = v;
        } else if (argv[i][0] == '-') {
            return cli_usage_error("unknown option '%s' (taskcache help shims)", argv[i]);
        } else if (dir) {
            return cli_usage_error("more than one directory: '%s'", argv[i]);
        } else {
            dir = argv[i];
        }
    }
    if (!dir)
        return cli_usage_error("%s", "no directory: taskcache shims DIR");
    char self[PATH_MAX], real_ptxas[PATH_MAX], abs[PATH_MAX], bin[PATH_MAX], path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "%s: error: cannot tell where taskcache is: %s\n", cli_prog,
                strerror(errno));
        return EXIT_FAIL;
    }
    self[n] = '\0';
    if (cli_real_ptxas(real_ptxas, sizeof real_ptxas) != 0) {
        fprintf(stderr, "%s: error: cannot find NVIDIA's ptxas: %s\n", cli_prog, real_ptxas);
        return EXIT_FAIL;
    }
    if (make_dir(dir) != 0 || !realpath(dir, abs)) {
        fprintf(stderr, "%s: error: cannot use %s: %s\n", cli_prog, dir, strerror(errno));
        return EXIT_FAIL;
    }
    if (join(bin, abs, "/bin") != 0 || join(path, bin, "/ptxas") != 0 || make_dir(bin) != 0 ||
        place_link(path, self) != 0)
        return EXIT_FAIL;
    printf("%s -> %s (taskcache ptxas; NVIDIA's is %s)\n", path, self, real_ptxas);
    char guess[PATH_MAX];
    if (!nvcc) {
        /* the nvcc beside NVIDIA's ptxas ("ptxas" is longer than "nvcc": it fits) */
        memcpy(guess, real_ptxas, strlen(real_ptxas) + 1);
        char *slash = strrchr(guess, '/');
        memcpy(slash ? slash + 1 : guess, "nvcc", 5);
        if (access(guess, X_OK) == 0)
            nvcc = guess;
    }
    if (nvcc && shim_nvcc(abs, bin, nvcc, real_ptxas) != 0)
        return EXIT_FAIL;
    if (!nvcc)
        printf("no nvcc beside %s (give --nvcc NVCC to add one)\n", real_ptxas);
    return EXIT_OK;
}
