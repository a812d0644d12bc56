/* Unit tests for kubeconfig loading: merged $KUBECONFIG, inline and file
 * credentials, relative paths, clear errors, exec plugins, in-cluster. All
 * files are written into a fresh temporary directory at test time. */
#define _GNU_SOURCE /* pthread_timedjoin_np */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <CUnit/CUnit.h>

#include "base/buf.h"
#include "base/xmalloc.h"
#include "kube/config.h"
#include "kube/execcred.h"
#include "base/ktime.h"
#include "test_suites.h"

void register_kube_config_tests(void);

static char tmpdir[256];

/* Writes printf text to tmpdir/name (creating its directories)
 * and returns the full path (caller frees). */
static char *put(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *put(const char *name, const char *fmt, ...)
{
	char *path = xasprintf("%s/%s", tmpdir, name);
	for (char *slash = path + strlen(tmpdir) + 1; (slash = strchr(slash, '/')); slash++) {
		*slash = '\0';
		mkdir(path, 0700);
		*slash = '/';
	}
	FILE *f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	va_list ap;
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fclose(f);
	return path;
}

static int suite_init(void)
{
	snprintf(tmpdir, sizeof tmpdir, "%s/sbx-kube-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int suite_clean(void)
{
	char *cmd = xasprintf("rm -rf '%s'", tmpdir);
	int rc = system(cmd);
	free(cmd);
	return rc == 0 ? 0 : -1;
}

static struct kube_creds *creds(struct kube_config *c)
{
	char err[512];
	struct kube_creds *cr = kube_config_creds(c, NULL, err, sizeof err);
	if (!cr)
		fprintf(stderr, "creds: %s\n", err);
	return cr;
}

static const char file1[] = "apiVersion: v1\n"
			    "kind: Config\n"
			    "current-context: one\n"
			    "clusters:\n"
			    "- name: c1\n"
			    "  cluster:\n"
			    "    server: https://one.example:6443/\n"
			    "    insecure-skip-tls-verify: true\n"
			    "contexts:\n"
			    "- name: one\n"
			    "  context: {cluster: c1, user: u1, namespace: ns-one}\n"
			    "users:\n"
			    "- name: u1\n"
			    "  user:\n"
			    "    token: tok-one\n";

static const char file2[] = "apiVersion: v1\n"
			    "kind: Config\n"
			    "current-context: two\n"
			    "clusters:\n"
			    "- name: c1\n"
			    "  cluster: {server: 'https://shadowed.example'}\n"
			    "- name: c2\n"
			    "  cluster: {server: 'https://two.example:443'}\n"
			    "contexts:\n"
			    "- name: one\n"
			    "  context: {cluster: c2, user: u2}\n"
			    "- name: two\n"
			    "  context: {cluster: c2, user: u2}\n"
			    "users:\n"
			    "- name: u1\n"
			    "  user: {token: shadowed}\n"
			    "- name: u2\n"
			    "  user: {token: tok-two}\n";

static void test_merged_kubeconfig(void)
{
	char *p1 = put("merge/a.yaml", "%s", file1);
	char *p2 = put("merge/b.yaml", "%s", file2);
	char *env = xasprintf("%s:%s/merge/missing.yaml::%s", p1, tmpdir, p2);
	setenv("KUBECONFIG", env, 1);
	char err[512] = "";
	struct kube_config *c = kube_config_load(NULL, NULL, err, sizeof err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	/* The first file wins: its current-context, cluster c1 and user u1. */
	CU_ASSERT_STRING_EQUAL(kube_config_server(c), "https://one.example:6443");
	CU_ASSERT_STRING_EQUAL(kube_config_namespace(c), "ns-one");
	CU_ASSERT_TRUE(kube_config_insecure(c));
	struct kube_creds *cr = creds(c);
	CU_ASSERT_PTR_NOT_NULL_FATAL(cr);
	CU_ASSERT_STRING_EQUAL(cr->token, "tok-one");
	CU_ASSERT_PTR_NULL(cr->cert);
	kube_creds_put(cr);
	kube_config_free(c);

	/* A context only the second file defines. */
	c = kube_config_load(NULL, "two", err, sizeof err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_STRING_EQUAL(kube_config_server(c), "https://two.example:443");
	CU_ASSERT_STRING_EQUAL(kube_config_namespace(c), "default");
	CU_ASSERT_FALSE(kube_config_insecure(c));
	cr = creds(c);
	CU_ASSERT_STRING_EQUAL(cr->token, "tok-two");
	kube_creds_put(cr);
	kube_config_free(c);

	/* Only missing files. */
	char *none = xasprintf("%s/nope1:%s/nope2", tmpdir, tmpdir);
	setenv("KUBECONFIG", none, 1);
	CU_ASSERT_PTR_NULL(kube_config_load(NULL, NULL, err, sizeof err));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "none of the listed files"));
	unsetenv("KUBECONFIG");
	free(none);
	free(env);
	free(p1);
	free(p2);
}

static void test_inline_data(void)
{
	/* base64 of "CA PEM\n", "CERT PEM\n", "KEY PEM\n", wrapped like real files. */
	char *p = put("inline.yaml", "clusters:\n"
				     "- name: c\n"
				     "  cluster:\n"
				     "    server: https://10.0.0.1\n"
				     "    certificate-authority-data: Q0EgUEVNCg==\n"
				     "    tls-server-name: kubernetes.default\n"
				     "users:\n"
				     "- name: u\n"
				     "  user:\n"
				     "    client-certificate-data: |\n"
				     "      Q0VSVCBQ\n"
				     "      RU0K\n"
				     "    client-key-data: S0VZIFBFTQo=\n"
				     "contexts:\n"
				     "- name: x\n"
				     "  context: {cluster: c, user: u}\n"
				     "current-context: x\n");
	char err[512] = "";
	struct kube_config *c = kube_config_load(p, NULL, err, sizeof err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	size_t len = 0;
	const char *ca = kube_config_ca(c, &len);
	CU_ASSERT_EQUAL(len, 7);
	CU_ASSERT(ca && !memcmp(ca, "CA PEM\n", 7));
	CU_ASSERT_STRING_EQUAL(kube_config_tls_server_name(c), "kubernetes.default");
	struct kube_creds *cr = creds(c);
	CU_ASSERT_PTR_NOT_NULL_FATAL(cr);
	CU_ASSERT_PTR_NULL(cr->token);
	CU_ASSERT_EQUAL(cr->cert_len, 9);
	CU_ASSERT(cr->cert && !memcmp(cr->cert, "CERT PEM\n", 9));
	CU_ASSERT_EQUAL(cr->key_len, 8);
	CU_ASSERT(cr->key && !memcmp(cr->key, "KEY PEM\n", 8));
	kube_creds_put(cr);
	kube_config_free(c);
	free(p);

	p = put("badb64.yaml",
		"clusters:\n- name: c\n  cluster: {server: https://h, certificate-authority-data: "
		"'!!!'}\n"
		"contexts:\n- name: x\n  context: {cluster: c}\ncurrent-context: x\n");
	CU_ASSERT_PTR_NULL(kube_config_load(p, NULL, err, sizeof err));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "base64"));
	free(p);
	p = put("certonly.yaml",
		"clusters:\n- name: c\n  cluster: {server: https://h}\nusers:\n- name: u\n"
		"  user: {client-certificate-data: Q0EK}\ncontexts:\n- name: x\n"
		"  context: {cluster: c, user: u}\ncurrent-context: x\n");
	CU_ASSERT_PTR_NULL(kube_config_load(p, NULL, err, sizeof err));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "client key"));
	free(p);
}

static void test_relative_paths_and_token_file(void)
{
	char *ca = put("rel/pki/ca.crt", "FILE CA\n");
	char *cert = put("rel/pki/client.crt", "FILE CERT\n");
	char *key = put("rel/pki/client.key", "FILE KEY\n");
	char *tok = put("rel/token", "file-token-1\n");
	char *p =
	    put("rel/config",
		"clusters:\n"
		"- name: c\n"
		"  cluster: {server: 'http://127.0.0.1:1', certificate-authority: pki/ca.crt}\n"
		"users:\n"
		"- name: u\n"
		"  user:\n"
		"    client-certificate: pki/client.crt\n"
		"    client-key: %s\n"
		"    token: inline-token\n"
		"    tokenFile: token\n"
		"contexts:\n"
		"- name: x\n"
		"  context: {cluster: c, user: u, namespace: team}\n"
		"current-context: x\n",
		key);
	/* Resolution must not depend on the working directory. */
	char cwd[1024];
	CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof cwd));
	CU_ASSERT_EQUAL(chdir("/"), 0);
	char err[512] = "";
	struct kube_config *c = kube_config_load(p, NULL, err, sizeof err);
	CU_ASSERT_EQUAL(chdir(cwd), 0);
	if (!c)
		fprintf(stderr, "%s\n", err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	size_t len;
	CU_ASSERT(!memcmp(kube_config_ca(c, &len), "FILE CA\n", 8));
	CU_ASSERT_TRUE(kube_config_refreshable(c));
	struct kube_creds *cr = creds(c);
	CU_ASSERT_STRING_EQUAL(cr->token, "file-token-1"); /* the file wins, newline stripped */
	CU_ASSERT(cr->cert && !strcmp(cr->cert, "FILE CERT\n"));
	CU_ASSERT(cr->key && !strcmp(cr->key, "FILE KEY\n"));

	/* Rotation: seen when the 401 path reports the snapshot as stale... */
	free(put("rel/token", "file-token-2\n"));
	char e2[256];
	struct kube_creds *cr2 = kube_config_creds(c, cr, e2, sizeof e2);
	CU_ASSERT_PTR_NOT_NULL_FATAL(cr2);
	CU_ASSERT_STRING_EQUAL(cr2->token, "file-token-2");
	CU_ASSERT_STRING_EQUAL(cr->token, "file-token-1"); /* the old snapshot is intact */
	kube_creds_put(cr);
	/* ...and on its own once the file changes again (checked once a second). */
	free(put("rel/token", "file-token-3-longer\n"));
	ktime_sleep_ms(1100);
	struct kube_creds *cr3 = creds(c);
	CU_ASSERT_STRING_EQUAL(cr3->token, "file-token-3-longer");
	/* An unchanged file yields the same snapshot. */
	struct kube_creds *cr4 = kube_config_creds(c, cr3, e2, sizeof e2);
	CU_ASSERT_PTR_EQUAL(cr4, cr3);
	kube_creds_put(cr2);
	kube_creds_put(cr3);
	kube_creds_put(cr4);
	kube_config_free(c);

	/* A missing token file is a load error naming it. */
	CU_ASSERT_EQUAL(unlink(tok), 0);
	CU_ASSERT_PTR_NULL(kube_config_load(p, NULL, err, sizeof err));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "rel/token"));
	free(ca);
	free(cert);
	free(key);
	free(tok);
	free(p);
}

static void test_errors(void)
{
	static const struct {
		const char *yaml;
		const char *context;
		const char *want;
	} cases[] = {
		{ "clusters: []\ncontexts: []\n", NULL, "current-context is not set" },
		{ "current-context: foo\ncontexts:\n- name: bar\n  context: {cluster: c}\n", NULL,
		  "context \"foo\" not found" },
		{ "current-context: bar\ncontexts:\n- name: bar\n  context: {cluster: c}\n", "foo",
		  "context \"foo\" not found" },
		{ "current-context: x\ncontexts:\n- name: x\n  context: {cluster: nowhere, user: u}\n",
		  NULL, "cluster \"nowhere\", which is not defined" },
		{ "current-context: x\nclusters:\n- name: c\n  cluster: {server: "
		  "https://h}\ncontexts:\n- name: x\n"
		  "  context: {cluster: c, user: ghost}\n",
		  NULL, "user \"ghost\", which is not defined" },
		{ "current-context: x\nclusters:\n- name: c\n  cluster: {insecure-skip-tls-verify: "
		  "true}\n"
		  "contexts:\n- name: x\n  context: {cluster: c}\n",
		  NULL, "cluster \"c\" has no server" },
		{ "current-context: x\ncontexts:\n- name: x\n  context: {user: u}\n", NULL,
		  "names no cluster" },
		{ "current-context: x\nclusters:\n- name: c\n  cluster: {server: https://h}\nusers:\n- "
		  "name: u\n"
		  "  user: {auth-provider: {name: gcp}}\ncontexts:\n- name: x\n  context: {cluster: c, "
		  "user: u}\n",
		  NULL, "auth-provider" },
		{ "clusters: {a: b}\n", NULL, "clusters is not a list" },
		{ "clusters: [a: b\n", NULL, "YAML" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char name[32];
		snprintf(name, sizeof name, "err%zu.yaml", i);
		char *p = put(name, "%s", cases[i].yaml);
		char err[512] = "";
		struct kube_config *c = kube_config_load(p, cases[i].context, err, sizeof err);
		CU_ASSERT_PTR_NULL(c);
		kube_config_free(c);
		if (!strstr(err, cases[i].want) || !strstr(err, p))
			fprintf(stderr, "case %zu: %s\n", i, err);
		CU_ASSERT_PTR_NOT_NULL(strstr(err, cases[i].want));
		CU_ASSERT_PTR_NOT_NULL(strstr(err, p)); /* the message names the file */
		free(p);
	}
	char err[512];
	char *missing = xasprintf("%s/does-not-exist", tmpdir);
	CU_ASSERT_PTR_NULL(kube_config_load(missing, NULL, err, sizeof err));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "No such file"));
	free(missing);
}

/* The plugin counts its runs in $COUNTER, records KUBERNETES_EXEC_INFO, and
 * answers with a token naming $SECRET and the run number. */
static const char plugin[] =
    "#!/bin/sh\n"
    "n=$(cat \"$COUNTER\" 2>/dev/null || echo 0)\n"
    "n=$((n+1))\n"
    "echo $n > \"$COUNTER\"\n"
    "printf '%s' \"$KUBERNETES_EXEC_INFO\" > \"$COUNTER.info\"\n"
    "if [ \"$1\" = fail ]; then echo 'plugin says boom' >&2; exit 3; fi\n"
    "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
    "\"status\":{\"token\":\"tok-%s-%s\",\"expirationTimestamp\":\"%s\"}}\\n' \"$SECRET\" \"$n\" "
    "\"$EXPIRY\"\n";

static int runs(const char *counter)
{
	struct buf b;
	buf_init(&b, 64);
	int n = buf_read_file(&b, counter) == 0 ? atoi(b.data) : 0;
	buf_release(&b);
	return n;
}

static char *exec_config(const char *name, const char *expiry, const char *arg)
{
	char *script = put("exec/bin/plugin.sh", "%s", plugin);
	chmod(script, 0755);
	free(script);
	return put(name,
		   "clusters:\n- name: c\n  cluster: {server: 'https://h', "
		   "certificate-authority-data: Q0EK}\n"
		   "users:\n"
		   "- name: u\n"
		   "  user:\n"
		   "    exec:\n"
		   "      apiVersion: client.authentication.k8s.io/v1\n"
		   "      command: ./bin/plugin.sh\n"
		   "      args: [%s]\n"
		   "      provideClusterInfo: true\n"
		   "      interactiveMode: IfAvailable\n"
		   "      env:\n"
		   "      - {name: SECRET, value: only-for-the-child}\n"
		   "      - {name: EXPIRY, value: '%s'}\n"
		   "      - {name: COUNTER, value: '%s/%s.count'}\n"
		   "contexts:\n- name: x\n  context: {cluster: c, user: u}\n"
		   "current-context: x\n",
		   arg, expiry, tmpdir, name);
}

static void test_exec_plugin(void)
{
	CU_ASSERT_PTR_NULL(getenv("SECRET"));
	/* Far future: run once, then served from the cache. */
	char *p = exec_config("exec/future.yaml", "2999-01-01T00:00:00Z", "ok");
	char *counter = xasprintf("%s/exec/future.yaml.count", tmpdir);
	char err[512] = "";
	struct kube_config *c = kube_config_load(p, NULL, err, sizeof err);
	if (!c)
		fprintf(stderr, "%s\n", err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_EQUAL(runs(counter), 0); /* not run before it is needed */
	struct kube_creds *a = creds(c);
	CU_ASSERT_PTR_NOT_NULL_FATAL(a);
	CU_ASSERT_STRING_EQUAL(a->token, "tok-only-for-the-child-1");
	struct kube_creds *b = creds(c);
	CU_ASSERT_PTR_EQUAL(a, b);
	CU_ASSERT_EQUAL(runs(counter), 1);
	CU_ASSERT_PTR_NULL(getenv("SECRET")); /* the env var was set for the child only */
	/* The plugin saw KUBERNETES_EXEC_INFO with the cluster. */
	char *infop = xasprintf("%s.info", counter);
	struct buf info;
	buf_init(&info, 1 << 16);
	CU_ASSERT_EQUAL(buf_read_file(&info, infop), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(info.data ? info.data : "", "\"kind\":\"ExecCredential\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(info.data ? info.data : "", "\"server\":\"https://h\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(info.data ? info.data : "", "\"interactive\":false"));
	buf_release(&info);
	free(infop);
	/* A 401 on this snapshot runs the plugin again. */
	struct kube_creds *d = kube_config_creds(c, b, err, sizeof err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	CU_ASSERT_STRING_EQUAL(d->token, "tok-only-for-the-child-2");
	CU_ASSERT_EQUAL(runs(counter), 2);
	/* A stale snapshot that is no longer current does not. */
	struct kube_creds *e = kube_config_creds(c, a, err, sizeof err);
	CU_ASSERT_PTR_EQUAL(e, d);
	CU_ASSERT_EQUAL(runs(counter), 2);
	kube_creds_put(a);
	kube_creds_put(b);
	kube_creds_put(d);
	kube_creds_put(e);
	kube_config_free(c);
	free(counter);
	free(p);

	/* Expiring in 2 s: cached until then, invoked again after. */
	char exp[21];
	ktime_format_rfc3339(time(NULL) + 2, exp);
	p = exec_config("exec/soon.yaml", exp, "ok");
	counter = xasprintf("%s/exec/soon.yaml.count", tmpdir);
	c = kube_config_load(p, NULL, err, sizeof err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	a = creds(c);
	b = creds(c);
	CU_ASSERT_EQUAL(runs(counter), 1);
	CU_ASSERT_PTR_EQUAL(a, b);
	ktime_sleep_ms(3100);
	d = creds(c);
	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	CU_ASSERT_EQUAL(runs(counter), 2);
	CU_ASSERT_STRING_EQUAL(d->token, "tok-only-for-the-child-2");
	kube_creds_put(a);
	kube_creds_put(b);
	kube_creds_put(d);
	kube_config_free(c);
	free(counter);
	free(p);

	/* Failure: exit status and stderr in the message; nothing cached. */
	p = exec_config("exec/fail.yaml", "2999-01-01T00:00:00Z", "fail");
	c = kube_config_load(p, NULL, err, sizeof err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_PTR_NULL(kube_config_creds(c, NULL, err, sizeof err));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "exit status 3"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "plugin says boom"));
	kube_config_free(c);
	free(p);

	/* A command that does not exist. */
	p = put("exec/nocmd.yaml",
		"clusters:\n- name: c\n  cluster: {server: 'https://h'}\nusers:\n- name: u\n"
		"  user:\n    exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: "
		"sbx-no-such-plugin, installHint: 'install it'}\n"
		"contexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n");
	c = kube_config_load(p, NULL, err, sizeof err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_PTR_NULL(kube_config_creds(c, NULL, err, sizeof err));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "sbx-no-such-plugin"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "install it"));
	kube_config_free(c);
	free(p);
}

/* A plugin that answers, closes its output and hangs on (with a child of its
 * own), after writing its pid and its child's to $PIDS. */
static const char hanging_plugin[] =
    "#!/bin/sh\n"
    "echo $$ > \"$PIDS\"\n"
    "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
    "\"status\":{\"token\":\"tok-hung\"}}\\n'\n"
    "exec >&- 2>&-\n"
    "sleep 100000 &\n"
    "echo $! >> \"$PIDS\"\n"
    "wait\n";

struct creds_call {
	struct kube_config *c;
	struct kube_creds *cr;
	char err[512];
};

/* Calls kube_config_creds as the controller's threads do: SIGTERM and SIGINT
 * blocked (main.c hands them to a signal thread), SIGPIPE ignored. */
static void *creds_call(void *arg)
{
	struct creds_call *k = arg;
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGTERM);
	sigaddset(&s, SIGINT);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
	k->cr = kube_config_creds(k->c, NULL, k->err, sizeof k->err);
	return NULL;
}

/* 1 while pid runs (a zombie waiting for init to reap it does not). */
static int running(pid_t pid)
{
	char path[64], st[512] = "";
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(st, 1, sizeof st - 1, f);
	fclose(f);
	st[n] = '\0';
	const char *paren = strrchr(st, ')');
	return !(paren && !strncmp(paren, ") Z", 3));
}

/* A plugin that closes its output but does not exit is killed, with its
 * children, at the deadline: kube_config_creds holds the config's lock while
 * it waits, so every API call would wait with it. */
static void test_exec_plugin_hangs(void)
{
	const int timeout_ms = 1000;
	char *script = put("exec/bin/hang.sh", "%s", hanging_plugin);
	chmod(script, 0755);
	char *pids = xasprintf("%s/exec/hang.pids", tmpdir);
	char *p = put("exec/hang.yaml",
		      "clusters:\n- name: c\n  cluster: {server: 'https://h'}\n"
		      "users:\n- name: u\n  user:\n    exec:\n"
		      "      apiVersion: client.authentication.k8s.io/v1\n"
		      "      command: ./bin/hang.sh\n"
		      "      env: [{name: PIDS, value: '%s'}]\n"
		      "contexts:\n- name: x\n  context: {cluster: c, user: u}\n"
		      "current-context: x\n",
		      pids);
	struct creds_call k = { 0 };
	k.c = kube_config_load(p, NULL, k.err, sizeof k.err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(k.c);
	kube_exec_set_timeout_ms(timeout_ms);
	void (*old_pipe)(int) = signal(SIGPIPE, SIG_IGN);
	int64_t t0 = ktime_mono_ms();
	pthread_t th;
	CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, creds_call, &k), 0);
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += timeout_ms / 1000 + 4;
	int joined = pthread_timedjoin_np(th, NULL, &until) == 0;
	int64_t took = ktime_mono_ms() - t0;
	struct buf b;
	buf_init(&b, 256);
	CU_ASSERT_EQUAL(buf_read_file(&b, pids), 0);
	int pid = 0, child = 0;
	CU_ASSERT_EQUAL(b.data ? sscanf(b.data, "%d %d", &pid, &child) : 0, 2);
	buf_release(&b);
	if (!joined) {
		fprintf(stderr, "\n    hung plugin: kube_config_creds still waiting after %lld ms\n",
			(long long)took);
		/* End the plugin here so the run goes on. */
		if (child > 0)
			kill(child, SIGKILL);
		if (pid > 0)
			kill(pid, SIGKILL);
		pthread_join(th, NULL);
	}
	signal(SIGPIPE, old_pipe);
	kube_exec_set_timeout_ms(0);
	CU_ASSERT_TRUE(joined);
	CU_ASSERT(took < timeout_ms + 3000);
	/* The answer came too late to count. */
	CU_ASSERT_PTR_NULL(k.cr);
	CU_ASSERT_PTR_NOT_NULL(strstr(k.err, "no answer within 1 s"));
	/* Killed and reaped, its child too. */
	CU_ASSERT(pid > 0 && kill(pid, 0) == -1 && errno == ESRCH);
	for (int i = 0; i < 100 && child > 0 && running(child); i++)
		ktime_sleep_ms(10);
	CU_ASSERT(child > 0 && !running(child));
	kube_creds_put(k.cr);
	kube_config_free(k.c);
	free(p);
	free(pids);
	free(script);
}

/* The signal set named field ("SigBlk", "SigIgn") of a /proc/PID/status
 * text, as a mask with bit n-1 for signal n. */
static unsigned long long sig_field(const char *status, const char *field)
{
	const char *f = status ? strstr(status, field) : NULL;
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	return strtoull(f + strlen(field) + 1, NULL, 16);
}

/* A plugin starts with the signals a plain process has, whatever the
 * controller's threads block (SIGTERM, SIGINT) or ignore (SIGPIPE): else a
 * plugin that writes to a closed pipe, or is told to stop, would not die.
 * cp is the plugin because a shell clears its mask itself. */
static void test_exec_plugin_signals(void)
{
	char *status = xasprintf("%s/exec/cp.status", tmpdir);
	char *p = put("exec/cp.yaml",
		      "clusters:\n- name: c\n  cluster: {server: 'https://h'}\n"
		      "users:\n- name: u\n  user:\n    exec:\n"
		      "      apiVersion: client.authentication.k8s.io/v1\n"
		      "      command: cp\n"
		      "      args: [/proc/self/status, '%s']\n"
		      "contexts:\n- name: x\n  context: {cluster: c, user: u}\n"
		      "current-context: x\n",
		      status);
	struct creds_call k = { 0 };
	k.c = kube_config_load(p, NULL, k.err, sizeof k.err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(k.c);
	void (*old_pipe)(int) = signal(SIGPIPE, SIG_IGN);
	pthread_t th;
	CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, creds_call, &k), 0);
	pthread_join(th, NULL);
	signal(SIGPIPE, old_pipe);
	CU_ASSERT_PTR_NULL(k.cr); /* cp prints no credential */
	struct buf b;
	buf_init(&b, 1 << 16);
	CU_ASSERT_EQUAL(buf_read_file(&b, status), 0);
	unsigned long long blocked = sig_field(b.data, "SigBlk:"), ignored = sig_field(b.data, "SigIgn:");
	unsigned long long ours = 1ull << (SIGTERM - 1) | 1ull << (SIGINT - 1) | 1ull << (SIGPIPE - 1);
	if (blocked || (ignored & ours))
		fprintf(stderr, "\n    plugin's signals: blocked %llx, ignored %llx\n", blocked, ignored);
	CU_ASSERT_EQUAL(blocked, 0);
	CU_ASSERT_EQUAL(ignored & ours, 0);
	buf_release(&b);
	kube_creds_put(k.cr);
	kube_config_free(k.c);
	free(p);
	free(status);
}

static void test_in_cluster(void)
{
	char *t = put("sa/token", "sa-token-1\n");
	free(put("sa/ca.crt", "SA CA\n"));
	free(put("sa/namespace", "sandboxes"));
	char *dir = xasprintf("%s/sa", tmpdir);
	char err[512] = "";
	setenv("KUBERNETES_SERVICE_HOST", "fd00:10::1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	struct kube_config *c = kube_config_in_cluster(dir, err, sizeof err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_STRING_EQUAL(kube_config_server(c), "https://[fd00:10::1]:443");
	CU_ASSERT_STRING_EQUAL(kube_config_namespace(c), "sandboxes");
	struct kube_creds *cr = creds(c);
	CU_ASSERT_STRING_EQUAL(cr->token, "sa-token-1");
	CU_ASSERT_TRUE(kube_config_refreshable(c));
	kube_creds_put(cr);
	kube_config_free(c);
	setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
	c = kube_config_in_cluster(dir, err, sizeof err);
	CU_ASSERT_STRING_EQUAL(kube_config_server(c), "https://10.96.0.1:443");
	kube_config_free(c);
	/* With no kubeconfig, kube_config_load reads the in-cluster files, from
	 * SBX_INCLUSTER_DIR when set (tests run the binary "in-cluster" that way). */
	char *kc = getenv("KUBECONFIG") ? xstrdup(getenv("KUBECONFIG")) : NULL;
	unsetenv("KUBECONFIG");
	setenv("SBX_INCLUSTER_DIR", dir, 1);
	c = kube_config_load(NULL, NULL, err, sizeof err);
	CU_ASSERT_PTR_NOT_NULL(c);
	if (c) {
		CU_ASSERT_STRING_EQUAL(kube_config_server(c), "https://10.96.0.1:443");
		CU_ASSERT_STRING_EQUAL(kube_config_namespace(c), "sandboxes");
		kube_config_free(c);
	}
	unsetenv("SBX_INCLUSTER_DIR");
	if (kc) {
		setenv("KUBECONFIG", kc, 1);
		free(kc);
	}
	unlink(t);
	CU_ASSERT_PTR_NULL(kube_config_in_cluster(dir, err, sizeof err));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "token"));
	unsetenv("KUBERNETES_SERVICE_HOST");
	CU_ASSERT_PTR_NULL(kube_config_in_cluster(dir, err, sizeof err));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "KUBERNETES_SERVICE_HOST"));
	unsetenv("KUBERNETES_SERVICE_PORT");
	free(dir);
	free(t);
}

/* From memory (kube_config_parse), and server URLs that are not URLs are
 * refused (found by fuzz/fuzz_kubeconfig.c). */
static void test_parse_server_urls(void)
{
	static const char fmt[] = "clusters:\n- name: c\n  cluster: {server: '%s'}\n"
				  "users:\n- name: u\n  user: {token: t}\n"
				  "contexts:\n- name: x\n  context: {cluster: c, user: u}\n"
				  "current-context: x\n";
	static const struct {
		const char *server, *want; /* want NULL: refused */
	} cases[] = {
		{ "https://127.0.0.1:6443/", "https://127.0.0.1:6443" },
		{ "http://localhost:8080", "http://localhost:8080" },
		{ "kube.example:6443", "https://kube.example:6443" },
		{ "https:/%127.0.0.1:6:///", NULL },
		{ "https://", NULL },
		{ "ftp://x", NULL },
		{ "https://a b", NULL },
		{ "://x", NULL },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char yaml[1024], err[512];
		snprintf(yaml, sizeof yaml, fmt, cases[i].server);
		struct kube_config *c = kube_config_parse(yaml, strlen(yaml), NULL, NULL, err, sizeof err);
		if (!cases[i].want) {
			CU_ASSERT_PTR_NULL(c);
			if (c)
				fprintf(stderr, "accepted server %s\n", cases[i].server);
			else
				CU_ASSERT_PTR_NOT_NULL(strstr(err, "server"));
		} else {
			CU_ASSERT_PTR_NOT_NULL_FATAL(c);
			CU_ASSERT_STRING_EQUAL(kube_config_server(c), cases[i].want);
		}
		kube_config_free(c);
	}
}

static void test_rfc3339(void)
{
	time_t t = 0;
	CU_ASSERT_EQUAL(ktime_parse_rfc3339("1970-01-01T00:01:00Z", &t), 0);
	CU_ASSERT_EQUAL(t, 60);
	CU_ASSERT_EQUAL(ktime_parse_rfc3339("2024-05-01T12:00:00.123456+02:00", &t), 0);
	CU_ASSERT_EQUAL(t, 1714557600);
	CU_ASSERT_EQUAL(ktime_parse_rfc3339("2024-05-01 12:00:00Z", &t), -1);
	CU_ASSERT_EQUAL(ktime_parse_rfc3339("2024-05-01T12:00:00", &t), -1);
	CU_ASSERT_EQUAL(t, 1714557600);
	char s[21];
	ktime_format_rfc3339(1714557600, s);
	CU_ASSERT_STRING_EQUAL(s, "2024-05-01T10:00:00Z");
	/* Round trip, an offset naming the same instant, and junk or NULL refused
	 * (the controller's claimed-at and creationTimestamp go through these). */
	time_t a = 0, b = 0;
	CU_ASSERT_EQUAL(ktime_parse_rfc3339("2026-11-30T02:44:29Z", &a), 0);
	ktime_format_rfc3339(a, s);
	CU_ASSERT_STRING_EQUAL(s, "2026-11-30T02:44:29Z");
	CU_ASSERT_EQUAL(ktime_parse_rfc3339("2026-11-30T04:44:29.123+02:00", &b), 0);
	CU_ASSERT_EQUAL(b, a);
	CU_ASSERT_EQUAL(ktime_parse_rfc3339("2026-11-30T02:44:29Zjunk", &b), -1);
	CU_ASSERT_EQUAL(ktime_parse_rfc3339(NULL, &b), -1);
}

void register_kube_config_tests(void)
{
	CU_pSuite s = CU_add_suite("kube/config", suite_init, suite_clean);
	if (!s || !CU_add_test(s, "merged KUBECONFIG, first wins", test_merged_kubeconfig) ||
	    !CU_add_test(s, "inline base64 data", test_inline_data) ||
	    !CU_add_test(s, "relative paths, token and tokenFile",
			 test_relative_paths_and_token_file) ||
	    !CU_add_test(s, "clear errors", test_errors) ||
	    !CU_add_test(s, "exec plugin", test_exec_plugin) ||
	    !CU_add_test(s, "exec plugin that hangs after answering", test_exec_plugin_hangs) ||
	    !CU_add_test(s, "exec plugin: plain signals", test_exec_plugin_signals) ||
	    !CU_add_test(s, "in-cluster", test_in_cluster) ||
	    !CU_add_test(s, "RFC 3339", test_rfc3339) ||
	    !CU_add_test(s, "in memory; server URLs checked", test_parse_server_urls))
		abort();
}
