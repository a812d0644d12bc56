#include "webhook/ca.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/kdf.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/x509v3.h>

#include "base/xmalloc.h"

#define CA_SALT "sandbox.dev/webhook-ca/v1"
#define CA_SUBJECT_CN "sandbox-controller-webhook-ca"
#define SERVING_DEFAULT_CN "sandbox-controller-webhook"
/* CA(e) is valid from one hour before its epoch starts. */
#define CA_BACKDATE_S 3600L
/* Caps on what a serving certificate may name. */
#define MAX_SAN_ENTRIES 32
#define MAX_DNS_NAME 253

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Writes a message (plus OpenSSL's first queued error, if any) and returns -1. */
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	unsigned long e = ERR_get_error();
	if (e && n >= 0 && (size_t)n < errlen) {
		char detail[256];
		ERR_error_string_n(e, detail, sizeof detail);
		snprintf(err + n, errlen - (size_t)n, ": %s", detail);
	}
	ERR_clear_error();
	return -1;
}

/* 1 iff s is a DNS name a certificate may carry: labels of [A-Za-z0-9-],
 * optionally a leading "*." wildcard, total at most 253 characters. */
static int dns_name_ok(const char *s)
{
	size_t n = strlen(s), label = 0;
	if (n == 0 || n > MAX_DNS_NAME)
		return 0;
	if (!strncmp(s, "*.", 2))
		s += 2;
	for (; *s; s++) {
		if (*s == '.') {
			if (label == 0)
				return 0;
			label = 0;
		} else if ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
			   *s == '-') {
			if (++label > 63)
				return 0;
		} else {
			return 0;
		}
	}
	return label > 0;
}

int webhook_cert_opts_check(struct webhook_cert_opts *o, char *err, size_t errlen)
{
	if (o->validity_s < WEBHOOK_CERT_MIN_VALIDITY_S || o->validity_s > WEBHOOK_CERT_MAX_VALIDITY_S)
		return fail(err, errlen, "certificate validity must be between %ld s and %ld s",
			    WEBHOOK_CERT_MIN_VALIDITY_S, WEBHOOK_CERT_MAX_VALIDITY_S);
	long lifetime = o->ca_lifetime_s ? o->ca_lifetime_s : WEBHOOK_CA_LIFETIME_FACTOR * o->validity_s;
	if (lifetime > WEBHOOK_CA_MAX_LIFETIME_S && !o->ca_lifetime_s)
		lifetime = WEBHOOK_CA_MAX_LIFETIME_S;
	if (lifetime < 2 * o->validity_s || lifetime > WEBHOOK_CA_MAX_LIFETIME_S)
		return fail(err, errlen, "CA lifetime must be at least twice the certificate validity (%ld s) "
					 "and at most %ld s",
			    2 * o->validity_s, WEBHOOK_CA_MAX_LIFETIME_S);
	if (o->ndns + o->nips == 0 || o->ndns + o->nips > MAX_SAN_ENTRIES)
		return fail(err, errlen, "a serving certificate needs 1 to %d DNS names and IPs", MAX_SAN_ENTRIES);
	for (size_t i = 0; i < o->ndns; i++)
		if (!o->dns_names[i] || !dns_name_ok(o->dns_names[i]))
			return fail(err, errlen, "invalid DNS name for the serving certificate: \"%.64s\"",
				    o->dns_names[i] ? o->dns_names[i] : "");
	for (size_t i = 0; i < o->nips; i++) {
		ASN1_OCTET_STRING *ip = o->ips[i] ? a2i_IPADDRESS(o->ips[i]) : NULL;
		if (!ip)
			return fail(err, errlen, "invalid IP address for the serving certificate: \"%.64s\"",
				    o->ips[i] ? o->ips[i] : "");
		ASN1_OCTET_STRING_free(ip);
	}
	o->ca_lifetime_s = lifetime;
	return 0;
}

long webhook_ca_epoch(time_t now, long ca_lifetime_s)
{
	return now < 0 ? 0 : (long)(now / ca_lifetime_s);
}

/* HKDF-SHA256(ikm, salt, info) -> out[outlen]. Returns 0 or -1. */
static int hkdf_sha256(const unsigned char *ikm, size_t ikm_len, const char *salt, const char *info,
		       unsigned char *out, size_t outlen)
{
	EVP_PKEY_CTX *pctx = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, NULL);
	int ok = pctx && EVP_PKEY_derive_init(pctx) > 0 && EVP_PKEY_CTX_set_hkdf_md(pctx, EVP_sha256()) > 0 &&
		 EVP_PKEY_CTX_set1_hkdf_salt(pctx, (const unsigned char *)salt, (int)strlen(salt)) > 0 &&
		 EVP_PKEY_CTX_set1_hkdf_key(pctx, ikm, (int)ikm_len) > 0 &&
		 EVP_PKEY_CTX_add1_hkdf_info(pctx, (const unsigned char *)info, (int)strlen(info)) > 0 &&
		 EVP_PKEY_derive(pctx, out, &outlen) > 0;
	EVP_PKEY_CTX_free(pctx);
	return ok ? 0 : -1;
}

/* Sets x's serial to the 16 bytes in b, made positive and non-zero. */
static int set_serial(X509 *x, unsigned char b[16])
{
	b[0] = (unsigned char)((b[0] & 0x7f) | 0x40);
	BIGNUM *bn = BN_bin2bn(b, 16, NULL);
	ASN1_INTEGER *ai = bn ? BN_to_ASN1_INTEGER(bn, NULL) : NULL;
	int ok = ai && X509_set_serialNumber(x, ai) == 1;
	ASN1_INTEGER_free(ai);
	BN_free(bn);
	return ok ? 0 : -1;
}

/* Adds one extension written in OpenSSL's config syntax (a fixed literal
 * here, never user input). issuer is the signing certificate. */
static int add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
	X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	int ok = ext && X509_add_ext(x, ext, -1) == 1;
	X509_EXTENSION_free(ext);
	return ok ? 0 : -1;
}

/* Sets notBefore/notAfter. */
static int set_validity(X509 *x, time_t not_before, time_t not_after)
{
	return ASN1_TIME_set(X509_getm_notBefore(x), not_before) &&
		       ASN1_TIME_set(X509_getm_notAfter(x), not_after)
		   ? 0
		   : -1;
}

/* Sets a one-entry CN subject (and, for a CA, the same issuer). */
static int set_cn(X509 *x, const char *cn, int self_issued)
{
	X509_NAME *name = X509_NAME_new();
	int ok = name &&
		 X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0) == 1 &&
		 X509_set_subject_name(x, name) == 1 && (!self_issued || X509_set_issuer_name(x, name) == 1);
	X509_NAME_free(name);
	return ok ? 0 : -1;
}

void webhook_ca_release(struct webhook_ca *ca)
{
	X509_free(ca->cert);
	EVP_PKEY_free(ca->key); /* OpenSSL wipes the raw Ed25519 key on free */
	*ca = (struct webhook_ca){ 0 };
}

int webhook_ca_derive(struct webhook_ca *ca, const unsigned char *seal, size_t seal_len, long ca_lifetime_s,
		      long epoch, char *err, size_t errlen)
{
	*ca = (struct webhook_ca){ .epoch = epoch };
	if (!seal || seal_len == 0 || seal_len > 1 << 20 || ca_lifetime_s <= 0 || epoch < 0)
		return fail(err, errlen, "invalid CA derivation input");
	/* The lifetime is part of the info: replicas configured differently never
	 * share a key under certificates that say different things. */
	char info[96];
	snprintf(info, sizeof info, "epoch=%ld,lifetime=%ld", epoch, ca_lifetime_s);
	unsigned char seed[32];
	if (hkdf_sha256(seal, seal_len, CA_SALT, info, seed, sizeof seed) < 0) {
		OPENSSL_cleanse(seed, sizeof seed);
		return fail(err, errlen, "HKDF for the webhook CA failed");
	}
	ca->key = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, seed, sizeof seed);
	OPENSSL_cleanse(seed, sizeof seed);
	if (!ca->key)
		return fail(err, errlen, "cannot make the Ed25519 CA key");

	/* serial = SHA-256("serial" || public key || info)[0..16): a function of
	 * the seal key and the epoch, distinct per epoch. */
	unsigned char pub[32], digest[SHA256_DIGEST_LENGTH];
	size_t publen = sizeof pub;
	if (EVP_PKEY_get_raw_public_key(ca->key, pub, &publen) != 1 || publen != sizeof pub) {
		webhook_ca_release(ca);
		return fail(err, errlen, "cannot read the CA public key");
	}
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	int hashed = md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1 &&
		     EVP_DigestUpdate(md, "serial", 6) == 1 && EVP_DigestUpdate(md, pub, sizeof pub) == 1 &&
		     EVP_DigestUpdate(md, info, strlen(info)) == 1 && EVP_DigestFinal_ex(md, digest, NULL) == 1;
	EVP_MD_CTX_free(md);
	if (!hashed) {
		webhook_ca_release(ca);
		return fail(err, errlen, "cannot hash the CA serial");
	}

	time_t start = (time_t)epoch * ca_lifetime_s;
	ca->cert = X509_new();
	if (!ca->cert || X509_set_version(ca->cert, 2) != 1 || set_serial(ca->cert, digest) < 0 ||
	    set_cn(ca->cert, CA_SUBJECT_CN, 1) < 0 ||
	    set_validity(ca->cert, start - CA_BACKDATE_S, start + 2 * (time_t)ca_lifetime_s) < 0 ||
	    X509_set_pubkey(ca->cert, ca->key) != 1 ||
	    add_ext(ca->cert, ca->cert, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") < 0 ||
	    add_ext(ca->cert, ca->cert, NID_key_usage, "critical,keyCertSign") < 0 ||
	    add_ext(ca->cert, ca->cert, NID_subject_key_identifier, "hash") < 0 ||
	    X509_sign(ca->cert, ca->key, NULL) <= 0) {
		webhook_ca_release(ca);
		return fail(err, errlen, "cannot build the webhook CA certificate");
	}
	ca->epoch = epoch;
	return 0;
}

/* Appends x as PEM to out. */
static int append_pem(struct buf *out, X509 *x)
{
	BIO *bio = BIO_new(BIO_s_mem());
	char *p;
	int ok = bio && PEM_write_bio_X509(bio, x) == 1;
	long n = ok ? BIO_get_mem_data(bio, &p) : 0;
	ok = ok && n > 0 && buf_append(out, p, (size_t)n) == 0;
	BIO_free(bio);
	return ok ? 0 : -1;
}

/* Appends the PEM of CA(from..to) of keys->key[k] for k < nkeys. */
static int append_cas(struct buf *out, const struct sbx_seal_keys *keys, size_t nkeys, long ca_lifetime_s,
		      long from, long to, char *err, size_t errlen)
{
	if (keys->n == 0)
		return fail(err, errlen, "no seal key");
	for (size_t k = 0; k < nkeys && k < keys->n; k++) {
		for (long e = from > 0 ? from : 0; e <= to; e++) {
			struct webhook_ca ca;
			if (webhook_ca_derive(&ca, keys->key[k], keys->len[k], ca_lifetime_s, e, err, errlen) < 0)
				return -1;
			int rc = append_pem(out, ca.cert);
			webhook_ca_release(&ca);
			if (rc < 0)
				return fail(err, errlen, "caBundle too large");
		}
	}
	return 0;
}

int webhook_ca_bundle(struct buf *out, const struct sbx_seal_keys *keys, long ca_lifetime_s, long epoch,
		      char *err, size_t errlen)
{
	return append_cas(out, keys, keys->n, ca_lifetime_s, epoch - 1, epoch + 1, err, errlen);
}

int webhook_ca_required(struct buf *out, const struct sbx_seal_keys *keys, long ca_lifetime_s, long epoch,
			char *err, size_t errlen)
{
	return append_cas(out, keys, 1, ca_lifetime_s, epoch, epoch + 1, err, errlen);
}

/* A fresh ECDSA P-256 key. */
static EVP_PKEY *ec_keygen(void)
{
	EVP_PKEY *key = NULL;
	EVP_PKEY_CTX *kctx = EVP_PKEY_CTX_new_id(EVP_PKEY_EC, NULL);
	if (!kctx || EVP_PKEY_keygen_init(kctx) <= 0 ||
	    EVP_PKEY_CTX_set_ec_paramgen_curve_nid(kctx, NID_X9_62_prime256v1) <= 0 ||
	    EVP_PKEY_keygen(kctx, &key) <= 0)
		key = NULL;
	EVP_PKEY_CTX_free(kctx);
	return key;
}

/* Appends one GENERAL_NAME of type (GEN_DNS or GEN_IPADD) taking value. On
 * failure value is freed. */
static int push_name(GENERAL_NAMES *gens, int type, ASN1_STRING *value)
{
	GENERAL_NAME *g = value ? GENERAL_NAME_new() : NULL;
	if (!g) {
		ASN1_STRING_free(value);
		return -1;
	}
	GENERAL_NAME_set0_value(g, type, value);
	if (sk_GENERAL_NAME_push(gens, g) <= 0) {
		GENERAL_NAME_free(g);
		return -1;
	}
	return 0;
}

/* Adds the subjectAltName extension, built as GENERAL_NAMEs (not through the
 * config syntax, so no name can smuggle in another entry). */
static int add_sans(X509 *x, const struct webhook_cert_opts *o)
{
	GENERAL_NAMES *gens = sk_GENERAL_NAME_new_null();
	int ok = gens != NULL;
	for (size_t i = 0; ok && i < o->ndns; i++) {
		ASN1_IA5STRING *s = ASN1_IA5STRING_new();
		if (s && ASN1_STRING_set(s, o->dns_names[i], (int)strlen(o->dns_names[i])) != 1) {
			ASN1_IA5STRING_free(s);
			s = NULL;
		}
		ok = push_name(gens, GEN_DNS, s) == 0;
	}
	for (size_t i = 0; ok && i < o->nips; i++)
		ok = push_name(gens, GEN_IPADD, a2i_IPADDRESS(o->ips[i])) == 0;
	ok = ok && X509_add1_ext_i2d(x, NID_subject_alt_name, gens, 0, X509V3_ADD_DEFAULT) == 1;
	GENERAL_NAMES_free(gens);
	return ok ? 0 : -1;
}

void webhook_serving_release(struct webhook_serving *s)
{
	X509_free(s->cert);
	EVP_PKEY_free(s->key); /* OpenSSL clears the private scalar on free */
	*s = (struct webhook_serving){ 0 };
}

int webhook_serving_issue(struct webhook_serving *s, const struct webhook_ca *ca,
			  const struct webhook_cert_opts *o, time_t now, char *err, size_t errlen)
{
	*s = (struct webhook_serving){ .epoch = ca->epoch };
	unsigned char serial[16];
	if (RAND_bytes(serial, sizeof serial) != 1)
		return fail(err, errlen, "no randomness for a certificate serial");
	s->key = ec_keygen();
	if (!s->key)
		return fail(err, errlen, "cannot make the serving key");
	long backdate = o->validity_s < WEBHOOK_CERT_BACKDATE_S ? o->validity_s : WEBHOOK_CERT_BACKDATE_S;
	s->not_after = now + o->validity_s;
	s->renew_at = now + (o->validity_s * 2) / 3;
	const char *cn = o->ndns ? o->dns_names[0] : SERVING_DEFAULT_CN;
	s->cert = X509_new();
	if (!s->cert || X509_set_version(s->cert, 2) != 1 || set_serial(s->cert, serial) < 0 ||
	    set_cn(s->cert, strlen(cn) <= 64 ? cn : SERVING_DEFAULT_CN, 0) < 0 ||
	    X509_set_issuer_name(s->cert, X509_get_subject_name(ca->cert)) != 1 ||
	    set_validity(s->cert, now - backdate, s->not_after) < 0 || X509_set_pubkey(s->cert, s->key) != 1 ||
	    add_ext(s->cert, ca->cert, NID_basic_constraints, "critical,CA:FALSE") < 0 ||
	    add_ext(s->cert, ca->cert, NID_key_usage, "critical,digitalSignature") < 0 ||
	    add_ext(s->cert, ca->cert, NID_ext_key_usage, "serverAuth") < 0 ||
	    add_ext(s->cert, ca->cert, NID_authority_key_identifier, "keyid:always") < 0 ||
	    add_sans(s->cert, o) < 0 || X509_sign(s->cert, ca->key, NULL) <= 0) {
		webhook_serving_release(s);
		return fail(err, errlen, "cannot build the serving certificate");
	}
	return 0;
}

/* Writes one PEM file atomically: a temporary file in dir, fsync, rename over
 * dir/name. key != NULL writes the private key (mode 0600), else cert. */
static int write_pem_file(const char *dir, const char *name, X509 *cert, EVP_PKEY *key, char *err,
			  size_t errlen)
{
	char *tmp = xasprintf("%s/.%s.XXXXXX", dir, name);
	char *dst = xasprintf("%s/%s", dir, name);
	int rc = -1;
	int fd = mkstemp(tmp); /* mode 0600 */
	if (fd < 0) {
		fail(err, errlen, "cannot create a file in %s: %s", dir, strerror(errno));
		goto out;
	}
	/* An fd BIO writes straight through: no copy of the key lingers in a
	 * stdio buffer. */
	BIO *bio = BIO_new_fd(fd, BIO_NOCLOSE);
	int ok = bio && (key ? PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0, NULL, NULL)
			     : PEM_write_bio_X509(bio, cert)) == 1;
	BIO_free(bio);
	if (ok && !key && fchmod(fd, 0644) < 0)
		ok = 0;
	if (ok && fsync(fd) < 0)
		ok = 0;
	if (close(fd) < 0)
		ok = 0;
	if (!ok || rename(tmp, dst) < 0) {
		fail(err, errlen, "cannot write %s: %s", dst, errno ? strerror(errno) : "encoding failed");
		unlink(tmp);
		goto out;
	}
	rc = 0;
out:
	free(tmp);
	free(dst);
	return rc;
}

/* mkdir -p with mode 0700 for the directories it creates. */
static int mkdir_p(const char *dir)
{
	char *p = xstrdup(dir);
	int rc = 0;
	for (char *s = p + 1; rc == 0; s++) {
		if (*s == '/' || *s == '\0') {
			char c = *s;
			*s = '\0';
			if (mkdir(p, 0700) < 0 && errno != EEXIST)
				rc = -1;
			*s = c;
			if (!c)
				break;
		}
	}
	free(p);
	return rc;
}

int webhook_serving_write(const struct webhook_serving *s, const char *dir, char *err, size_t errlen)
{
	if (mkdir_p(dir) < 0)
		return fail(err, errlen, "cannot create the cert dir %s: %s", dir, strerror(errno));
	/* Key first: a reader that catches the new key with the old certificate
	 * sees a mismatched pair and keeps what it serves until the certificate
	 * follows a moment later. */
	errno = 0;
	if (write_pem_file(dir, "tls.key", NULL, s->key, err, errlen) < 0)
		return -1;
	errno = 0;
	return write_pem_file(dir, "tls.crt", s->cert, NULL, err, errlen);
}

void webhook_cert_fingerprint(X509 *cert, char out[96])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	out[0] = '\0';
	if (X509_digest(cert, EVP_sha256(), md, &n) != 1 || n != 32)
		return;
	for (unsigned i = 0; i < n; i++)
		snprintf(out + 3 * i, 4, "%02X%s", md[i], i + 1 < n ? ":" : "");
}

/* 1 iff the base64 PEM text b64 holds every certificate PEM block of required. */
static int bundle_holds(const char *b64, const char *required)
{
	static const char end_marker[] = "-----END CERTIFICATE-----\n";
	size_t n = strlen(b64);
	if (n == 0 || n % 4 || n > (size_t)INT_MAX)
		return 0;
	char *pem = xmalloc(n / 4 * 3 + 1);
	int len = EVP_DecodeBlock((unsigned char *)pem, (const unsigned char *)b64, (int)n);
	int ok = len >= 0;
	if (ok) {
		pem[len] = '\0'; /* padding decodes to NULs, which end the text early: harmless */
		for (const char *p = required; ok && *p;) {
			const char *e = strstr(p, end_marker);
			size_t blen = e ? (size_t)(e - p) + sizeof end_marker - 1 : strlen(p);
			char *block = xstrndup(p, blen);
			ok = strstr(pem, block) != NULL;
			free(block);
			p += blen;
		}
	}
	free(pem);
	return ok;
}

int webhook_cabundle_apply(cJSON *config, const char *want, const char *required)
{
	int changed = 0;
	const cJSON *hooks = cJSON_GetObjectItemCaseSensitive(config, "webhooks");
	const cJSON *h;
	cJSON_ArrayForEach(h, hooks)
	{
		cJSON *cc = cJSON_GetObjectItemCaseSensitive(h, "clientConfig");
		if (!cJSON_IsObject(cc))
			continue;
		const cJSON *cur = cJSON_GetObjectItemCaseSensitive(cc, "caBundle");
		const char *s = cJSON_IsString(cur) ? cur->valuestring : "";
		if (!strcmp(s, want) || bundle_holds(s, required))
			continue;
		cJSON_DeleteItemFromObjectCaseSensitive(cc, "caBundle");
		cJSON_AddItemToObject(cc, "caBundle", cJSON_CreateString(want));
		changed++;
	}
	return changed;
}
