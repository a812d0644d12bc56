/* Exec credential plugins (execcred.h). */
#define _GNU_SOURCE
#include "kube/execcred.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "base/buf.h"
#include "base/ktime.h"
#include "base/xmalloc.h"
#include "base/yamljson.h"

extern char **environ;

#define EXEC_OUT_MAX (1u << 20)	 /* an exec plugin's stdout */
#define EXEC_ERR_MAX (16u << 10) /* an exec plugin's stderr (kept for messages) */
#define EXEC_TIMEOUT_MS 60000

struct kube_exec {
	char *command; /* absolute, PATH-searched bare name, or resolved against the kubeconfig dir */
	char **argv;   /* NULL-terminated, argv[0] = command */
	char **env;    /* NULL-terminated "NAME=value" overrides */
	char *api_version;
	char *install_hint;
	int provide_cluster_info;
};

static int exec_timeout_ms = EXEC_TIMEOUT_MS;

void kube_exec_set_timeout_ms(int ms)
{
	exec_timeout_ms = ms > 0 ? ms : EXEC_TIMEOUT_MS;
}

static void free_strv(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

void kube_exec_free(struct kube_exec *e)
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

struct kube_exec *kube_exec_parse(const cJSON *ex, const char *dir, char *err, size_t errlen)
{
	char s[64];
	const char *cmd = yaml_str_nonempty(ex, "command", s);
	const char *av = yaml_str_nonempty(ex, "apiVersion", s);
	if (!cmd) {
		snprintf(err, errlen, "exec has no command");
		return NULL;
	}
	if (!av || (strcmp(av, "client.authentication.k8s.io/v1") &&
		    strcmp(av, "client.authentication.k8s.io/v1beta1"))) {
		snprintf(err, errlen, "exec apiVersion must be client.authentication.k8s.io/v1 or v1beta1");
		return NULL;
	}
	const char *mode = yaml_str_nonempty(ex, "interactiveMode", s);
	if (mode && !strcmp(mode, "Always")) {
		snprintf(err, errlen, "exec plugin needs interactiveMode Always, but a controller has no terminal");
		return NULL;
	}
	struct kube_exec *e = xcalloc(1, sizeof *e);
	cmd = yaml_str_nonempty(ex, "command", s);
	/* Like client-go: a command with a slash is a path relative to the
	 * kubeconfig; a bare name is looked up on PATH. */
	e->command = strchr(cmd, '/') && cmd[0] != '/' && dir ? xasprintf("%s/%s", dir, cmd) : xstrdup(cmd);
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
			snprintf(err, errlen, "exec args must be strings");
			kube_exec_free(e);
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
			snprintf(err, errlen, "exec env entry %d has no valid name", i);
			kube_exec_free(e);
			return NULL;
		}
		e->env[i] = xasprintf("%s=%s", n, v ? v : "");
	}
	return e;
}

/* Encodes len bytes as base64 without newlines (caller frees). */
static char *b64_encode(const char *in, size_t len)
{
	char *out = xmalloc(4 * ((len + 2) / 3) + 1);
	EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)in, (int)len);
	return out;
}

/* Builds the KUBERNETES_EXEC_INFO value (caller frees). */
static char *exec_info(const struct kube_exec *e, const struct kube_exec_cluster *cl)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "apiVersion", e->api_version);
	cJSON_AddStringToObject(o, "kind", "ExecCredential");
	cJSON *spec = cJSON_AddObjectToObject(o, "spec");
	cJSON_AddBoolToObject(spec, "interactive", 0);
	if (e->provide_cluster_info) {
		cJSON *ci = cJSON_AddObjectToObject(spec, "cluster");
		cJSON_AddStringToObject(ci, "server", cl->server);
		if (cl->tls_server_name)
			cJSON_AddStringToObject(ci, "tls-server-name", cl->tls_server_name);
		if (cl->insecure)
			cJSON_AddBoolToObject(ci, "insecure-skip-tls-verify", 1);
		if (cl->ca) {
			char *b = b64_encode(cl->ca, cl->ca_len);
			cJSON_AddStringToObject(ci, "certificate-authority-data", b);
			free(b);
		}
		if (cl->proxy)
			cJSON_AddStringToObject(ci, "proxy-url", cl->proxy);
	}
	char *s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (!s)
		abort(); /* cJSON prints only fail on allocation failure */
	return s;
}

/* The child's environment: ours, minus names the plugin config overrides, plus
 * those overrides and KUBERNETES_EXEC_INFO. Only the child sees them. */
static char **exec_envp(const struct kube_exec *e, const char *info)
{
	size_t n = 0, m = 0;
	for (char **p = environ; p && *p; p++)
		n++;
	for (char **o = e->env; o && *o; o++)
		m++;
	char **envp = xcalloc(n + m + 2, sizeof *envp);
	size_t k = 0;
	for (char **p = environ; p && *p; p++) {
		size_t nl = strcspn(*p, "=");
		int overridden = !strncmp(*p, "KUBERNETES_EXEC_INFO=", 21);
		for (char **o = e->env; o && *o && !overridden; o++)
			if (!strncmp(*o, *p, nl) && (*o)[nl] == '=')
				overridden = 1;
		if (!overridden)
			envp[k++] = xstrdup(*p);
	}
	for (char **o = e->env; o && *o; o++)
		envp[k++] = xstrdup(*o);
	envp[k++] = xasprintf("KUBERNETES_EXEC_INFO=%s", info);
	envp[k] = NULL;
	return envp;
}

/* Fills at, for a plugin: a process group of its own, so that a timeout
 * kills whatever the plugin started too, and the signals a plain process
 * starts with (the controller's threads block SIGTERM and SIGINT and it
 * ignores SIGPIPE; a child would keep all three across exec). Caller
 * destroys at. */
static void exec_attr(posix_spawnattr_t *at)
{
	sigset_t none, dfl;
	sigemptyset(&none);
	sigemptyset(&dfl);
	sigaddset(&dfl, SIGPIPE);
	sigaddset(&dfl, SIGTERM);
	sigaddset(&dfl, SIGINT);
	posix_spawnattr_init(at);
	posix_spawnattr_setflags(at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	posix_spawnattr_setpgroup(at, 0);
	posix_spawnattr_setsigmask(at, &none);
	posix_spawnattr_setsigdefault(at, &dfl);
}

/* The message for a plugin that outlived its deadline. */
static void timed_out(const struct kube_exec *e, char *err, size_t errlen)
{
	snprintf(err, errlen, "exec plugin %s: no answer within %g s", e->command, exec_timeout_ms / 1000.0);
}

/* Runs the plugin, collecting stdout and stderr (both capped) until it exits or
 * the timeout passes; then it and its process group are killed. Returns 0
 * with *status set, or -1 with a message. */
static int exec_run(const struct kube_exec *e, const struct kube_exec_cluster *cl, struct buf *out, struct buf *errout, int *status,
		    char *err, size_t errlen)
{
	int po[2], pe[2];
	if (pipe2(po, O_CLOEXEC) < 0) {
		snprintf(err, errlen, "exec plugin %s: pipe: %s", e->command, strerror(errno));
		return -1;
	}
	if (pipe2(pe, O_CLOEXEC) < 0) {
		snprintf(err, errlen, "exec plugin %s: pipe: %s", e->command, strerror(errno));
		close(po[0]);
		close(po[1]);
		return -1;
	}
	char *info = exec_info(e, cl);
	char **envp = exec_envp(e, info);
	free(info);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, po[1], 1);
	posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
	posix_spawnattr_t at;
	exec_attr(&at);
	pid_t pid;
	int rc = posix_spawnp(&pid, e->command, &fa, &at, e->argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	free_strv(envp);
	close(po[1]);
	close(pe[1]);
	if (rc != 0) {
		close(po[0]);
		close(pe[0]);
		snprintf(err, errlen, "exec plugin %s: %s%s%s", e->command, strerror(rc),
			 e->install_hint ? ": " : "",
			 e->install_hint ? e->install_hint : "");
		return -1;
	}
	struct pollfd pfd[2] = { { .fd = po[0], .events = POLLIN }, { .fd = pe[0], .events = POLLIN } };
	int64_t deadline = ktime_mono_ms() + exec_timeout_ms;
	int open_fds = 2, failed = 0;
	while (open_fds > 0) {
		int64_t left = deadline - ktime_mono_ms();
		if (left <= 0) {
			timed_out(e, err, errlen);
			failed = 1;
			break;
		}
		int pr = poll(pfd, 2, (int)left);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr < 0) {
			snprintf(err, errlen, "exec plugin %s: poll: %s", e->command,
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
				snprintf(err, errlen, "exec plugin %s: output exceeds %u bytes",
					 e->command, EXEC_OUT_MAX);
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
		kill(-pid, SIGKILL);
	/* Closed output is not an exit: a plugin may stay on, and a blocking
	 * waitpid would hold the caller (and kube_config_creds its lock) for
	 * good. So the exit too is awaited only until the deadline. */
	int64_t nap = 1;
	for (;;) {
		pid_t w = waitpid(pid, status, failed ? 0 : WNOHANG);
		if (w == pid)
			break;
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			snprintf(err, errlen, "exec plugin %s: waitpid: %s", e->command, strerror(errno));
			return -1;
		}
		int64_t left = deadline - ktime_mono_ms();
		if (left <= 0) {
			timed_out(e, err, errlen);
			failed = 1;
			kill(-pid, SIGKILL);
			continue;
		}
		ktime_sleep_ms(nap < left ? nap : left);
		if (nap < 50)
			nap *= 2;
	}
	return failed ? -1 : 0;
}

int kube_exec_fetch(const struct kube_exec *e, const struct kube_exec_cluster *cl, struct kube_exec_answer *a,
		    char *err, size_t errlen)
{
	struct buf out, errout;
	buf_init(&out, EXEC_OUT_MAX);
	buf_init(&errout, EXEC_ERR_MAX);
	int status = 0, rc = -1;
	*a = (struct kube_exec_answer){ 0 };
	cJSON *j = NULL;
	char *cert = NULL, *key = NULL;
	size_t cert_len = 0, key_len = 0;
	if (exec_run(e, cl, &out, &errout, &status, err, errlen) < 0)
		goto done;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		char msg[256] = "";
		if (errout.len)
			snprintf(msg, sizeof msg, "%.*s", (int)(errout.len < 200 ? errout.len : 200),
				 errout.data);
		str_rstrip(msg);
		/* 127: the shell's (and a forking posix_spawn's) "command not found". */
		int hint = WIFEXITED(status) && WEXITSTATUS(status) == 127 && e->install_hint;
		snprintf(err, errlen, "exec plugin %s failed (%s %d)%s%s%s%s", e->command,
			 WIFEXITED(status) ? "exit status" : "signal",
			 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), msg[0] ? ": " : "",
			 msg, hint ? ": " : "", hint ? e->install_hint : "");
		goto done;
	}
	j = out.len ? cJSON_ParseWithLength(out.data, out.len) : NULL;
	const cJSON *kind = cJSON_GetObjectItemCaseSensitive(j, "kind");
	const cJSON *av = cJSON_GetObjectItemCaseSensitive(j, "apiVersion");
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "status");
	if (!cJSON_IsString(kind) || strcmp(kind->valuestring, "ExecCredential") ||
	    !cJSON_IsObject(st)) {
		snprintf(err, errlen, "exec plugin %s: output is not an ExecCredential with a status",
			 e->command);
		goto done;
	}
	if (!cJSON_IsString(av) || strcmp(av->valuestring, e->api_version)) {
		snprintf(err, errlen, "exec plugin %s: answered apiVersion %s, want %s",
			 e->command, cJSON_IsString(av) ? av->valuestring : "(none)",
			 e->api_version);
		goto done;
	}
	char s1[64], s2[64], s3[64], s4[64];
	const char *token = yaml_str_nonempty(st, "token", s1);
	const char *cd = yaml_str_nonempty(st, "clientCertificateData", s2);
	const char *kd = yaml_str_nonempty(st, "clientKeyData", s3);
	const char *exp = yaml_str_nonempty(st, "expirationTimestamp", s4);
	if (!token && !(cd && kd)) {
		snprintf(err, errlen,
			 "exec plugin %s: status has neither token nor "
			 "clientCertificateData+clientKeyData",
			 e->command);
		goto done;
	}
	if (!!cd != !!kd) {
		snprintf(err, errlen,
			 "exec plugin %s: clientCertificateData and clientKeyData must come together",
			 e->command);
		goto done;
	}
	time_t expiry = 0;
	if (exp && ktime_parse_rfc3339(exp, &expiry) < 0) {
		snprintf(err, errlen, "exec plugin %s: bad expirationTimestamp %s", e->command,
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
	*a = (struct kube_exec_answer){ .token = xstrdup(token), .cert = cert, .cert_len = cert_len, .key = key, .key_len = key_len, .expiry = expiry };
	cert = key = NULL; /* the answer's now */
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

void kube_exec_answer_release(struct kube_exec_answer *a)
{
	if (a->token)
		OPENSSL_cleanse(a->token, strlen(a->token));
	if (a->key)
		OPENSSL_cleanse(a->key, a->key_len);
	free(a->token);
	free(a->cert);
	free(a->key);
	*a = (struct kube_exec_answer){ 0 };
}
