/* libFuzzer target: AdmissionReview v1 decoding (webhook/admission.h), the
 * answer encoded for it, and the identity a pool's record keeps of its
 * userInfo (sandbox/authz.h). Invariants: a decoded review has the fields
 * the header promises (uid, operation, kind, username as strings); the
 * encoded answer is JSON that echoes the uid; a recorded identity is at most
 * SBX_AUTHZ_IDENTITY_MAX bytes, parses back, and is its own canonical form. */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/authz.h"
#include "sandbox/jcs.h"
#include "webhook/admission.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wh_review r;
	char err[512];
	if (wh_review_decode((const char *)data, size, &r, err, sizeof err) < 0) {
		assert(memchr(err, '\0', sizeof err) != NULL);
		return 0;
	}
	assert(r.uid && r.operation && r.kind && r.username);
	struct wh_verdict v;
	memset(&v, 0, sizeof v);
	if (strlen(r.uid) % 2)
		wh_verdict_allow(&v);
	else
		wh_verdict_deny(&v, 422, "Invalid", "refused %s %s/%s", r.operation, r.ns ? r.ns : "",
				r.name ? r.name : "");
	char *out = wh_response_encode(r.uid, &v);
	if (out) {
		cJSON *o = cJSON_Parse(out);
		assert(o != NULL);
		const cJSON *resp = cJSON_GetObjectItemCaseSensitive(o, "response");
		const cJSON *uid = cJSON_GetObjectItemCaseSensitive(resp, "uid");
		assert(cJSON_IsString(uid) && !strcmp(uid->valuestring, r.uid));
		cJSON_Delete(o);
		free(out);
	}
	wh_verdict_release(&v);
	char *id = sbx_authz_identity(r.user_info);
	if (id) {
		assert(strlen(id) <= SBX_AUTHZ_IDENTITY_MAX);
		cJSON *back = sbx_authz_identity_parse(id);
		assert(back != NULL);
		char *again = jcs_string(back);
		assert(again && !strcmp(again, id));
		free(again);
		cJSON_Delete(back);
		free(id);
	}
	wh_review_release(&r);
	return 0;
}
