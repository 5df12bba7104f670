/* probe_shim.h — a stand-in context for the probe (see probe_shim.cu). */
#ifndef NF_PROBE_SHIM_H
#define NF_PROBE_SHIM_H

#include "internal.h"

nf_context *probe_context(int device); /* NULL when the device cannot be used */
const char *probe_last_error(void);    /* the message of the last nf_fail()   */

#endif /* NF_PROBE_SHIM_H */
