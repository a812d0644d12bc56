/* Per-owner quotas in the controller (contract section 10; the rules and
 * names are sandbox/quota.h's; docs/api.md "Quota slots").
 *
 * The bind is the authority. Before a pod becomes active for a generation
 * of a key (a cold create, a warm take, a resume's re-create), the
 * generation must hold one of its owner's quota slots: a SandboxClaim
 * sbxq-<owner key>-<n>, n < maxActive, state Slot, naming the generation.
 * The create of a slot name succeeds once in the API server, so racing
 * replicas and racing admissions never hold more than maxActive slots; a
 * generation's other Sandboxes (retries of one intent) find its slot and
 * take none. A slot is owned by the Sandbox that took it until the pod
 * exists, then by the pod: it goes with the pod (the garbage collector; the
 * controller deletes it as soon as it sees the pod gone), and a suspended
 * Sandbox holds none, so its resume needs one again.
 *
 * Arrival order: the Sandboxes of an owner that want a slot (new, waiting
 * with QuotaWaiting, or a resume; not one unbound for another reason) are
 * ordered by creationTimestamp, then name; every replica sees the same
 * order from its cache. A Sandbox takes a free slot only when fewer intents
 * are ahead of it (those holding a slot aside) than slots are free, so a
 * freed slot goes to the longest waiting; a freed slot wakes the first
 * waiters.
 *
 * What the cache sees per owner key (slots held, warm pods, suspended and
 * waiting Sandboxes) is kept here from the informers' events, for the
 * quotas' status and the waiting order. */
#ifndef SBX_RECONCILE_QUOTA_H
#define SBX_RECONCILE_QUOTA_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "reconcile/view.h"

struct sbx_controller;
struct sbx_quota_state;

/* Returns new empty bookkeeping (caller frees with sbx_quota_state_free). */
struct sbx_quota_state *sbx_quota_state_new(void);
void sbx_quota_state_free(struct sbx_quota_state *s);

/* Informer events: a Sandbox added or changed (obj) or deleted (gone 1); a
 * quota slot added (d 1) or deleted (d -1); a warm pod added or deleted; a
 * sandbox pod deleted or finished (its slot is freed); a SandboxQuota changed. Each
 * keeps the bookkeeping and queues what must look again. */
void sbx_quota_on_sandbox(struct sbx_controller *c, const cJSON *obj, int gone);
void sbx_quota_on_slot(struct sbx_controller *c, const cJSON *slot, int d);
void sbx_quota_on_warm(struct sbx_controller *c, const cJSON *pod, int d);
void sbx_quota_on_pod_gone(struct sbx_controller *c, const cJSON *pod);
/* A sandbox pod added or changed (gone 0) or deleted (gone 1): the owner's
 * active pods, which count whether a slot holds them or not (one made
 * before its owner's quota applied holds none). */
void sbx_quota_on_pod(struct sbx_controller *c, const cJSON *pod, int gone);
void sbx_quota_on_quota(struct sbx_controller *c, const cJSON *quota);

enum sbx_quota_verdict { SBX_QUOTA_ADMIT,  /* no limit, or the generation holds a slot */
			 SBX_QUOTA_WAIT,   /* Queue: no slot for it now */
			 SBX_QUOTA_REJECT, /* Reject: no slot */
			 SBX_QUOTA_ERROR };

/* Whether v's generation of claim name claim may have an active pod now:
 * it holds a slot of its owner's quota (found, or taken now), or no limit
 * applies. resume: v resumes a suspended generation (it waits, never is
 * rejected). Otherwise msg (msglen) says why, naming the owner, the limit,
 * the count and the quota; on SBX_QUOTA_ERROR, v->retry_after_ms may be set. */
enum sbx_quota_verdict sbx_quota_admit(struct sbx_controller *c, struct sbx_view *v, const char *claim, int resume,
				       char *msg, size_t msglen);

/* sbx_quota_admit as a resume (v waits, never is rejected) for v's
 * generation claim: 1 when admitted; else 0, v's status says it waits
 * (phase Pending, Bound=False/QuotaWaiting) and *r is the reconcile's
 * result (REQUEUE_QUOTA_MS, or -1 when the quota or the status could not be
 * read or written). */
int sbx_quota_wait_for_slot(struct sbx_controller *c, struct sbx_view *v, const char *claim, int *r);

/* 1 when v's claims go through the generation's record (a Reject-mode quota
 * applies to its owner): a refusal's stored outcome and another replica's
 * claim of the same generation then exclude each other. */
int sbx_quota_claims_through_record(struct sbx_controller *c, const struct sbx_view *v);

/* v's refusal in mode Reject: the stored outcome of its generation (a
 * Rejected record of claim, when v has a key) and its status (phase
 * Rejected, Bound=False/QuotaExceeded with msg, an event). Returns the
 * reconcile's result: 0, a delay (a record of the generation stood: look
 * again), or -1. */
int sbx_quota_reject(struct sbx_controller *c, struct sbx_view *v, const char *claim, const char *msg);

/* The words of v's own refusal (v is the Sandbox a Rejected record of its
 * generation names, its status not written yet: another replica's refusal,
 * or a lost answer of ours): its owner's quota as it stands now, into msg.
 * 0, or -1 when no limit of active sandboxes applies now. */
int sbx_quota_refusal_message(struct sbx_controller *c, const struct sbx_view *v, char *msg, size_t msglen);

/* v is bound to pod, its generation's claim name claim: the generation's
 * slot (the lowest, if racing replicas took two) becomes the pod's, so it
 * goes with the pod, and any other slot of the generation is deleted.
 * Nothing is written when that holds already. */
void sbx_quota_bound(struct sbx_controller *c, const struct sbx_view *v, const char *claim, const cJSON *pod);

/* v will not get a pod for now (suspended or refused before one existed):
 * the slots v took and no pod owns yet are deleted. */
void sbx_quota_release_pending(struct sbx_controller *c, const struct sbx_view *v);
/* v, bound to a generation and now suspended or expired, holds a slot only
 * through its pod: the slots it took for a resume whose pod was never made
 * (the controller stopped in between, the create failed) are deleted, once
 * the pod is read to be absent and v, read live, to be still suspended or
 * expired (a resume started meanwhile keeps its slot). Reads nothing when
 * the cache shows v no such slot. */
void sbx_quota_release_unused(struct sbx_controller *c, const struct sbx_view *v);

/* How many more warm pods owner (NULL: none) may have in ns, every pool of
 * the owner's counted (the caches' pods not being deleted): 1 with *room
 * (negative when over the limit, e.g. after racing replicas both filled)
 * and why saying whose, or 0 when no limit applies. What in_flight(ctx)
 * returns (NULL: nothing) counts too: creates whose pods the caches do not
 * show yet. It is called only when a limit applies, and before the caches
 * are read, so a pod that leaves flight meanwhile is in them. */
int sbx_quota_warm_room(struct sbx_controller *c, const char *ns, const char *owner, long (*in_flight)(void *ctx),
			void *ctx, long *room, char *why, size_t whylen);

/* The work queue's quota items: a SandboxQuota's status (what it counts)
 * written when it changed; a quota slot whose pod is gone deleted. Return
 * the reconcile's result. */
int sbx_quota_reconcile(struct sbx_controller *c, const char *ns, const char *name);
int sbx_quota_collect_slot(struct sbx_controller *c, const char *ns, const char *name);

#endif
