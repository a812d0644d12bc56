/* Self-managed webhook certificates: the CA derived from the seal key is
 * byte-identical across derivations, serving certificates verify against the
 * caBundle (chain and SAN), an epoch change keeps the previous certificate
 * trusted, another seal key gives another CA, and the caBundle patch logic. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CUnit/CUnit.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "base/buf.h"
#include "obs/metrics.h"
#include "sandbox/seal.h"
#include "webhook/certs.h"

#include "test_suites.h"

static const unsigned char seal_a[] = "0123456789abcdef0123456789abcdef-seal-key-A";
static const unsigned char seal_b[] = "0123456789abcdef0123456789abcdef-seal-key-B";
static const char *const dns[] = { "sandbox-controller-webhook.sandbox-system.svc",
				   "sandbox-controller-webhook.sandbox-system.svc.cluster.local" };
static const char *const ips[] = { "127.0.0.1" };

static struct webhook_cert_opts opts(long validity, long lifetime)
{
	struct webhook_cert_opts o = { .dns_names = dns, .ndns = 2, .ips = ips, .nips = 1, .validity_s = validity, .ca_lifetime_s = lifetime };
	char err[256];
	CU_ASSERT_FATAL(webhook_cert_opts_check(&o, err, sizeof err) == 0);
	return o;
}

/* PEM of CA(epoch). */
static char *ca_pem(const unsigned char *seal, size_t len, long lifetime, long epoch)
{
	struct webhook_ca ca;
	char err[256];
	CU_ASSERT_FATAL(webhook_ca_derive(&ca, seal, len, lifetime, epoch, err, sizeof err) == 0);
	BIO *bio = BIO_new(BIO_s_mem());
	CU_ASSERT_FATAL(PEM_write_bio_X509(bio, ca.cert) == 1);
	char *p;
	long n = BIO_get_mem_data(bio, &p);
	char *out = strndup(p, (size_t)n);
	BIO_free(bio);
	webhook_ca_release(&ca);
	return out;
}

/* A key list of one or two keys, newest first (release with sbx_seal_keys_release). */
static struct sbx_seal_keys keys_of(const unsigned char *k0, size_t l0, const unsigned char *k1, size_t l1)
{
	struct sbx_seal_keys k;
	char err[256];
	sbx_seal_keys_init(&k);
	CU_ASSERT_FATAL(sbx_seal_keys_add(&k, k0, l0, 0, err, sizeof err) == 0);
	if (k1)
		CU_ASSERT_FATAL(sbx_seal_keys_add(&k, k1, l1, 0, err, sizeof err) == 0);
	return k;
}

/* The PEM caBundle (required = 0) or required CAs (required = 1) of keys. */
static char *bundle_of(const struct sbx_seal_keys *k, long lifetime, long epoch, int required)
{
	struct buf b;
	char err[256];
	buf_init(&b, 1 << 16);
	CU_ASSERT_FATAL((required ? webhook_ca_required : webhook_ca_bundle)(&b, k, lifetime, epoch, err,
									     sizeof err) == 0);
	return buf_detach(&b);
}

static char *bundle(const unsigned char *seal, size_t len, long lifetime, long epoch)
{
	struct sbx_seal_keys k = keys_of(seal, len, NULL, 0);
	char *out = bundle_of(&k, lifetime, epoch, 0);
	sbx_seal_keys_release(&k);
	return out;
}

/* X509_verify_cert of leaf against the PEM bundle at time t, for a TLS
 * server named host (a DNS name or an IP). Returns the verify result (1 = ok). */
static int verify(X509 *leaf, const char *bundle_pem, time_t t, const char *host)
{
	X509_STORE *store = X509_STORE_new();
	BIO *bio = BIO_new_mem_buf(bundle_pem, -1);
	X509 *x;
	int ncas = 0;
	while ((x = PEM_read_bio_X509(bio, NULL, NULL, NULL))) {
		X509_STORE_add_cert(store, x);
		X509_free(x);
		ncas++;
	}
	BIO_free(bio);
	CU_ASSERT(ncas > 0 && ncas % 3 == 0);
	X509_STORE_CTX *ctx = X509_STORE_CTX_new();
	X509_STORE_CTX_init(ctx, store, leaf, NULL);
	X509_VERIFY_PARAM *p = X509_STORE_CTX_get0_param(ctx);
	X509_VERIFY_PARAM_set_time(p, t);
	X509_VERIFY_PARAM_set_purpose(p, X509_PURPOSE_SSL_SERVER);
	if (strchr(host, ':') || strspn(host, "0123456789.") == strlen(host))
		X509_VERIFY_PARAM_set1_ip_asc(p, host);
	else
		X509_VERIFY_PARAM_set1_host(p, host, 0);
	int rc = X509_verify_cert(ctx);
	X509_STORE_CTX_free(ctx);
	X509_STORE_free(store);
	ERR_clear_error();
	return rc;
}

static void issue_at(struct webhook_serving *s, const unsigned char *seal, size_t len,
		     const struct webhook_cert_opts *o, time_t now)
{
	struct webhook_ca ca;
	char err[256];
	long e = webhook_ca_epoch(now, o->ca_lifetime_s);
	CU_ASSERT_FATAL(webhook_ca_derive(&ca, seal, len, o->ca_lifetime_s, e, err, sizeof err) == 0);
	CU_ASSERT_FATAL(webhook_serving_issue(s, &ca, o, now, err, sizeof err) == 0);
	webhook_ca_release(&ca);
}

static void test_ca_deterministic(void)
{
	char *a = ca_pem(seal_a, sizeof seal_a - 1, 86400 * 30, 700);
	char *b = ca_pem(seal_a, sizeof seal_a - 1, 86400 * 30, 700);
	CU_ASSERT_STRING_EQUAL(a, b);
	char *next = ca_pem(seal_a, sizeof seal_a - 1, 86400 * 30, 701);
	CU_ASSERT_STRING_NOT_EQUAL(a, next);
	char *b1 = bundle(seal_a, sizeof seal_a - 1, 86400 * 30, 700);
	char *b2 = bundle(seal_a, sizeof seal_a - 1, 86400 * 30, 700);
	CU_ASSERT_STRING_EQUAL(b1, b2);
	/* the bundle holds CA(e-1), CA(e), CA(e+1), in that order */
	char *prev = ca_pem(seal_a, sizeof seal_a - 1, 86400 * 30, 699);
	char *expect = malloc(strlen(prev) + strlen(a) + strlen(next) + 1);
	strcat(strcat(strcpy(expect, prev), a), next);
	CU_ASSERT_STRING_EQUAL(b1, expect);
	free(a), free(b), free(next), free(b1), free(b2), free(prev), free(expect);
}

static void test_ca_fields(void)
{
	struct webhook_ca ca;
	char err[256];
	long L = 3600;
	CU_ASSERT_FATAL(webhook_ca_derive(&ca, seal_a, sizeof seal_a - 1, L, 10, err, sizeof err) == 0);
	CU_ASSERT(X509_check_ca(ca.cert) == 1);
	CU_ASSERT(EVP_PKEY_id(ca.key) == EVP_PKEY_ED25519);
	CU_ASSERT(X509_cmp_time(X509_get0_notBefore(ca.cert), &(time_t){ 10 * L - 3600 - 1 }) > 0);
	CU_ASSERT(X509_cmp_time(X509_get0_notBefore(ca.cert), &(time_t){ 10 * L - 3600 }) < 0 ||
		  X509_cmp_time(X509_get0_notBefore(ca.cert), &(time_t){ 10 * L - 3600 }) == 0);
	CU_ASSERT(X509_cmp_time(X509_get0_notAfter(ca.cert), &(time_t){ 12 * L - 1 }) > 0);
	CU_ASSERT(X509_cmp_time(X509_get0_notAfter(ca.cert), &(time_t){ 12 * L + 1 }) < 0);
	char cn[128];
	CU_ASSERT(X509_NAME_get_text_by_NID(X509_get_subject_name(ca.cert), NID_commonName, cn, sizeof cn) > 0);
	CU_ASSERT_STRING_EQUAL(cn, "sandbox-controller-webhook-ca");
	CU_ASSERT(X509_get_ext_by_NID(ca.cert, NID_subject_key_identifier, -1) >= 0);
	CU_ASSERT(X509_verify(ca.cert, ca.key) == 1); /* self-signed */
	webhook_ca_release(&ca);
}

static void test_serving_verifies(void)
{
	struct webhook_cert_opts o = opts(86400, 0);
	CU_ASSERT(o.ca_lifetime_s == 30 * 86400);
	time_t now = 1800000000;
	struct webhook_serving s;
	issue_at(&s, seal_a, sizeof seal_a - 1, &o, now);
	char *b = bundle(seal_a, sizeof seal_a - 1, o.ca_lifetime_s, webhook_ca_epoch(now, o.ca_lifetime_s));
	CU_ASSERT(verify(s.cert, b, now, dns[0]) == 1);
	CU_ASSERT(verify(s.cert, b, now, dns[1]) == 1);
	CU_ASSERT(verify(s.cert, b, now, "127.0.0.1") == 1);
	CU_ASSERT(verify(s.cert, b, now, "other.sandbox-system.svc") != 1);
	CU_ASSERT(verify(s.cert, b, now, "10.0.0.1") != 1);
	CU_ASSERT(verify(s.cert, b, now + 86400 + 1, dns[0]) != 1); /* expired */
	CU_ASSERT(s.not_after == now + 86400);
	CU_ASSERT(s.renew_at == now + 2 * 86400 / 3);
	CU_ASSERT(EVP_PKEY_id(s.key) == EVP_PKEY_EC);
	/* two replicas: own keys, same trust */
	struct webhook_serving s2;
	issue_at(&s2, seal_a, sizeof seal_a - 1, &o, now + 5);
	CU_ASSERT(EVP_PKEY_eq(s.key, s2.key) != 1);
	CU_ASSERT(verify(s2.cert, b, now + 5, dns[0]) == 1);
	webhook_serving_release(&s);
	webhook_serving_release(&s2);
	free(b);
}

static void test_epoch_rollover(void)
{
	struct webhook_cert_opts o = opts(60, 120);
	long e = 15000000;
	time_t start_next = (time_t)(e + 1) * 120;
	/* issued 10 s before the epoch ends, still valid 50 s into the next */
	struct webhook_serving old;
	issue_at(&old, seal_a, sizeof seal_a - 1, &o, start_next - 10);
	CU_ASSERT(old.epoch == e);
	char *b_now = bundle(seal_a, sizeof seal_a - 1, 120, e);
	char *b_next = bundle(seal_a, sizeof seal_a - 1, 120, e + 1);
	CU_ASSERT(verify(old.cert, b_next, start_next + 5, "127.0.0.1") == 1);
	/* a replica already in the next epoch is trusted by the old bundle */
	struct webhook_serving fresh;
	issue_at(&fresh, seal_a, sizeof seal_a - 1, &o, start_next + 1);
	CU_ASSERT(fresh.epoch == e + 1);
	CU_ASSERT(verify(fresh.cert, b_now, start_next + 1, "127.0.0.1") == 1);
	CU_ASSERT(verify(fresh.cert, b_next, start_next + 1, "127.0.0.1") == 1);
	/* two epochs on, CA(e) has left the bundle */
	char *b_later = bundle(seal_a, sizeof seal_a - 1, 120, e + 2);
	CU_ASSERT(verify(old.cert, b_later, start_next + 5, "127.0.0.1") != 1);
	webhook_serving_release(&old);
	webhook_serving_release(&fresh);
	free(b_now), free(b_next), free(b_later);
}

static void test_other_seal_other_ca(void)
{
	char *a = ca_pem(seal_a, sizeof seal_a - 1, 3600, 5);
	char *b = ca_pem(seal_b, sizeof seal_b - 1, 3600, 5);
	CU_ASSERT_STRING_NOT_EQUAL(a, b);
	/* the lifetime is part of the derivation too */
	char *c = ca_pem(seal_a, sizeof seal_a - 1, 7200, 5);
	CU_ASSERT_STRING_NOT_EQUAL(a, c);
	struct webhook_cert_opts o = opts(60, 3600);
	struct webhook_serving s;
	time_t now = 5 * 3600 + 100;
	issue_at(&s, seal_a, sizeof seal_a - 1, &o, now);
	char *bb = bundle(seal_b, sizeof seal_b - 1, 3600, 5);
	CU_ASSERT(verify(s.cert, bb, now, "127.0.0.1") != 1);
	webhook_serving_release(&s);
	free(a), free(b), free(c), free(bb);
}

static void test_opts_check(void)
{
	char err[256];
	struct webhook_cert_opts o = { .dns_names = dns, .ndns = 1, .validity_s = 29 };
	CU_ASSERT(webhook_cert_opts_check(&o, err, sizeof err) < 0);
	o.validity_s = 60;
	o.ca_lifetime_s = 119;
	CU_ASSERT(webhook_cert_opts_check(&o, err, sizeof err) < 0);
	CU_ASSERT(o.ca_lifetime_s == 119); /* unchanged on error */
	o.ca_lifetime_s = 0;
	CU_ASSERT(webhook_cert_opts_check(&o, err, sizeof err) == 0);
	CU_ASSERT(o.ca_lifetime_s == 1800);
	static const char *const bad_dns[] = { "a..b" };
	static const char *const bad_dns2[] = { "x,IP:1.2.3.4" };
	static const char *const bad_ip[] = { "300.1.1.1" };
	struct webhook_cert_opts b1 = { .dns_names = bad_dns, .ndns = 1, .validity_s = 60 };
	struct webhook_cert_opts b2 = { .dns_names = bad_dns2, .ndns = 1, .validity_s = 60 };
	struct webhook_cert_opts b3 = { .ips = bad_ip, .nips = 1, .validity_s = 60 };
	struct webhook_cert_opts b4 = { .validity_s = 60 };
	CU_ASSERT(webhook_cert_opts_check(&b1, err, sizeof err) < 0);
	CU_ASSERT(webhook_cert_opts_check(&b2, err, sizeof err) < 0);
	CU_ASSERT(webhook_cert_opts_check(&b3, err, sizeof err) < 0);
	CU_ASSERT(webhook_cert_opts_check(&b4, err, sizeof err) < 0);
	struct webhook_cert_opts year = { .dns_names = dns, .ndns = 1, .validity_s = 366L * 86400 };
	CU_ASSERT(webhook_cert_opts_check(&year, err, sizeof err) == 0);
	CU_ASSERT(year.ca_lifetime_s == WEBHOOK_CA_MAX_LIFETIME_S);
}

static void test_write_files(void)
{
	char dir[] = "/tmp/sbx-certs-test.XXXXXX";
	CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
	char sub[128], crt[160], key[160], err[256];
	snprintf(sub, sizeof sub, "%s/a/b", dir);
	snprintf(crt, sizeof crt, "%s/tls.crt", sub);
	snprintf(key, sizeof key, "%s/tls.key", sub);
	struct webhook_cert_opts o = opts(60, 0);
	struct webhook_serving s;
	issue_at(&s, seal_a, sizeof seal_a - 1, &o, time(NULL));
	CU_ASSERT_FATAL(webhook_serving_write(&s, sub, err, sizeof err) == 0);
	struct stat st;
	CU_ASSERT(stat(key, &st) == 0 && (st.st_mode & 0777) == 0600);
	CU_ASSERT(stat(crt, &st) == 0 && (st.st_mode & 0777) == 0644);
	FILE *f = fopen(crt, "r");
	X509 *x = f ? PEM_read_X509(f, NULL, NULL, NULL) : NULL;
	if (f)
		fclose(f);
	f = fopen(key, "r");
	EVP_PKEY *k = f ? PEM_read_PrivateKey(f, NULL, NULL, NULL) : NULL;
	if (f)
		fclose(f);
	CU_ASSERT_FATAL(x && k);
	CU_ASSERT(X509_cmp(x, s.cert) == 0);
	CU_ASSERT(X509_check_private_key(x, k) == 1);
	char fp[96];
	webhook_cert_fingerprint(x, fp);
	CU_ASSERT(strlen(fp) == 95 && fp[2] == ':');
	X509_free(x);
	EVP_PKEY_free(k);
	webhook_serving_release(&s);
	unlink(crt), unlink(key);
	snprintf(crt, sizeof crt, "%s/a", dir);
	rmdir(sub), rmdir(crt), rmdir(dir);
}

/* base64 of a PEM text (caller frees). */
static char *b64(const char *pem)
{
	size_t n = strlen(pem);
	char *out = malloc(4 * ((n + 2) / 3) + 1);
	EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)pem, (int)n);
	return out;
}

/* A webhook configuration whose one webhook carries caBundle b (caller frees). */
static cJSON *config_with(const char *b)
{
	cJSON *cfg = cJSON_Parse("{\"webhooks\":[{\"name\":\"a\",\"clientConfig\":{}}]}");
	cJSON_AddStringToObject(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(cfg, "webhooks"), 0),
						    "clientConfig"),
				"caBundle", b);
	return cfg;
}

static const char *bundle_in(const cJSON *cfg, int i)
{
	const cJSON *h = cJSON_GetArrayItem(cJSON_GetObjectItem(cfg, "webhooks"), i);
	const cJSON *b = cJSON_GetObjectItem(cJSON_GetObjectItem(h, "clientConfig"), "caBundle");
	return cJSON_IsString(b) ? b->valuestring : "";
}

static void test_cabundle_apply(void)
{
	long L = 3600, e = 50;
	struct sbx_seal_keys k = keys_of(seal_a, sizeof seal_a - 1, NULL, 0);
	char *pem_now = bundle_of(&k, L, e, 0), *pem_next = bundle_of(&k, L, e + 1, 0);
	char *pem_old = bundle_of(&k, L, e - 2, 0), *req = bundle_of(&k, L, e, 1);
	char *want = b64(pem_now), *next = b64(pem_next), *old = b64(pem_old);
	cJSON *cfg = cJSON_CreateObject();
	cJSON *hooks = cJSON_AddArrayToObject(cfg, "webhooks");
	const char *have[] = { NULL, want, next, old, "!!notbase64", "" };
	for (int i = 0; i < 6; i++) {
		cJSON *h = cJSON_CreateObject(), *cc = cJSON_AddObjectToObject(h, "clientConfig");
		if (have[i])
			cJSON_AddStringToObject(cc, "caBundle", have[i]);
		cJSON_AddItemToArray(hooks, h);
	}
	/* kept: ours, and the next epoch's (a replica whose clock runs ahead:
	 * it still holds CA(e) and CA(e+1)); rewritten: absent, stale, junk, empty */
	CU_ASSERT(webhook_cabundle_apply(cfg, want, req) == 4);
	const char *expect[] = { want, want, next, want, want, want };
	for (int i = 0; i < 6; i++)
		CU_ASSERT_STRING_EQUAL(bundle_in(cfg, i), expect[i]);
	CU_ASSERT(webhook_cabundle_apply(cfg, want, req) == 0); /* idempotent */
	/* the replica ahead does not keep the older bundle: it lacks CA(e+2) */
	char *req_next = bundle_of(&k, L, e + 1, 1);
	CU_ASSERT(webhook_cabundle_apply(cfg, next, req_next) == 5);
	cJSON_Delete(cfg);
	sbx_seal_keys_release(&k);
	free(pem_now), free(pem_next), free(pem_old), free(req), free(req_next), free(want), free(next), free(old);
}

/* Seal key rotation (newest key first, every replica restarted in turn): a
 * replica that still has only the old key and one that has [new, old] must
 * both accept the bundle the other writes when it trusts their own CAs, or
 * they rewrite each other's caBundle for the whole rollout and admission
 * calls to one side fail in between. */
static void test_rotation_no_flapping(void)
{
	long L = 3600, e = 100;
	time_t now = e * L + 10;
	struct sbx_seal_keys old_k = keys_of(seal_a, sizeof seal_a - 1, NULL, 0);
	struct sbx_seal_keys new_k = keys_of(seal_b, sizeof seal_b - 1, seal_a, sizeof seal_a - 1);
	struct sbx_seal_keys done_k = keys_of(seal_b, sizeof seal_b - 1, NULL, 0);
	char *pem_old = bundle_of(&old_k, L, e, 0), *pem_new = bundle_of(&new_k, L, e, 0);
	char *req_old = bundle_of(&old_k, L, e, 1), *req_new = bundle_of(&new_k, L, e, 1);
	char *req_done = bundle_of(&done_k, L, e, 1);
	char *w_old = b64(pem_old), *w_new = b64(pem_new);
	/* the [new, old] replica writes both keys' CAs ... */
	cJSON *cfg = config_with(w_old);
	CU_ASSERT(webhook_cabundle_apply(cfg, w_new, req_new) == 1);
	CU_ASSERT_STRING_EQUAL(bundle_in(cfg, 0), w_new);
	/* ... which the old replica keeps, and so does a replica that dropped the old key */
	CU_ASSERT(webhook_cabundle_apply(cfg, w_old, req_old) == 0);
	CU_ASSERT(webhook_cabundle_apply(cfg, w_old, req_done) == 0);
	cJSON_Delete(cfg);
	/* both replicas' certificates verify against it */
	struct webhook_cert_opts o = opts(60, L);
	struct webhook_serving s_old, s_new;
	issue_at(&s_old, seal_a, sizeof seal_a - 1, &o, now);
	issue_at(&s_new, seal_b, sizeof seal_b - 1, &o, now);
	CU_ASSERT(verify(s_old.cert, pem_new, now, "127.0.0.1") == 1);
	CU_ASSERT(verify(s_new.cert, pem_new, now, "127.0.0.1") == 1);
	CU_ASSERT(verify(s_new.cert, pem_old, now, "127.0.0.1") != 1);
	webhook_serving_release(&s_old);
	webhook_serving_release(&s_new);
	sbx_seal_keys_release(&old_k), sbx_seal_keys_release(&new_k), sbx_seal_keys_release(&done_k);
	free(pem_old), free(pem_new), free(req_old), free(req_new), free(req_done), free(w_old), free(w_new);
}

static void test_keeper_start_stop(void)
{
	char dir[] = "/tmp/sbx-certs-keeper.XXXXXX", crt[160], key[160], err[256];
	CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
	snprintf(crt, sizeof crt, "%s/tls.crt", dir);
	snprintf(key, sizeof key, "%s/tls.key", dir);
	struct webhook_certs_opts o = { .cert = { .ips = ips, .nips = 1, .validity_s = 60 }, .cert_dir = dir };
	struct sbx_seal_keys k = keys_of(seal_a, sizeof seal_a - 1, NULL, 0);
	struct webhook_certs *c = webhook_certs_start(NULL, &k, &o, err, sizeof err);
	CU_ASSERT_FATAL(c != NULL);
	CU_ASSERT(access(crt, R_OK) == 0 && access(key, R_OK) == 0);
	double na = obs_metric_value(
	    obs_gauge("webhook_serving_certificate_expiration_timestamp_seconds", "", NULL), NULL);
	CU_ASSERT(na > (double)time(NULL) + 50 && na <= (double)time(NULL) + 60);
	webhook_certs_free(c); /* the thread stops at once */
	o.cert.validity_s = 10;
	CU_ASSERT(webhook_certs_start(NULL, &k, &o, err, sizeof err) == NULL);
	CU_ASSERT(strstr(err, "validity") != NULL);
	sbx_seal_keys_release(&k);
	unlink(crt), unlink(key), rmdir(dir);
}

void register_webhook_certs_tests(void)
{
	SBX_SUITE("webhook_certs", { "CA derivation is deterministic", test_ca_deterministic },
		  { "CA certificate fields", test_ca_fields },
		  { "serving certificate verifies against the bundle", test_serving_verifies },
		  { "epoch rollover keeps certificates trusted", test_epoch_rollover },
		  { "another seal key gives another CA", test_other_seal_other_ca },
		  { "option checks", test_opts_check }, { "atomic file writes", test_write_files },
		  { "caBundle patch logic", test_cabundle_apply },
		  { "keeper writes at start and stops", test_keeper_start_stop },
		  { "seal key rotation: replicas do not rewrite each other", test_rotation_no_flapping });
}
