#define _GNU_SOURCE
#include "kube/config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <openssl/evp.h>

#include "base/buf.h"
#include "base/xmalloc.h"
#include "base/yamljson.h"
#include "base/ktime.h"
#include "obs/log.h"

extern char **environ;

#define KUBECONFIG_MAX (8u << 20) /* one kubeconfig file */
#define PEM_MAX (4u << 20)	  /* a CA bundle, certificate or key file */
#define TOKEN_MAX (64u << 10)	  /* a bearer token file */
#define EXEC_OUT_MAX (1u << 20)	  /* an exec plugin's stdout */
#define EXEC_ERR_MAX (16u << 10)  /* an exec plugin's stderr (kept for messages) */
#define EXEC_TIMEOUT_MS 60000
#define TOKEN_RECHECK_MS 1000
#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

struct exec_spec {
	char *
	    command; /* absolute, PATH-searched bare name, or resolved against the kubeconfig dir */
	char **argv; /* NULL-terminated, argv[0] = command */
	char **env;  /* NULL-terminated "NAME=value" overrides */
	char *api_version;
	char *install_hint;
	int provide_cluster_info;
};

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
	char *token_file;
	struct stat token_st;
	int64_t token_checked_ms;
	struct exec_spec *exec;
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

/* Encodes len bytes as base64 without newlines (caller frees). */
static char *b64_encode(const char *in, size_t len)
{
	char *out = xmalloc(4 * ((len + 2) / 3) + 1);
	EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)in, (int)len);
	return out;
}

static void free_strv(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

static void exec_spec_free(struct exec_spec *e)
{
	if (!e)
		return;
	free(e->command);
	free_strv(e->argv);
	free_strv(e->env);
	free(e->api_version);
	free(e->install_hint);
	free(e);
}

static struct kube_creds *creds_new(const char *token, const char *cert, size_t cert_len,
				    const char *key, size_t key_len)
{
	struct kube_creds *cr = xcalloc(1, sizeof *cr);
	cr->refs = 1;
	cr->token = xstrdup(token);
	if (cert) {
		cr->cert = xmalloc(cert_len + 1);
		memcpy(cr->cert, cert, cert_len);
		cr->cert[cert_len] = '\0';
		cr->cert_len = cert_len;
	}
	if (key) {
		cr->key = xmalloc(key_len + 1);
		memcpy(cr->key, key, key_len);
		cr->key[key_len] = '\0';
		cr->key_len = key_len;
	}
	return cr;
}

void kube_creds_put(struct kube_creds *cr)
{
	if (!cr || __atomic_sub_fetch(&cr->refs, 1, __ATOMIC_ACQ_REL) > 0)
		return;
	free(cr->token);
	if (cr->key)
		OPENSSL_cleanse(cr->key, cr->key_len);
	free(cr->cert);
	free(cr->key);
	free(cr);
}

/* Replaces the current snapshot. Caller holds mu. */
static void set_cur(struct kube_config *c, struct kube_creds *cr)
{
	kube_creds_put(c->cur);
	c->cur = cr;
}

/* Reads the token file and records its identity. Returns the token (caller
 * frees) or NULL with a message. */
static char *read_token_file(struct kube_config *c, char *err, size_t errlen)
{
	struct stat st;
	if (stat(c->token_file, &st) < 0) {
		seterr(err, errlen, "token file %s: %s", c->token_file, strerror(errno));
		return NULL;
	}
	char *t = buf_load(c->token_file, TOKEN_MAX, NULL, err, errlen);
	if (!t)
		return NULL;
	str_rstrip(t);
	if (!t[0]) {
		seterr(err, errlen, "token file %s is empty", c->token_file);
		free(t);
		return NULL;
	}
	c->token_st = st;
	c->token_checked_ms = ktime_mono_ms();
	return t;
}

static int same_file_state(const struct stat *a, const struct stat *b)
{
	return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* ---- exec credential plugins ---- */

/* Builds the KUBERNETES_EXEC_INFO value (caller frees). Caller holds mu. */
static char *exec_info(const struct kube_config *c)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "apiVersion", c->exec->api_version);
	cJSON_AddStringToObject(o, "kind", "ExecCredential");
	cJSON *spec = cJSON_AddObjectToObject(o, "spec");
	cJSON_AddBoolToObject(spec, "interactive", 0);
	if (c->exec->provide_cluster_info) {
		cJSON *cl = cJSON_AddObjectToObject(spec, "cluster");
		cJSON_AddStringToObject(cl, "server", c->server);
		if (c->tls_server_name)
			cJSON_AddStringToObject(cl, "tls-server-name", c->tls_server_name);
		if (c->insecure)
			cJSON_AddBoolToObject(cl, "insecure-skip-tls-verify", 1);
		if (c->ca) {
			char *b = b64_encode(c->ca, c->ca_len);
			cJSON_AddStringToObject(cl, "certificate-authority-data", b);
			free(b);
		}
		if (c->proxy)
			cJSON_AddStringToObject(cl, "proxy-url", c->proxy);
	}
	char *s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (!s)
		abort(); /* cJSON prints only fail on allocation failure */
	return s;
}

/* The child's environment: ours, minus names the plugin config overrides, plus
 * those overrides and KUBERNETES_EXEC_INFO. Only the child sees them. */
static char **exec_envp(const struct kube_config *c, const char *info)
{
	size_t n = 0, m = 0;
	for (char **e = environ; e && *e; e++)
		n++;
	for (char **e = c->exec->env; e && *e; e++)
		m++;
	char **envp = xcalloc(n + m + 2, sizeof *envp);
	size_t k = 0;
	for (char **e = environ; e && *e; e++) {
		size_t nl = strcspn(*e, "=");
		int overridden = !strncmp(*e, "KUBERNETES_EXEC_INFO=", 21);
		for (char **o = c->exec->env; o && *o && !overridden; o++)
			if (!strncmp(*o, *e, nl) && (*o)[nl] == '=')
				overridden = 1;
		if (!overridden)
			envp[k++] = xstrdup(*e);
	}
	for (char **o = c->exec->env; o && *o; o++)
		envp[k++] = xstrdup(*o);
	envp[k++] = xasprintf("KUBERNETES_EXEC_INFO=%s", info);
	envp[k] = NULL;
	return envp;
}

/* Runs the plugin, collecting stdout and stderr (both capped) until it exits or
 * the timeout passes. Returns 0 with *status set, or -1 with a message. */
static int exec_run(const struct kube_config *c, struct buf *out, struct buf *errout, int *status,
		    char *err, size_t errlen)
{
	int po[2], pe[2];
	if (pipe2(po, O_CLOEXEC) < 0) {
		seterr(err, errlen, "exec plugin %s: pipe: %s", c->exec->command, strerror(errno));
		return -1;
	}
	if (pipe2(pe, O_CLOEXEC) < 0) {
		seterr(err, errlen, "exec plugin %s: pipe: %s", c->exec->command, strerror(errno));
		close(po[0]);
		close(po[1]);
		return -1;
	}
	char *info = exec_info(c);
	char **envp = exec_envp(c, info);
	free(info);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, po[1], 1);
	posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
	pid_t pid;
	int rc = posix_spawnp(&pid, c->exec->command, &fa, NULL, c->exec->argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	free_strv(envp);
	close(po[1]);
	close(pe[1]);
	if (rc != 0) {
		close(po[0]);
		close(pe[0]);
		seterr(err, errlen, "exec plugin %s: %s%s%s", c->exec->command, strerror(rc),
		       c->exec->install_hint ? ": " : "",
		       c->exec->install_hint ? c->exec->install_hint : "");
		return -1;
	}
	struct pollfd pfd[2] = {{.fd = po[0], .events = POLLIN}, {.fd = pe[0], .events = POLLIN}};
	int64_t deadline = ktime_mono_ms() + EXEC_TIMEOUT_MS;
	int open_fds = 2, failed = 0;
	while (open_fds > 0) {
		int64_t left = deadline - ktime_mono_ms();
		if (left <= 0) {
			seterr(err, errlen, "exec plugin %s: no answer within %d s",
			       c->exec->command, EXEC_TIMEOUT_MS / 1000);
			failed = 1;
			break;
		}
		int pr = poll(pfd, 2, (int)left);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr < 0) {
			seterr(err, errlen, "exec plugin %s: poll: %s", c->exec->command,
			       strerror(errno));
			failed = 1;
			break;
		}
		for (int i = 0; i < 2; i++) {
			if (pfd[i].fd < 0 || !pfd[i].revents)
				continue;
			char chunk[4096];
			ssize_t r = read(pfd[i].fd, chunk, sizeof chunk);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				close(pfd[i].fd);
				pfd[i].fd = -1;
				open_fds--;
				continue;
			}
			struct buf *b = i == 0 ? out : errout;
			if (buf_append(b, chunk, (size_t)r) < 0 && i == 0) {
				seterr(err, errlen, "exec plugin %s: output exceeds %u bytes",
				       c->exec->command, EXEC_OUT_MAX);
				failed = 1;
			}
		}
		if (failed)
			break;
	}
	for (int i = 0; i < 2; i++)
		if (pfd[i].fd >= 0)
			close(pfd[i].fd);
	if (failed)
		kill(pid, SIGKILL);
	while (waitpid(pid, status, 0) < 0) {
		if (errno != EINTR) {
			seterr(err, errlen, "exec plugin %s: waitpid: %s", c->exec->command,
			       strerror(errno));
			return -1;
		}
	}
	return failed ? -1 : 0;
}

/* Runs the exec plugin and installs its credential as the current snapshot.
 * Caller holds mu. Returns 0, or -1 with a message (nothing changed). */
static int exec_refresh(struct kube_config *c, char *err, size_t errlen)
{
	struct buf out, errout;
	buf_init(&out, EXEC_OUT_MAX);
	buf_init(&errout, EXEC_ERR_MAX);
	int status = 0, rc = -1;
	cJSON *j = NULL;
	char *cert = NULL, *key = NULL;
	size_t cert_len = 0, key_len = 0;
	if (exec_run(c, &out, &errout, &status, err, errlen) < 0)
		goto done;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		char e[256] = "";
		if (errout.len)
			snprintf(e, sizeof e, "%.*s", (int)(errout.len < 200 ? errout.len : 200),
				 errout.data);
		str_rstrip(e);
		/* 127: the shell's (and a forking posix_spawn's) "command not found". */
		int hint = WIFEXITED(status) && WEXITSTATUS(status) == 127 && c->exec->install_hint;
		seterr(err, errlen, "exec plugin %s failed (%s %d)%s%s%s%s", c->exec->command,
		       WIFEXITED(status) ? "exit status" : "signal",
		       WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), e[0] ? ": " : "",
		       e, hint ? ": " : "", hint ? c->exec->install_hint : "");
		goto done;
	}
	j = out.len ? cJSON_ParseWithLength(out.data, out.len) : NULL;
	const cJSON *kind = cJSON_GetObjectItemCaseSensitive(j, "kind");
	const cJSON *av = cJSON_GetObjectItemCaseSensitive(j, "apiVersion");
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "status");
	if (!cJSON_IsString(kind) || strcmp(kind->valuestring, "ExecCredential") ||
	    !cJSON_IsObject(st)) {
		seterr(err, errlen, "exec plugin %s: output is not an ExecCredential with a status",
		       c->exec->command);
		goto done;
	}
	if (!cJSON_IsString(av) || strcmp(av->valuestring, c->exec->api_version)) {
		seterr(err, errlen, "exec plugin %s: answered apiVersion %s, want %s",
		       c->exec->command, cJSON_IsString(av) ? av->valuestring : "(none)",
		       c->exec->api_version);
		goto done;
	}
	char s1[64], s2[64], s3[64], s4[64];
	const char *token = yaml_str_nonempty(st, "token", s1);
	const char *cd = yaml_str_nonempty(st, "clientCertificateData", s2);
	const char *kd = yaml_str_nonempty(st, "clientKeyData", s3);
	const char *exp = yaml_str_nonempty(st, "expirationTimestamp", s4);
	if (!token && !(cd && kd)) {
		seterr(err, errlen,
		       "exec plugin %s: status has neither token nor "
		       "clientCertificateData+clientKeyData",
		       c->exec->command);
		goto done;
	}
	if (!!cd != !!kd) {
		seterr(err, errlen,
		       "exec plugin %s: clientCertificateData and clientKeyData must come together",
		       c->exec->command);
		goto done;
	}
	time_t expiry = 0;
	if (exp && ktime_parse_rfc3339(exp, &expiry) < 0) {
		seterr(err, errlen, "exec plugin %s: bad expirationTimestamp %s", c->exec->command,
		       exp);
		goto done;
	}
	/* ExecCredential carries PEM text, not base64. */
	if (cd) {
		cert = xstrdup(cd);
		cert_len = strlen(cd);
		key = xstrdup(kd);
		key_len = strlen(kd);
	}
	/* The plugin's answer replaces inline credentials of the same kind. */
	set_cur(c, creds_new(token, cert ? cert : c->cert, cert ? cert_len : c->cert_len,
			     cert ? key : c->key, cert ? key_len : c->key_len));
	c->exec_expiry = expiry;
	rc = 0;
done:
	if (key)
		OPENSSL_cleanse(key, key_len);
	free(cert);
	free(key);
	cJSON_Delete(j);
	if (out.data)
		OPENSSL_cleanse(out.data, out.len);
	buf_release(&out);
	buf_release(&errout);
	return rc;
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
	} else if (c->token_file) {
		int64_t now = ktime_mono_ms();
		if (force || now - c->token_checked_ms >= TOKEN_RECHECK_MS) {
			struct stat st;
			int changed =
			    stat(c->token_file, &st) < 0 || !same_file_state(&st, &c->token_st);
			c->token_checked_ms = now;
			if (force || changed) {
				char e[256];
				char *t = read_token_file(c, e, sizeof e);
				if (!t) {
					/* Keep serving the last good token; the file may be
					 * mid-rotation. */
					log_kv(LOG_WARN, "cannot re-read token file", "error", e);
				} else if (!c->cur->token || strcmp(t, c->cur->token)) {
					set_cur(c, creds_new(t, c->cert, c->cert_len, c->key,
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
	return c->exec || c->token_file;
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
	free(c->token_file);
	exec_spec_free(c->exec);
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
	c->token_file = p;
	char e[256];
	char *t = read_token_file(c, e, sizeof e);
	if (!t) {
		seterr(err, errlen, "in-cluster: %s", e);
		goto fail;
	}
	c->cur = creds_new(t, NULL, 0, NULL, 0);
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
		l->v[l->n++] = (struct named){name, cJSON_IsObject(node) ? node : NULL, dir};
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

/* Reads an exec plugin block. Returns a new spec or NULL with a message. */
static struct exec_spec *load_exec(const cJSON *ex, const char *dir, const char *user,
				   const struct merged *m, char *err, size_t errlen)
{
	char s[64];
	const char *cmd = yaml_str_nonempty(ex, "command", s);
	const char *av = yaml_str_nonempty(ex, "apiVersion", s);
	if (!cmd) {
		seterr(err, errlen, "kubeconfig %s: user \"%s\": exec has no command", m->src,
		       user);
		return NULL;
	}
	if (!av || (strcmp(av, "client.authentication.k8s.io/v1") &&
		    strcmp(av, "client.authentication.k8s.io/v1beta1"))) {
		seterr(err, errlen,
		       "kubeconfig %s: user \"%s\": exec apiVersion must be "
		       "client.authentication.k8s.io/v1 "
		       "or v1beta1",
		       m->src, user);
		return NULL;
	}
	const char *mode = yaml_str_nonempty(ex, "interactiveMode", s);
	if (mode && !strcmp(mode, "Always")) {
		seterr(err, errlen,
		       "kubeconfig %s: user \"%s\": exec plugin needs interactiveMode Always, but "
		       "a controller "
		       "has no terminal",
		       m->src, user);
		return NULL;
	}
	struct exec_spec *e = xcalloc(1, sizeof *e);
	cmd = yaml_str_nonempty(ex, "command", s);
	/* Like client-go: a command with a slash is a path relative to the
	 * kubeconfig; a bare name is looked up on PATH. */
	e->command = strchr(cmd, '/') ? resolve(dir, cmd) : xstrdup(cmd);
	e->api_version = xstrdup(yaml_str_nonempty(ex, "apiVersion", s));
	e->install_hint = xstrdup(yaml_str_nonempty(ex, "installHint", s));
	const cJSON *pci = cJSON_GetObjectItemCaseSensitive(ex, "provideClusterInfo");
	e->provide_cluster_info = cJSON_IsTrue(pci);
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(ex, "args");
	int nargs = cJSON_IsArray(args) ? cJSON_GetArraySize(args) : 0;
	e->argv = xcalloc((size_t)nargs + 2, sizeof *e->argv);
	e->argv[0] = xstrdup(e->command);
	for (int i = 0; i < nargs; i++) {
		const cJSON *a = cJSON_GetArrayItem(args, i);
		if (cJSON_IsString(a)) {
			e->argv[i + 1] = xstrdup(a->valuestring);
		} else if (cJSON_IsNumber(a)) {
			e->argv[i + 1] = xasprintf("%.17g", a->valuedouble);
		} else {
			seterr(err, errlen, "kubeconfig %s: user \"%s\": exec args must be strings",
			       m->src, user);
			exec_spec_free(e);
			return NULL;
		}
	}
	const cJSON *env = cJSON_GetObjectItemCaseSensitive(ex, "env");
	int nenv = cJSON_IsArray(env) ? cJSON_GetArraySize(env) : 0;
	e->env = xcalloc((size_t)nenv + 1, sizeof *e->env);
	for (int i = 0; i < nenv; i++) {
		const cJSON *kv = cJSON_GetArrayItem(env, i);
		char s1[64], s2[64];
		const char *n = yaml_str_nonempty(kv, "name", s1);
		const char *v = yaml_str(kv, "value", s2);
		if (!n || strchr(n, '=')) {
			seterr(err, errlen,
			       "kubeconfig %s: user \"%s\": exec env entry %d has no valid name",
			       m->src, user, i);
			exec_spec_free(e);
			return NULL;
		}
		e->env[i] = xasprintf("%s=%s", n, v ? v : "");
	}
	return e;
}

/* Builds a config from the merged files for the chosen context. */
/* 1 when u is http:// or https:// followed by a host (and maybe a port and
 * path) of printable characters without spaces. */
static int server_url_ok(const char *u)
{
	const char *h = !strncmp(u, "https://", 8) ? u + 8 : !strncmp(u, "http://", 7) ? u + 7 : NULL;
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
			c->token_file = resolve(user->dir, tf);
		const cJSON *ex = cJSON_GetObjectItemCaseSensitive(un, "exec");
		if (cJSON_IsObject(ex)) {
			c->exec = load_exec(ex, user->dir, uname, m, err, errlen);
			if (!c->exec)
				goto fail;
		}
	}
	if (c->token_file && !c->exec) {
		/* The file's token wins over an inline one, as in client-go. */
		char e[300];
		char *t = read_token_file(c, e, sizeof e);
		if (!t) {
			seterr(err, errlen, "kubeconfig %s: user \"%s\": %s", m->src, uname, e);
			goto fail;
		}
		c->cur = creds_new(t, c->cert, c->cert_len, c->key, c->key_len);
		OPENSSL_cleanse(t, strlen(t));
		free(t);
	} else if (!c->exec) {
		c->cur = creds_new(c->static_token, c->cert, c->cert_len, c->key, c->key_len);
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
	struct merged m = {0};
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
	struct merged m = {0};
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
