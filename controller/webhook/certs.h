/* The self-managed webhook certificate keeper: a thread per replica that
 * writes the serving certificate, renews it at 2/3 of its validity and at
 * each epoch change, and keeps the webhook configurations' caBundle current
 * (the design, the derivation and the issuance: webhook/ca.h). */
#ifndef SBX_WEBHOOK_CERTS_H
#define SBX_WEBHOOK_CERTS_H

#include <stddef.h>

#include "kube/client.h"
#include "sandbox/seal.h"
#include "webhook/ca.h"

struct webhook_certs_opts {
	struct webhook_cert_opts cert;
	const char *cert_dir;	 /* where tls.crt and tls.key are written */
	const char *config_name; /* name of both webhook configurations; NULL = no caBundle upkeep */
	long bundle_check_s;	 /* how often the caBundle is checked; 0 = 60 */
};

struct webhook_certs;

/* Writes the first serving certificate into o->cert_dir at once (so the
 * webhook server can start on it), then starts a thread that renews it at 2/3
 * of its validity and at each epoch change, and keeps the caBundle of the
 * MutatingWebhookConfiguration and ValidatingWebhookConfiguration named
 * o->config_name current (at start, after each renewal and every
 * bundle_check_s; GET + PUT with the resourceVersion, retried on Conflict;
 * NotFound means nothing to patch). kc (borrowed, may be NULL = no caBundle
 * upkeep) must outlive the keeper. The seal keys (newest first; the newest
 * signs) and all options are copied.
 * Returns the keeper (caller frees with webhook_certs_free), or NULL with a
 * message when the options are invalid or the first certificate cannot be
 * written. */
struct webhook_certs *webhook_certs_start(struct kube_client *kc, const struct sbx_seal_keys *keys,
					  const struct webhook_certs_opts *o,
					  char *err, size_t errlen);
/* Stops the thread (an API call in flight is aborted), wipes the seal key
 * copies and frees c. NULL ok. */
void webhook_certs_free(struct webhook_certs *c);

#endif
