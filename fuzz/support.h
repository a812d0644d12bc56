/* What more than one fuzz target checks (fuzz/support.c): the printed size
 * of an object, the seal keys, and the workspace invariant of a pod. */
#ifndef SBX_FUZZ_SUPPORT_H
#define SBX_FUZZ_SUPPORT_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "sandbox/config.h"
#include "sandbox/seal.h"

/* The namespace every target's objects live in. */
#define FUZZ_NS "team-a"
/* What README promises per cached object, with slack. */
#define FUZZ_TRIM_BOUND (96 * 1024)

/* The current seal key (32 bytes). */
extern const unsigned char fuzz_seal_key[32];

/* The length of o printed unformatted. */
size_t fuzz_printed_size(const cJSON *o);
/* The seal keys: fuzz_seal_key and a previous one (rotation). */
const struct sbx_seal_keys *fuzz_seal_keys(void);
/* Asserts that every volume and mount of pod (in FUZZ_NS) stays inside
 * owner's folders under cfg: <root>/<namespace>/<owner>/ (hostPath) or
 * <owner>/ of the claim (PVC), and that nothing is mounted without an owner. */
void fuzz_check_mounts(const cJSON *pod, const struct sbx_config *cfg, const char *owner);
/* The two workspace configurations the targets build pods with: PVC (the
 * default) and hostPath under /srv/ws. */
void fuzz_configs(const struct sbx_config **pvc, const struct sbx_config **host);

#endif
