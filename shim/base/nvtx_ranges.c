/*
 * nvtx_ranges.c - NVTX injection and per-thread range names (see
 * nvtx_ranges.h).
 *
 * The protocol (NVTX v3, nvtxDetail/nvtxInit.h and nvtxTypes.h): at a
 * library's first NVTX call NVTX dlopens $NVTX_INJECTION64_PATH, calls its
 * InitializeInjectionNvtx2(getExportTable), and the injection asks
 * getExportTable(NVTX_ETID_CALLBACKS = 1) for GetModuleFunctionTable, which
 * hands out, per module (CORE = 1, CORE2 = 5), an array of pointers to the
 * library's function-pointer slots indexed by callback id; the injection
 * writes its functions into the slots it wants, NVTX turns the others into
 * no-ops. Every library that carries the NVTX headers has its own slots
 * and calls the injection once, so InitializeInjectionNvtx2 may run many
 * times. The few NVTX types needed are declared here, as NVTX defines
 * them, so the shim needs no NVTX headers.
 *
 * How NVTX finds recap: a constructor sets NVTX_INJECTION64_PATH to
 * librecap's own resolved path when it is unset (and RECAP_MODE is not
 * off), before the program's first NVTX call. A path naming another tool
 * (Nsight Systems sets it) is left alone and noted once in the log. NVTX
 * then dlopens the already loaded librecap: the same object, the same
 * thread-local stacks.
 */
#include "shim/base/nvtx_ranges.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

/* ---- NVTX's types, as nvtxTypes.h and nvToolsExt.h define them ---------- */

typedef void (*nvtx_fn)(void);
typedef nvtx_fn **nvtx_table;                 /* NvtxFunctionTable */
typedef const void *(*nvtx_get_export_table_fn)(uint32_t id);

struct nvtx_export_callbacks {               /* NvtxExportTableCallbacks */
    size_t struct_size;
    int (*get_module_function_table)(int module, nvtx_table *table, unsigned int *size);
};

struct nvtx_event_attributes {               /* nvtxEventAttributes_v2 */
    uint16_t version;
    uint16_t size;
    uint32_t category;
    int32_t color_type;
    uint32_t color;
    int32_t payload_type;
    int32_t reserved0;
    uint64_t payload;
    int32_t message_type;
    const void *message;
};

enum {
    NVTX_ETID_CALLBACKS = 1,
    NVTX_CB_MODULE_CORE = 1,
    NVTX_CB_MODULE_CORE2 = 5,
    NVTX_CBID_CORE_RangePushEx = 8,
    NVTX_CBID_CORE_RangePushA = 9,
    NVTX_CBID_CORE_RangePushW = 10,
    NVTX_CBID_CORE_RangePop = 11,
    NVTX_CBID_CORE2_DomainRangePushEx = 4,
    NVTX_CBID_CORE2_DomainRangePop = 5,
    NVTX_CBID_CORE2_DomainRegisterStringA = 10,
    NVTX_CBID_CORE2_DomainRegisterStringW = 11,
    NVTX_CBID_CORE2_DomainCreateA = 12,
    NVTX_CBID_CORE2_DomainCreateW = 13,
    NVTX_CBID_CORE2_DomainDestroy = 14,
    NVTX_MESSAGE_TYPE_ASCII = 1,
    NVTX_MESSAGE_TYPE_UNICODE = 2,
    NVTX_MESSAGE_TYPE_REGISTERED = 3,
};

/* ---- the per-thread stack ------------------------------------------------ */

/* A range open on this thread: its domain (NULL for the default one) and
 * name. A range that carries an extension payload (NVTX_PAYLOAD_TYPE_EXT:
 * libraries such as NCCL describe their calls that way) is kept hidden: it
 * balances its domain's pop but never names a site. A pop closes the
 * innermost open range of its own domain, so a library's ranges cannot
 * close the program's. */
struct nvtx_open_range {
    const void *domain;
    int hidden;
    char name[NVTX_RANGES_NAME_MAX];
};

#define NVTX_PAYLOAD_TYPE_EXT ((int32_t)0xDFBD0009)

static __thread int nvtx_depth;               /* entries in nvtx_open */
static __thread int nvtx_overflow;            /* pushes past NVTX_RANGES_DEPTH_MAX */
static __thread struct nvtx_open_range nvtx_open[NVTX_RANGES_DEPTH_MAX];

static char nvtx_note[PATH_MAX + 160];
static int nvtx_note_pending;

static int nvtx_push_named(const void *domain, int hidden, const char *name)
{
    int level = nvtx_depth + nvtx_overflow;
    if (nvtx_depth == NVTX_RANGES_DEPTH_MAX) {
        nvtx_overflow++;
        return level;
    }
    struct nvtx_open_range *r = &nvtx_open[nvtx_depth];
    r->domain = domain;
    r->hidden = hidden;
    size_t n = 0;
    if (name != NULL)
        while (n < NVTX_RANGES_NAME_MAX - 1 && name[n] != '\0') {
            unsigned char c = (unsigned char)name[n];
            r->name[n] = c < 0x20 || c == 0x7f ? '?' : (char)c;
            n++;
        }
    r->name[n] = '\0';
    nvtx_depth++;
    return level;
}

static int nvtx_push_narrow(const char *name)
{
    return nvtx_push_named(NULL, 0, name);
}

/* Wide names keep their ASCII characters; anything else reads as '?'. */
static void nvtx_narrow_copy(const wchar_t *name, char narrow[NVTX_RANGES_NAME_MAX])
{
    size_t n = 0;
    if (name != NULL)
        for (; n < NVTX_RANGES_NAME_MAX - 1 && name[n] != 0; n++)
            narrow[n] = name[n] >= 0x20 && name[n] < 0x7f ? (char)name[n] : '?';
    narrow[n] = '\0';
}

static int nvtx_push_wide(const wchar_t *name)
{
    char narrow[NVTX_RANGES_NAME_MAX];
    nvtx_narrow_copy(name, narrow);
    return nvtx_push_narrow(narrow);
}

/* A domain handle is a copy of the domain's name (nvtx_domain_create_*).
 * NCCL's domain describes NCCL's own calls, not the program's phases, and
 * on PyTorch one of its ranges ("ncclCommInitRankConfig") was seen left
 * open on the capturing thread across every capture: its ranges are not
 * followed at all. */
static int nvtx_domain_ignored(const void *domain)
{
    return domain != NULL && strcmp(domain, "NCCL") == 0;
}

static int nvtx_push_attributes(const void *domain, const struct nvtx_event_attributes *a)
{
    if (nvtx_domain_ignored(domain))
        return 0;
    if (a == NULL || a->size < sizeof *a)
        return nvtx_push_named(domain, 0, "");
    int hidden = a->payload_type == NVTX_PAYLOAD_TYPE_EXT;
    char narrow[NVTX_RANGES_NAME_MAX];
    switch (a->message_type) {
    case NVTX_MESSAGE_TYPE_ASCII:
    case NVTX_MESSAGE_TYPE_REGISTERED:           /* our handles are the strings */
        return nvtx_push_named(domain, hidden, a->message);
    case NVTX_MESSAGE_TYPE_UNICODE:
        nvtx_narrow_copy(a->message, narrow);
        return nvtx_push_named(domain, hidden, narrow);
    default:
        return nvtx_push_named(domain, hidden, "");
    }
}

static int nvtx_pop_domain(const void *domain)
{
    if (nvtx_domain_ignored(domain))
        return 0;
    if (nvtx_overflow > 0)
        return nvtx_depth + --nvtx_overflow;
    for (int i = nvtx_depth - 1; i >= 0; i--) {
        if (nvtx_open[i].domain != domain)
            continue;
        memmove(&nvtx_open[i], &nvtx_open[i + 1],
                (size_t)(nvtx_depth - 1 - i) * sizeof nvtx_open[0]);
        return --nvtx_depth;
    }
    return -1;                                    /* a pop without a push */
}

static int nvtx_range_push_a(const char *message) { return nvtx_push_narrow(message); }
static int nvtx_range_push_w(const wchar_t *message) { return nvtx_push_wide(message); }
static int nvtx_range_push_ex(const struct nvtx_event_attributes *a)
{
    return nvtx_push_attributes(NULL, a);
}
static int nvtx_range_pop(void) { return nvtx_pop_domain(NULL); }

static int nvtx_domain_range_push_ex(void *domain, const struct nvtx_event_attributes *a)
{
    return nvtx_push_attributes(domain, a);
}

static int nvtx_domain_range_pop(void *domain)
{
    return nvtx_pop_domain(domain);
}

/* A registered string's handle is a copy of the string, kept for the
 * process's life (programs register a few names once). */
static void *nvtx_register_string_a(void *domain, const char *text)
{
    (void)domain;
    return text ? strdup(text) : NULL;
}

static void *nvtx_domain_create_a(const char *name)
{
    return strdup(name != NULL ? name : "");
}

static void *nvtx_domain_create_w(const wchar_t *name)
{
    char narrow[NVTX_RANGES_NAME_MAX];
    nvtx_narrow_copy(name, narrow);
    return strdup(narrow);
}

static void nvtx_domain_destroy(void *domain)
{
    free(domain);
}

static void *nvtx_register_string_w(void *domain, const wchar_t *text)
{
    (void)domain;
    if (text == NULL)
        return NULL;
    size_t n = wcslen(text);
    char *copy = malloc(n + 1);
    if (copy == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++)
        copy[i] = text[i] >= 0x20 && text[i] < 0x7f ? (char)text[i] : '?';
    copy[n] = '\0';
    return copy;
}

const char *nvtx_ranges_innermost(void)
{
    for (int i = nvtx_depth - 1; i >= 0; i--)
        if (!nvtx_open[i].hidden)
            return nvtx_open[i].name;
    return NULL;
}

/* ---- the injection --------------------------------------------------------- */

static void nvtx_set(nvtx_table table, unsigned int size, unsigned int id, nvtx_fn fn)
{
    if (id <= size && table[id] != NULL)
        *table[id] = fn;
}

__attribute__((visibility("default")))
int InitializeInjectionNvtx2(nvtx_get_export_table_fn get_export_table);

__attribute__((visibility("default")))
int InitializeInjectionNvtx2(nvtx_get_export_table_fn get_export_table)
{
    if (get_export_table == NULL)
        return 0;
    const struct nvtx_export_callbacks *cb = get_export_table(NVTX_ETID_CALLBACKS);
    if (cb == NULL || cb->struct_size < sizeof *cb || cb->get_module_function_table == NULL)
        return 0;
    nvtx_table table = NULL;
    unsigned int size = 0;
    if (cb->get_module_function_table(NVTX_CB_MODULE_CORE, &table, &size) && table != NULL) {
        nvtx_set(table, size, NVTX_CBID_CORE_RangePushEx, (nvtx_fn)nvtx_range_push_ex);
        nvtx_set(table, size, NVTX_CBID_CORE_RangePushA, (nvtx_fn)nvtx_range_push_a);
        nvtx_set(table, size, NVTX_CBID_CORE_RangePushW, (nvtx_fn)nvtx_range_push_w);
        nvtx_set(table, size, NVTX_CBID_CORE_RangePop, (nvtx_fn)nvtx_range_pop);
    }
    table = NULL;
    size = 0;
    if (cb->get_module_function_table(NVTX_CB_MODULE_CORE2, &table, &size) && table != NULL) {
        nvtx_set(table, size, NVTX_CBID_CORE2_DomainRangePushEx, (nvtx_fn)nvtx_domain_range_push_ex);
        nvtx_set(table, size, NVTX_CBID_CORE2_DomainRangePop, (nvtx_fn)nvtx_domain_range_pop);
        nvtx_set(table, size, NVTX_CBID_CORE2_DomainRegisterStringA, (nvtx_fn)nvtx_register_string_a);
        nvtx_set(table, size, NVTX_CBID_CORE2_DomainRegisterStringW, (nvtx_fn)nvtx_register_string_w);
        nvtx_set(table, size, NVTX_CBID_CORE2_DomainCreateA, (nvtx_fn)nvtx_domain_create_a);
        nvtx_set(table, size, NVTX_CBID_CORE2_DomainCreateW, (nvtx_fn)nvtx_domain_create_w);
        nvtx_set(table, size, NVTX_CBID_CORE2_DomainDestroy, (nvtx_fn)nvtx_domain_destroy);
    }
    return 1;
}

const char *nvtx_ranges_take_note(void)
{
    if (!__atomic_exchange_n(&nvtx_note_pending, 0, __ATOMIC_ACQ_REL))
        return NULL;
    return nvtx_note;
}

/* Runs when librecap is loaded: preloaded into the program, or dlopened by
 * NVTX as its injection (then the variable is already set). */
__attribute__((constructor))
static void nvtx_ranges_point_nvtx_here(void)
{
    const char *mode = getenv("RECAP_MODE");
    if (mode != NULL && strcmp(mode, "off") == 0)
        return;
    Dl_info info;
    char self[PATH_MAX];
    if (!dladdr((const void *)nvtx_ranges_innermost, &info) || info.dli_fname == NULL ||
        realpath(info.dli_fname, self) == NULL)
        return;
    const char *current = getenv("NVTX_INJECTION64_PATH");
    if (current == NULL || current[0] == '\0') {
        setenv("NVTX_INJECTION64_PATH", self, 1);
        return;
    }
    char resolved[PATH_MAX];
    if (realpath(current, resolved) != NULL && strcmp(resolved, self) == 0)
        return;
    snprintf(nvtx_note, sizeof nvtx_note, "NVTX_INJECTION64_PATH names another tool (%.*s): "
             "it keeps NVTX, and NVTX ranges do not name sites in this run", PATH_MAX, current);
    nvtx_note_pending = 1;
}
