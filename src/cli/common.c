/* common: helpers the commands share (see common.h). */
#include "cli/common.h"

#include <stdio.h>
#include <string.h>

const char *const cli_prog = "taskcache";

int cli_usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "%s: ", cli_prog);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'taskcache help' for more information.\n");
    return EXIT_USAGE;
}

const char *cli_value_of(int argc, char **argv, int *i, const char *name, int attached)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0)
        return NULL;
    if (a[n] == '=')
        return a + n + 1;
    if (a[n] == '\0') {
        if (*i + 1 >= argc)
            return "";
        return argv[++*i];
    }
    return attached ? a + n : NULL;
}

void cli_json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

tc_cache *cli_open_cache(const char *dir)
{
    tc_cache *c = NULL;
    tc_error err;
    if (tc_cache_open(dir, &c, &err) != TC_OK) {
        fprintf(stderr, "%s: error: %s\n", cli_prog, err.message);
        return NULL;
    }
    return c;
}
