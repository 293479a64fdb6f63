/* transport: the clock the remote and its transports keep their
 * deadlines by (transport.h). */
#define _GNU_SOURCE
#include "remote/transport.h"

#include <time.h>

double tc_remote_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
