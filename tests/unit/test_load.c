/* Tests of the loader's behaviour where it matters on every machine: with
 * no driver (CI) or a driver but a bad image (GPU machine), loading fails
 * with TC_ERR_DRIVER and a message, never a crash; bad arguments are
 * TC_ERR_INVALID. */
#include <stdlib.h>

#include "check.h"
#include "taskcache.h"

int main(void)
{
    tc_module *m = (tc_module *)1;
    tc_error err;
    static const char garbage[64] = "definitely not a cubin";
    tc_status st = tc_module_load_image(garbage, sizeof garbage, &m, &err);
    CHECK(st == TC_ERR_DRIVER);
    CHECK(m == NULL);
    CHECK(err.code == TC_ERR_DRIVER && err.message[0] != '\0');
    printf("loader says: %s\n", err.message);

    CHECK(tc_module_load_image(NULL, 0, &m, &err) == TC_ERR_INVALID);
    CHECK(tc_module_load(NULL, &m, &err) == TC_ERR_INVALID);
    CHECK_STR(tc_status_name(TC_ERR_DRIVER), "TC_ERR_DRIVER");
    tc_module_unload(NULL); /* allowed */
    return check_report("test_load");
}
