/* Links the installed library and calls it: a status name and the context
 * check (NF_ERR_NO_DEVICE on a machine without a GPU, NF_OK with one). */
#include <stdio.h>
#include <string.h>

#include <normfuse.h>

int main(void)
{
    nf_context *ctx = NULL;
    const nf_status s = nf_context_create(&ctx, 0);
    nf_context_destroy(ctx);
    printf("consumer: %s\n", nf_status_name(s));
    return (s == NF_OK || s == NF_ERR_NO_DEVICE) && strcmp(nf_status_name(NF_OK), "NF_OK") == 0 ? 0 : 1;
}
