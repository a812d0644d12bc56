/* Exec credential plugins (client.authentication.k8s.io v1 and v1beta1, run
 * as client-go runs them): a kubeconfig user's exec stanza, the plugin run
 * with its output capped and a deadline, and the ExecCredential it answers.
 * When to run it is kube/config.h's. */
#ifndef SBX_KUBE_EXECCRED_H
#define SBX_KUBE_EXECCRED_H

#include <stddef.h>
#include <time.h>

#include <cjson/cJSON.h>

/* A user's exec plugin, as parsed. */
struct kube_exec;

/* What the plugin is told of its cluster when it asks for it
 * (provideClusterInfo). All borrowed. */
struct kube_exec_cluster {
	const char *server, *tls_server_name, *proxy;
	const char *ca; /* PEM, or NULL */
	size_t ca_len;
	int insecure;
};

/* The credential the plugin answered; every pointer owned (release with
 * kube_exec_answer_release, which wipes the token and the key). */
struct kube_exec_answer {
	char *token; /* or NULL */
	char *cert;  /* client certificate PEM, or NULL (then key is NULL too) */
	size_t cert_len;
	char *key;
	size_t key_len;
	time_t expiry; /* 0: none given */
};

/* Reads the exec stanza ex of a kubeconfig user; a command with a slash is
 * resolved against dir (the kubeconfig's directory), a bare name is looked up
 * on PATH. Returns a new plugin (caller frees with kube_exec_free), or NULL
 * with a message (no command, an apiVersion other than v1 or v1beta1,
 * interactiveMode Always, args or env that are not strings). */
struct kube_exec *kube_exec_parse(const cJSON *ex, const char *dir, char *err, size_t errlen);
/* Frees e; NULL ok. */
void kube_exec_free(struct kube_exec *e);
/* Runs the plugin (stdin /dev/null; stdout at most 1 MiB, stderr kept for
 * messages; in a process group of its own, with no signal blocked or
 * ignored; 60 s to exit, then the group is killed) and reads its
 * ExecCredential into *a. Returns 0, or -1 with a message naming the plugin
 * (*a is then empty). */
int kube_exec_fetch(const struct kube_exec *e, const struct kube_exec_cluster *cl, struct kube_exec_answer *a,
		    char *err, size_t errlen);
/* Sets how long a plugin may run before it is killed (60 s; ms <= 0 sets
 * that back). For tests: call it while no plugin runs. */
void kube_exec_set_timeout_ms(int ms);
/* Wipes and frees what a holds; a is empty afterwards. */
void kube_exec_answer_release(struct kube_exec_answer *a);

#endif
