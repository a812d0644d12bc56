#include "reconcile/inforce.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonget.h"
#include "base/ktime.h"
#include "base/xmalloc.h"

/* The one namespace label the API server sets and keeps equal to the name. */
#define NS_NAME_LABEL "kubernetes.io/metadata.name"

/* 1 when a managedFields entry's fieldsV1 owns anything of a webhook other
 * than its caBundle (and the "." markers of the sets it is in). */
static int owns_enforcement(const cJSON *fields)
{
	const cJSON *hook, *f, *cc;
	cJSON_ArrayForEach(hook, jobj(fields, "f:webhooks"))
	{
		if (!strcmp(hook->string, "."))
			continue;
		cJSON_ArrayForEach(f, hook)
		{
			if (!strcmp(f->string, "."))
				continue;
			if (strcmp(f->string, "f:clientConfig"))
				return 1;
			cJSON_ArrayForEach(cc, f)
			{
				if (strcmp(cc->string, ".") && strcmp(cc->string, "f:caBundle"))
					return 1;
			}
		}
	}
	return 0;
}

cJSON *sbx_inforce_trim(const cJSON *mwc)
{
	static const char *const meta[] = { "name", "uid", "resourceVersion", "creationTimestamp",
					    "deletionTimestamp", NULL };
	const cJSON *om = jobj(mwc, "metadata");
	cJSON *t = cJSON_CreateObject();
	cJSON *m = cJSON_AddObjectToObject(t, "metadata");
	for (const char *const *k = meta; *k; k++) {
		const char *v = jstr(om, *k);
		if (v)
			cJSON_AddStringToObject(m, *k, v);
	}
	time_t since = 0, at;
	if (ktime_parse_rfc3339(jstr(om, "creationTimestamp"), &at) == 0)
		since = at;
	const cJSON *e;
	cJSON_ArrayForEach(e, jobj(om, "managedFields"))
	{
		if (owns_enforcement(jobj(e, "fieldsV1")) && ktime_parse_rfc3339(jstr(e, "time"), &at) == 0 &&
		    at > since)
			since = at;
	}
	if (since > 0) {
		char ts[32];
		ktime_format_rfc3339(since, ts);
		cJSON_AddStringToObject(t, SBX_INFORCE_SINCE, ts);
	}
	cJSON *hooks = cJSON_AddArrayToObject(t, "webhooks");
	const cJSON *h;
	cJSON_ArrayForEach(h, jobj(mwc, "webhooks"))
	{
		cJSON *d = cJSON_Duplicate(h, 1);
		if (!d)
			abort(); /* out of memory */
		cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(d, "clientConfig"), "caBundle");
		cJSON_AddItemToArray(hooks, d);
	}
	return t;
}

/* 1 when the string array a holds s or "*". */
static int lists(const cJSON *a, const char *s)
{
	const cJSON *v;
	cJSON_ArrayForEach(v, a)
	{
		if (cJSON_IsString(v) && (!strcmp(v->valuestring, s) || !strcmp(v->valuestring, "*")))
			return 1;
	}
	return 0;
}

/* 1 when one of the webhook's rules sends operation on resource (of sandbox.dev). */
static int rules_cover(const cJSON *hook, const char *resource, const char *operation)
{
	const cJSON *r;
	cJSON_ArrayForEach(r, jobj(hook, "rules"))
	{
		const char *scope = jstr(r, "scope");
		const cJSON *res, *rs;
		int covered = 0;
		res = jobj(r, "resources");
		cJSON_ArrayForEach(rs, res)
		{
			covered |= cJSON_IsString(rs) && (!strcmp(rs->valuestring, resource) ||
							  !strcmp(rs->valuestring, "*") || !strcmp(rs->valuestring, "*/*"));
		}
		if (covered && lists(jobj(r, "operations"), operation) && lists(jobj(r, "apiGroups"), "sandbox.dev") &&
		    lists(jobj(r, "apiVersions"), "v1alpha1") && (!scope || !strcmp(scope, "*") || !strcmp(scope, "Namespaced")))
			return 1;
	}
	return 0;
}

/* expr without blanks into out (size n); 0, or -1 when it does not fit. */
static int unblanked(const char *expr, char *out, size_t n)
{
	size_t k = 0;
	for (const char *p = expr; p && *p; p++) {
		if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
			continue;
		if (k + 1 >= n)
			return -1;
		out[k++] = *p;
	}
	out[k] = '\0';
	return 0;
}

/* The end of the CEL string literal that starts at p (a quote; raw, without
 * escapes, when r or R is just before it: in CEL that is only ever the raw
 * prefix, as nothing else may touch a string), or NULL when it does not end. */
static const char *string_end(const char *expr, const char *p)
{
	char q = *p;
	int raw = p > expr && (p[-1] == 'r' || p[-1] == 'R');
	int triple = p[1] == q && p[2] == q;
	for (p += triple ? 3 : 1; *p; p++) {
		if (*p == '\\' && !raw) {
			if (!*++p)
				return NULL;
		} else if (*p == q && (!triple || (p[1] == q && p[2] == q))) {
			return triple ? p + 2 : p;
		}
	}
	return NULL;
}

/* 1 when nothing in expr binds looser than a || at its top level: CEL's one
 * looser operator is the ternary, so no ? or : outside parentheses,
 * brackets, braces, string literals and comments, which must all be closed.
 * 0 when one does, or when expr is not read to its end. */
static int or_is_loosest(const char *expr)
{
	int depth = 0;
	for (const char *p = expr; *p; p++) {
		if (*p == '\'' || *p == '"') {
			p = string_end(expr, p);
			if (!p)
				return 0;
		} else if (p[0] == '/' && p[1] == '/') {
			p += strcspn(p, "\n");
			if (!*p)
				break;
		} else if (*p == '(' || *p == '[' || *p == '{') {
			depth++;
		} else if (*p == ')' || *p == ']' || *p == '}') {
			if (--depth < 0)
				return 0;
		} else if ((*p == '?' || *p == ':') && depth == 0) {
			return 0;
		}
	}
	return depth == 0;
}

/* 1 when the condition never skips operation: for CREATE, an expression that
 * starts with request.operation != 'UPDATE' || (blanks and quote style
 * aside), true for every create whatever follows, as long as what follows
 * cannot take the || apart (a top-level ternary: "A || true ? false : false"
 * is "(A || true) ? false : false", false for every request); for UPDATE,
 * only the product's own, which skips an object being deleted (never
 * resumed, never given a new template). */
static int never_skips(const char *expr, const char *operation)
{
	static const char *const create[] = { "request.operation!='UPDATE'||", "request.operation!=\"UPDATE\"||" };
	static const char *const update[] = { "request.operation!='UPDATE'||!has(object.metadata.deletionTimestamp)",
					      "request.operation!=\"UPDATE\"||!has(object.metadata.deletionTimestamp)" };
	char buf[160];
	if (unblanked(expr, buf, sizeof buf) < 0)
		return 0;
	int upd = !strcmp(operation, "UPDATE");
	for (size_t i = 0; i < 2; i++) {
		if (upd && !strcmp(buf, update[i]))
			return 1;
		if (!upd && !strncmp(buf, create[i], strlen(create[i])))
			return or_is_loosest(expr);
	}
	return 0;
}

/* 1 when the selector (NULL or {}: everything) selects namespace ns, 0 when
 * it does not, -1 when it names another label than NS_NAME_LABEL or an
 * unknown operator (why says which). */
static int selects_namespace(const cJSON *sel, const char *ns, char *why, size_t whylen)
{
	const cJSON *kv, *ex;
	cJSON_ArrayForEach(kv, jobj(sel, "matchLabels"))
	{
		if (strcmp(kv->string, NS_NAME_LABEL)) {
			snprintf(why, whylen, "its namespaceSelector uses the label %.100s, which the controller cannot "
					      "judge (only " NS_NAME_LABEL ")",
				 kv->string);
			return -1;
		}
		if (!cJSON_IsString(kv) || strcmp(kv->valuestring, ns))
			return 0;
	}
	cJSON_ArrayForEach(ex, jobj(sel, "matchExpressions"))
	{
		const char *key = jstr(ex, "key"), *op = jstr(ex, "operator");
		if (!key || strcmp(key, NS_NAME_LABEL)) {
			snprintf(why, whylen, "its namespaceSelector uses the label %.100s, which the controller cannot "
					      "judge (only " NS_NAME_LABEL ")",
				 key ? key : "?");
			return -1;
		}
		int in = 0;
		const cJSON *v;
		cJSON_ArrayForEach(v, jobj(ex, "values")) in |= cJSON_IsString(v) && !strcmp(v->valuestring, ns);
		if (op && !strcmp(op, "In") && !in)
			return 0;
		if (op && !strcmp(op, "NotIn") && in)
			return 0;
		if (op && !strcmp(op, "DoesNotExist"))
			return 0;
		if (!op || (strcmp(op, "In") && strcmp(op, "NotIn") && strcmp(op, "Exists") && strcmp(op, "DoesNotExist"))) {
			snprintf(why, whylen, "its namespaceSelector has an operator the controller does not know");
			return -1;
		}
	}
	return 1;
}

int sbx_inforce_eval(const cJSON *mwc, const char *webhook, const char *resource, const char *operation,
		     const char *ns, time_t *since, char *why, size_t whylen)
{
	*since = 0;
	if (!mwc) {
		snprintf(why, whylen, "the MutatingWebhookConfiguration is not installed");
		return 0;
	}
	const char *name = meta_str(mwc, "name");
	if (!name)
		name = "?";
	if (meta_str(mwc, "deletionTimestamp")) {
		snprintf(why, whylen, "the MutatingWebhookConfiguration %.64s is being deleted", name);
		return 0;
	}
	const cJSON *hook = NULL, *h;
	cJSON_ArrayForEach(h, jobj(mwc, "webhooks"))
	{
		const char *hn = jstr(h, "name");
		if (hn && !strcmp(hn, webhook))
			hook = h;
	}
	if (!hook) {
		snprintf(why, whylen, "the MutatingWebhookConfiguration %.64s has no webhook %s", name, webhook);
		return 0;
	}
	const char *fp = jstr(hook, "failurePolicy");
	if (fp && strcmp(fp, "Fail")) {
		snprintf(why, whylen, "webhook %s fails open (failurePolicy %.16s)", webhook, fp);
		return 0;
	}
	if (!rules_cover(hook, resource, operation)) {
		snprintf(why, whylen, "webhook %s is not sent %s of %s.sandbox.dev/v1alpha1", webhook, operation, resource);
		return 0;
	}
	const cJSON *os = jobj(hook, "objectSelector");
	if (cJSON_GetArraySize(jobj(os, "matchLabels")) || cJSON_GetArraySize(jobj(os, "matchExpressions"))) {
		snprintf(why, whylen, "webhook %s has an objectSelector (labels are the tenant's to set)", webhook);
		return 0;
	}
	const cJSON *mc;
	cJSON_ArrayForEach(mc, jobj(hook, "matchConditions"))
	{
		if (!never_skips(jstr(mc, "expression"), operation)) {
			snprintf(why, whylen, "webhook %s has a matchCondition (%.64s) that may skip %s", webhook,
				 jstr(mc, "name") ? jstr(mc, "name") : "?",
				 !strcmp(operation, "UPDATE") ? "an update" : "a create");
			return 0;
		}
	}
	char sel_why[256] = "";
	int sel = selects_namespace(jobj(hook, "namespaceSelector"), ns, sel_why, sizeof sel_why);
	if (sel < 0) {
		snprintf(why, whylen, "webhook %s: %s", webhook, sel_why);
		return 0;
	}
	if (!sel) {
		snprintf(why, whylen, "webhook %s does not cover namespace %.64s (its namespaceSelector)", webhook, ns);
		return 0;
	}
	if (ktime_parse_rfc3339(jstr(mwc, SBX_INFORCE_SINCE), since) < 0) {
		snprintf(why, whylen, "the MutatingWebhookConfiguration %.64s does not say when it was made", name);
		return 0;
	}
	return 1;
}

struct sbx_inforce {
	pthread_mutex_t mu;
	time_t floor; /* nothing made before it counts */
};

struct sbx_inforce *sbx_inforce_new(void)
{
	struct sbx_inforce *g = xcalloc(1, sizeof *g);
	pthread_mutex_init(&g->mu, NULL);
	return g;
}

void sbx_inforce_free(struct sbx_inforce *g)
{
	if (!g)
		return;
	pthread_mutex_destroy(&g->mu);
	free(g);
}

void sbx_inforce_observe(struct sbx_inforce *g, const cJSON *old, const cJSON *now, time_t at)
{
	/* An add needs nothing (its creationTimestamp bounds it), a delete
	 * leaves nothing to be in force; an update may change what is enforced
	 * without a field manager saying so (managedFields can be cleared). */
	if (!old || !now || cJSON_Compare(jobj(old, "webhooks"), jobj(now, "webhooks"), 1))
		return;
	pthread_mutex_lock(&g->mu);
	if (at > g->floor)
		g->floor = at;
	pthread_mutex_unlock(&g->mu);
}

int sbx_inforce_check(struct sbx_inforce *g, const cJSON *mwc, const char *webhook, const char *resource,
		      const char *operation, const char *ns, time_t made, char *why, size_t whylen)
{
	time_t since;
	if (!sbx_inforce_eval(mwc, webhook, resource, operation, ns, &since, why, whylen))
		return 0;
	pthread_mutex_lock(&g->mu);
	if (g->floor > since)
		since = g->floor;
	pthread_mutex_unlock(&g->mu);
	if (made < since + SBX_INFORCE_GRACE_S) {
		char a[32], b[32];
		ktime_format_rfc3339(made, a);
		ktime_format_rfc3339(since, b);
		snprintf(why, whylen,
			 "made at %s, before webhook %s was in force as it is now (since %s, plus %d s for the API "
			 "server to load it)",
			 a, webhook, b, SBX_INFORCE_GRACE_S);
		return 0;
	}
	return 1;
}
