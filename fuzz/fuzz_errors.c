/* libFuzzer target: typed API errors (kube/errors.h) from any HTTP status,
 * body and Retry-After header, and the reconcile's "is this refusal final"
 * decision on them. Invariants: every field is filled and bounded.
 *
 * Departs from the layout rule (README, Layout: only main.c includes
 * reconcile/): the decision it fuzzes reads a kube_error, so it is the
 * controller's, and this target includes reconcile/reconcile.h for it. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kube/errors.h"
#include "reconcile/reconcile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct kube_error *e)
{
	assert(e->code >= KUBE_OK && e->code <= KUBE_ERR_OTHER);
	assert(memchr(e->reason, '\0', sizeof e->reason) && memchr(e->message, '\0', sizeof e->message));
	assert(e->retry_after_s >= 0 && e->retry_after_s <= 86400);
	assert(e->ncauses >= 0 && e->ncauses <= KUBE_ERROR_CAUSES && e->ncauses <= e->ncauses_total);
	assert(kube_err_str(e->code) != NULL);
	(void)sbx_pod_refusal_is_final(e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 3)
		return 0;
	long http = 100 + (long)((data[0] << 8 | data[1]) % 500);
	size_t hlen = data[2] % 40;
	data += 3;
	size -= 3;
	if (hlen > size)
		hlen = size;
	char header[41];
	memcpy(header, data, hlen);
	header[hlen] = '\0';
	struct kube_error e;
	kube_error_from_response(http, (const char *)data + hlen, size - hlen, hlen ? header : NULL, &e);
	check(&e);
	cJSON *st = cJSON_ParseWithLength((const char *)data + hlen, size - hlen);
	if (st) {
		kube_error_from_status(st, &e);
		check(&e);
		cJSON_Delete(st);
	}
	return 0;
}
