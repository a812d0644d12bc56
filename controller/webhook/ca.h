/* Serving certificates for the admission webhook with no Secret beyond the
 * seal key ("self-managed" certificate mode): the CA derivation, issuance and
 * caBundle, pure (no thread, no API call; unit tested as such). The thread
 * that renews and syncs them is webhook/certs.h.
 *
 * Every replica already holds the seal key, so the webhook CA is derived from
 * it instead of being stored: time is cut into epochs of ca_lifetime seconds
 * (epoch = floor(now / ca_lifetime)), and CA(epoch) is an Ed25519 key taken
 * from HKDF-SHA256(ikm = seal key, salt = "sandbox.dev/webhook-ca/v1",
 * info = "epoch=<n>,lifetime=<s>") with a certificate whose every field is a
 * function of (seal key, epoch, lifetime). Ed25519 signatures are
 * deterministic, so all replicas produce byte-identical CA certificates and an
 * identical caBundle without talking to each other, and writing that bundle
 * into the webhook configurations is idempotent.
 *
 * The caBundle holds CA(epoch-1), CA(epoch) and CA(epoch+1): the next CA is
 * trusted before any replica signs with it, and serving certificates signed by
 * the previous CA stay trusted while they live (a replica whose clock runs
 * late, or that has not renewed yet, keeps working across the epoch change).
 * CA(e) is valid from start(e) - 1 h to start(e) + 2 ca_lifetime, so it
 * outlives every serving certificate it signs.
 *
 * Seal key rotation (a list of keys, newest first; replicas restarted in
 * turn): the newest key's CA signs, and the caBundle holds those three CAs
 * for every key in the list. A replica leaves a caBundle alone as long as it
 * contains the CAs its own certificates need (CA(epoch) and CA(epoch+1) of its
 * newest key) and writes its own bundle otherwise. So replicas holding [old]
 * and [new, old] during a rollout, or replicas whose clocks straddle an epoch
 * change, never rewrite each other; CAs of a key dropped from the list leave
 * the caBundle at the next epoch change (or at once if someone clears it).
 *
 * Each replica makes its own serving key (ECDSA P-256, random, never leaves
 * the cert dir) and a certificate signed by CA(epoch), valid for `validity`
 * seconds, renewed at 2/3 of its validity and at each epoch change, and
 * written atomically (temporary file + rename) as tls.key and tls.crt.
 *
 * Private keys are wiped when released (OpenSSL clears EVP_PKEY material on
 * free; derived seeds are OPENSSL_cleanse'd here) and are never logged. */
#ifndef SBX_WEBHOOK_CA_H
#define SBX_WEBHOOK_CA_H

#include <stddef.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include "base/buf.h"
#include "sandbox/seal.h"

/* Shortest serving certificate validity accepted (tests use 60 s); the
 * renewal runs at 2/3 of it, so this keeps renewals >= 20 s apart. */
#define WEBHOOK_CERT_MIN_VALIDITY_S 30L
/* Longest serving certificate validity accepted (a year). */
#define WEBHOOK_CERT_MAX_VALIDITY_S (366L * 86400)
/* Default CA lifetime = this many serving certificate validities. */
#define WEBHOOK_CA_LIFETIME_FACTOR 30L
/* The CA lifetime is at least twice the serving validity (so a CA outlives
 * every certificate it signs) and at most ten years. */
#define WEBHOOK_CA_MAX_LIFETIME_S (10L * 366 * 86400)
/* The backdating of serving certificates' notBefore (clock skew), capped at
 * the validity itself. */
#define WEBHOOK_CERT_BACKDATE_S 300L

/* What a serving certificate says. All strings borrowed. */
struct webhook_cert_opts {
	const char *const *dns_names; /* subjectAltName DNS entries */
	size_t ndns;
	const char *const *ips; /* subjectAltName IP entries ("127.0.0.1", "::1") */
	size_t nips;
	long validity_s;    /* WEBHOOK_CERT_MIN_VALIDITY_S .. WEBHOOK_CERT_MAX_VALIDITY_S */
	long ca_lifetime_s; /* 0 = WEBHOOK_CA_LIFETIME_FACTOR x validity */
};

/* Checks o (lengths, ranges, names parseable) and fills in the default CA
 * lifetime. Returns 0, or -1 with a message (then *o is unchanged). */
int webhook_cert_opts_check(struct webhook_cert_opts *o, char *err, size_t errlen);

/* The epoch that contains time now (now >= 0). */
long webhook_ca_epoch(time_t now, long ca_lifetime_s);

/* A derived CA: both pointers owned. */
struct webhook_ca {
	X509 *cert;
	EVP_PKEY *key;
	long epoch;
};

/* Derives CA(epoch) from the seal key. Returns 0 and fills *ca (release with
 * webhook_ca_release), or -1 with a message and *ca zeroed. */
int webhook_ca_derive(struct webhook_ca *ca, const unsigned char *seal, size_t seal_len,
		      long ca_lifetime_s, long epoch, char *err, size_t errlen);
/* Frees the CA's certificate and key (the key is wiped). */
void webhook_ca_release(struct webhook_ca *ca);

/* Appends the PEM caBundle for epoch to out: CA(epoch-1) CA(epoch) CA(epoch+1)
 * of each key, in the keys' order. Returns 0, or -1 with a message (out may
 * hold part of it). */
int webhook_ca_bundle(struct buf *out, const struct sbx_seal_keys *keys, long ca_lifetime_s, long epoch,
		      char *err, size_t errlen);
/* Appends the PEM of the CAs a replica's serving certificates need at epoch:
 * CA(epoch) and CA(epoch+1) of the newest key. Returns 0 or -1 with a message. */
int webhook_ca_required(struct buf *out, const struct sbx_seal_keys *keys, long ca_lifetime_s, long epoch,
			char *err, size_t errlen);

/* A serving certificate and its key: both pointers owned. */
struct webhook_serving {
	X509 *cert;
	EVP_PKEY *key;
	time_t not_after;
	time_t renew_at; /* issue time + 2/3 validity */
	long epoch;	 /* the CA's epoch */
};

/* Issues a serving certificate at time now, signed by ca, for o (checked by
 * webhook_cert_opts_check). Returns 0 and fills *s (release with
 * webhook_serving_release), or -1 with a message and *s zeroed. */
int webhook_serving_issue(struct webhook_serving *s, const struct webhook_ca *ca,
			  const struct webhook_cert_opts *o, time_t now, char *err, size_t errlen);
void webhook_serving_release(struct webhook_serving *s);
/* Writes dir/tls.key (mode 0600) and dir/tls.crt, each to a temporary file in
 * dir then renamed over the old one, the key first. Creates dir (0700) when
 * missing. Returns 0, or -1 with a message (the old files are then intact). */
int webhook_serving_write(const struct webhook_serving *s, const char *dir, char *err,
			  size_t errlen);
/* The SHA-256 fingerprint of cert, as colon-separated upper-case hex (what
 * `openssl x509 -fingerprint -sha256` prints) into out (96 bytes). */
void webhook_cert_fingerprint(X509 *cert, char out[96]);

/* Sets every webhooks[*].clientConfig.caBundle of a webhook configuration
 * object (admissionregistration.k8s.io/v1) to want (base64 of the PEM bundle)
 * unless it already holds every PEM certificate of required (a PEM text, as
 * webhook_ca_required makes; certificates are compared by their exact PEM
 * text, which is deterministic for the derived CAs). Returns the number of
 * entries changed. */
int webhook_cabundle_apply(cJSON *config, const char *want, const char *required);

#endif
