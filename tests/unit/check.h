/* check.h: the minimal test harness of taskcache's C unit tests. A failed
 * CHECK prints file:line and the expression and marks the test failed;
 * the program's exit status says whether every check passed. */
#ifndef TC_TEST_CHECK_H
#define TC_TEST_CHECK_H

#include <stdio.h>
#include <string.h>

static int check_failures;
static int check_count;

#define CHECK(cond)                                                             \
    do {                                                                        \
        check_count++;                                                          \
        if (!(cond)) {                                                          \
            check_failures++;                                                   \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                       \
    } while (0)

#define CHECK_STR(a, b)                                                         \
    do {                                                                        \
        const char *a_ = (a), *b_ = (b);                                        \
        check_count++;                                                          \
        if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                \
            check_failures++;                                                   \
            fprintf(stderr, "%s:%d: check failed: %s == %s\n  got:      \"%s\"\n  expected: \"%s\"\n", \
                    __FILE__, __LINE__, #a, #b, a_ ? a_ : "(null)", b_ ? b_ : "(null)"); \
        }                                                                       \
    } while (0)

#define CHECK_CONTAINS(hay, needle)                                             \
    do {                                                                        \
        const char *h_ = (hay), *n_ = (needle);                                 \
        check_count++;                                                          \
        if (!h_ || !strstr(h_, n_)) {                                           \
            check_failures++;                                                   \
            fprintf(stderr, "%s:%d: check failed: \"%s\" in %s\n--- text ---\n%s\n------------\n", \
                    __FILE__, __LINE__, n_, #hay, h_ ? h_ : "(null)");          \
        }                                                                       \
    } while (0)

static inline int check_report(const char *name)
{
    if (check_failures)
        fprintf(stderr, "%s: %d of %d checks failed\n", name, check_failures, check_count);
    else
        printf("%s: all %d checks passed\n", name, check_count);
    return check_failures ? 1 : 0;
}

#endif
