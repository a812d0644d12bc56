/* The admission webhook server: AdmissionReview v1 over HTTPS on the
 * bounded server of obs/httpserver.h (TLS 1.2+, certificate and key re-read
 * when their files change, size/connection/time caps), with the Sandbox
 * decisions of webhook/sandbox_admission.h. Every replica serves it: it
 * reads the Sandbox cache, which every replica keeps. Paths:
 *   /mutate-sandbox    MutatingWebhookConfiguration, Sandboxes, CREATE
 *   /validate-sandbox  ValidatingWebhookConfiguration, Sandboxes, CREATE+UPDATE
 *   /validate-pod-connect  ValidatingWebhookConfiguration, CONNECT of
 *                      pods/exec, pods/attach, pods/portforward (the exec gate,
 *                      webhook/pod_admission.h)
 * Metrics: sandbox_admission_requests_total{webhook,outcome},
 * sandbox_admission_duration_seconds{webhook} and
 * sandbox_admission_access_reviews_total{source,result}.
 *
 * Owner authorizations (SubjectAccessReviews) are answered through a cache
 * (kube/accesscache.h): an allowed answer holds 10 s, a refusal 2 s, so a
 * revoked grant takes effect within 10 s; concurrent reviews of one question
 * share one call. Each names the owner (or profile); the question about
 * every name first is cfg->ask_every_name_first's (off by default).
 *
 * Bounds on what a caller costs (contract section 6), before a body is
 * parsed: a body over WH_REVIEW_MAX is refused unread (413); the bytes of
 * unanswered requests on all connections together stay under
 * WH_INFLIGHT_MAX (past it the connection holding the most is closed, see
 * obs/httpserver.h); a body with more than WH_REVIEW_MAX_NODES JSON values
 * is refused (413); and each parse
 * is charged twice its body (the copy the handler gets, the parsed strings)
 * and WH_NODE_COST per value against WH_PARSE_BUDGET,
 * shared by every loop: a review that does not fit is answered 429 with
 * Retry-After, never parsed. Refusals are logged at most once a second per
 * kind, with user-supplied fields cut to WH_LOG_FIELD_MAX bytes. */
#ifndef SBX_WEBHOOK_SERVER_H
#define SBX_WEBHOOK_SERVER_H

#include <stddef.h>

#include "kube/client.h"
#include "kube/informer.h"
#include "sandbox/config.h"

struct wh_server_opts {
	const char *addr;      /* "host:port" or ":port" */
	const char *cert_file; /* PEM serving certificate (chain) */
	const char *key_file;  /* PEM private key */
	/* PEM CA(s) the API server's client certificate chains to (its
	 * AdmissionConfiguration kubeConfigFile); NULL: callers are not
	 * authenticated (anyone who reaches the port may post reviews). */
	const char *client_ca_file;
	const char *const *client_names;  /* NULL-terminated; NULL: any name the CA signed */
	int threads;			  /* event loops; default 1 */
	int handler_threads;		  /* threads deciding reviews; default WH_HANDLER_THREADS */
	long review_allow_ms;		  /* SubjectAccessReview answers kept: allowed (0: 10 s) */
	long review_deny_ms;		  /* ... and refused (0: 2 s) */
	const struct sbx_config *cfg;	  /* borrowed: owner authorization mode, key lifetime */
	const unsigned char *const *keys; /* borrowed seal keys, newest first */
	const size_t *keylens;
	size_t nkeys;
	struct kube_client *kc;	    /* borrowed: SubjectAccessReviews (its own client: its connections
				     * and client-side limit are not the reconciles') */
	struct informer *sandboxes; /* borrowed: Sandboxes indexed by scope digest */
	struct informer *pods;	    /* borrowed: sandbox pods (a miss is read live) */
	struct informer *quotas;    /* borrowed: SandboxQuotas by namespace (NULL: no early quota check) */
	struct informer *slots;	    /* borrowed: quota slots by owner key */
	struct informer *pool_pods; /* borrowed: warm pods (the pool label); NULL: none */
	struct informer *profiles;  /* borrowed: SandboxNetworkProfiles (NULL: no Sandbox may name one) */
	struct informer *claims;    /* borrowed: claim records by scope digest (NULL: not consulted) */
};

/* Reviews decided at once: each may wait on a SubjectAccessReview (at most
 * KUBE_ACCESS_TIMEOUT_MS); more wait in line, read but not yet decided. */
#define WH_HANDLER_THREADS 16

/* Bytes of unanswered requests, all connections: several of the largest
 * reviews, hundreds of ordinary ones. */
#define WH_INFLIGHT_MAX (12u << 20)
/* Memory charged to reviews being parsed and decided at once. */
#define WH_PARSE_BUDGET (40u << 20)
/* Longest user-supplied value in a log line. */
#define WH_LOG_FIELD_MAX 128

struct wh_server;

/* Starts serving. Returns the server (stop with wh_server_free) or NULL with
 * a message in err. Everything borrowed must outlive the server. */
struct wh_server *wh_server_start(const struct wh_server_opts *o, char *err, size_t errlen);
/* The port bound. */
int wh_server_port(const struct wh_server *s);
/* The process is on its way out: reviews are still answered, each closing
 * its connection, so the API server's next call connects again (through the
 * Service, to a ready replica) instead of reusing a kept-alive connection
 * the listener will close under it (obs_http_drain). */
void wh_server_drain(struct wh_server *s);
/* Stops accepting, finishes, joins; no handler runs after it returns. */
void wh_server_free(struct wh_server *s);

#endif
