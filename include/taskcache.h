/* taskcache.h - incremental, cached compilation of PTX modules.
 *
 * taskcache turns a PTX module holding many kernels (`.entry` functions)
 * into one linked, executable cubin for one GPU target. It splits the
 * module into self-contained per-kernel slices, groups them into small
 * compile units, keys each unit by a SHA-256 hash of its canonical text and
 * of everything else that can change its machine code, compiles only the
 * units it has not seen before (in parallel, with ptxas), and links all unit
 * objects into one image. A module seen before costs one record read.
 *
 * What the library promises
 * -------------------------
 * - Never a wrong binary. A key covers the unit's text, the exact target,
 *   every compiler option, the compiler's identity and the record format.
 *   When the slicer meets a construct it cannot split safely it compiles
 *   the module whole (still cached) and says why (tc_result_whole_reason).
 * - The output depends only on the input and the options: a build served
 *   partly or wholly from the cache is byte-identical to a cold build.
 * - A cache problem never fails a build. Records verify themselves (a
 *   checksum over header and payload); a bad or missing record is a miss.
 *   A cache directory that cannot be written is used read-only or not at
 *   all, with one warning in the result's diagnostics.
 * - Records are published atomically (temporary file + rename); readers
 *   take no locks.
 * - The library never prints and never exits: every error is a status code
 *   plus a human message.
 *
 * Threads
 * -------
 * A tc_cache may be shared by any number of threads. tc_options and
 * tc_result objects are plain values: use each from one thread at a time
 * (several threads may read one that nobody modifies). Builds running at
 * the same time in several threads or processes may share one cache
 * directory.
 *
 * Memory
 * ------
 * Every object returned through an out-parameter is owned by the caller and
 * freed with its matching *_free function. Pointers returned by accessors
 * stay valid until the object they came from is freed.
 */
#ifndef TASKCACHE_H
#define TASKCACHE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Symbols the shared library exports. */
#if defined(__GNUC__) && !defined(TC_STATIC)
#define TC_API __attribute__((visibility("default")))
#else
#define TC_API
#endif

#define TC_VERSION_MAJOR 0
#define TC_VERSION_MINOR 1
#define TC_VERSION_PATCH 0

/* Version of the library as "MAJOR.MINOR.PATCH". */
TC_API const char *tc_version(void);

/* ---- errors --------------------------------------------------------------- */

typedef enum tc_status {
    TC_OK = 0,
    TC_ERR_INVALID = 1,    /* a bad argument or option */
    TC_ERR_PARSE = 2,      /* the input is not well-formed PTX */
    TC_ERR_COMPILE = 3,    /* the compiler rejected the input */
    TC_ERR_LINK = 4,       /* the objects could not be linked */
    TC_ERR_TOOLCHAIN = 5,  /* ptxas/nvlink missing or unusable */
    TC_ERR_IO = 6,         /* reading an input or writing an output failed */
    TC_ERR_NOMEM = 7,
    TC_ERR_DRIVER = 8,     /* no usable CUDA driver or device, or a driver call failed */
    TC_ERR_NOT_FOUND = 9,  /* no kernel or global of that name */
    TC_ERR_CANCELLED = 10  /* the host cancelled the build (tc_codegen_cancel, tc_host.cancel) */
} tc_status;

/* Short name of a status ("TC_ERR_PARSE"); never NULL. */
TC_API const char *tc_status_name(tc_status s);

/* Error details for calls that produce no result object. Pass NULL where
 * the details are not wanted. */
typedef struct tc_error {
    tc_status code;
    char message[1024];
} tc_error;

/* ---- cache ---------------------------------------------------------------- */

typedef struct tc_cache tc_cache;

/* Opens (creating if needed, mode 0700) the cache directory `dir`; NULL
 * means $TASKCACHE_DIR, else $XDG_CACHE_HOME/taskcache, else
 * ~/.cache/taskcache. A directory that cannot be created or written does
 * not make this fail: the cache then works without storing, and builds
 * report one warning. Fails only for out of memory or when no directory can
 * be determined at all.
 * @return TC_OK and *out set, or an error (then *out is NULL). */
TC_API tc_status tc_cache_open(const char *dir, tc_cache **out, tc_error *err);

/* Closes the handle (records on disk stay). NULL is allowed. Never blocks,
 * but for uploads to a remote (tc_cache_set_remote): the last holder of
 * the handle waits for those, at most the remote's flush-timeout. Calls
 * running on the handle when it is closed (builds and lookups in
 * other threads, the build whose codegen callback closes it, tc_cache_gc,
 * tc_cache_verify, tc_cache_clear, tc_cache_stats) finish normally with
 * it, storing what they built, and the last of them to return frees it.
 * No call may start with the handle once tc_cache_close has been called.
 * In a child forked while such calls ran in other threads, those calls
 * never return, so closing it there keeps it allocated (one open
 * directory and a few bytes) until the child exits. */
TC_API void tc_cache_close(tc_cache *cache);

/* The directory in use; valid until tc_cache_close. */
TC_API const char *tc_cache_dir(const tc_cache *cache);

/* Non-NULL when the cache cannot store records (why, in words). */
TC_API const char *tc_cache_warning(const tc_cache *cache);

typedef struct tc_stats {
    /* counters since the last tc_cache_zero_stats, summed over processes */
    uint64_t builds;
    uint64_t module_hits, module_misses;
    uint64_t unit_hits, unit_misses;
    uint64_t compiles;          /* compiler invocations */
    uint64_t compile_errors;    /* builds that failed to compile or link */
    uint64_t whole_builds;      /* modules compiled whole (not split) */
    uint64_t records_written, bytes_written;
    uint64_t bad_records;       /* records that failed verification */
    uint64_t store_errors;      /* records that could not be written */
    uint64_t task_hits, task_misses;   /* keyed tasks (tc_build_tasks) */
    uint64_t codegen_calls;            /* host codegen callbacks run */
    uint64_t group_hits, group_misses; /* group manifests (tc_lookup_group) */
    uint64_t evictions;                /* records removed to keep within the limit */
    uint64_t waited;                   /* units another process compiled for us */
    /* what is on disk now */
    uint64_t module_records, unit_records, task_records, group_records;
    uint64_t disk_bytes;
    uint64_t max_size;                 /* the size limit in bytes */
    uint64_t stats_skipped;            /* builds whose counts are missing above: another
                                          process held the statistics' lock */
    /* `taskcache run`: PTX inputs of CUDA driver calls that taskcache built,
       and those the driver compiled itself (the log says why); the PTX of a
       link that turns out to have a second input counts in both */
    uint64_t driver_built, driver_passed;
    /* the remote tier (tc_cache_set_remote): lookups of records missing
       locally (hits + misses; errors and bad records are misses too), the
       bytes and microseconds they took, and uploads (written, and not:
       refused, failed, too large, or dropped at a full queue or at the
       flush deadline) */
    uint64_t remote_hits, remote_misses, remote_errors, remote_bad;
    uint64_t remote_read_bytes, remote_read_us;
    uint64_t remote_writes, remote_write_bytes, remote_write_errors;
} tc_stats;

/* Reads the statistics. Thread-safe. */
TC_API tc_status tc_cache_stats(tc_cache *cache, tc_stats *out, tc_error *err);

/* One member of tc_stats, described for programs that show or export
 * every figure: the command line's `taskcache stats` (text and --json) and
 * the Python package read them all through tc_stats_fields, so a figure
 * added to tc_stats reaches them without further change. */
typedef struct tc_stats_field {
    const char *name;      /* the member ("module_hits"); also its key in `taskcache stats --json` */
    const char *label;     /* its line in `taskcache stats` ("  module record hits"); NULL
                              when it is shown on the line before it (bytes_written) */
    size_t offset;         /* offsetof(tc_stats, member); every member is a uint64_t */
    unsigned flags;        /* TC_STATS_* below */
} tc_stats_field;

#define TC_STATS_COUNTER 1u /* a counter: summed over processes, reset by tc_cache_zero_stats
                               (otherwise a figure measured on disk when asked) */
#define TC_STATS_SHARE 2u   /* one of an adjacent pair (hits, misses) worth showing as shares
                               of their sum */
#define TC_STATS_HOST 4u    /* about host tasks: worth showing when a figure of its run of
                               adjacent host rows is not 0 */
#define TC_STATS_BYTES 8u   /* a number of bytes */
#define TC_STATS_LIMIT 16u  /* a limit, where 0 means none */
#define TC_STATS_INTERCEPT 32u /* about `taskcache run`: worth showing when a figure of its
                                  run of adjacent such rows is not 0 */
#define TC_STATS_REMOTE 64u /* about the remote tier: worth showing when a figure of its run of
                               adjacent such rows is not 0 */
#define TC_STATS_MICROS 128u /* microseconds, spent by the events of the nearest pair of
                                shares above it (a mean per event is their quotient) */

/* Every member of tc_stats, in the order `taskcache stats` shows them.
 * @return the table (static, never NULL); *count receives its length. */
TC_API const tc_stats_field *tc_stats_fields(size_t *count);

/* Resets the counters (records stay). */
TC_API tc_status tc_cache_zero_stats(tc_cache *cache, tc_error *err);

/* The cache's size limit: $TASKCACHE_MAXSIZE, else "max_size = 5G" in
 * <dir>/taskcache.conf, else 5 GiB. After each build, when the cache has
 * grown past it, the least recently used records of every tier are evicted
 * until it holds 90% of it (one process cleans at a time). 0 means no
 * limit. The setter applies to this handle only. */
TC_API uint64_t tc_cache_max_size(const tc_cache *cache);
/* Reads a size such as "5G", "500M", "64K" or "1024" (binary units).
 * @return TC_OK, or TC_ERR_INVALID when s is not a size. */
TC_API tc_status tc_parse_size(const char *s, uint64_t *bytes);
TC_API void tc_cache_set_max_size(tc_cache *cache, uint64_t bytes);

typedef struct tc_gc_report {
    uint64_t evicted_files, evicted_bytes;
    uint64_t files, bytes;       /* what remains */
    uint64_t temps_removed;      /* temporaries left behind by killed writers */
    int skipped;                 /* another process was cleaning already */
} tc_gc_report;

/* Cleans the cache now: LRU eviction down to 90% of max_bytes (0: the
 * cache's limit), removal of every record unused for older_than_seconds
 * (< 0: none), of stale temporaries, of links and special files (FIFOs,
 * sockets, devices) planted in the cache, and of the scratch directories
 * ($TMPDIR/taskcache.*) of this user's builds that were killed.
 * A module record never needs the unit records it was built from, so
 * eviction never breaks a hit; anything evicted is rebuilt when needed. */
TC_API tc_status tc_cache_gc(tc_cache *cache, uint64_t max_bytes, int64_t older_than_seconds,
                             tc_gc_report *out, tc_error *err);

/* Reads every record and checks it (header, key, checksum, decompression).
 * *checked and *bad count them; with remove_bad the bad ones are deleted
 * (builds already treat them as misses and replace them). Records with an
 * HMAC are checked only when this process holds a secret
 * (TASKCACHE_SECRET_FILE); without one they are neither counted nor
 * deleted. Checking leaves each record's time of last use as it was.
 * @return TC_OK, or TC_ERR_IO when the records cannot be listed (the
 * directory is unreadable or not a cache), with err saying why. */
TC_API tc_status tc_cache_verify(tc_cache *cache, int remove_bad, uint64_t *checked,
                                 uint64_t *bad, tc_error *err);

/* Removes every record and resets the counters. Safe while other processes
 * use the cache: they see misses. */
TC_API tc_status tc_cache_clear(tc_cache *cache, tc_error *err);

/* ---- remote storage ------------------------------------------------------- */

/* A remote tier shared by many machines can stand behind the cache
 * directory: a record missing locally is looked up on the server, verified
 * exactly like a local one (checksum, key and kind; the HMAC when
 * TASKCACHE_SECRET_FILE names a secret) and kept locally; every record
 * stored is uploaded in the background. A server that fails, stalls or
 * sends a bad record costs a miss, counted in tc_stats, never a failed
 * build; a server that cannot be reached is not asked again by the
 * process. Nothing connects until a record is missing locally.
 *
 * The remote is $TASKCACHE_REMOTE, else "remote = SPEC" in
 * <dir>/taskcache.conf, else none. A spec is a URL with optional
 * attributes after '|' (docs/remote.md, "Where it is configured"):
 *
 *   redis://[[USER]:PASSWORD@]HOST[:PORT][,HOST[:PORT]...][/DB]  (rediss:// for TLS)
 *   http://HOST[:PORT][/PATH]  https://...      (WebDAV, bazel-remote, S3)
 *   attributes: read-only, connect-timeout=500ms, timeout=10s, flush-timeout=10s,
 *   retries=2, ttl=7d (Redis), max-record=64M, layout=subdirs or layout=bazel,
 *   bearer-token-file=PATH, aws-sigv4=aws:amz:REGION:s3, ca=PATH
 *   e.g. "redis://cache.lan:6379|ttl=30d|read-only"
 *
 * A Redis spec may name any node of a Redis Cluster. */

/* Sets this handle's remote, replacing $TASKCACHE_REMOTE and taskcache.conf
 * ("none": no remote). Call before the handle's first build. A remote is
 * used only when the cache directory itself is usable.
 * @return TC_OK, or TC_ERR_INVALID with err naming what is wrong in spec
 * (no credentials are repeated in the message), or TC_ERR_IO when the
 * password-file it names cannot be read (the handle then has no remote). */
TC_API tc_status tc_cache_set_remote(tc_cache *cache, const char *spec, tc_error *err);

/* The remote in use, in words without credentials ("redis://cache:6379
 * (read-only)"), or NULL. Valid until the next tc_cache_set_remote. */
TC_API const char *tc_cache_remote(const tc_cache *cache);

/* Non-NULL when a remote is configured but not used (a bad spec in
 * $TASKCACHE_REMOTE or taskcache.conf: where, and what is wrong). */
TC_API const char *tc_cache_remote_problem(const tc_cache *cache);

/* Waits until the records queued for upload are written, at most
 * timeout_seconds (< 0: the spec's flush-timeout, default 10 s).
 * tc_cache_close does this too; a program calls it to learn the outcome.
 * @return TC_OK when every upload since the last call succeeded (or there
 * is no remote), TC_ERR_IO with err saying how many failed and the first
 * reason (they are counted in tc_stats.remote_write_errors). */
TC_API tc_status tc_cache_flush(tc_cache *cache, double timeout_seconds, tc_error *err);

/* What tc_cache_check_remote found. */
typedef struct tc_remote_report {
    int reachable;          /* the server answered */
    int writable;           /* a test record was written (not tried when read-only) */
    int read_back;          /* it came back intact (read-only: a lookup worked) */
    int read_only;
    double connect_seconds; /* connecting and a first question */
    double write_seconds, read_seconds;   /* one test record each way */
    int64_t server_bytes;   /* memory or disk the server says it uses; -1 unknown */
    int64_t server_records; /* keys or records it holds; -1 unknown */
    char server[256];       /* what answered ("Redis 7.0.15, a cluster of 3 masters") */
    char message[512];      /* the first step that failed, and why; "" when none */
} tc_remote_report;

/* Checks the remote: reaches it, writes a test record, reads it back and
 * removes it, and asks what it holds. Blocks for up to the spec's
 * timeouts.
 * @return TC_OK with *out filled (reachable, writable and read_back say
 * how far it got), or TC_ERR_NOT_FOUND when no remote is configured. */
TC_API tc_status tc_cache_check_remote(tc_cache *cache, tc_remote_report *out, tc_error *err);

/* ---- options -------------------------------------------------------------- */

typedef struct tc_options tc_options;

/* A fresh set of options: no target (it must be set), -j = number of
 * online CPUs, every cache tier on, splitting on. NULL when out of memory. */
TC_API tc_options *tc_options_new(void);
TC_API void tc_options_free(tc_options *opts);

/* The GPU target, "sm_XX" with an optional "a" or "f" suffix (e.g.
 * "sm_90", "sm_90a"). */
TC_API tc_status tc_options_set_arch(tc_options *opts, const char *arch, tc_error *err);

/* Adds one option for the compiler, as ptxas spells it: "-O3",
 * "-lineinfo", "--maxrregcount=64", "--fmad=false", ... Options that
 * taskcache controls itself (-c, -o, -arch, --input-as-string, ...) are
 * refused with TC_ERR_INVALID. Every option is part of every key. */
TC_API tc_status tc_options_add_compiler_option(tc_options *opts, const char *opt, tc_error *err);

/* Number of compiler processes run at once (>= 1). */
TC_API tc_status tc_options_set_jobs(tc_options *opts, int jobs);

/* Path of the ptxas binary. Default: $TASKCACHE_PTXAS, else
 * $CUDA_HOME/bin/ptxas, else the toolkit found when taskcache was built,
 * else ptxas on $PATH. nvlink is looked for next to it. A ptxas named here
 * (or by the variables) compiles, unless the in-process compiler is its
 * release (tc_options_set_compiler); one that cannot run fails the build
 * with TC_ERR_TOOLCHAIN. */
TC_API tc_status tc_options_set_ptxas(tc_options *opts, const char *path);

typedef enum tc_tier {
    TC_TIER_MODULE = 1, /* whole-module records: an unchanged module is one read */
    TC_TIER_UNIT = 2    /* unit records: only changed units are compiled */
} tc_tier;

/* Turns one cache tier on or off (for debugging; both are on by default).
 * With a tier off it is neither read nor written. For tc_build_tasks and
 * tc_lookup_group, TC_TIER_UNIT covers the task records and the group
 * manifests that name them, and TC_TIER_MODULE the linked modules. */
TC_API tc_status tc_options_set_tier(tc_options *opts, tc_tier tier, int enabled);

typedef enum tc_compiler {
    TC_COMPILER_AUTO = 0,      /* in-process when built with it and no other ptxas release
                                  was named, else ptxas */
    TC_COMPILER_PTXAS = 1,     /* one ptxas process per unit */
    TC_COMPILER_INPROCESS = 2  /* nvPTXCompiler on worker threads */
} tc_compiler;

/* Chooses the compile backend. Default: $TASKCACHE_COMPILER ("ptxas",
 * "inprocess" or "auto") if set, else TC_COMPILER_AUTO. Under auto, a ptxas
 * the user named (tc_options_set_ptxas, $TASKCACHE_PTXAS, or the one in
 * $CUDA_HOME/bin or $CUDA_PATH/bin) is the compiler that compiles: the
 * in-process compiler stands in for it only when it is the same release
 * ("13.0.88" from ptxas --version), and compiles when no ptxas was named;
 * tc_result_compiler says which ran. Asking for the in-process compiler in
 * a build of taskcache made without it fails at build time with
 * TC_ERR_TOOLCHAIN. The backends have different identities, so their
 * records coexist in one cache and never stand in for each other. This
 * call replaces a $TASKCACHE_COMPILER that tc_options_check refuses. */
TC_API tc_status tc_options_set_compiler(tc_options *opts, tc_compiler compiler);

/* Appends the events of each build made with these options (every compile,
 * codegen call and link, and the build itself, with their threads and
 * times) to a trace file that Perfetto (ui.perfetto.dev) and
 * chrome://tracing open: the Trace Event Format's JSON array, left open so
 * that builds of many processes append to one file (each takes an
 * exclusive flock while it writes). A file that cannot be written gives a
 * warning in the diagnostics, never a failed build. NULL or "": none.
 * Default: $TASKCACHE_TRACE. TC_ERR_NOMEM when out of memory. */
TC_API tc_status tc_options_set_trace(tc_options *opts, const char *path);

/* Whether the options can build: TC_ERR_INVALID, with the reason in err,
 * when $TASKCACHE_COMPILER or $TASKCACHE_UNIT_CODE held a value taskcache
 * does not know (a misspelling, an empty string) when the options were
 * made, and no tc_options_set_compiler / tc_options_set_unit_code call
 * replaced it. Every build and lookup with these options fails the same
 * way: another compiler than the one asked for is never chosen silently.
 * TC_OK otherwise. */
TC_API tc_status tc_options_check(const tc_options *opts, tc_error *err);

/* 1 when this build of the library has the in-process compiler. */
TC_API int tc_have_inprocess_compiler(void);

/* How units are compiled. Whole-program units (ptxas -ewp) get the code a
 * whole-module build gives each kernel (same registers, same inlined
 * calling sequences); a unit that calls or takes the address of a function
 * shared through the module data, or reads .const data, is still compiled
 * relocatable. Such objects link only with libnvJitLink (nvlink drops
 * them). Relocatable units (ptxas -c) compile about 1.2x faster, but calls
 * to copied helper functions follow the full calling convention, as in any
 * separately compiled code: more registers, sometimes local memory.
 * The default, TC_UNIT_CODE_AUTO, is whole-program units where libnvJitLink
 * is found, else relocatable ones; TC_UNIT_CODE_WHOLE_PROGRAM without
 * libnvJitLink compiles relocatable units and says so in a note.
 * $TASKCACHE_UNIT_CODE ("whole-program", "relocatable" or "auto") sets
 * the default of new options. The code used is part of every key. */
typedef enum tc_unit_code {
    TC_UNIT_CODE_RELOCATABLE = 0,
    TC_UNIT_CODE_WHOLE_PROGRAM = 1,
    TC_UNIT_CODE_AUTO = 2
} tc_unit_code;
TC_API tc_status tc_options_set_unit_code(tc_options *opts, tc_unit_code code);

/* What a build produces. TC_OUTPUT_IMAGE (the default): one linked,
 * executable cubin. TC_OUTPUT_OBJECT: one relocatable object of the whole
 * module, as `ptxas -c` writes it, for a later device link (nvcc -rdc,
 * clang -fgpu-rdc). An object is one compile of the whole module (its
 * kernels cannot be compiled apart and joined without changing what the
 * device link sees), cached as a module record: an unchanged module is
 * one read, an edited one is compiled again. Part of every key.
 * tc_build_tasks and tc_lookup_group always link an image: with
 * TC_OUTPUT_OBJECT they return TC_ERR_INVALID. */
typedef enum tc_output {
    TC_OUTPUT_IMAGE = 0,
    TC_OUTPUT_OBJECT = 1
} tc_output;
TC_API tc_status tc_options_set_output(tc_options *opts, tc_output output);

/* The build stands for one ptxas command line (what `taskcache ptxas`
 * does): a module compiled whole gets the compiler options given and none
 * of taskcache's own (by default it adds --split-compile=0, a compiler
 * thread on every CPU, which gives the same code but may order the
 * image's symbols otherwise), so that the file is the one that command
 * line writes, but for the tool note. Part of the module key. Default 0. */
TC_API tc_status tc_options_set_exact_whole(tc_options *opts, int on);

/* Lets the in-process compiler run threads of its own (--split-compile,
 * as ptxas processes always may): a unit of an edit compiles on two,
 * a module compiled whole on every CPU (the 250-kernel benchmark on 2
 * cores: a unit of three kernels in 60 ms against 84). But with threads,
 * nvPTXCompiler 13.0 ends the calling process (abort) when a compile
 * fails, where it would return the error, and writes its numbered advice
 * to standard error instead of its log. So only a host that survives its
 * own end asks for them: the command line does, and when a build dies it
 * builds again with ptxas processes (src/cli/recover.h). Whatever this
 * says, a text that uses wgmma gets no threads (its advice is what the
 * log must keep). Records made with and without threads differ by the
 * image's tool note, and are kept apart. Default 0. */
TC_API tc_status tc_options_set_inprocess_threads(tc_options *opts, int on);

/* The in-process compiler crashed building this input with these options
 * before (a host that starts over after the crash: the command line does,
 * src/cli/recover.h). tc_build then builds it with ptxas processes, and
 * keeps the image under the key that the in-process build of the same
 * input and options looks up too, so that the next such build reads it
 * instead of crashing again (an edited input has another key: its build
 * may crash once more). Without ptxas it fails with TC_ERR_TOOLCHAIN.
 * Nothing changes for a build that does not use the in-process compiler,
 * nor for tc_build_tasks and tc_lookup_group. Default 0. */
TC_API tc_status tc_options_set_inprocess_crashed(tc_options *opts, int crashed);

/* A flag the host raises (sets nonzero) to cancel the builds made with
 * these options, from any thread or from a signal handler; it must
 * outlive them. tc_build_tasks checks it before it starts, before each
 * codegen call and each compile, and before it links: once raised, no
 * further codegen or compile starts, those running finish, and the build
 * returns TC_ERR_CANCELLED, having stored nothing. tc_build checks it
 * before it starts compiling and before each compile (units already
 * compiled stay in the cache: each is correct on its own), tc_explain
 * before it starts. Either way the build's temporary files are removed.
 * A lookup in a remote cache (tc_cache_set_remote) that waits on a slow
 * server gives up within about a second of the flag being raised.
 * NULL (the default): none. */
TC_API tc_status tc_options_set_cancel(tc_options *opts, const volatile sig_atomic_t *flag);

/* A function a build calls as it compiles, for a progress display: done
 * of total compiles have finished (a split module's units, a module
 * compiled whole as one, or tasks, each generated and compiled; a unit
 * another process compiled while this build waited for it counts as
 * done). It is called with done = 0 when compiling starts and once after
 * each compile, one call at a time, from the build's threads: it must
 * return quickly and must not wait for the build. A build that compiles
 * nothing (every unit cached) never calls it. user is passed through.
 * NULL (the default): none. */
typedef void (*tc_progress_fn)(void *user, unsigned done, unsigned total);
TC_API tc_status tc_options_set_progress(tc_options *opts, tc_progress_fn fn, void *user);

/* Turns splitting off: the module is compiled whole (debugging aid). */
TC_API tc_status tc_options_set_split(tc_options *opts, int enabled);

/* Target estimated cost of one compile unit in PTX statements (0 = the
 * default: 500 at any job count, and a module whose kernels fit in one
 * unit of 1000, or cost 1,500 statements in all, is compiled whole).
 * Larger units amortize compiler start-up better cold; smaller ones
 * recompile less after an edit and spread a cold build over more workers. Given, every module is split.
 * Part of the module key. */
TC_API tc_status tc_options_set_unit_cost(tc_options *opts, unsigned cost);

/* ---- building ------------------------------------------------------------- */

typedef struct tc_result tc_result;

/* Builds a linked cubin from PTX text.
 * cache: may be NULL to build without caching.
 * ptx, size: the module text (need not be NUL-terminated). The text ends
 *   at the first NUL byte, as the CUDA driver reads PTX (a note says so when
 *   more than whitespace follows); the module record's key covers all size
 *   bytes.
 * name: the input's file name for messages ("<input>" if NULL).
 * *out receives a result in every case but TC_ERR_NOMEM and TC_ERR_INVALID
 * arguments, so that diagnostics can be read after a failure.
 * On failure nothing is written to the cache.
 * Thread-safe for distinct results. */
TC_API tc_status tc_build(tc_cache *cache, const tc_options *opts, const void *ptx, size_t size,
                   const char *name, tc_result **out);

/* Like tc_build but compiles nothing: fills the result's entries with their
 * unit and slice keys and whether each unit is in the cache now. The
 * result has no image. */
TC_API tc_status tc_explain(tc_cache *cache, const tc_options *opts, const void *ptx, size_t size,
                     const char *name, tc_result **out);

TC_API void tc_result_free(tc_result *r);

/* Status the build ended with. */
TC_API tc_status tc_result_status(const tc_result *r);

/* The linked cubin, or NULL (size 0) when the build failed or for explain. */
TC_API const void *tc_result_image(const tc_result *r, size_t *size);

/* Writes the image to `path` as compilers write their output: a regular
 * file (or a new one) atomically (temporary file + rename, so a reader
 * never sees a partial cubin; through a symbolic link, the file it names
 * is replaced and the link stays), with the permissions the file had (a
 * new one: 0666 less the umask; one the process may not write is an
 * error); a device (/dev/null), a FIFO or a file with other hard links is
 * written in place. TC_ERR_INVALID when there is no image, TC_ERR_IO when
 * the file cannot be written. */
TC_API tc_status tc_result_write_image(const tc_result *r, const char *path, tc_error *err);

/* Errors, warnings and notes, one per line, in the form
 * "file:line: error: message" (line omitted where unknown). "" if none. */
TC_API const char *tc_result_diagnostics(const tc_result *r);

/* Non-NULL when the module was compiled whole rather than split: why. */
TC_API const char *tc_result_whole_reason(const tc_result *r);

/* The compiler whose code the image holds (and whose identity keyed it),
 * in words: "ptxas PATH (release 13.0.88)" or "nvPTXCompiler 13.0.88
 * (in-process; the release of PATH)", with why where taskcache chose
 * between them. "" when the build stopped before choosing one. Owned by
 * the result. */
TC_API const char *tc_result_compiler(const tc_result *r);

/* The slowest compiles of the build, slowest first, at most five, in words:
 * each one's kernels (a unit's first kernel and how many more, a task's
 * name, or the module compiled whole) and its seconds, "; " between them
 * ("k_step (+3 more) 0.812 s; k_init 0.455 s"). A host's task counts its
 * codegen call too, which is also given alone ("t_step 1.204 s (codegen
 * 0.930)"): where the host's front end is the costly part (NVRTC, for
 * Warp), that is what bounds a build. "" when the build compiled nothing.
 * Owned by the result. */
TC_API const char *tc_result_slowest(const tc_result *r);

typedef struct tc_report {
    int module_hit;          /* served from the whole-module record */
    int split;               /* 1 split into units, 0 compiled whole */
    uint32_t entries;        /* kernels in the module */
    uint32_t units;          /* compile units (module data included) */
    uint32_t unit_hits;      /* units served from the cache */
    uint32_t units_compiled; /* units compiled by this build */
    double seconds;          /* wall time of the whole call */
    double seconds_compile;  /* wall time of compiling the units the cache lacks, while
                                the cached ones are read and the link takes them in */
    double seconds_link;     /* wall time of finishing the link */
    int in_process;          /* compiled with the in-process compiler */
    uint32_t codegen_calls;  /* tasks: times the host's codegen ran */
    int group_hit;           /* tasks: served from a group manifest */
    int nvjitlink;           /* split builds: the linker is libnvJitLink in-process (1)
                                or the nvlink program (0) */
    int whole_program_units; /* split builds: units compiled as whole programs (ptxas -ewp;
                                see tc_unit_code), 0 relocatable */
} tc_report;

TC_API void tc_result_report(const tc_result *r, tc_report *out);

typedef struct tc_param_info {
    const char *type;   /* element type without the dot: "u64", "b8", ... */
    uint32_t offset;    /* byte offset in the parameter buffer */
    uint32_t size;      /* bytes */
    uint32_t align;
} tc_param_info;

typedef struct tc_entry_info {
    const char *name;
    uint32_t param_count;
    uint32_t param_bytes;              /* size of the parameter buffer */
    const tc_param_info *params;
    /* performance directives from the PTX (0 = absent) */
    uint32_t maxntid[3], reqntid[3];
    uint32_t minnctapersm, maxnreg;
    uint32_t reqnctapercluster[3], maxclusterrank;
    /* the compiler's resource report (-1 = unknown) */
    int32_t registers;
    int32_t shared_bytes;              /* static shared memory */
    int32_t stack_bytes;               /* stack frame (local memory) */
    int32_t spill_store_bytes, spill_load_bytes;
    /* where it came from */
    const char *unit_key;              /* 64 hex digits; "" when built whole */
    const char *slice_key;             /* explain only: the entry's own slice key */
    uint32_t unit;                     /* index of its unit */
    int cached;                        /* build: unit came from the cache;
                                          explain: unit record present now */
    /* the compiler's -v lines about the kernel, in ptxas's form (each line
       ends in a newline), as tc_result_ptxas_report puts them together;
       NULL when unknown (a compile without its log) */
    const char *verbose_head;          /* printed before compiling: the register limit
                                          it overrides; NULL when none */
    const char *verbose;               /* from "Compiling entry function" to the
                                          "Function properties" of the functions it calls,
                                          "Compile time" that of the compile that made it */
    uint32_t verbose_rank;             /* kernels are reported in increasing rank */
} tc_entry_info;

/* Kernels of the module in name order. */
TC_API size_t tc_result_entry_count(const tc_result *r);
/* Fills *out for kernel i (pointers stay valid while r lives).
 * @return TC_OK, or TC_ERR_INVALID when i is out of range. */
TC_API tc_status tc_result_entry(const tc_result *r, size_t i, tc_entry_info *out);

/* What tc_result_ptxas_report writes: the lines of ptxas's options. */
enum {
    TC_PTXAS_LIMITS = 1,            /* -v, before compiling: the register limits it overrides */
    TC_PTXAS_WARN_SPILLS = 2,       /* --warn-on-spills */
    TC_PTXAS_WARN_LOCAL_MEMORY = 4, /* --warn-on-local-memory-usage */
    TC_PTXAS_RESOURCES = 8,         /* -v, after compiling: memory, each kernel's resources */
    TC_PTXAS_VERBOSE = TC_PTXAS_LIMITS | TC_PTXAS_RESOURCES /* -v */
};

/* What ptxas prints on standard error for a whole-module compile of the
 * input with the options in `what`, besides its diagnostics (in
 * tc_result_diagnostics; ptxas prints its warnings about the input before
 * the register limits, its numbered advice after them): the register limits
 * it overrides, the warnings asked for, then the module's global (and, where
 * the target's report has them, constant) memory from the image and each
 * kernel's lines (verbose), in ptxas's order of kernels (verbose_rank).
 * The warnings are ptxas's, made from the "Function properties" figures of
 * the kernels and of the functions they call ("Local memory used" for a
 * stack frame, "Registers are spilled" when there are both spill stores
 * and loads). The figures are those of this image: where a split build's
 * code differs from the whole compile's, so do they; a whole-program unit
 * does not know a kernel's cumulative stack size, which is read from the
 * image. A kernel whose lines are unknown gets those its resource figures
 * give (tc_entry_info), none for the functions it calls.
 * Writes at most size bytes, NUL included, to buf (buf may be NULL when size
 * is 0). @return the length of the whole text, as snprintf does (call again
 * with a larger buffer when it is size or more); 0 when there is nothing to
 * print or no memory. Thread-safe. */
TC_API size_t tc_result_ptxas_report(const tc_result *r, unsigned what, char *buf, size_t size);

/* ---- embedding in a JIT compiler: keyed tasks -------------------------------- */

/* A JIT's front end turns a program into tasks and its codegen emits PTX
 * for each. taskcache can be asked *before* codegen: the host gives, per
 * task, the bytes that determine its output (its IR, say); taskcache keys
 * the task by them (plus target, options, compiler and the host's version
 * string) and calls the host's codegen only for tasks it has not seen. A
 * task record holds the relocatable object, the metadata of the task's
 * kernels and an opaque host metadata blob (block sizes, which data the
 * task touches, anything its launcher needs), so a cached task loads
 * without any side effect of the codegen.
 *
 * Each task's PTX is one complete module (.version, .target, its kernels
 * and the functions they call) compiled as one relocatable unit; all tasks
 * are linked into one image, in the order given. A global shared between
 * tasks is defined in one task and declared .extern in the others; a
 * visible symbol (kernel, function, variable) that two tasks define fails
 * the build with TC_ERR_LINK ("multiple definition of 'NAME' (objects I
 * and J)", I and J the tasks' indices). */

/* A task's key must cover everything its codegen output depends on, since
 * a hit serves the stored object without asking: the IR (or source) and,
 * when codegen reads anything else, that too: values of globals and
 * constants it folds in, the signature or argument types it specializes
 * for, the names it gives kernels and symbols, codegen options and the
 * versions of the compilers and libraries involved (those can go in the
 * host's version string, which is part of every key). Whatever the key
 * leaves out, a warm build serves from the first build that had the key.
 * The codegen output must also be a function of the key alone: no names
 * or counters that depend on what else the process compiled before.
 *
 * The name is part of the key (tasks of different names never share a
 * record). Two tasks of one tc_build_tasks call with the same name and
 * key fail the build with TC_ERR_INVALID naming both. */
typedef struct tc_task {
    const char *name;          /* for messages; part of the key; NULL means "" */
    const void *key;           /* bytes that determine the task's PTX (see above) */
    size_t key_size;
} tc_task;

typedef struct tc_codegen tc_codegen;

/* Called on a miss, on a worker thread (one at a time when the host asks
 * for serialized codegen): produce the PTX of tasks[index] and, optionally,
 * its metadata, through the setters below. Both are copied. */
typedef void (*tc_codegen_fn)(void *user, size_t index, const tc_task *task, tc_codegen *out);

/* The task's PTX: size bytes, or up to the first NUL byte before them (a
 * C string's terminator may be included). */
TC_API void tc_codegen_set_ptx(tc_codegen *out, const void *ptx, size_t size);
/* The task's metadata, size bytes (data may be NULL for none; NULL with a
 * size fails the task, as tc_codegen_fail does). */
TC_API void tc_codegen_set_metadata(tc_codegen *out, const void *data, size_t size);
/* Reports that codegen failed: the build fails with this message. */
TC_API void tc_codegen_fail(tc_codegen *out, const char *message);
/* Reports that the host wants the build to stop (the user pressed Ctrl-C,
 * say): as if the options' cancel flag were raised (tc_options_set_cancel).
 * The output of this call, if any, is ignored. */
TC_API void tc_codegen_cancel(tc_codegen *out);

typedef struct tc_host {
    const char *version;       /* the host's own version/ABI string: part of every key */
    tc_codegen_fn codegen;
    void *user;                /* passed to codegen */
    /* 1: never run two codegen calls of this host at once, across every
     * tc_build_tasks of the process (a host is its codegen and user pair:
     * threads sharing them take turns). A build started from inside a
     * codegen call, on that call's thread, with the same host runs while
     * that call waits for it; its own codegen calls take turns. */
    int serialize_codegen;
    /* Optional group manifest: a key the host computed for the whole group
     * of tasks before running its front end (a hash of the source, say);
     * like a task key, it must cover everything the front end's output
     * depends on. When given, a successful build stores group -> ordered
     * task keys, and tc_lookup_group can return the whole result without
     * the front end. NULL: no manifest; an empty key (size 0, pointer not
     * NULL) is a key like any other. */
    const void *group_key;
    size_t group_key_size;
} tc_host;

/* Builds a module from keyed tasks. Tasks found in the cache are not
 * generated again; the rest are generated (host->codegen), compiled in
 * parallel and stored. The result has one entry per kernel, in task order
 * then name order, and one tc_task_info per task. A previously built
 * module with the same ordered task keys is served from its record, after
 * every task record it names has been found and verified; if any is
 * missing, that task is generated and compiled again: never an error and
 * never a partial module. Likewise, when the link fails and some tasks came
 * from the cache (a record stale because the host's key left something
 * out, say), those tasks are generated again, once, and the link retried
 * before the build fails; the diagnostics then say so in a note.
 * A task's PTX is compiled as a whole program (ptxas -ewp: its kernels get
 * the code a whole-module build gives them) where whole-program units link
 * (libnvJitLink, see tc_unit_code), unless it holds what such code cannot
 * carry into a link: .const data, texture or surface references, calls
 * through a register, a function's address taken, .weak or .common
 * symbols, .extern declarations other than system calls (vprintf, malloc,
 * free, __assertfail) and dynamic .shared memory, or anything but kernels
 * made .visible; those tasks are compiled relocatable (-c). Which rules
 * apply is part of every task key.
 * Thread-safe. */
TC_API tc_status tc_build_tasks(tc_cache *cache, const tc_options *opts, const tc_host *host,
                                const tc_task *tasks, size_t ntasks, tc_result **out);

/* Looks up a group manifest stored by tc_build_tasks. On a hit (every task
 * record it names present and verified) *out is the same result a build
 * would give and no codegen runs; the host can skip its front end. A miss
 * returns TC_ERR_NOT_FOUND with *out NULL: run the front end and
 * tc_build_tasks with the same group key. A miss is: no manifest, a task
 * record it names missing or bad, records that no longer link together
 * (tc_build_tasks regenerates them), or the unit tier switched off. Any
 * other failure (no ptxas, no target, out of memory, ...) returns its
 * status with *out a result whose diagnostics say why (free it).
 * group_key may be NULL when group_key_size is 0. Thread-safe. */
TC_API tc_status tc_lookup_group(tc_cache *cache, const tc_options *opts, const char *version,
                                 const void *group_key, size_t group_key_size, tc_result **out);

typedef struct tc_task_info {
    const char *name;
    const char *key;           /* 64 hex digits */
    int cached;                /* the task's record came from the cache */
    int codegen_ran;           /* the host's codegen ran for it in this call */
    const void *metadata;      /* the host's metadata blob (NULL if none) */
    size_t metadata_size;
    uint32_t first_entry;      /* its kernels: entries [first_entry, +entry_count) */
    uint32_t entry_count;
} tc_task_info;

/* Tasks of a tc_build_tasks or tc_lookup_group result (0 for tc_build). */
TC_API size_t tc_result_task_count(const tc_result *r);
TC_API tc_status tc_result_task(const tc_result *r, size_t i, tc_task_info *out);

/* ---- bindings ------------------------------------------------------------------ */

/* The layout of the structs of this header, for bindings that mirror them
 * without a C compiler: the Python package checks its copies against it
 * when it loads the library, so a library and a package that disagree
 * fail at once with the member that differs instead of reading garbage. */
typedef struct tc_abi_field {
    const char *type;      /* the struct: "tc_stats" */
    const char *member;    /* "module_hits"; NULL in the row that gives the struct's size */
    size_t offset;         /* offsetof(type, member), or 0 */
    size_t size;           /* sizeof the member, or of the whole struct */
} tc_abi_field;

/* Every member of every struct of this header, struct by struct, each
 * struct's members followed by its size row.
 * @return the table (static, never NULL); *count receives its length. */
TC_API const tc_abi_field *tc_abi_fields(size_t *count);

/* ---- loading and launching (CUDA driver API) ------------------------------- */

/* The CUDA driver is opened with dlopen("libcuda.so.1") the first time one
 * of these functions needs it, so nothing in taskcache needs a GPU to build
 * or to run anything else. Without a driver or device they return
 * TC_ERR_DRIVER with the reason; they never crash or exit. */

typedef struct tc_module tc_module;

/* Loads the image of a successful build into the calling thread's current
 * CUDA context. When no context is current, the primary context of device
 * 0 is retained and made current (and released by tc_module_unload). The
 * kernels' metadata is copied from the result, which may be freed after.
 * Thread-safe; the module may be used from any thread whose current
 * context is the one it was loaded into. */
TC_API tc_status tc_module_load(const tc_result *r, tc_module **out, tc_error *err);

/* Loads any cubin, fatbin or PTX image (no taskcache metadata: kernels
 * then report only what the driver knows). */
TC_API tc_status tc_module_load_image(const void *image, size_t size, tc_module **out,
                                      tc_error *err);

/* Unloads the module. NULL is allowed. */
TC_API void tc_module_unload(tc_module *m);

typedef struct tc_kernel {
    void *function;                /* the CUfunction */
    const tc_entry_info *entry;    /* build metadata, or NULL (tc_module_load_image) */
    /* what the driver reports (cuFuncGetAttribute) */
    int max_threads_per_block;
    int registers;
    int shared_bytes;              /* static shared memory */
    int local_bytes;               /* local memory per thread */
    int const_bytes;
} tc_kernel;

/* Looks a kernel up by name. TC_ERR_NOT_FOUND when there is none. The
 * pointers in *out stay valid until the module is unloaded. */
TC_API tc_status tc_module_kernel(tc_module *m, const char *name, tc_kernel *out, tc_error *err);

/* Device address and size of a global variable (a __device__ or
 * __constant__ variable) by name. */
TC_API tc_status tc_module_global(tc_module *m, const char *name, uint64_t *dptr, size_t *bytes,
                                  tc_error *err);

typedef struct tc_launch {
    unsigned grid[3];              /* blocks; 0 is taken as 1 */
    unsigned block[3];             /* threads per block; 0 is taken as 1 */
    unsigned shared_bytes;         /* dynamic shared memory */
    void *stream;                  /* CUstream, NULL for the default stream */
    int cooperative;               /* launch with cuLaunchCooperativeKernel */
} tc_launch;

/* Launches a kernel. Give the arguments either as `args` (one pointer to
 * each argument's value, as cuLaunchKernel takes them) or as one packed
 * parameter buffer laid out as the kernel's metadata says (params/
 * param_size; taskcache checks the size against the layout when it has
 * one). The launch is asynchronous, as in CUDA. */
TC_API tc_status tc_module_launch(tc_module *m, const char *name, const tc_launch *cfg,
                                  void **args, const void *params, size_t param_size,
                                  tc_error *err);

#ifdef __cplusplus
}
#endif

#endif /* TASKCACHE_H */
