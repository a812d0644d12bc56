#include "sandbox/quota.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "base/buf.h"
#include "base/jsonget.h"
#include "sandbox/mac.h"

static const char *spec_owner(const cJSON *q)
{
	return jstr(jobj(q, "spec"), "owner");
}

/* 1 when some quota of quotas names owner itself. */
static int has_own(const cJSON *quotas, const char *owner)
{
	const cJSON *q;
	cJSON_ArrayForEach(q, quotas)
	{
		const char *o = spec_owner(q);
		if (owner && o && !strcmp(o, owner) && !jstr(jobj(q, "metadata"), "deletionTimestamp"))
			return 1;
	}
	return 0;
}

int sbx_quota_governs(const cJSON *quotas, const cJSON *q, const char *owner)
{
	if (jstr(jobj(q, "metadata"), "deletionTimestamp") || cJSON_IsTrue(jobj(jobj(q, "spec"), "invalid")))
		return 0;
	const char *o = spec_owner(q);
	if (o)
		return owner && !strcmp(o, owner);
	return !has_own(quotas, owner);
}

/* A spec limit: 1 with *v when present and in range. */
static int limit_of(const cJSON *spec, const char *k, long *v)
{
	const cJSON *n = jobj(spec, k);
	if (!cJSON_IsNumber(n) || n->valuedouble < 0 || n->valuedouble > SBX_QUOTA_MAX || !isfinite(n->valuedouble))
		return 0;
	*v = (long)n->valuedouble;
	return 1;
}

int sbx_quota_resolve(const cJSON *quotas, const char *ns, const char *owner, const struct sbx_config *cfg,
		      struct sbx_quota_limits *out)
{
	memset(out, 0, sizeof *out);
	const cJSON *q, *first = NULL;
	int any = 0;
	cJSON_ArrayForEach(q, quotas)
	{
		if (!sbx_quota_governs(quotas, q, owner))
			continue;
		any = 1;
		const cJSON *spec = jobj(q, "spec");
		long v;
		if (limit_of(spec, "maxActive", &v) && (!out->has_active || v < out->max_active)) {
			out->has_active = 1;
			out->max_active = v;
		}
		if (limit_of(spec, "maxWarm", &v) && (!out->has_warm || v < out->max_warm)) {
			out->has_warm = 1;
			out->max_warm = v;
		}
		const char *mode = jstr(spec, "mode");
		if (mode && !strcmp(mode, "Reject"))
			out->reject = 1;
		const char *name = jstr(jobj(q, "metadata"), "name");
		if (name && (!first || strcmp(name, jstr(jobj(first, "metadata"), "name")) < 0))
			first = q;
	}
	if (any) {
		snprintf(out->source, sizeof out->source, "SandboxQuota %s/%s", ns ? ns : "",
			 first ? jstr(jobj(first, "metadata"), "name") : "");
		return out->has_active || out->has_warm;
	}
	if (cfg && (cfg->quota.has_active || cfg->quota.has_warm)) {
		out->has_active = cfg->quota.has_active;
		out->max_active = cfg->quota.max_active;
		out->has_warm = cfg->quota.has_warm;
		out->max_warm = cfg->quota.max_warm;
		out->reject = cfg->quota.reject;
		snprintf(out->source, sizeof out->source, "the controller's default quota");
		return 1;
	}
	return 0;
}

int sbx_quota_owner_key(const char *ns, const char *owner, char out[33])
{
	static const unsigned char absent = 0x00, present = 0x01;
	struct buf m;
	unsigned char md[32];
	unsigned int mdlen = 0;
	buf_init(&m, 1024);
	int rc = sbx_lp_str(&m, "sandbox.dev/quota/v1") | sbx_lp_str(&m, ns ? ns : "") |
		 buf_append(&m, owner ? &present : &absent, 1) | (owner ? sbx_lp_str(&m, owner) : 0);
	if (rc == 0 && (EVP_Digest(m.data, m.len, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32))
		rc = -1;
	buf_release(&m);
	out[0] = '\0';
	if (rc < 0)
		return -1;
	char hex[65];
	sbx_hex(md, sizeof md, hex);
	memcpy(out, hex, 32);
	out[32] = '\0';
	return 0;
}

void sbx_quota_slot_name(const char *key, long n, char *out, size_t outlen)
{
	snprintf(out, outlen, "sbxq-%s-%ld", key, n);
}

void sbx_quota_warm_slot_name(const char *key, long n, char *out, size_t outlen)
{
	snprintf(out, outlen, "sbxw-%s-%ld", key, n);
}

/* The number of name, a slot of key under prefix (5 bytes), or -1. */
static long slot_index(const char *name, const char *prefix, const char *key)
{
	size_t kl = strlen(key);
	if (!name || strncmp(name, prefix, 5) || strncmp(name + 5, key, kl) || name[5 + kl] != '-')
		return -1;
	const char *d = name + 6 + kl;
	if (!*d || strlen(d) > 5 || strspn(d, "0123456789") != strlen(d) || (d[0] == '0' && d[1]))
		return -1;
	long n = strtol(d, NULL, 10);
	return n < SBX_QUOTA_MAX ? n : -1;
}

long sbx_quota_slot_index(const char *name, const char *key)
{
	return slot_index(name, "sbxq-", key);
}

long sbx_quota_warm_slot_index(const char *name, const char *key)
{
	return slot_index(name, "sbxw-", key);
}

void sbx_quota_full_message(const struct sbx_quota_limits *q, const char *ns, const char *owner, long held,
			    int reject, char *msg, size_t msglen)
{
	snprintf(msg, msglen,
		 "%s%s holds %ld of %ld active sandboxes in namespace %s (%s, mode %s): %s", owner ? "workspace owner " : "ownerless Sandboxes",
		 owner ? owner : "", held, q->max_active, ns ? ns : "", q->source, reject ? "Reject" : "Queue",
		 reject ? "no sandbox for this intent; delete or suspend one of them and create a new Sandbox"
			: "waiting for a slot; bound in arrival order when one frees");
}

int sbx_quota_refuses(const cJSON *quotas, const cJSON *slots, const char *ns, const char *owner,
		      const char *digest, const struct sbx_config *cfg, char *msg, size_t msglen)
{
	struct sbx_quota_limits q;
	char key[33];
	msg[0] = '\0';
	if (!sbx_quota_resolve(quotas, ns, owner, cfg, &q) || !q.has_active || !q.reject ||
	    sbx_quota_owner_key(ns, owner, key) < 0)
		return 0;
	long held = 0;
	const cJSON *sl;
	cJSON_ArrayForEach(sl, slots)
	{
		const cJSON *m = jobj(sl, "metadata");
		const char *sns = jstr(m, "namespace");
		if (!sns || !ns || strcmp(sns, ns) || sbx_quota_slot_index(jstr(m, "name"), key) < 0 ||
		    jstr(m, "deletionTimestamp"))
			continue;
		const char *d = jstr(jobj(sl, "spec"), "scopeDigest");
		if (digest && d && !strcmp(d, digest))
			return 0; /* the intent holds a slot: a retry */
		held++;
	}
	if (held < q.max_active)
		return 0;
	sbx_quota_full_message(&q, ns, owner, held, 1, msg, msglen);
	return 1;
}

cJSON *sbx_quota_trim(const cJSON *obj)
{
	static const char *const meta[] = { "name", "namespace", "uid", "resourceVersion", "creationTimestamp",
					    "deletionTimestamp", NULL };
	cJSON *t = cJSON_CreateObject(), *m = cJSON_AddObjectToObject(t, "metadata");
	const cJSON *om = jobj(obj, "metadata"), *os = jobj(obj, "spec");
	for (const char *const *k = meta; *k; k++) {
		const char *v = jstr(om, *k);
		if (v && strlen(v) <= 253)
			cJSON_AddStringToObject(m, *k, v);
	}
	const cJSON *g = jobj(om, "generation");
	if (cJSON_IsNumber(g))
		cJSON_AddNumberToObject(m, "generation", g->valuedouble);
	if (jstr(om, "namespace") && strlen(jstr(om, "namespace")) <= 63)
		cJSON_AddStringToObject(cJSON_AddObjectToObject(m, "labels"), SBX_QUOTA_NS_INDEX, jstr(om, "namespace"));
	cJSON *s = cJSON_AddObjectToObject(t, "spec");
	const char *owner = jstr(os, "owner"), *mode = jstr(os, "mode");
	if (owner && strlen(owner) <= 63)
		cJSON_AddStringToObject(s, "owner", owner);
	else if (jobj(os, "owner"))
		cJSON_AddTrueToObject(s, "invalid"); /* never a namespace-wide quota by mistake */
	if (mode && (!strcmp(mode, "Queue") || !strcmp(mode, "Reject")))
		cJSON_AddStringToObject(s, "mode", mode);
	long v;
	if (limit_of(os, "maxActive", &v))
		cJSON_AddNumberToObject(s, "maxActive", (double)v);
	if (limit_of(os, "maxWarm", &v))
		cJSON_AddNumberToObject(s, "maxWarm", (double)v);
	/* the controller's own status, to write it only when it changes */
	const cJSON *st = jobj(obj, "status");
	char *text = cJSON_IsObject(st) ? cJSON_PrintUnformatted(st) : NULL;
	if (text && strlen(text) <= 16384)
		cJSON_AddItemToObject(t, "status", cJSON_Duplicate(st, 1));
	free(text);
	return t;
}
