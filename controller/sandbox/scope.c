#include "sandbox/scope.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "sandbox/jcs.h"
#include "sandbox/mac.h"
#include "sandbox/spec.h"

/* Cap on the digest input M: two markers, three short strings and a hash. */
#define SCOPE_M_CAP (64 * 1024)

/* SHA-256 of p[0..n) into md. Returns 0 or -1 (OpenSSL failure). */
static int sha256(const void *p, size_t n, unsigned char md[32])
{
	unsigned int mdlen = 0;
	if (EVP_Digest(p, n, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32)
		return -1;
	return 0;
}

/* Returns the string member f of spec in *val (NULL when absent); -1 when it
 * is present with another type. */
static int optional_string(const cJSON *spec, const char *f, const char **val)
{
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(spec, f);
	*val = NULL;
	if (!m)
		return 0;
	if (!cJSON_IsString(m) || !m->valuestring)
		return -1;
	*val = m->valuestring;
	return 0;
}

int sbx_scope_compute(const char *ns, const char *uid, const cJSON *spec, struct sbx_scope *out,
		      char *err, size_t errlen)
{
	const char *owner, *key;
	unsigned char fp[32], md[32];
	struct buf m;
	char *canon = NULL;
	int rc = -1, e;
	static const char tag[] = "sandbox.dev/scope/v1";
	static const unsigned char absent = 0x00, present = 0x01;

	memset(out, 0, sizeof *out);
	if (errlen)
		err[0] = '\0';
	buf_init(&m, SCOPE_M_CAP);
	if (!ns || !cJSON_IsObject(spec)) {
		snprintf(err, errlen, "scope: namespace and spec object are required");
		goto out;
	}
	if (optional_string(spec, "workspaceOwner", &owner) < 0 ||
	    optional_string(spec, "idempotencyKey", &key) < 0) {
		snprintf(err, errlen,
			 "scope: spec.workspaceOwner and spec.idempotencyKey must be strings");
		goto out;
	}
	if (!key && (!uid || !uid[0])) {
		snprintf(err, errlen,
			 "scope: metadata.uid is required when there is no idempotency key");
		goto out;
	}
	/* The intent: the spec without its lifecycle (section 3), so changing
	 * when a Sandbox ends never changes which pod it shares. */
	cJSON *intent = sbx_spec_intent(spec);
	canon = jcs_string(intent);
	cJSON_Delete(intent);
	if (!canon) {
		snprintf(err, errlen,
			 "scope: spec cannot be canonicalized (RFC 8785): invalid UTF-8, "
			 "a non-finite number, a duplicate member or over 1 MiB");
		goto out;
	}
	if (sha256(canon, strlen(canon), fp) < 0)
		goto crypto;

	e = sbx_lp_append(&m, tag, sizeof tag - 1) | sbx_lp_append(&m, ns, strlen(ns));
	if (owner)
		e |= buf_append(&m, &present, 1) | sbx_lp_append(&m, owner, strlen(owner));
	else
		e |= buf_append(&m, &absent, 1) | buf_append(&m, fp, sizeof fp);
	if (key)
		e |= buf_append(&m, &present, 1) | sbx_lp_append(&m, key, strlen(key));
	else
		e |= buf_append(&m, &absent, 1) | sbx_lp_append(&m, uid, strlen(uid));
	if (e) {
		snprintf(err, errlen, "scope: namespace, owner or key too long");
		goto out;
	}
	if (sha256(m.data, m.len, md) < 0)
		goto crypto;
	sbx_hex(md, 16, out->digest);
	sbx_hex(fp, 32, out->fingerprint);
	rc = 0;
	goto out;
crypto:
	snprintf(err, errlen, "scope: SHA-256 failed");
out:
	if (rc < 0)
		memset(out, 0, sizeof *out);
	free(canon);
	buf_release(&m);
	return rc;
}

int sbx_template_fingerprint(const cJSON *spec, char out[65])
{
	unsigned char md[32];
	out[0] = '\0';
	if (!cJSON_IsObject(spec))
		return -1;
	cJSON *intent = sbx_spec_intent(spec);
	cJSON_DeleteItemFromObjectCaseSensitive(intent, "idempotencyKey"); /* a reference: spec keeps it */
	char *canon = jcs_string(intent);
	cJSON_Delete(intent);
	int rc = canon && sha256(canon, strlen(canon), md) == 0 ? 0 : -1;
	if (rc == 0)
		sbx_hex(md, 32, out);
	free(canon);
	return rc;
}

void sbx_pod_name(const struct sbx_scope *s, unsigned generation, char *out, size_t outlen)
{
	if (generation == 0)
		snprintf(out, outlen, "sbx-%s", s->digest);
	else
		snprintf(out, outlen, "sbx-%s-%u", s->digest, generation);
}
