/* The admission webhook server: AdmissionReview v1 over HTTPS on the
 * bounded server of obs/httpserver.h (TLS 1.2+, certificate and key re-read
 * when their files change, size/connection/time caps), with the Sandbox
 * decisions of webhook/sandbox_admission.h. Every replica serves it: it
 * reads the Sandbox cache, which every replica keeps. Paths:
 *   /mutate-sandbox    MutatingWebhookConfiguration, Sandboxes, CREATE
 *   /validate-sandbox  ValidatingWebhookConfiguration, Sandboxes, CREATE+UPDATE
 * Metrics: sandbox_admission_requests_total{webhook,outcome} and
 * sandbox_admission_duration_seconds{webhook}. */
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
	int threads;	       /* event loops; default 4 */
	const struct sbx_config *cfg;	  /* borrowed: owner authorization mode, key lifetime */
	const unsigned char *const *keys; /* borrowed seal keys, newest first */
	const size_t *keylens;
	size_t nkeys;
	struct kube_client *kc;	     /* borrowed: SubjectAccessReviews */
	struct informer *sandboxes;  /* borrowed: Sandboxes indexed by scope digest */
};

struct wh_server;

/* Starts serving. Returns the server (stop with wh_server_free) or NULL with
 * a message in err. Everything borrowed must outlive the server. */
struct wh_server *wh_server_start(const struct wh_server_opts *o, char *err, size_t errlen);
/* The port bound. */
int wh_server_port(const struct wh_server *s);
/* Stops accepting, finishes, joins; no handler runs after it returns. */
void wh_server_free(struct wh_server *s);

#endif
