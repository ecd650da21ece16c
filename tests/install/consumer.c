/* Links against an installed ptsc; prints what proves the right library loaded. */
#include <ptsc.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    int major = -1;
    ptsc_version(&major, NULL, NULL);
    if (major != PTSC_VERSION_MAJOR || strcmp(ptsc_version_string(), PTSC_VERSION_STRING) != 0)
        return 1;
    printf("consumer: ptsc %s, %s\n", ptsc_version_string(), ptsc_status_name(PTSC_ERR_TAG));
    return 0;
}
