/* Per-owner quotas (contract section 10; docs/api.md "Quota slots"): which
 * limits apply to a workspace owner of a namespace, the owner's key, the
 * names of its quota slots, and what the cache keeps of a SandboxQuota.
 * Pure: the counting and the writes are reconcile/quota.h's.
 *
 * Which quota applies to (namespace, owner): the SandboxQuotas of the
 * namespace whose spec.owner is the owner; if there are none, those without
 * spec.owner (every owner without a quota of its own, and ownerless
 * Sandboxes, each counted on its own as one owner); if there are none, the
 * controller's configured default (sbx_config.quota); else no limit. Several
 * quotas of one tier: the lowest limit of each kind holds, and Reject when
 * any says Reject.
 *
 * An owner's active sandboxes are bounded by its quota slots: SandboxClaims
 * named sbxq-<owner key>-<n> for n < maxActive, state Slot, each held by one
 * generation of a key (one intent, however many Sandboxes share it). A
 * create of a slot name is atomic in the API server, so replicas that race
 * for a slot never both get it, whatever their caches show. */
#ifndef SBX_SANDBOX_QUOTA_H
#define SBX_SANDBOX_QUOTA_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "sandbox/config.h"

#define SBX_QUOTA_KIND "SandboxQuota"
#define SBX_QUOTA_PLURAL "sandboxquotas"
/* The label of a quota slot: its owner's key (and the slot cache's index). */
#define SBX_LABEL_QUOTA_OWNER "sandbox.dev/quota-owner"
/* The label the quota trimmer sets: the namespace (the quota cache's index). */
#define SBX_QUOTA_NS_INDEX "sandbox.dev/quota-namespace"
/* The most a quota may allow of either kind (the CRD's maximum). */
#define SBX_QUOTA_MAX 10000

/* The limits that hold for one owner of a namespace. */
struct sbx_quota_limits {
	int has_active;
	long max_active;
	int has_warm;
	long max_warm;
	int reject;	  /* mode Reject (else Queue) */
	char source[320]; /* "SandboxQuota <ns>/<name>" or "the controller's default quota" */
};

/* The limits of owner (NULL: ownerless Sandboxes) among quotas, the
 * namespace's cached SandboxQuotas (an array; NULL: none), falling back to
 * cfg->quota; into out. Returns 1 when any limit applies, 0 when none does
 * (out then says no limit). */
int sbx_quota_resolve(const cJSON *quotas, const char *ns, const char *owner, const struct sbx_config *cfg,
		      struct sbx_quota_limits *out);

/* 1 when the cached SandboxQuota q governs owner (NULL: ownerless) as its
 * tier in quotas: its own, or the namespace's when the owner has none. */
int sbx_quota_governs(const cJSON *quotas, const cJSON *q, const char *owner);

/* The key of owner (NULL: the ownerless) in ns: the first 32 hex digits of
 * SHA-256(lp("sandbox.dev/quota/v1") || lp(ns) || 0x01 || lp(owner)), or
 * with 0x00 and no owner; into out (33 bytes). Returns 0, or -1. */
int sbx_quota_owner_key(const char *ns, const char *owner, char out[33]);

/* The name of slot n of an owner key: "sbxq-<key>-<n>", into out. */
void sbx_quota_slot_name(const char *key, long n, char *out, size_t outlen);
/* The slot number of name for key, or -1 when it is not one of key's. */
long sbx_quota_slot_index(const char *name, const char *key);
/* The same for warm slots (maxWarm): "sbxw-<key>-<n>". */
void sbx_quota_warm_slot_name(const char *key, long n, char *out, size_t outlen);
long sbx_quota_warm_slot_index(const char *name, const char *key);

/* The words of a full quota, naming the owner (NULL: ownerless), the count
 * held, the limit, the namespace, the quota and its mode, and what follows
 * (reject: no sandbox for the intent; else it waits), into msg. */
void sbx_quota_full_message(const struct sbx_quota_limits *q, const char *ns, const char *owner, long held,
			    int reject, char *msg, size_t msglen);

/* Admission's early answer for a new Sandbox of intent digest (its scope
 * digest) of owner (NULL: ownerless) in ns, given the namespace's cached
 * quotas and the cached quota slots of the owner's key (arrays; NULL:
 * none): 1 with msg when a Reject-mode quota is full and no slot holds the
 * intent already (a retry of an intent is never refused), else 0. Advisory:
 * the controller's bind is the authority. */
int sbx_quota_refuses(const cJSON *quotas, const cJSON *slots, const char *ns, const char *owner,
		      const char *digest, const struct sbx_config *cfg, char *msg, size_t msglen);

/* The informer's trimmer for SandboxQuotas: name, namespace, uid,
 * resourceVersion, generation, creationTimestamp, deletionTimestamp, the
 * spec's owner, maxActive, maxWarm and mode (each checked and bounded), and
 * the namespace as the SBX_QUOTA_NS_INDEX label. Returns a new object
 * (caller frees); never NULL. */
cJSON *sbx_quota_trim(const cJSON *obj);

#endif
