/* Credentials and endpoint for the Kubernetes API: kubeconfig files (merged as
 * kubectl merges $KUBECONFIG), in-cluster ServiceAccount files, bearer tokens
 * (inline or re-read from a file as it rotates: kube/creds.h), client
 * certificates held in memory only, and exec credential plugins
 * (client.authentication.k8s.io: kube/execcred.h).
 * A loaded config is internally locked: the client may ask it for credentials
 * from any thread. */
#ifndef SBX_KUBE_CONFIG_H
#define SBX_KUBE_CONFIG_H

#include <stddef.h>

#include "kube/creds.h"

struct kube_config;

/* Loads credentials: explicit_path if non-NULL and non-empty, else $KUBECONFIG (a
 * colon-separated list merged as kubectl does: the first file to define a
 * cluster/user/context name or current-context wins; missing files are skipped),
 * else in-cluster (KUBERNETES_SERVICE_HOST/PORT and the ServiceAccount files, in
 * /var/run/secrets/kubernetes.io/serviceaccount or, for tests, $SBX_INCLUSTER_DIR),
 * else ~/.kube/config. context (NULL = current-context) picks the context.
 * Relative paths are resolved against the directory of the kubeconfig file that
 * names them. Returns a new config (caller frees with kube_config_free), or NULL
 * with a message in err such as `kubeconfig /x: context "foo" not found`. */
struct kube_config *kube_config_load(const char *explicit_path, const char *context, char *err,
				     size_t errlen);
/* kube_config_load from one kubeconfig document in memory (yaml[0..len), at
 * most the file cap); relative paths are resolved against dir (NULL = "."),
 * files it names are read as from a file. Returns a new config (caller frees
 * with kube_config_free) or NULL with a message. For tests and fuzzing. */
struct kube_config *kube_config_parse(const char *yaml, size_t len, const char *dir,
				      const char *context, char *err, size_t errlen);
/* The in-cluster configuration, reading token, ca.crt and namespace from sa_dir
 * (normally /var/run/secrets/kubernetes.io/serviceaccount). The token is re-read
 * as the kubelet rotates it. Returns a new config (caller frees with
 * kube_config_free) or NULL with a message. */
struct kube_config *kube_config_in_cluster(const char *sa_dir, char *err, size_t errlen);
void kube_config_free(struct kube_config *c);

/* Borrowed strings, valid until kube_config_free. */
const char *kube_config_namespace(const struct kube_config *c); /* context namespace or "default" */
const char *
kube_config_server(const struct kube_config *c);		      /* "https://host:port", no trailing '/' */
const char *kube_config_tls_server_name(const struct kube_config *c); /* or NULL */
const char *kube_config_proxy(const struct kube_config *c);	      /* or NULL */
int kube_config_insecure(const struct kube_config *c);
/* The CA bundle PEM (borrowed; *len set), or NULL to use the system store. */
const char *kube_config_ca(const struct kube_config *c, size_t *len);

/* Returns the credentials to use now (a new reference the caller drops with
 * kube_creds_put), refreshing them first when needed: a token file that changed
 * on disk is re-read (checked at most once a second) and an exec credential that
 * expired is fetched again. stale (NULL ok) is a snapshot the server just
 * refused with 401: if it is still the current one, the token file is re-read
 * and the exec plugin run again regardless. Returns NULL with a message in err
 * when no credential can be obtained (the plugin failed, the file vanished);
 * then nothing is changed. */
struct kube_creds *kube_config_creds(struct kube_config *c, const struct kube_creds *stale,
				     char *err, size_t errlen);
/* 1 when a 401 may be cured by refreshing (token file or exec plugin). */
int kube_config_refreshable(const struct kube_config *c);

#endif
