#include "sandbox/status.h"

#include <stdio.h>
#include <string.h>

const cJSON *sbx_status_condition(const cJSON *status, const char *type)
{
	const cJSON *conds = cJSON_GetObjectItemCaseSensitive(status, "conditions");
	const cJSON *c;
	cJSON_ArrayForEach(c, conds)
	{
		const cJSON *t = cJSON_GetObjectItemCaseSensitive(c, "type");
		if (cJSON_IsString(t) && !strcmp(t->valuestring, type))
			return c;
	}
	return NULL;
}

static void add_str_or_null(cJSON *o, const char *k, const char *v)
{
	if (v)
		cJSON_AddStringToObject(o, k, v);
	else
		cJSON_AddNullToObject(o, k);
}

static cJSON *condition3(const cJSON *old_status, const char *type, const char *st, const char *reason,
			 const char *message, long long gen, const char *now)
{
	const char *ltt = now;
	const cJSON *old = sbx_status_condition(old_status, type);
	if (old) {
		const cJSON *os = cJSON_GetObjectItemCaseSensitive(old, "status");
		const cJSON *ot = cJSON_GetObjectItemCaseSensitive(old, "lastTransitionTime");
		if (cJSON_IsString(os) && !strcmp(os->valuestring, st) && cJSON_IsString(ot))
			ltt = ot->valuestring;
	}
	cJSON *c = cJSON_CreateObject();
	cJSON_AddStringToObject(c, "type", type);
	cJSON_AddStringToObject(c, "status", st);
	cJSON_AddStringToObject(c, "reason", reason);
	cJSON_AddStringToObject(c, "message", message ? message : "");
	cJSON_AddStringToObject(c, "lastTransitionTime", ltt);
	cJSON_AddNumberToObject(c, "observedGeneration", (double)gen);
	return c;
}

static cJSON *condition(const cJSON *old_status, const char *type, int ok, const char *reason,
			const char *message, long long gen, const char *now)
{
	return condition3(old_status, type, ok ? "True" : "False", reason, message, gen, now);
}

cJSON *sbx_status_build(const struct sbx_status_in *in, const cJSON *old_status, const char *now)
{
	cJSON *s = cJSON_CreateObject();
	add_str_or_null(s, "phase", in->phase);
	add_str_or_null(s, "podName", in->pod_name);
	add_str_or_null(s, "podUID", in->pod_uid);
	add_str_or_null(s, "scopeDigest", in->scope_digest);
	add_str_or_null(s, "specFingerprint", in->fingerprint);
	add_str_or_null(s, "binding", in->binding);
	add_str_or_null(s, "claimedAt", in->claimed_at);
	add_str_or_null(s, "keyExpiresAt", in->key_expires_at);
	add_str_or_null(s, "podIP", in->pod_ip);
	/* Kept once written: a resume needs a record of a later generation. */
	const cJSON *sg = cJSON_GetObjectItemCaseSensitive(old_status, "suspendedGeneration");
	if (in->suspended_generation > 0)
		cJSON_AddNumberToObject(s, "suspendedGeneration", (double)in->suspended_generation);
	else if (cJSON_IsNumber(sg))
		cJSON_AddNumberToObject(s, "suspendedGeneration", sg->valuedouble);
	cJSON_AddNumberToObject(s, "observedGeneration", (double)in->generation);
	cJSON *conds = cJSON_AddArrayToObject(s, "conditions");
	cJSON_AddItemToArray(conds, condition(old_status, "Bound", in->bound, in->bound_reason,
					      in->bound_message, in->generation, now));
	char ready_msg[1024];
	const char *rm = in->ready_message ? in->ready_message : "";
	if (in->ready_detail[0]) {
		snprintf(ready_msg, sizeof ready_msg, "%s: %s", rm, in->ready_detail);
		rm = ready_msg;
	}
	cJSON_AddItemToArray(conds, condition(old_status, "Ready", in->ready, in->ready_reason, rm, in->generation,
					      now));
	if (in->net_status)
		cJSON_AddItemToArray(conds, condition3(old_status, "NetworkPolicyEnforced", in->net_status,
						       in->net_reason ? in->net_reason : "", in->net_message,
						       in->generation, now));
	return s;
}

/* Compares a against b field by field, treating null and absent alike and
 * skipping lastTransitionTime. */
static int same_value(const cJSON *a, const cJSON *b);

static int is_absent(const cJSON *v)
{
	return !v || cJSON_IsNull(v);
}

static int same_object(const cJSON *a, const cJSON *b)
{
	const cJSON *x;
	cJSON_ArrayForEach(x, a)
	{
		if (!strcmp(x->string, "lastTransitionTime"))
			continue;
		if (!same_value(x, cJSON_GetObjectItemCaseSensitive(b, x->string)))
			return 0;
	}
	cJSON_ArrayForEach(x, b)
	{
		if (!strcmp(x->string, "lastTransitionTime"))
			continue;
		if (is_absent(x))
			continue;
		if (!cJSON_GetObjectItemCaseSensitive(a, x->string))
			return 0;
	}
	return 1;
}

static int same_value(const cJSON *a, const cJSON *b)
{
	if (is_absent(a) || is_absent(b))
		return is_absent(a) && is_absent(b);
	if (cJSON_IsObject(a) && cJSON_IsObject(b))
		return same_object(a, b);
	if (cJSON_IsArray(a) && cJSON_IsArray(b)) {
		if (cJSON_GetArraySize(a) != cJSON_GetArraySize(b))
			return 0;
		const cJSON *y = b->child;
		const cJSON *x;
		cJSON_ArrayForEach(x, a)
		{
			if (!same_value(x, y))
				return 0;
			y = y->next;
		}
		return 1;
	}
	return cJSON_Compare(a, b, 1);
}

int sbx_status_same(const cJSON *a, const cJSON *b)
{
	return same_value(a, b);
}
