/* The credentials the Kubernetes client presents: immutable,
 * reference-counted snapshots, so that a token rotation never frees what a
 * request in flight is using, and bearer token files re-read as they rotate
 * (the kubelet's projected ServiceAccount token, a kubeconfig tokenFile).
 * Which snapshot is current is kube/config.h's. */
#ifndef SBX_KUBE_CREDS_H
#define SBX_KUBE_CREDS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

/* Largest token file read. */
#define KUBE_TOKEN_MAX (64u << 10)

/* A snapshot of the credentials to present. */
struct kube_creds {
	int refs;    /* managed by kube_config_creds/kube_creds_put */
	char *token; /* bearer token, or NULL */
	char *cert;  /* client certificate PEM (in memory, never on disk), or NULL */
	size_t cert_len;
	char *key; /* client key PEM, or NULL */
	size_t key_len;
};

/* A new snapshot holding copies of token, cert[0..cert_len) and
 * key[0..key_len) (each NULL: none), with one reference, the caller's (drop
 * it with kube_creds_put). */
struct kube_creds *kube_creds_new(const char *token, const char *cert, size_t cert_len, const char *key,
				  size_t key_len);
/* Drops a reference (NULL ok); the last one wipes the key and frees all. */
void kube_creds_put(struct kube_creds *cr);

/* A bearer token file and what was seen of it at the last read. */
struct kube_token_file {
	char *path;	    /* owned by whoever fills it */
	struct stat st;	    /* the file's identity and times at the last read */
	int64_t checked_ms; /* when it was last read or checked (monotonic ms) */
};

/* Reads the token (trailing whitespace stripped; at most KUBE_TOKEN_MAX
 * bytes) and records the file's state. Returns the token (caller wipes and
 * frees it), or NULL with "token file <path>: <reason>" in err (an empty
 * file is an error). */
char *kube_token_file_read(struct kube_token_file *t, char *err, size_t errlen);
/* 1 when the file is not in the state of the last read (replaced, written,
 * gone); records now_ms as the last check. */
int kube_token_file_changed(struct kube_token_file *t, int64_t now_ms);

#endif
