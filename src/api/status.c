/* status: the library's version, the names of its status codes, and the
 * tc_error filling every call without a result uses. */
#include <stdarg.h>
#include <stdio.h>

#include "api/handles.h"

#define STR2(x) #x
#define STR(x) STR2(x)

const char *tc_version(void)
{
    return STR(TC_VERSION_MAJOR) "." STR(TC_VERSION_MINOR) "." STR(TC_VERSION_PATCH);
}

const char *tc_status_name(tc_status s)
{
    switch (s) {
    case TC_OK: return "TC_OK";
    case TC_ERR_INVALID: return "TC_ERR_INVALID";
    case TC_ERR_PARSE: return "TC_ERR_PARSE";
    case TC_ERR_COMPILE: return "TC_ERR_COMPILE";
    case TC_ERR_LINK: return "TC_ERR_LINK";
    case TC_ERR_TOOLCHAIN: return "TC_ERR_TOOLCHAIN";
    case TC_ERR_IO: return "TC_ERR_IO";
    case TC_ERR_NOMEM: return "TC_ERR_NOMEM";
    case TC_ERR_DRIVER: return "TC_ERR_DRIVER";
    case TC_ERR_NOT_FOUND: return "TC_ERR_NOT_FOUND";
    case TC_ERR_CANCELLED: return "TC_ERR_CANCELLED";
    }
    return "TC_ERR_UNKNOWN";
}

tc_status tc_set_error(tc_error *err, tc_status code, const char *fmt, ...)
{
    if (err) {
        err->code = code;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return code;
}

void tc_clear_error(tc_error *err)
{
    if (err) {
        err->code = TC_OK;
        err->message[0] = '\0';
    }
}
