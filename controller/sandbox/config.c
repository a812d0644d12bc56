#include "sandbox/config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/buf.h"
#include "base/cidr.h"
#include "base/xmalloc.h"
#include "base/yamljson.h"

/* Longest path accepted for a mount path or the hostPath root. */
#define PATH_MAX_LEN 4096
/* Longest subdirectory name (one path segment). */
#define SEGMENT_MAX 255

static const struct {
	const char *subdir, *path;
} default_mounts[] = {
	{ "workspace", "/workspace" },
	{ "claude", "/home/agent/.claude" },
	{ "codex", "/home/agent/.codex" },
	{ "gemini", "/home/agent/.gemini" },
};

/* Frees n mounts and the array. */
static void free_mounts(struct sbx_mount *m, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(m[i].subdir);
		free(m[i].path);
	}
	free(m);
}

/* Frees n strings and the array. */
static void free_strv(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* Returns a deep copy of n strings (an array of at least one slot). */
static char **dup_strv(char *const *v, size_t n)
{
	char **out = xcalloc(n ? n : 1, sizeof *out);
	for (size_t i = 0; i < n; i++)
		out[i] = xstrdup(v[i]);
	return out;
}

static void free_injected(struct sbx_injected *inj, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(inj[i].name);
		free(inj[i].image);
		free_strv(inj[i].volumes, inj[i].nvolumes);
	}
	free(inj);
}

/* Returns a deep copy of a cJSON tree, or NULL for NULL (aborts on OOM). */
static cJSON *dup_json(const cJSON *j)
{
	if (!j)
		return NULL;
	cJSON *d = cJSON_Duplicate(j, 1);
	if (!d) {
		fprintf(stderr, "sandbox-controller: out of memory copying the config\n");
		abort();
	}
	return d;
}

static void pod_settings_release(struct sbx_pod_settings *p)
{
	free_strv(p->runtime_allowed, p->nruntime_allowed);
	free(p->runtime_default);
	free(p->priority_class);
	cJSON_Delete(p->node_selector);
	cJSON_Delete(p->tolerations);
	cJSON_Delete(p->pull_secrets);
	cJSON_Delete(p->labels);
	cJSON_Delete(p->annotations);
}

void sbx_config_init(struct sbx_config *c)
{
	size_t n = sizeof default_mounts / sizeof default_mounts[0];
	memset(c, 0, sizeof *c);
	c->ws_mode = SBX_WS_PVC;
	c->pvc_name = xstrdup("sandbox-workspaces");
	c->mounts = xcalloc(n, sizeof *c->mounts);
	for (size_t i = 0; i < n; i++) {
		c->mounts[i].subdir = xstrdup(default_mounts[i].subdir);
		c->mounts[i].path = xstrdup(default_mounts[i].path);
	}
	c->nmounts = n;
	c->key_lifetime_s = 86400;
	c->prep_enabled = 1;
	c->pod.run_as_user = c->pod.run_as_group = c->pod.fs_group = SBX_DEFAULT_UID;
	c->net.policies = 1;
	c->net.verify = 1; /* enforcement is verified, not assumed (issue 24 item 4) */
	c->net.verify_interval_s = 600;
}

void sbx_config_release(struct sbx_config *c)
{
	free(c->pvc_name);
	free(c->host_root);
	free(c->prep_image);
	free(c->seal_key_file);
	free_mounts(c->mounts, c->nmounts);
	pod_settings_release(&c->pod);
	free_injected(c->mutations.injected, c->mutations.ninjected);
	free_strv(c->mutations.labels, c->mutations.nlabels);
	free_strv(c->mutations.resource_defaults, c->mutations.nresource_defaults);
	free_strv(c->net.dns, c->net.ndns);
	free_strv(c->net.ingress, c->net.ningress);
	free_strv(c->net.cluster, c->net.ncluster);
	free(c->net.verify_ns);
	memset(c, 0, sizeof *c);
}

/* Fills dst with a deep copy of src (dst's old contents are not freed). */
static void config_copy(struct sbx_config *dst, const struct sbx_config *src)
{
	*dst = *src;
	dst->pvc_name = xstrdup(src->pvc_name);
	dst->host_root = xstrdup(src->host_root);
	dst->prep_image = xstrdup(src->prep_image);
	dst->seal_key_file = xstrdup(src->seal_key_file);
	dst->mounts = xcalloc(src->nmounts ? src->nmounts : 1, sizeof *dst->mounts);
	for (size_t i = 0; i < src->nmounts; i++) {
		dst->mounts[i].subdir = xstrdup(src->mounts[i].subdir);
		dst->mounts[i].path = xstrdup(src->mounts[i].path);
	}
	const struct sbx_pod_settings *sp = &src->pod;
	struct sbx_pod_settings *dp = &dst->pod;
	dp->runtime_allowed = dup_strv(sp->runtime_allowed, sp->nruntime_allowed);
	dp->runtime_default = xstrdup(sp->runtime_default);
	dp->priority_class = xstrdup(sp->priority_class);
	dp->node_selector = dup_json(sp->node_selector);
	dp->tolerations = dup_json(sp->tolerations);
	dp->pull_secrets = dup_json(sp->pull_secrets);
	dp->labels = dup_json(sp->labels);
	dp->annotations = dup_json(sp->annotations);
	const struct sbx_mutations *sm = &src->mutations;
	struct sbx_mutations *dm = &dst->mutations;
	dm->labels = dup_strv(sm->labels, sm->nlabels);
	dm->resource_defaults = dup_strv(sm->resource_defaults, sm->nresource_defaults);
	dst->net.dns = dup_strv(src->net.dns, src->net.ndns);
	dst->net.ingress = dup_strv(src->net.ingress, src->net.ningress);
	dst->net.cluster = dup_strv(src->net.cluster, src->net.ncluster);
	dst->net.verify_ns = xstrdup(src->net.verify_ns);
	dm->injected = xcalloc(sm->ninjected ? sm->ninjected : 1, sizeof *dm->injected);
	for (size_t i = 0; i < sm->ninjected; i++) {
		dm->injected[i] = sm->injected[i];
		dm->injected[i].name = xstrdup(sm->injected[i].name);
		dm->injected[i].image = xstrdup(sm->injected[i].image);
		dm->injected[i].volumes = dup_strv(sm->injected[i].volumes, sm->injected[i].nvolumes);
	}
}

static int cfail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Writes "config: <message>" into err and returns -1. */
static int cfail(char *err, size_t errlen, const char *fmt, ...)
{
	if (errlen) {
		int n = snprintf(err, errlen, "config: ");
		va_list ap;
		va_start(ap, fmt);
		if (n >= 0 && (size_t)n < errlen)
			vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* Fails unless every member name of obj is one of allowed (NULL-terminated);
 * where names the object in the message. */
static int only_keys(const cJSON *obj, const char *where, const char *const *allowed, char *err,
		     size_t errlen)
{
	for (const cJSON *m = obj->child; m; m = m->next) {
		size_t i;
		for (i = 0; allowed[i]; i++)
			if (!strcmp(m->string, allowed[i]))
				break;
		if (!allowed[i])
			return cfail(err, errlen, "unknown key \"%.64s\" in %s", m->string, where);
	}
	return 0;
}

/* Fetches an optional section: *out is NULL when absent or null. */
static int section(const cJSON *root, const char *name, const cJSON **out, char *err, size_t errlen)
{
	const cJSON *s = cJSON_GetObjectItemCaseSensitive(root, name);
	*out = NULL;
	if (!s || cJSON_IsNull(s))
		return 0;
	if (!cJSON_IsObject(s))
		return cfail(err, errlen, "%s must be a mapping", name);
	*out = s;
	return 0;
}

/* Fetches an optional non-empty string field: *out is NULL when absent. */
static int string_field(const cJSON *obj, const char *where, const char *name, const char **out,
			char *err, size_t errlen)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
	*out = NULL;
	if (!v)
		return 0;
	if (!cJSON_IsString(v) || !v->valuestring || !v->valuestring[0])
		return cfail(err, errlen, "%s.%s must be a non-empty string", where, name);
	*out = v->valuestring;
	return 0;
}

/* Returns 1 iff p is an absolute path with no empty, "." or ".." segment, no
 * trailing slash, no control character, and is not "/" itself. */
static int clean_abs_path(const char *p)
{
	size_t n = strlen(p);
	if (n < 2 || n > PATH_MAX_LEN || p[0] != '/' || p[n - 1] == '/')
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)p[i] < 0x20 || p[i] == 0x7F)
			return 0;
	for (const char *s = p + 1;;) {
		const char *e = strchr(s, '/');
		size_t len = e ? (size_t)(e - s) : strlen(s);
		if (len == 0 || (len == 1 && s[0] == '.') ||
		    (len == 2 && s[0] == '.' && s[1] == '.'))
			return 0;
		if (!e)
			return 1;
		s = e + 1;
	}
}

/* The set is narrow on purpose: the segment is joined under <owner>/ to form
 * a subPath or a host path. */
int sbx_safe_segment(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > SEGMENT_MAX || !strcmp(s, ".") || !strcmp(s, ".."))
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

/* Returns 1 iff s is a DNS-1123 subdomain (a valid PVC name). */
static int dns_subdomain(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 253)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		int alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
		if (!alnum && ((c != '-' && c != '.') || i == 0 || i == n - 1))
			return 0;
	}
	return 1;
}

int sbx_parse_duration(const char *s, long *secs)
{
	long total = 0;
	if (!s || !*s)
		return -1;
	if (strspn(s, "0123456789") == strlen(s)) {
		errno = 0;
		char *end;
		long v = strtol(s, &end, 10);
		if (errno || v <= 0 || v > SBX_KEY_LIFETIME_MAX)
			return -1;
		*secs = v;
		return 0;
	}
	while (*s) {
		long v = 0;
		if (*s < '0' || *s > '9')
			return -1;
		for (; *s >= '0' && *s <= '9'; s++) {
			v = v * 10 + (*s - '0');
			if (v > SBX_KEY_LIFETIME_MAX)
				return -1;
		}
		long unit;
		switch (*s++) {
		case 'h':
			unit = 3600;
			break;
		case 'm':
			unit = 60;
			break;
		case 's':
			unit = 1;
			break;
		default:
			return -1;
		}
		if (v > (SBX_KEY_LIFETIME_MAX - total) / unit)
			return -1;
		total += v * unit;
	}
	if (total <= 0)
		return -1;
	*secs = total;
	return 0;
}

/* Replaces t's mounts with the list in mounts when every entry is valid;
 * on error t is unchanged. */
static int apply_mounts(struct sbx_config *t, const cJSON *mounts, char *err, size_t errlen)
{
	static const char *const keys[] = { "subdir", "mountPath", NULL };
	if (!cJSON_IsArray(mounts))
		return cfail(err, errlen, "workspace.mounts must be a list of {subdir, mountPath}");
	int n = cJSON_GetArraySize(mounts);
	if (n < 1 || n > SBX_CONFIG_MAX_MOUNTS)
		return cfail(err, errlen, "workspace.mounts must have 1..%d entries",
			     SBX_CONFIG_MAX_MOUNTS);
	struct sbx_mount *m = xcalloc((size_t)n, sizeof *m);
	size_t got = 0;
	char where[64];
	int rc = -1;
	for (const cJSON *e = mounts->child; e; e = e->next, got++) {
		const char *sub, *path;
		snprintf(where, sizeof where, "workspace.mounts[%zu]", got);
		if (!cJSON_IsObject(e)) {
			cfail(err, errlen, "%s must be a mapping with subdir and mountPath", where);
			goto out;
		}
		if (only_keys(e, where, keys, err, errlen) < 0 ||
		    string_field(e, where, "subdir", &sub, err, errlen) < 0 ||
		    string_field(e, where, "mountPath", &path, err, errlen) < 0)
			goto out;
		if (!sub || !path) {
			cfail(err, errlen, "%s needs both subdir and mountPath", where);
			goto out;
		}
		if (!sbx_safe_segment(sub)) {
			cfail(err, errlen,
			      "%s.subdir \"%.64s\" must be one path segment of [A-Za-z0-9._-], "
			      "not \".\" or \"..\"",
			      where, sub);
			goto out;
		}
		if (!clean_abs_path(path)) {
			cfail(
			    err, errlen,
			    "%s.mountPath \"%.64s\" must be an absolute path without \".\", \"..\" "
			    "or empty segments",
			    where, path);
			goto out;
		}
		for (size_t j = 0; j < got; j++) {
			if (!strcmp(m[j].path, path)) {
				cfail(err, errlen, "%s.mountPath \"%.64s\" is used twice", where,
				      path);
				goto out;
			}
		}
		m[got].subdir = xstrdup(sub);
		m[got].path = xstrdup(path);
	}
	free_mounts(t->mounts, t->nmounts);
	t->mounts = m;
	t->nmounts = got;
	m = NULL;
	rc = 0;
out:
	if (m)
		free_mounts(m, got);
	return rc;
}

static int image_pattern_ok(const char *s);

/* Applies workspace.prepare to t. */
static int apply_prepare(struct sbx_config *t, const cJSON *prep, char *err, size_t errlen)
{
	static const char *const keys[] = { "enabled", "image", NULL };
	const char *image;
	if (!cJSON_IsObject(prep))
		return cfail(err, errlen, "workspace.prepare must be a mapping {enabled, image}");
	if (only_keys(prep, "workspace.prepare", keys, err, errlen) < 0 ||
	    string_field(prep, "workspace.prepare", "image", &image, err, errlen) < 0)
		return -1;
	const cJSON *en = cJSON_GetObjectItemCaseSensitive(prep, "enabled");
	if (en && !cJSON_IsBool(en))
		return cfail(err, errlen, "workspace.prepare.enabled must be true or false");
	if (image && (!image_pattern_ok(image) || strchr(image, '*')))
		return cfail(err, errlen, "workspace.prepare.image \"%.64s\" is not an image reference", image);
	if (en)
		t->prep_enabled = cJSON_IsTrue(en);
	if (image) {
		free(t->prep_image);
		t->prep_image = xstrdup(image);
	}
	return 0;
}

/* Applies the workspace section to t. */
static int apply_workspace(struct sbx_config *t, const cJSON *ws, char *err, size_t errlen)
{
	static const char *const keys[] = { "mode", "pvcName", "hostPathRoot", "mounts", "prepare", NULL };
	const char *mode, *pvc, *root;
	if (only_keys(ws, "workspace", keys, err, errlen) < 0 ||
	    string_field(ws, "workspace", "mode", &mode, err, errlen) < 0 ||
	    string_field(ws, "workspace", "pvcName", &pvc, err, errlen) < 0 ||
	    string_field(ws, "workspace", "hostPathRoot", &root, err, errlen) < 0)
		return -1;
	if (mode) {
		if (!strcmp(mode, "pvc"))
			t->ws_mode = SBX_WS_PVC;
		else if (!strcmp(mode, "hostPath"))
			t->ws_mode = SBX_WS_HOSTPATH;
		else
			return cfail(err, errlen,
				     "workspace.mode \"%.64s\" must be pvc or hostPath", mode);
	}
	if (pvc) {
		if (!dns_subdomain(pvc))
			return cfail(err, errlen,
				     "workspace.pvcName \"%.64s\" is not a valid PVC name", pvc);
		free(t->pvc_name);
		t->pvc_name = xstrdup(pvc);
	}
	if (root) {
		if (!clean_abs_path(root))
			return cfail(
			    err, errlen,
			    "workspace.hostPathRoot \"%.64s\" must be an absolute path without "
			    "\".\", \"..\" or empty segments",
			    root);
		free(t->host_root);
		t->host_root = xstrdup(root);
	}
	const cJSON *mounts = cJSON_GetObjectItemCaseSensitive(ws, "mounts");
	if (mounts && apply_mounts(t, mounts, err, errlen) < 0)
		return -1;
	const cJSON *prep = cJSON_GetObjectItemCaseSensitive(ws, "prepare");
	if (prep && apply_prepare(t, prep, err, errlen) < 0)
		return -1;
	return 0;
}

/* Applies the idempotency section to t. */
static int apply_idempotency(struct sbx_config *t, const cJSON *idem, char *err, size_t errlen)
{
	static const char *const keys[] = { "keyLifetime", NULL };
	if (only_keys(idem, "idempotency", keys, err, errlen) < 0)
		return -1;
	const cJSON *lt = cJSON_GetObjectItemCaseSensitive(idem, "keyLifetime");
	if (!lt)
		return 0;
	long secs;
	if (cJSON_IsNumber(lt)) {
		double d = lt->valuedouble;
		if (!isfinite(d) || d != floor(d) || d <= 0 || d > (double)SBX_KEY_LIFETIME_MAX)
			return cfail(err, errlen,
				     "idempotency.keyLifetime must be a positive whole number of "
				     "seconds up to %ld",
				     SBX_KEY_LIFETIME_MAX);
		secs = (long)d;
	} else if (!cJSON_IsString(lt) || sbx_parse_duration(lt->valuestring, &secs) < 0) {
		return cfail(
		    err, errlen,
		    "idempotency.keyLifetime must be a positive duration such as 24h, 90m, "
		    "3600s or a number of seconds (at most %ld s)",
		    SBX_KEY_LIFETIME_MAX);
	}
	t->key_lifetime_s = secs;
	return 0;
}

/* A quota limit: a whole number 0..10000 (YAML gives a number or its text). */
static int quota_limit(const cJSON *v, const char *name, int *has, long *out, char *err, size_t errlen)
{
	if (!v)
		return 0;
	char *end = NULL;
	double d = cJSON_IsNumber(v) ? v->valuedouble : cJSON_IsString(v) ? strtod(v->valuestring, &end)
									  : -1;
	if ((end && (*end || end == v->valuestring)) || !isfinite(d) || d != floor(d) || d < 0 || d > 10000)
		return cfail(err, errlen, "quota.%s must be a whole number from 0 to 10000", name);
	*has = 1;
	*out = (long)d;
	return 0;
}

/* Applies the quota section (the default per-owner quota) to t. */
static int apply_quota(struct sbx_config *t, const cJSON *q, char *err, size_t errlen)
{
	static const char *const keys[] = { "maxActive", "maxWarm", "mode", NULL };
	const char *mode;
	struct sbx_quota_default d = { 0 };
	if (only_keys(q, "quota", keys, err, errlen) < 0 || string_field(q, "quota", "mode", &mode, err, errlen) < 0 ||
	    quota_limit(cJSON_GetObjectItemCaseSensitive(q, "maxActive"), "maxActive", &d.has_active, &d.max_active,
			err, errlen) < 0 ||
	    quota_limit(cJSON_GetObjectItemCaseSensitive(q, "maxWarm"), "maxWarm", &d.has_warm, &d.max_warm, err,
			errlen) < 0)
		return -1;
	if (mode && strcmp(mode, "Queue") && strcmp(mode, "Reject"))
		return cfail(err, errlen, "quota.mode must be Queue or Reject");
	d.reject = mode && !strcmp(mode, "Reject");
	t->quota = d;
	return 0;
}

/* Applies the seal section to t. */
static int apply_seal(struct sbx_config *t, const cJSON *seal, char *err, size_t errlen)
{
	static const char *const keys[] = { "keyFile", NULL };
	const char *file;
	if (only_keys(seal, "seal", keys, err, errlen) < 0 ||
	    string_field(seal, "seal", "keyFile", &file, err, errlen) < 0)
		return -1;
	if (file) {
		free(t->seal_key_file);
		t->seal_key_file = xstrdup(file);
	}
	return 0;
}

/* ---- pod settings and declared mutations ---- */

/* Returns 1 iff s is 0..63 characters of [A-Za-z0-9._-] beginning and ending
 * alphanumeric (a label value; empty allowed when empty_ok). */
static int label_name(const char *s, int empty_ok)
{
	size_t n = strlen(s);
	if (n == 0)
		return empty_ok;
	if (n > 63)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		int alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
		if (!alnum && ((c != '-' && c != '_' && c != '.') || i == 0 || i == n - 1))
			return 0;
	}
	return 1;
}

/* Returns 1 iff k is a Kubernetes qualified name: [dns-subdomain/]name. */
static int qualified_name(const char *k)
{
	const char *slash = strchr(k, '/');
	if (!slash)
		return label_name(k, 0);
	if (strchr(slash + 1, '/') || slash == k || (size_t)(slash - k) > 253)
		return 0;
	char prefix[254];
	memcpy(prefix, k, (size_t)(slash - k));
	prefix[slash - k] = '\0';
	return dns_subdomain(prefix) && label_name(slash + 1, 0);
}

/* Returns 1 iff key is reserved to the controller: under sandbox.dev/ (or a
 * subdomain of it), or, for labels, one of the fixed labels it sets. */
static int reserved_key(const char *key, int is_label)
{
	const char *slash = strchr(key, '/');
	if (slash) {
		size_t pl = (size_t)(slash - key);
		static const char dom[] = "sandbox.dev";
		size_t dl = sizeof dom - 1;
		if ((pl == dl && !strncmp(key, dom, dl)) ||
		    (pl > dl && key[pl - dl - 1] == '.' && !strncmp(key + pl - dl, dom, dl)))
			return 1;
	}
	return is_label && (!strcmp(key, "app.kubernetes.io/managed-by") ||
			    !strcmp(key, "app.kubernetes.io/name"));
}

/* Validates a map of strings (labels, annotations or a node selector) and
 * stores a copy in *out (replacing it). what names it in messages. */
static int apply_string_map(cJSON **out, const cJSON *m, const char *what, int is_label,
			    int check_reserved, char *err, size_t errlen)
{
	if (!cJSON_IsObject(m))
		return cfail(err, errlen, "%s must be a mapping of strings", what);
	if (cJSON_GetArraySize(m) > SBX_CONFIG_MAX_ITEMS)
		return cfail(err, errlen, "%s has more than %d entries", what, SBX_CONFIG_MAX_ITEMS);
	for (const cJSON *e = m->child; e; e = e->next) {
		if (!qualified_name(e->string))
			return cfail(err, errlen, "%s key \"%.64s\" is not a valid qualified name",
				     what, e->string);
		if (check_reserved && reserved_key(e->string, is_label))
			return cfail(err, errlen,
				     "%s key \"%.64s\" is reserved to the controller (sandbox.dev/ "
				     "and the fixed labels cannot be set by configuration)",
				     what, e->string);
		if (!cJSON_IsString(e))
			return cfail(err, errlen, "%s.%.64s must be a string", what, e->string);
		if (is_label ? !label_name(e->valuestring, 1)
			     : strlen(e->valuestring) > SBX_CONFIG_MAX_VALUE)
			return cfail(err, errlen, "%s.%.64s has an invalid value", what, e->string);
	}
	cJSON_Delete(*out);
	*out = cJSON_GetArraySize(m) ? dup_json(m) : NULL;
	return 0;
}

/* Validates a list of strings, each accepted by ok(), and stores a copy in
 * (*out, *n), replacing the old list. */
static int apply_string_list(char ***out, size_t *n, const cJSON *l, const char *what,
			     int (*ok)(const char *), char *err, size_t errlen)
{
	if (!cJSON_IsArray(l))
		return cfail(err, errlen, "%s must be a list of strings", what);
	int cnt = cJSON_GetArraySize(l);
	if (cnt > SBX_CONFIG_MAX_ITEMS)
		return cfail(err, errlen, "%s has more than %d entries", what, SBX_CONFIG_MAX_ITEMS);
	for (const cJSON *e = l->child; e; e = e->next)
		if (!cJSON_IsString(e) || !ok(e->valuestring))
			return cfail(err, errlen, "%s has an invalid entry \"%.64s\"", what,
				     cJSON_IsString(e) ? e->valuestring : "(not a string)");
	char **v = xcalloc(cnt ? (size_t)cnt : 1, sizeof *v);
	size_t i = 0;
	for (const cJSON *e = l->child; e; e = e->next)
		v[i++] = xstrdup(e->valuestring);
	free_strv(*out, *n);
	*out = v;
	*n = i;
	return 0;
}

/* Fetches an optional id (uid/gid) 1..2147483647: root is never configurable. */
static int id_field(const cJSON *obj, const char *name, long *out, char *err, size_t errlen)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
	if (!v)
		return 0;
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble != floor(v->valuedouble) ||
	    v->valuedouble < 1 || v->valuedouble > 2147483647.0)
		return cfail(err, errlen, "pod.%s must be a whole number 1..2147483647 (never 0: root)",
			     name);
	*out = (long)v->valuedouble;
	return 0;
}

static int dns_subdomain_ok(const char *s)
{
	return dns_subdomain(s);
}

static int qualified_name_ok(const char *s)
{
	return qualified_name(s);
}

/* Validates pod.tolerations (a list of core/v1 Tolerations). */
static int apply_tolerations(struct sbx_pod_settings *p, const cJSON *l, char *err, size_t errlen)
{
	static const char *const keys[] = { "key", "operator", "value", "effect",
					    "tolerationSeconds", NULL };
	if (!cJSON_IsArray(l) || cJSON_GetArraySize(l) > SBX_CONFIG_MAX_ITEMS)
		return cfail(err, errlen, "pod.tolerations must be a list of at most %d tolerations",
			     SBX_CONFIG_MAX_ITEMS);
	for (const cJSON *t = l->child; t; t = t->next) {
		const char *key, *op, *val, *eff;
		if (!cJSON_IsObject(t))
			return cfail(err, errlen, "pod.tolerations[] must be a mapping");
		if (only_keys(t, "pod.tolerations[]", keys, err, errlen) < 0 ||
		    string_field(t, "pod.tolerations[]", "operator", &op, err, errlen) < 0 ||
		    string_field(t, "pod.tolerations[]", "effect", &eff, err, errlen) < 0)
			return -1;
		const cJSON *k = cJSON_GetObjectItemCaseSensitive(t, "key");
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(t, "value");
		const cJSON *secs = cJSON_GetObjectItemCaseSensitive(t, "tolerationSeconds");
		key = cJSON_IsString(k) ? k->valuestring : NULL;
		val = cJSON_IsString(v) ? v->valuestring : NULL;
		if ((k && (!key || (key[0] && !qualified_name(key)))) || (v && !val) ||
		    (val && !label_name(val, 1)))
			return cfail(err, errlen, "pod.tolerations[]: key/value invalid");
		if (op && strcmp(op, "Exists") && strcmp(op, "Equal"))
			return cfail(err, errlen, "pod.tolerations[].operator must be Exists or Equal");
		if (op && !strcmp(op, "Exists") && val && val[0])
			return cfail(err, errlen, "pod.tolerations[]: operator Exists takes no value");
		if (eff && strcmp(eff, "NoSchedule") && strcmp(eff, "PreferNoSchedule") &&
		    strcmp(eff, "NoExecute"))
			return cfail(err, errlen,
				     "pod.tolerations[].effect must be NoSchedule, PreferNoSchedule "
				     "or NoExecute");
		if (secs && (!cJSON_IsNumber(secs) || secs->valuedouble != floor(secs->valuedouble)))
			return cfail(err, errlen, "pod.tolerations[].tolerationSeconds must be whole");
	}
	cJSON_Delete(p->tolerations);
	p->tolerations = cJSON_GetArraySize(l) ? dup_json(l) : NULL;
	return 0;
}

/* Validates pod.imagePullSecrets (names) and stores them as [{name}]. */
static int apply_pull_secrets(struct sbx_pod_settings *p, const cJSON *l, char *err, size_t errlen)
{
	char **names = NULL;
	size_t n = 0;
	if (apply_string_list(&names, &n, l, "pod.imagePullSecrets", dns_subdomain_ok, err,
			      errlen) < 0)
		return -1;
	cJSON *arr = n ? cJSON_CreateArray() : NULL;
	for (size_t i = 0; i < n; i++) {
		cJSON *o = cJSON_CreateObject();
		if (!arr || !o || !cJSON_AddStringToObject(o, "name", names[i]) ||
		    !cJSON_AddItemToArray(arr, o)) {
			fprintf(stderr, "sandbox-controller: out of memory reading the config\n");
			abort();
		}
	}
	free_strv(names, n);
	cJSON_Delete(p->pull_secrets);
	p->pull_secrets = arr;
	return 0;
}

/* Applies pod.runtimeClasses. */
static int apply_runtime(struct sbx_pod_settings *p, const cJSON *rc, char *err, size_t errlen)
{
	static const char *const keys[] = { "allowed", "default", NULL };
	const char *def;
	if (!cJSON_IsObject(rc))
		return cfail(err, errlen, "pod.runtimeClasses must be a mapping {allowed, default}");
	if (only_keys(rc, "pod.runtimeClasses", keys, err, errlen) < 0 ||
	    string_field(rc, "pod.runtimeClasses", "default", &def, err, errlen) < 0)
		return -1;
	const cJSON *allowed = cJSON_GetObjectItemCaseSensitive(rc, "allowed");
	if (allowed && apply_string_list(&p->runtime_allowed, &p->nruntime_allowed, allowed,
					 "pod.runtimeClasses.allowed", dns_subdomain_ok, err,
					 errlen) < 0)
		return -1;
	if (def) {
		free(p->runtime_default);
		p->runtime_default = xstrdup(def);
	}
	return 0;
}

/* Applies the pod section to t. */
static int apply_pod(struct sbx_config *t, const cJSON *pod, char *err, size_t errlen)
{
	static const char *const keys[] = { "runAsUser", "runAsGroup", "fsGroup",
					    "runtimeClasses", "nodeSelector", "tolerations",
					    "priorityClassName", "imagePullSecrets", "labels",
					    "annotations", NULL };
	struct sbx_pod_settings *p = &t->pod;
	const char *prio;
	if (only_keys(pod, "pod", keys, err, errlen) < 0 ||
	    id_field(pod, "runAsUser", &p->run_as_user, err, errlen) < 0 ||
	    id_field(pod, "runAsGroup", &p->run_as_group, err, errlen) < 0 ||
	    id_field(pod, "fsGroup", &p->fs_group, err, errlen) < 0 ||
	    string_field(pod, "pod", "priorityClassName", &prio, err, errlen) < 0)
		return -1;
	if (prio) {
		if (!dns_subdomain(prio))
			return cfail(err, errlen, "pod.priorityClassName \"%.64s\" is not a valid name",
				     prio);
		free(p->priority_class);
		p->priority_class = xstrdup(prio);
	}
	const cJSON *v;
	if ((v = cJSON_GetObjectItemCaseSensitive(pod, "runtimeClasses")) &&
	    apply_runtime(p, v, err, errlen) < 0)
		return -1;
	if ((v = cJSON_GetObjectItemCaseSensitive(pod, "nodeSelector")) &&
	    apply_string_map(&p->node_selector, v, "pod.nodeSelector", 1, 0, err, errlen) < 0)
		return -1;
	if ((v = cJSON_GetObjectItemCaseSensitive(pod, "labels")) &&
	    apply_string_map(&p->labels, v, "pod.labels", 1, 1, err, errlen) < 0)
		return -1;
	if ((v = cJSON_GetObjectItemCaseSensitive(pod, "annotations")) &&
	    apply_string_map(&p->annotations, v, "pod.annotations", 0, 1, err, errlen) < 0)
		return -1;
	if ((v = cJSON_GetObjectItemCaseSensitive(pod, "tolerations")) &&
	    apply_tolerations(p, v, err, errlen) < 0)
		return -1;
	if ((v = cJSON_GetObjectItemCaseSensitive(pod, "imagePullSecrets")) &&
	    apply_pull_secrets(p, v, err, errlen) < 0)
		return -1;
	return 0;
}

/* Returns 1 iff s is a usable image pattern: printable, no spaces, at most
 * SBX_CONFIG_MAX_VALUE bytes, and '*' only as the last character. */
static int image_pattern_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > SBX_CONFIG_MAX_VALUE || (n == 1 && s[0] == '*'))
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= 0x20 || s[i] == 0x7F || (s[i] == '*' && i != n - 1))
			return 0;
	return 1;
}

/* A volume name an injection may declare: a DNS label that is not one of
 * the workspace volumes the builder names ("workspaces", "ws-<n>"). */
static int injected_volume_ok(const char *s)
{
	return label_name(s, 0) && strlen(s) <= 63 && strcmp(s, "workspaces") &&
	       strncmp(s, "ws-", 3) != 0 && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-") == strlen(s);
}

/* Applies adoption.allowedMutations.injectedContainers. */
static int apply_injected(struct sbx_mutations *m, const cJSON *l, char *err, size_t errlen)
{
	static const char *const keys[] = { "name", "image", "init", "volumes", NULL };
	const char *where = "adoption.allowedMutations.injectedContainers[]";
	if (!cJSON_IsArray(l) || cJSON_GetArraySize(l) > SBX_CONFIG_MAX_ITEMS)
		return cfail(err, errlen, "%s: a list of at most %d entries", where,
			     SBX_CONFIG_MAX_ITEMS);
	size_t n = (size_t)cJSON_GetArraySize(l), got = 0;
	struct sbx_injected *inj = xcalloc(n ? n : 1, sizeof *inj);
	int rc = -1;
	for (const cJSON *e = l->child; e; e = e->next) {
		const char *name, *image;
		if (!cJSON_IsObject(e)) {
			cfail(err, errlen, "%s must be a mapping {name, image, init, volumes}", where);
			goto out;
		}
		if (only_keys(e, where, keys, err, errlen) < 0 ||
		    string_field(e, where, "name", &name, err, errlen) < 0 ||
		    string_field(e, where, "image", &image, err, errlen) < 0)
			goto out;
		if (!name || !image || !label_name(name, 0) || !strcmp(name, "sandbox") ||
		    !image_pattern_ok(image)) {
			cfail(err, errlen,
			      "%s needs a container name (not \"sandbox\") and an image (exact, or a "
			      "prefix ending in \"*\")",
			      where);
			goto out;
		}
		const cJSON *init = cJSON_GetObjectItemCaseSensitive(e, "init");
		if (init && !cJSON_IsBool(init)) {
			cfail(err, errlen, "%s.init must be true or false", where);
			goto out;
		}
		struct sbx_injected *x = &inj[got++];
		x->name = xstrdup(name);
		x->image = xstrdup(image);
		x->init = cJSON_IsTrue(init);
		const cJSON *vols = cJSON_GetObjectItemCaseSensitive(e, "volumes");
		if (vols && apply_string_list(&x->volumes, &x->nvolumes, vols,
					      "injectedContainers[].volumes (not workspaces or ws-<n>)",
					      injected_volume_ok, err, errlen) < 0)
			goto out;
	}
	free_injected(m->injected, m->ninjected);
	m->injected = inj;
	m->ninjected = got;
	inj = NULL;
	rc = 0;
out:
	if (inj)
		free_injected(inj, got);
	return rc;
}

/* Returns 1 iff s is a resource name a container's limits and requests may
 * carry (Kubernetes' rule): a qualified name, and without a domain prefix
 * one of the standard container resources, so that a typo such as
 * "ephemeral_storage" is refused rather than declaring nothing. */
static int resource_name_ok(const char *s)
{
	static const char *const standard[] = { "cpu", "memory", "ephemeral-storage", NULL };
	if (!qualified_name(s))
		return 0;
	if (strchr(s, '/'))
		return 1;
	for (const char *const *n = standard; *n; n++)
		if (!strcmp(s, *n))
			return 1;
	return !strncmp(s, "hugepages-", 10) && s[10];
}

/* Applies adoption.allowedMutations.resourceDefaults (what a LimitRange may
 * fill in): resource names, at most SBX_CONFIG_MAX_ITEMS. */
static int apply_resource_defaults(struct sbx_mutations *m, const cJSON *l, char *err, size_t errlen)
{
	const char *what = "adoption.allowedMutations.resourceDefaults";
	const cJSON *e;
	/* A clearer message than apply_string_list's for a wrong name. */
	if (cJSON_IsArray(l) && cJSON_GetArraySize(l) <= SBX_CONFIG_MAX_ITEMS) {
		cJSON_ArrayForEach(e, l)
		{
			if (cJSON_IsString(e) && !resource_name_ok(e->valuestring))
				return cfail(err, errlen,
					     "%s: \"%.64s\" is not a resource name (cpu, memory, ephemeral-storage, "
					     "hugepages-<size>, or a name with a domain prefix such as example.com/gpu)",
					     what, e->valuestring);
		}
	}
	return apply_string_list(&m->resource_defaults, &m->nresource_defaults, l, what, resource_name_ok, err,
				 errlen);
}

/* Applies the adoption section to t. */
static int apply_adoption(struct sbx_config *t, const cJSON *ad, char *err, size_t errlen)
{
	static const char *const keys[] = { "allowedMutations", NULL };
	static const char *const mkeys[] = { "imageDigestPinning", "injectedContainers", "labels",
					     "resourceDefaults", NULL };
	const cJSON *am;
	if (only_keys(ad, "adoption", keys, err, errlen) < 0 ||
	    section(ad, "allowedMutations", &am, err, errlen) < 0)
		return -1;
	if (!am)
		return 0;
	if (only_keys(am, "adoption.allowedMutations", mkeys, err, errlen) < 0)
		return -1;
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(am, "imageDigestPinning");
	if (v) {
		if (!cJSON_IsBool(v))
			return cfail(err, errlen,
				     "adoption.allowedMutations.imageDigestPinning must be true or false");
		t->mutations.digest_pinning = cJSON_IsTrue(v);
	}
	if ((v = cJSON_GetObjectItemCaseSensitive(am, "injectedContainers")) &&
	    apply_injected(&t->mutations, v, err, errlen) < 0)
		return -1;
	if ((v = cJSON_GetObjectItemCaseSensitive(am, "labels")) &&
	    apply_string_list(&t->mutations.labels, &t->mutations.nlabels, v,
			      "adoption.allowedMutations.labels", qualified_name_ok, err, errlen) < 0)
		return -1;
	if ((v = cJSON_GetObjectItemCaseSensitive(am, "resourceDefaults")) &&
	    apply_resource_defaults(&t->mutations, v, err, errlen) < 0)
		return -1;
	return 0;
}

int sbx_runtime_allowed(const struct sbx_config *c, const char *name)
{
	for (size_t i = 0; name && i < c->pod.nruntime_allowed; i++)
		if (!strcmp(c->pod.runtime_allowed[i], name))
			return 1;
	return 0;
}

int sbx_image_pattern_match(const char *pattern, const char *image)
{
	if (!pattern || !image)
		return 0;
	size_t n = strlen(pattern);
	if (n && pattern[n - 1] == '*')
		return strncmp(pattern, image, n - 1) == 0;
	return strcmp(pattern, image) == 0;
}

/* The network section (sandbox/netfloor.h). */
static int apply_network(struct sbx_config *t, const cJSON *n, char *err, size_t errlen)
{
	static const char *const keys[] = { "policies", "dns", "ingressFrom", "clusterCIDRs", "verify",
					    "verifyNamespace", "verifyInterval", "requireEnforced", NULL };
	static const char *const flags[] = { "policies", "verify", "requireEnforced" };
	int *const flag_out[] = { &t->net.policies, &t->net.verify, &t->net.require_enforced };
	if (only_keys(n, "network", keys, err, errlen) < 0)
		return -1;
	const cJSON *v;
	for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
		v = cJSON_GetObjectItemCaseSensitive(n, flags[i]);
		if (v && !cJSON_IsBool(v))
			return cfail(err, errlen, "network.%s must be true or false", flags[i]);
		if (v)
			*flag_out[i] = cJSON_IsTrue(v);
	}
	const char *ns, *iv;
	if (string_field(n, "network", "verifyNamespace", &ns, err, errlen) < 0 ||
	    string_field(n, "network", "verifyInterval", &iv, err, errlen) < 0)
		return -1;
	if (ns && (strlen(ns) > 63 || strchr(ns, '.') || !dns_subdomain(ns)))
		return cfail(err, errlen, "network.verifyNamespace must be a namespace name");
	long secs = 0;
	if (iv && (sbx_parse_duration(iv, &secs) < 0 || secs < 10))
		return cfail(err, errlen, "network.verifyInterval must be a duration of at least 10s");
	if (ns) {
		free(t->net.verify_ns);
		t->net.verify_ns = xstrdup(ns);
	}
	if (iv)
		t->net.verify_interval_s = secs;
	if ((v = cJSON_GetObjectItemCaseSensitive(n, "dns")) &&
	    apply_string_list(&t->net.dns, &t->net.ndns, v, "network.dns", sbx_cidr_ok, err, errlen) < 0)
		return -1;
	if ((v = cJSON_GetObjectItemCaseSensitive(n, "ingressFrom")) &&
	    apply_string_list(&t->net.ingress, &t->net.ningress, v, "network.ingressFrom", sbx_cidr_ok, err,
			      errlen) < 0)
		return -1;
	if ((v = cJSON_GetObjectItemCaseSensitive(n, "clusterCIDRs")) &&
	    apply_string_list(&t->net.cluster, &t->net.ncluster, v, "network.clusterCIDRs", sbx_cidr_ok, err,
			      errlen) < 0)
		return -1;
	return 0;
}

/* The admission section: how the webhook asks about owners and profiles. */
static int apply_admission(struct sbx_config *t, const cJSON *a, char *err, size_t errlen)
{
	static const char *const keys[] = { "askEveryNameFirst", NULL };
	if (only_keys(a, "admission", keys, err, errlen) < 0)
		return -1;
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(a, "askEveryNameFirst");
	if (v && !cJSON_IsBool(v))
		return cfail(err, errlen, "admission.askEveryNameFirst must be true or false");
	if (v)
		t->ask_every_name_first = cJSON_IsTrue(v);
	return 0;
}

/* Applies the document root to t and checks the result as a whole. */
static int apply(struct sbx_config *t, const cJSON *root, char *err, size_t errlen)
{
	static const char *const keys[] = { "workspace", "idempotency", "seal", "pod", "adoption",
					    "ownerAuthorization", "quota", "network", "admission", NULL };
	const cJSON *ws, *idem, *seal, *pod, *ad, *quota, *net, *adm;
	const char *oa;
	if (!cJSON_IsObject(root))
		return cfail(err, errlen, "the document must be a mapping");
	if (only_keys(root, "the top level", keys, err, errlen) < 0 ||
	    section(root, "workspace", &ws, err, errlen) < 0 ||
	    section(root, "idempotency", &idem, err, errlen) < 0 ||
	    section(root, "seal", &seal, err, errlen) < 0 ||
	    section(root, "pod", &pod, err, errlen) < 0 ||
	    section(root, "adoption", &ad, err, errlen) < 0 || section(root, "quota", &quota, err, errlen) < 0 ||
	    section(root, "network", &net, err, errlen) < 0 || section(root, "admission", &adm, err, errlen) < 0 ||
	    string_field(root, "the top level", "ownerAuthorization", &oa, err, errlen) < 0)
		return -1;
	if (oa && !strcmp(oa, "accessReview"))
		t->owner_authz = SBX_OWNER_AUTHZ_ACCESS_REVIEW;
	else if (oa && !strcmp(oa, "namespace"))
		t->owner_authz = SBX_OWNER_AUTHZ_NAMESPACE;
	else if (oa)
		return cfail(err, errlen, "ownerAuthorization must be accessReview or namespace");
	if ((ws && apply_workspace(t, ws, err, errlen) < 0) ||
	    (idem && apply_idempotency(t, idem, err, errlen) < 0) ||
	    (seal && apply_seal(t, seal, err, errlen) < 0) ||
	    (pod && apply_pod(t, pod, err, errlen) < 0) ||
	    (ad && apply_adoption(t, ad, err, errlen) < 0) || (quota && apply_quota(t, quota, err, errlen) < 0) ||
	    (net && apply_network(t, net, err, errlen) < 0) || (adm && apply_admission(t, adm, err, errlen) < 0))
		return -1;
	if (t->pod.runtime_default && !sbx_runtime_allowed(t, t->pod.runtime_default))
		return cfail(err, errlen,
			     "pod.runtimeClasses.default \"%.64s\" must be one of "
			     "pod.runtimeClasses.allowed",
			     t->pod.runtime_default);
	if (t->ws_mode == SBX_WS_HOSTPATH && !t->host_root)
		return cfail(err, errlen,
			     "workspace.hostPathRoot is required when workspace.mode is hostPath");
	return 0;
}

int sbx_config_parse(struct sbx_config *c, const char *yaml, size_t len, char *err, size_t errlen)
{
	char yerr[256];
	if (errlen)
		err[0] = '\0';
	if (len > SBX_CONFIG_MAX)
		return cfail(err, errlen, "larger than %d bytes", SBX_CONFIG_MAX);
	cJSON *root = yaml_to_json(yaml, len, yerr, sizeof yerr);
	if (!root)
		return cfail(err, errlen, "%s", yerr);
	struct sbx_config t;
	config_copy(&t, c);
	int rc = apply(&t, root, err, errlen);
	cJSON_Delete(root);
	if (rc < 0) {
		sbx_config_release(&t);
		return -1;
	}
	sbx_config_release(c);
	*c = t;
	return 0;
}

int sbx_config_load(struct sbx_config *c, const char *path, char *err, size_t errlen)
{
	struct buf b;
	buf_init(&b, SBX_CONFIG_MAX);
	if (buf_read_file(&b, path) < 0) {
		int e = errno;
		buf_release(&b);
		return cfail(err, errlen, "cannot read %s: %s", path,
			     e == EFBIG ? "larger than 1 MiB" : strerror(e));
	}
	int rc = sbx_config_parse(c, b.data, b.len, err, errlen);
	buf_release(&b);
	return rc;
}
