#define _GNU_SOURCE
#include "kube/config.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <openssl/evp.h>

#include "base/buf.h"
#include "base/ktime.h"
#include "base/xmalloc.h"
#include "base/yamljson.h"
#include "kube/creds.h"
#include "kube/execcred.h"
#include "obs/log.h"

#define KUBECONFIG_MAX (8u << 20) /* one kubeconfig file */
#define PEM_MAX (4u << 20)	  /* a CA bundle, certificate or key file */
#define TOKEN_RECHECK_MS 1000
#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

struct kube_config {
	char *server;
	char *tls_server_name;
	char *proxy;
	int insecure;
	char *ca;
	size_t ca_len;
	char *ns;

	pthread_mutex_t mu; /* guards everything below */
	char *static_token;
	char *cert;
	size_t cert_len;
	char *key;
	size_t key_len;
	struct kube_token_file token; /* .path NULL: none */
	struct kube_exec *exec;
	time_t exec_expiry; /* 0 = no expiry given */
	struct kube_creds *cur;
};

/* ---- small helpers ---- */

static void seterr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
	if (!err || !errlen)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* Returns a heap copy of the directory part of path ("." if none). */
static char *dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return xstrdup(".");
	if (slash == path)
		return xstrdup("/");
	return xstrndup(path, (size_t)(slash - path));
}

/* Returns p if absolute, else dir/p (caller frees). */
static char *resolve(const char *dir, const char *p)
{
	if (p[0] == '/' || !dir)
		return xstrdup(p);
	return xasprintf("%s/%s", dir, p);
}

/* Decodes base64 (whitespace and newlines allowed). Returns a heap buffer,
 * NUL-terminated for convenience (caller frees), or NULL if invalid. */
static char *b64_decode(const char *in, size_t *outlen)
{
	size_t n = strlen(in);
	unsigned char *out = xmalloc(n / 4 * 3 + 4);
	EVP_ENCODE_CTX *ctx = EVP_ENCODE_CTX_new();
	if (!ctx) {
		free(out);
		return NULL;
	}
	int l1 = 0, l2 = 0;
	EVP_DecodeInit(ctx);
	if (n > (size_t)1 << 30 ||
	    EVP_DecodeUpdate(ctx, out, &l1, (const unsigned char *)in, (int)n) < 0 ||
	    EVP_DecodeFinal(ctx, out + l1, &l2) < 0) {
		EVP_ENCODE_CTX_free(ctx);
		free(out);
		return NULL;
	}
	EVP_ENCODE_CTX_free(ctx);
	*outlen = (size_t)(l1 + l2);
	out[*outlen] = '\0';
	return (char *)out;
}

/* Replaces the current snapshot. Caller holds mu. */
static void set_cur(struct kube_config *c, struct kube_creds *cr)
{
	kube_creds_put(c->cur);
	c->cur = cr;
}

/* Runs the exec plugin and installs its credential as the current snapshot.
 * Caller holds mu. Returns 0, or -1 with a message (nothing changed). */
static int exec_refresh(struct kube_config *c, char *err, size_t errlen)
{
	struct kube_exec_cluster cl = { .server = c->server, .tls_server_name = c->tls_server_name, .proxy = c->proxy, .ca = c->ca, .ca_len = c->ca_len, .insecure = c->insecure };
	struct kube_exec_answer a;
	if (kube_exec_fetch(c->exec, &cl, &a, err, errlen) < 0)
		return -1;
	/* The plugin's answer replaces inline credentials of the same kind. */
	set_cur(c, kube_creds_new(a.token, a.cert ? a.cert : c->cert, a.cert ? a.cert_len : c->cert_len,
				  a.cert ? a.key : c->key, a.cert ? a.key_len : c->key_len));
	c->exec_expiry = a.expiry;
	kube_exec_answer_release(&a);
	return 0;
}

/* ---- credentials ---- */

struct kube_creds *kube_config_creds(struct kube_config *c, const struct kube_creds *stale,
				     char *err, size_t errlen)
{
	pthread_mutex_lock(&c->mu);
	int force = stale && stale == c->cur;
	if (c->exec) {
		if (!c->cur || force || (c->exec_expiry && time(NULL) >= c->exec_expiry)) {
			if (exec_refresh(c, err, errlen) < 0) {
				pthread_mutex_unlock(&c->mu);
				return NULL;
			}
		}
	} else if (c->token.path) {
		int64_t now = ktime_mono_ms();
		if (force || now - c->token.checked_ms >= TOKEN_RECHECK_MS) {
			int changed = kube_token_file_changed(&c->token, now);
			if (force || changed) {
				char e[256];
				char *t = kube_token_file_read(&c->token, e, sizeof e);
				if (!t) {
					/* Keep serving the last good token; the file may be
					 * mid-rotation. */
					log_kv(LOG_WARN, "cannot re-read token file", "error", e);
				} else if (!c->cur->token || strcmp(t, c->cur->token)) {
					set_cur(c, kube_creds_new(t, c->cert, c->cert_len, c->key,
								  c->key_len));
				}
				if (t)
					OPENSSL_cleanse(t, strlen(t));
				free(t);
			}
		}
	}
	struct kube_creds *cr = c->cur;
	__atomic_add_fetch(&cr->refs, 1, __ATOMIC_ACQ_REL);
	pthread_mutex_unlock(&c->mu);
	return cr;
}

int kube_config_refreshable(const struct kube_config *c)
{
	return c->exec || c->token.path;
}

/* ---- accessors ---- */

const char *kube_config_namespace(const struct kube_config *c)
{
	return c->ns ? c->ns : "default";
}

const char *kube_config_server(const struct kube_config *c)
{
	return c->server;
}

const char *kube_config_tls_server_name(const struct kube_config *c)
{
	return c->tls_server_name;
}

const char *kube_config_proxy(const struct kube_config *c)
{
	return c->proxy;
}

int kube_config_insecure(const struct kube_config *c)
{
	return c->insecure;
}

const char *kube_config_ca(const struct kube_config *c, size_t *len)
{
	*len = c->ca_len;
	return c->ca;
}

static struct kube_config *config_alloc(void)
{
	struct kube_config *c = xcalloc(1, sizeof *c);
	pthread_mutex_init(&c->mu, NULL);
	return c;
}

void kube_config_free(struct kube_config *c)
{
	if (!c)
		return;
	free(c->server);
	free(c->tls_server_name);
	free(c->proxy);
	free(c->ca);
	free(c->ns);
	if (c->static_token)
		OPENSSL_cleanse(c->static_token, strlen(c->static_token));
	free(c->static_token);
	free(c->cert);
	if (c->key)
		OPENSSL_cleanse(c->key, c->key_len);
	free(c->key);
	free(c->token.path);
	kube_exec_free(c->exec);
	kube_creds_put(c->cur);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

/* ---- in-cluster ---- */

struct kube_config *kube_config_in_cluster(const char *sa_dir, char *err, size_t errlen)
{
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT");
	if (!host || !*host || !port || !*port) {
		seterr(
		    err, errlen,
		    "in-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set");
		return NULL;
	}
	struct kube_config *c = config_alloc();
	if (strchr(host, ':') && host[0] != '[')
		c->server = xasprintf("https://[%s]:%s", host, port);
	else
		c->server = xasprintf("https://%s:%s", host, port);
	char *p = xasprintf("%s/token", sa_dir);
	c->token.path = p;
	char e[256];
	char *t = kube_token_file_read(&c->token, e, sizeof e);
	if (!t) {
		seterr(err, errlen, "in-cluster: %s", e);
		goto fail;
	}
	c->cur = kube_creds_new(t, NULL, 0, NULL, 0);
	OPENSSL_cleanse(t, strlen(t));
	free(t);
	p = xasprintf("%s/ca.crt", sa_dir);
	c->ca = buf_load(p, PEM_MAX, &c->ca_len, e, sizeof e);
	free(p);
	if (!c->ca) {
		seterr(err, errlen, "in-cluster: %s", e);
		goto fail;
	}
	p = xasprintf("%s/namespace", sa_dir);
	char *ns = buf_load(p, 1024, NULL, NULL, 0);
	free(p);
	if (ns) {
		str_rstrip(ns);
		if (ns[0])
			c->ns = ns;
		else
			free(ns);
	}
	return c;
fail:
	kube_config_free(c);
	return NULL;
}

/* ---- kubeconfig files ---- */

struct named {
	const char *name;
	const cJSON *node; /* the "cluster"/"user"/"context" object */
	const char *dir;   /* directory of the file that defined it */
};

struct named_list {
	struct named *v;
	size_t n;
};

struct merged {
	cJSON **docs;
	char **dirs;
	size_t ndocs;
	struct named_list clusters, users, contexts;
	const char *current_context;
	const char *src; /* for messages: the file or list of files */
};

static const struct named *find_named(const struct named_list *l, const char *name)
{
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->v[i].name, name))
			return &l->v[i];
	return NULL;
}

/* Adds each {name, <field>} entry of doc[list] unless the name is known
 * (the first file to set a key wins). */
static int merge_list(struct named_list *l, const cJSON *doc, const char *list, const char *field,
		      const char *dir, const char *file, char *err, size_t errlen)
{
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(doc, list);
	if (!arr || cJSON_IsNull(arr))
		return 0;
	if (!cJSON_IsArray(arr)) {
		seterr(err, errlen, "kubeconfig %s: %s is not a list", file, list);
		return -1;
	}
	const cJSON *it;
	cJSON_ArrayForEach(it, arr)
	{
		char s[64];
		const char *name = yaml_str_nonempty(it, "name", s);
		const cJSON *node = cJSON_GetObjectItemCaseSensitive(it, field);
		if (!name || name == s) { /* a number would live in the scratch buffer */
			seterr(err, errlen, "kubeconfig %s: an entry of %s has no string name",
			       file, list);
			return -1;
		}
		if (find_named(l, name))
			continue;
		l->v = xrealloc(l->v, (l->n + 1) * sizeof *l->v);
		l->v[l->n++] = (struct named){ name, cJSON_IsObject(node) ? node : NULL, dir };
	}
	return 0;
}

/* Merges one kubeconfig document (YAML text, name src for messages, relative
 * paths resolved against dir, which m takes over) into m. Returns 0 or -1 with
 * a message. */
static int merge_text(struct merged *m, const char *text, size_t len, const char *src, char *dir,
		      char *err, size_t errlen)
{
	char yerr[200];
	cJSON *doc = yaml_to_json(text, len, yerr, sizeof yerr);
	if (!doc) {
		free(dir);
		seterr(err, errlen, "kubeconfig %s: %s", src, yerr);
		return -1;
	}
	if (!cJSON_IsObject(doc)) {
		free(dir);
		cJSON_Delete(doc);
		seterr(err, errlen, "kubeconfig %s: not a mapping", src);
		return -1;
	}
	m->docs = xrealloc(m->docs, (m->ndocs + 1) * sizeof *m->docs);
	m->dirs = xrealloc(m->dirs, (m->ndocs + 1) * sizeof *m->dirs);
	m->docs[m->ndocs] = doc;
	m->dirs[m->ndocs] = dir;
	m->ndocs++;
	if (merge_list(&m->clusters, doc, "clusters", "cluster", dir, src, err, errlen) < 0 ||
	    merge_list(&m->users, doc, "users", "user", dir, src, err, errlen) < 0 ||
	    merge_list(&m->contexts, doc, "contexts", "context", dir, src, err, errlen) < 0)
		return -1;
	const cJSON *cc = cJSON_GetObjectItemCaseSensitive(doc, "current-context");
	if (!m->current_context && cJSON_IsString(cc) && cc->valuestring[0])
		m->current_context = cc->valuestring;
	return 0;
}

/* Loads and merges one file into m. Returns 0, 1 when the file does not exist
 * (skip_missing), or -1 with a message. */
static int merge_file(struct merged *m, const char *path, int skip_missing, char *err,
		      size_t errlen)
{
	struct buf b;
	buf_init(&b, KUBECONFIG_MAX);
	if (buf_read_file(&b, path) < 0) {
		int e = errno;
		buf_release(&b);
		if (e == ENOENT && skip_missing)
			return 1;
		seterr(err, errlen, "kubeconfig %s: %s", path,
		       e == EFBIG ? "file too large" : strerror(e));
		return -1;
	}
	int rc = merge_text(m, b.data, b.len, path, dir_of(path), err, errlen);
	buf_release(&b);
	return rc;
}

static void merged_release(struct merged *m)
{
	for (size_t i = 0; i < m->ndocs; i++) {
		cJSON_Delete(m->docs[i]);
		free(m->dirs[i]);
	}
	free(m->docs);
	free(m->dirs);
	free(m->clusters.v);
	free(m->users.v);
	free(m->contexts.v);
}

/* Reads PEM material from inline base64 data (wins) or a file path resolved
 * against dir. Returns 0 (with *out NULL when neither is set) or -1. */
static int load_pem(const cJSON *node, const char *data_key, const char *path_key, const char *dir,
		    const char *what, const struct merged *m, char **out, size_t *len, char *err,
		    size_t errlen)
{
	char s1[64], s2[64];
	const char *data = yaml_str_nonempty(node, data_key, s1);
	const char *path = yaml_str_nonempty(node, path_key, s2);
	*out = NULL;
	*len = 0;
	if (data) {
		*out = b64_decode(data, len);
		if (!*out) {
			seterr(err, errlen, "kubeconfig %s: %s %s is not valid base64", m->src,
			       what, data_key);
			return -1;
		}
		return 0;
	}
	if (path) {
		char *full = resolve(dir, path);
		char e[300];
		*out = buf_load(full, PEM_MAX, len, e, sizeof e);
		free(full);
		if (!*out) {
			seterr(err, errlen, "kubeconfig %s: %s %s: %s", m->src, what, path_key, e);
			return -1;
		}
	}
	return 0;
}

/* Builds a config from the merged files for the chosen context. */
/* 1 when u is http:// or https:// followed by a host (and maybe a port and
 * path) of printable characters without spaces. */
static int server_url_ok(const char *u)
{
	const char *h = !strncmp(u, "https://", 8) ? u + 8 : !strncmp(u, "http://", 7) ? u + 7
										       : NULL;
	if (!h || !*h || *h == '/' || *h == ':')
		return 0;
	for (const char *p = h; *p; p++)
		if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f || *p == '%' || *p == '\\')
			return 0;
	return 1;
}

static struct kube_config *from_merged(const struct merged *m, const char *context, char *err,
				       size_t errlen)
{
	char s[64], cs[64];
	const char *ctxname = context && *context ? context : m->current_context;
	if (!ctxname) {
		seterr(err, errlen,
		       "kubeconfig %s: current-context is not set and no context was given",
		       m->src);
		return NULL;
	}
	const struct named *ctx = find_named(&m->contexts, ctxname);
	if (!ctx) {
		seterr(err, errlen, "kubeconfig %s: context \"%s\" not found", m->src, ctxname);
		return NULL;
	}
	const char *clname = yaml_str_nonempty(ctx->node, "cluster", cs);
	if (!clname) {
		seterr(err, errlen, "kubeconfig %s: context \"%s\" names no cluster", m->src,
		       ctxname);
		return NULL;
	}
	const struct named *cl = find_named(&m->clusters, clname);
	if (!cl || !cl->node) {
		seterr(
		    err, errlen,
		    "kubeconfig %s: context \"%s\" refers to cluster \"%s\", which is not defined",
		    m->src, ctxname, clname);
		return NULL;
	}
	char us[64];
	const char *uname = yaml_str_nonempty(ctx->node, "user", us);
	const struct named *user = NULL;
	if (uname) {
		user = find_named(&m->users, uname);
		if (!user) {
			seterr(err, errlen,
			       "kubeconfig %s: context \"%s\" refers to user \"%s\", which is not "
			       "defined",
			       m->src, ctxname, uname);
			return NULL;
		}
	}
	const char *server = yaml_str_nonempty(cl->node, "server", s);
	if (!server) {
		seterr(err, errlen, "kubeconfig %s: cluster \"%s\" has no server", m->src, clname);
		return NULL;
	}
	struct kube_config *c = config_alloc();
	c->server = strstr(server, "://") ? xstrdup(server) : xasprintf("https://%s", server);
	size_t sl = strlen(c->server);
	while (sl > 0 && c->server[sl - 1] == '/')
		c->server[--sl] = '\0';
	if (!server_url_ok(c->server)) {
		seterr(err, errlen, "kubeconfig %s: cluster \"%s\": server \"%.100s\" is not an http(s) URL",
		       m->src, clname, server);
		goto fail;
	}
	c->ns = xstrdup(yaml_str_nonempty(ctx->node, "namespace", s));
	c->tls_server_name = xstrdup(yaml_str_nonempty(cl->node, "tls-server-name", s));
	c->proxy = xstrdup(yaml_str_nonempty(cl->node, "proxy-url", s));
	c->insecure =
	    cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cl->node, "insecure-skip-tls-verify"));
	if (load_pem(cl->node, "certificate-authority-data", "certificate-authority", cl->dir,
		     "cluster", m, &c->ca, &c->ca_len, err, errlen) < 0)
		goto fail;
	const cJSON *un = user ? user->node : NULL;
	if (un) {
		if (cJSON_GetObjectItemCaseSensitive(un, "auth-provider")) {
			seterr(err, errlen,
			       "kubeconfig %s: user \"%s\": auth-provider plugins are not "
			       "supported; use an exec "
			       "plugin",
			       m->src, uname);
			goto fail;
		}
		if (yaml_str_nonempty(un, "username", s) || yaml_str_nonempty(un, "password", s)) {
			seterr(err, errlen,
			       "kubeconfig %s: user \"%s\": basic authentication "
			       "(username/password) is not "
			       "supported",
			       m->src, uname);
			goto fail;
		}
		if (load_pem(un, "client-certificate-data", "client-certificate", user->dir, "user",
			     m, &c->cert, &c->cert_len, err, errlen) < 0 ||
		    load_pem(un, "client-key-data", "client-key", user->dir, "user", m, &c->key,
			     &c->key_len, err, errlen) < 0)
			goto fail;
		if (!!c->cert != !!c->key) {
			seterr(
			    err, errlen,
			    "kubeconfig %s: user \"%s\": a client certificate needs a client key "
			    "and vice versa",
			    m->src, uname);
			goto fail;
		}
		c->static_token = xstrdup(yaml_str_nonempty(un, "token", s));
		const char *tf = yaml_str_nonempty(un, "tokenFile", s);
		if (tf)
			c->token.path = resolve(user->dir, tf);
		const cJSON *ex = cJSON_GetObjectItemCaseSensitive(un, "exec");
		if (cJSON_IsObject(ex)) {
			char e[256];
			c->exec = kube_exec_parse(ex, user->dir, e, sizeof e);
			if (!c->exec) {
				seterr(err, errlen, "kubeconfig %s: user \"%s\": %s", m->src, uname, e);
				goto fail;
			}
		}
	}
	if (c->token.path && !c->exec) {
		/* The file's token wins over an inline one, as in client-go. */
		char e[300];
		char *t = kube_token_file_read(&c->token, e, sizeof e);
		if (!t) {
			seterr(err, errlen, "kubeconfig %s: user \"%s\": %s", m->src, uname, e);
			goto fail;
		}
		c->cur = kube_creds_new(t, c->cert, c->cert_len, c->key, c->key_len);
		OPENSSL_cleanse(t, strlen(t));
		free(t);
	} else if (!c->exec) {
		c->cur = kube_creds_new(c->static_token, c->cert, c->cert_len, c->key, c->key_len);
	}
	/* With exec, the first kube_config_creds call runs the plugin. */
	return c;
fail:
	kube_config_free(c);
	return NULL;
}

/* Loads the files in list (':'-separated when split is set). */
static struct kube_config *load_files(const char *list, int split, const char *context, char *err,
				      size_t errlen)
{
	struct merged m = { 0 };
	struct kube_config *c = NULL;
	char *copy = xstrdup(list);
	char *srcs = NULL;
	int found = 0;
	char *save = NULL;
	for (char *p = split ? strtok_r(copy, ":", &save) : copy; p;
	     p = split ? strtok_r(NULL, ":", &save) : NULL) {
		if (!*p)
			continue;
		int rc = merge_file(&m, p, split, err, errlen);
		if (rc < 0)
			goto out;
		if (rc == 0) {
			char *n = srcs ? xasprintf("%s:%s", srcs, p) : xstrdup(p);
			free(srcs);
			srcs = n;
			found++;
		}
	}
	if (!found) {
		seterr(err, errlen, "KUBECONFIG=%s: none of the listed files exists", list);
		goto out;
	}
	m.src = srcs;
	c = from_merged(&m, context, err, errlen);
out:
	merged_release(&m);
	free(srcs);
	free(copy);
	return c;
}

struct kube_config *kube_config_parse(const char *yaml, size_t len, const char *dir,
				      const char *context, char *err, size_t errlen)
{
	struct merged m = { 0 };
	struct kube_config *c = NULL;
	if (len > KUBECONFIG_MAX) {
		seterr(err, errlen, "kubeconfig (memory): larger than %d bytes", (int)KUBECONFIG_MAX);
		return NULL;
	}
	m.src = "(memory)";
	if (merge_text(&m, yaml, len, m.src, xstrdup(dir ? dir : "."), err, errlen) == 0)
		c = from_merged(&m, context, err, errlen);
	merged_release(&m);
	return c;
}

struct kube_config *kube_config_load(const char *explicit_path, const char *context, char *err,
				     size_t errlen)
{
	if (explicit_path && *explicit_path)
		return load_files(explicit_path, 0, context, err, errlen);
	const char *env = getenv("KUBECONFIG");
	if (env && *env)
		return load_files(env, 1, context, err, errlen);
	if (getenv("KUBERNETES_SERVICE_HOST") && getenv("KUBERNETES_SERVICE_PORT")) {
		/* SBX_INCLUSTER_DIR is for tests: the ServiceAccount files laid out
		 * elsewhere than in a pod (e2e/test_deployed.sh). */
		const char *dir = getenv("SBX_INCLUSTER_DIR");
		return kube_config_in_cluster(dir && *dir ? dir : SA_DIR, err, errlen);
	}
	const char *home = getenv("HOME");
	if (home && *home) {
		char *p = xasprintf("%s/.kube/config", home);
		struct stat st;
		if (stat(p, &st) == 0) {
			struct kube_config *c = load_files(p, 0, context, err, errlen);
			free(p);
			return c;
		}
		free(p);
	}
	seterr(
	    err, errlen,
	    "no Kubernetes configuration: pass a kubeconfig, set KUBECONFIG, run in a cluster, or "
	    "create ~/.kube/config");
	return NULL;
}
