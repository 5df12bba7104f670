/*
 * status.c — status names, sentences, and the per-thread last-error message.
 */
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

static _Thread_local char nf_last_message[512];

static const char *const nf_status_names[NF_STATUS_COUNT] = {
    [NF_OK] = "NF_OK",
    [NF_ERR_NULL_ARGUMENT] = "NF_ERR_NULL_ARGUMENT",
    [NF_ERR_BAD_SIZE] = "NF_ERR_BAD_SIZE",
    [NF_ERR_BAD_STRIDE] = "NF_ERR_BAD_STRIDE",
    [NF_ERR_MISALIGNED] = "NF_ERR_MISALIGNED",
    [NF_ERR_BAD_EPS] = "NF_ERR_BAD_EPS",
    [NF_ERR_BAD_VALUE] = "NF_ERR_BAD_VALUE",
    [NF_ERR_INCONSISTENT] = "NF_ERR_INCONSISTENT",
    [NF_ERR_UNSUPPORTED_SHAPE] = "NF_ERR_UNSUPPORTED_SHAPE",
    [NF_ERR_NOT_IMPLEMENTED] = "NF_ERR_NOT_IMPLEMENTED",
    [NF_ERR_NO_DEVICE] = "NF_ERR_NO_DEVICE",
    [NF_ERR_UNSUPPORTED_DEVICE] = "NF_ERR_UNSUPPORTED_DEVICE",
    [NF_ERR_OUT_OF_MEMORY] = "NF_ERR_OUT_OF_MEMORY",
    [NF_ERR_CUDA] = "NF_ERR_CUDA",
    [NF_ERR_CUBLAS] = "NF_ERR_CUBLAS",
    [NF_ERR_CUDNN] = "NF_ERR_CUDNN",
};

static const char *const nf_status_sentences[NF_STATUS_COUNT] = {
    [NF_OK] = "success",
    [NF_ERR_NULL_ARGUMENT] = "a required pointer is NULL",
    [NF_ERR_BAD_SIZE] = "a size is out of its documented range",
    [NF_ERR_BAD_STRIDE] = "a leading dimension is too small or not the multiple the kernel needs",
    [NF_ERR_MISALIGNED] = "a pointer lacks the alignment the kernel needs",
    [NF_ERR_BAD_EPS] = "eps must be > 0 and <= 2^64 (NF_EPS_MAX)",
    [NF_ERR_BAD_VALUE] = "a scalar or enum argument is out of range",
    [NF_ERR_INCONSISTENT] = "arguments contradict each other",
    [NF_ERR_UNSUPPORTED_SHAPE] = "this implementation does not support the shape",
    [NF_ERR_NOT_IMPLEMENTED] = "the implementation asked for does not exist yet",
    [NF_ERR_NO_DEVICE] = "no CUDA device is visible",
    [NF_ERR_UNSUPPORTED_DEVICE] = "the device is not of the architecture this kernel needs",
    [NF_ERR_OUT_OF_MEMORY] = "a device allocation failed",
    [NF_ERR_CUDA] = "a CUDA runtime call failed",
    [NF_ERR_CUBLAS] = "a cuBLAS call failed",
    [NF_ERR_CUDNN] = "a cuDNN call failed",
};

const char *nf_status_name(nf_status status)
{
    if ((unsigned)status >= NF_STATUS_COUNT)
        return "NF_STATUS_UNKNOWN";
    return nf_status_names[status];
}

const char *nf_status_string(nf_status status)
{
    if ((unsigned)status >= NF_STATUS_COUNT)
        return "unknown status";
    return nf_status_sentences[status];
}

const char *nf_last_error(void) { return nf_last_message; }

nf_status nf_fail(nf_status status, const char *where, const char *fmt, ...)
{
    int off = snprintf(nf_last_message, sizeof nf_last_message, "%s: ", where);
    if (off < 0 || (size_t)off >= sizeof nf_last_message)
        off = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(nf_last_message + off, sizeof nf_last_message - (size_t)off, fmt, ap);
    va_end(ap);
    return status;
}

const char *nf_impl_name(nf_impl impl)
{
    switch (impl) {
    case NF_IMPL_AUTO: return "auto";
    case NF_IMPL_REF: return "ref";
    case NF_IMPL_VENDOR: return "vendor";
    case NF_IMPL_FUSED: return "fused";
    default: return "unknown";
    }
}

const char *nf_activation_name(nf_activation act)
{
    switch (act) {
    case NF_ACT_SOFTMAX: return "softmax";
    case NF_ACT_GELU: return "gelu";
    case NF_ACT_GELU_TANH: return "gelu_tanh";
    case NF_ACT_SILU: return "silu";
    default: return "unknown";
    }
}
