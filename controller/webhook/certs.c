/* The self-managed certificate keeper (certs.h): the thread that renews the
 * serving certificate and keeps the caBundle current, over the pure
 * derivation and issuance of ca.h. */
#include "webhook/certs.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "base/ktime.h"
#include "base/xmalloc.h"
#include "obs/log.h"
#include "obs/metrics.h"

/* A PEM bundle of three small Ed25519 certificates is about 2 KiB. */
#define BUNDLE_CAP (64 * 1024)
/* A retry after a failed renewal or caBundle update. */
#define RETRY_S 10L

struct webhook_certs {
	struct kube_client *kc;	       /* borrowed; NULL = no caBundle upkeep */
	struct sbx_seal_keys keys;     /* owned copies, wiped on free; key[0] signs */
	struct webhook_cert_opts cert; /* strings below owned */
	char **dns, **ips;
	char *cert_dir;
	char *config_name;
	long check_s;

	/* State of the keeper thread only. */
	long epoch;	 /* of the certificate written last */
	time_t renew_at; /* when the written certificate is due */
	time_t next_check;
	char *bundle_b64; /* the caBundle this replica writes, for bundle_epoch */
	char *required;	  /* PEM of the CAs it needs, for bundle_epoch */
	long bundle_epoch;
	int missing_logged[2]; /* NotFound logged once per kind */

	struct obs_metric *m_expiry, *m_renewals, *m_bundle;

	pthread_t thread;
	int started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	atomic_int stop;
};

static const char *const kinds[2] = { "mutatingwebhookconfigurations", "validatingwebhookconfigurations" };

/* Computes c->bundle_b64 and c->required for epoch. Returns 0 or -1. */
static int make_bundle(struct webhook_certs *c, long epoch, char *err, size_t errlen)
{
	struct buf pem, req;
	buf_init(&pem, BUNDLE_CAP);
	buf_init(&req, BUNDLE_CAP);
	int rc = -1;
	if (webhook_ca_bundle(&pem, &c->keys, c->cert.ca_lifetime_s, epoch, err, errlen) == 0 &&
	    webhook_ca_required(&req, &c->keys, c->cert.ca_lifetime_s, epoch, err, errlen) == 0) {
		free(c->bundle_b64);
		free(c->required);
		c->bundle_b64 = xmalloc(4 * ((pem.len + 2) / 3) + 1);
		EVP_EncodeBlock((unsigned char *)c->bundle_b64, (const unsigned char *)pem.data, (int)pem.len);
		c->required = buf_detach(&req);
		c->bundle_epoch = epoch;
		rc = 0;
	}
	buf_release(&pem);
	buf_release(&req);
	return rc;
}

/* Issues and writes a serving certificate for now. Returns 0 or -1 (logged). */
static int renew(struct webhook_certs *c, time_t now)
{
	char err[512], fp[96], cafp[96];
	long epoch = webhook_ca_epoch(now, c->cert.ca_lifetime_s);
	struct webhook_ca ca;
	struct webhook_serving s = { 0 };
	int rc = webhook_ca_derive(&ca, c->keys.key[0], c->keys.len[0], c->cert.ca_lifetime_s, epoch, err,
				   sizeof err);
	if (rc == 0) {
		rc = webhook_serving_issue(&s, &ca, &c->cert, now, err, sizeof err);
		if (rc == 0)
			rc = webhook_serving_write(&s, c->cert_dir, err, sizeof err);
	}
	obs_metric_add(c->m_renewals, (const char *const[]){ rc < 0 ? "error" : "success" }, 1);
	if (rc < 0) {
		log_kv(LOG_ERROR, "cannot renew the webhook serving certificate", "error", err);
	} else {
		obs_metric_set(c->m_expiry, NULL, (double)s.not_after);
		char na[21], ep[24];
		webhook_cert_fingerprint(s.cert, fp);
		webhook_cert_fingerprint(ca.cert, cafp);
		ktime_format_rfc3339(s.not_after, na);
		snprintf(ep, sizeof ep, "%ld", epoch);
		log_kv(LOG_INFO, "webhook serving certificate written", "dir", c->cert_dir, "sha256", fp,
		       "notAfter", na, "caEpoch", ep, "caSha256", cafp);
		c->epoch = epoch;
		c->renew_at = s.renew_at;
	}
	webhook_serving_release(&s);
	webhook_ca_release(&ca);
	return rc;
}

/* Makes one webhook configuration's caBundle current. Returns 0 (done or
 * nothing to do) or -1 (logged; retry later). */
static int sync_kind(struct webhook_certs *c, int k)
{
	char *path = xasprintf("/apis/admissionregistration.k8s.io/v1/%s/%s", kinds[k], c->config_name);
	struct kube_request_opts ro = { .abort = &c->stop };
	struct kube_error ke = { 0 };
	int rc = -1;
	for (int attempt = 0; attempt < 5 && !atomic_load(&c->stop); attempt++) {
		cJSON *obj = NULL;
		enum kube_err e = kube_request_ex(c->kc, "GET", path, NULL, NULL, NULL, &ro, &obj, &ke);
		if (e == KUBE_ERR_NOT_FOUND) {
			if (!c->missing_logged[k]++)
				log_kv(LOG_INFO, "no webhook configuration to put the caBundle in (yet)", "resource",
				       kinds[k], "name", c->config_name);
			rc = 0;
			break;
		}
		if (e != KUBE_OK) {
			cJSON_Delete(obj);
			break;
		}
		c->missing_logged[k] = 0;
		int n = webhook_cabundle_apply(obj, c->bundle_b64, c->required);
		if (n == 0) {
			cJSON_Delete(obj);
			rc = 0;
			break;
		}
		/* The object carries metadata.resourceVersion: the PUT fails with
		 * Conflict when someone changed it since the GET, and we re-read. */
		char *body = cJSON_PrintUnformatted(obj);
		cJSON_Delete(obj);
		e = kube_request_ex(c->kc, "PUT", path, NULL, body, NULL, &ro, NULL, &ke);
		free(body);
		if (e == KUBE_OK) {
			obs_metric_add(c->m_bundle, (const char *const[]){ kinds[k], "updated" }, 1);
			char nb[16];
			snprintf(nb, sizeof nb, "%d", n);
			log_kv(LOG_INFO, "webhook caBundle updated", "resource", kinds[k], "name", c->config_name,
			       "webhooks", nb);
			rc = 0;
			break;
		}
		if (e != KUBE_ERR_CONFLICT)
			break;
	}
	if (rc < 0 && !atomic_load(&c->stop)) {
		obs_metric_add(c->m_bundle, (const char *const[]){ kinds[k], "error" }, 1);
		log_kv(LOG_WARN, "cannot update the webhook caBundle", "resource", kinds[k], "name", c->config_name,
		       "error", kube_err_str(ke.code), "message", ke.message);
	}
	free(path);
	return rc;
}

/* Checks both configurations against the bundle for the current epoch.
 * Returns 0 or -1. */
static int sync_bundles(struct webhook_certs *c, long epoch)
{
	if (!c->kc || !c->config_name)
		return 0;
	char err[512];
	if ((!c->bundle_b64 || c->bundle_epoch != epoch) && make_bundle(c, epoch, err, sizeof err) < 0) {
		log_kv(LOG_ERROR, "cannot build the webhook caBundle", "error", err);
		return -1;
	}
	int rc = 0;
	for (int k = 0; k < 2; k++)
		rc |= sync_kind(c, k);
	return rc;
}

static void *keeper_main(void *arg)
{
	struct webhook_certs *c = arg;
	int renewed = 1; /* the first certificate was written by start */
	while (!atomic_load(&c->stop)) {
		time_t now = time(NULL);
		long epoch = webhook_ca_epoch(now, c->cert.ca_lifetime_s);
		if (epoch != c->epoch || now >= c->renew_at) {
			if (renew(c, now) == 0)
				renewed = 1;
			else
				c->renew_at = now + RETRY_S;
		}
		if (renewed || now >= c->next_check) {
			c->next_check = now + (sync_bundles(c, c->epoch) == 0 ? c->check_s : RETRY_S);
			renewed = 0;
		}
		time_t wake = c->renew_at;
		time_t next_epoch = (time_t)(epoch + 1) * c->cert.ca_lifetime_s;
		if (next_epoch < wake)
			wake = next_epoch;
		if (c->next_check < wake)
			wake = c->next_check;
		now = time(NULL);
		long secs = wake > now ? (long)(wake - now) : 0;
		if (secs > 60)
			secs = 60; /* re-read the wall clock at least once a minute */
		pthread_mutex_lock(&c->mu);
		int64_t deadline = ktime_mono_ms() + secs * 1000 + 50;
		while (!atomic_load(&c->stop) && ktime_cond_wait_until(&c->cv, &c->mu, deadline) == 0)
			;
		pthread_mutex_unlock(&c->mu);
	}
	return NULL;
}

/* Copies n strings. */
static char **strv_dup(const char *const *v, size_t n)
{
	char **out = xcalloc(n ? n : 1, sizeof *out);
	for (size_t i = 0; i < n; i++)
		out[i] = xstrdup(v[i]);
	return out;
}

static void strv_free(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

struct webhook_certs *webhook_certs_start(struct kube_client *kc, const struct sbx_seal_keys *keys,
					  const struct webhook_certs_opts *o, char *err, size_t errlen)
{
	struct webhook_cert_opts co = o->cert;
	if (webhook_cert_opts_check(&co, err, errlen) < 0)
		return NULL;
	if (!o->cert_dir || !*o->cert_dir || !keys || keys->n == 0) {
		snprintf(err, errlen, "self-managed certificates need a cert dir and the seal key");
		return NULL;
	}
	struct webhook_certs *c = xcalloc(1, sizeof *c);
	c->kc = kc;
	sbx_seal_keys_init(&c->keys);
	for (size_t i = 0; i < keys->n; i++)
		if (sbx_seal_keys_add(&c->keys, keys->key[i], keys->len[i], 0, err, errlen) < 0) {
			webhook_certs_free(c);
			return NULL;
		}
	c->dns = strv_dup(co.dns_names, co.ndns);
	c->ips = strv_dup(co.ips, co.nips);
	c->cert = co;
	c->cert.dns_names = (const char *const *)c->dns;
	c->cert.ips = (const char *const *)c->ips;
	c->cert_dir = xstrdup(o->cert_dir);
	c->config_name = o->config_name && *o->config_name ? xstrdup(o->config_name) : NULL;
	c->check_s = o->bundle_check_s > 0 ? o->bundle_check_s : 60;
	c->epoch = -1;
	c->m_expiry = obs_gauge("webhook_serving_certificate_expiration_timestamp_seconds",
				"notAfter of the self-managed webhook serving certificate, in Unix seconds.", NULL);
	c->m_renewals = obs_counter("webhook_serving_certificate_renewals_total",
				    "Self-managed webhook serving certificates issued, by result.", "result");
	c->m_bundle = obs_counter("webhook_cabundle_updates_total",
				  "Writes of the webhook configurations' caBundle, by resource and result.",
				  "resource,result");
	pthread_mutex_init(&c->mu, NULL);
	ktime_cond_init(&c->cv);
	if (renew(c, time(NULL)) < 0) {
		snprintf(err, errlen, "cannot write the first serving certificate into %s", o->cert_dir);
		webhook_certs_free(c);
		return NULL;
	}
	if (pthread_create(&c->thread, NULL, keeper_main, c) != 0) {
		snprintf(err, errlen, "cannot start the certificate thread");
		webhook_certs_free(c);
		return NULL;
	}
	c->started = 1;
	return c;
}

void webhook_certs_free(struct webhook_certs *c)
{
	if (!c)
		return;
	if (c->started) {
		pthread_mutex_lock(&c->mu);
		atomic_store(&c->stop, 1);
		pthread_cond_broadcast(&c->cv);
		pthread_mutex_unlock(&c->mu);
		pthread_join(c->thread, NULL);
	}
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	sbx_seal_keys_release(&c->keys);
	strv_free(c->dns, c->cert.ndns);
	strv_free(c->ips, c->cert.nips);
	free(c->cert_dir);
	free(c->config_name);
	free(c->bundle_b64);
	free(c->required);
	free(c);
}
