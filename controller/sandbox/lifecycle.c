#include "sandbox/lifecycle.h"

#include <stdio.h>
#include <string.h>

#include "base/jsonget.h"
#include "kube/ktime.h"

int sbx_lifecycle_parse(const cJSON *spec, struct sbx_lifecycle *out, char *msg, size_t msglen)
{
	memset(out, 0, sizeof *out);
	const cJSON *lc = jobj(spec, "lifecycle");
	if (!lc)
		return 0;
	if (!cJSON_IsObject(lc)) {
		snprintf(msg, msglen, "spec.lifecycle must be an object");
		return -1;
	}
	const cJSON *m;
	cJSON_ArrayForEach(m, lc)
	{
		if (strcmp(m->string, "shutdownTime") && strcmp(m->string, "shutdownPolicy") && strcmp(m->string, "suspend")) {
			snprintf(msg, msglen, "spec.lifecycle.%.64s is not a lifecycle field (shutdownTime, shutdownPolicy, suspend)",
				 m->string);
			return -1;
		}
	}
	const cJSON *t = jobj(lc, "shutdownTime"), *p = jobj(lc, "shutdownPolicy"), *s = jobj(lc, "suspend");
	if (t) {
		if (!cJSON_IsString(t) || ktime_parse_rfc3339(t->valuestring, &out->shutdown) < 0) {
			snprintf(msg, msglen, "spec.lifecycle.shutdownTime must be an RFC 3339 time (e.g. 2026-12-01T18:00:00Z)");
			return -1;
		}
		out->has_shutdown = 1;
	}
	if (p) {
		if (!cJSON_IsString(p) || (strcmp(p->valuestring, "Retain") && strcmp(p->valuestring, "Delete"))) {
			snprintf(msg, msglen, "spec.lifecycle.shutdownPolicy must be Retain or Delete");
			return -1;
		}
		out->delete_policy = !strcmp(p->valuestring, "Delete");
	}
	if (s) {
		if (!cJSON_IsBool(s)) {
			snprintf(msg, msglen, "spec.lifecycle.suspend must be true or false");
			return -1;
		}
		out->suspend = cJSON_IsTrue(s);
	}
	return 0;
}

cJSON *sbx_spec_intent(const cJSON *spec)
{
	cJSON *o = cJSON_CreateObject();
	const cJSON *m;
	cJSON_ArrayForEach(m, spec)
	{
		if (m->string && strcmp(m->string, "lifecycle"))
			cJSON_AddItemReferenceToObject(o, m->string, (cJSON *)m);
	}
	return o;
}

int sbx_spec_same_intent(const cJSON *a, const cJSON *b)
{
	if (!cJSON_IsObject(a) || !cJSON_IsObject(b))
		return cJSON_Compare(a, b, 1);
	cJSON *x = sbx_spec_intent(a), *y = sbx_spec_intent(b);
	int same = cJSON_Compare(x, y, 1);
	cJSON_Delete(x);
	cJSON_Delete(y);
	return same;
}

int sbx_lifecycle_expired(const struct sbx_lifecycle *l, time_t now)
{
	return l->has_shutdown && l->shutdown <= now;
}
