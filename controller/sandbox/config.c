#include "sandbox/config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/buf.h"
#include "base/xmalloc.h"
#include "base/yamljson.h"

/* Longest path accepted for a mount path or the hostPath root. */
#define PATH_MAX_LEN 4096
/* Longest subdirectory name (one path segment). */
#define SEGMENT_MAX 255

static const struct {
	const char *subdir, *path;
} default_mounts[] = {
    {"workspace", "/workspace"},
    {"claude", "/home/agent/.claude"},
    {"codex", "/home/agent/.codex"},
    {"gemini", "/home/agent/.gemini"},
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
}

void sbx_config_release(struct sbx_config *c)
{
	free(c->pvc_name);
	free(c->host_root);
	free(c->seal_key_file);
	free_mounts(c->mounts, c->nmounts);
	memset(c, 0, sizeof *c);
}

/* Fills dst with a deep copy of src (dst's old contents are not freed). */
static void config_copy(struct sbx_config *dst, const struct sbx_config *src)
{
	*dst = *src;
	dst->pvc_name = xstrdup(src->pvc_name);
	dst->host_root = xstrdup(src->host_root);
	dst->seal_key_file = xstrdup(src->seal_key_file);
	dst->mounts = xcalloc(src->nmounts ? src->nmounts : 1, sizeof *dst->mounts);
	for (size_t i = 0; i < src->nmounts; i++) {
		dst->mounts[i].subdir = xstrdup(src->mounts[i].subdir);
		dst->mounts[i].path = xstrdup(src->mounts[i].path);
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
	static const char *const keys[] = {"subdir", "mountPath", NULL};
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

/* Applies the workspace section to t. */
static int apply_workspace(struct sbx_config *t, const cJSON *ws, char *err, size_t errlen)
{
	static const char *const keys[] = {"mode", "pvcName", "hostPathRoot", "mounts", NULL};
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
	return 0;
}

/* Applies the idempotency section to t. */
static int apply_idempotency(struct sbx_config *t, const cJSON *idem, char *err, size_t errlen)
{
	static const char *const keys[] = {"keyLifetime", NULL};
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

/* Applies the seal section to t. */
static int apply_seal(struct sbx_config *t, const cJSON *seal, char *err, size_t errlen)
{
	static const char *const keys[] = {"keyFile", NULL};
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

/* Applies the document root to t and checks the result as a whole. */
static int apply(struct sbx_config *t, const cJSON *root, char *err, size_t errlen)
{
	static const char *const keys[] = {"workspace", "idempotency", "seal", NULL};
	const cJSON *ws, *idem, *seal;
	if (!cJSON_IsObject(root))
		return cfail(err, errlen, "the document must be a mapping");
	if (only_keys(root, "the top level", keys, err, errlen) < 0 ||
	    section(root, "workspace", &ws, err, errlen) < 0 ||
	    section(root, "idempotency", &idem, err, errlen) < 0 ||
	    section(root, "seal", &seal, err, errlen) < 0)
		return -1;
	if ((ws && apply_workspace(t, ws, err, errlen) < 0) ||
	    (idem && apply_idempotency(t, idem, err, errlen) < 0) ||
	    (seal && apply_seal(t, seal, err, errlen) < 0))
		return -1;
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
