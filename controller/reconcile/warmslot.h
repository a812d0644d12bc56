/* Warm slots: an owner's maxWarm held across racing replicas (docs/api.md
 * "Quota slots").
 *
 * Under a quota of warm pods, a pool's warm pod takes one of its owner's
 * warm slots before it is created: a SandboxClaim of state WarmSlot named
 * sbxw-<owner key>-<n>, n < maxWarm, naming the pod, sealed like every
 * claim record and owned by the pool (the garbage collector deletes it with
 * the pool). The API server creates a name once, so replicas that each know
 * only their own creates in flight never hold more than maxWarm slots
 * together, nor create more warm pods through them.
 *
 * A warm pod a Sandbox took is active (a quota slot counts it, if
 * maxActive applies): its warm slot is taken over by the next warm pod of
 * the owner that needs one (one guarded update instead of a delete and a
 * create, and nothing written on the take itself). A slot is deleted when
 * the controller deletes its pod, and by the reconcile of any pool of the
 * owner when its pod, read live once the slot is older than a create in
 * flight (WARM_SLOT_GRACE_S), is neither a warm member of the slot's pool
 * nor a live sandbox pod. Two slots of one pod (a lost answer, racing replicas): the
 * lower number is kept. */
#ifndef SBX_RECONCILE_WARMSLOT_H
#define SBX_RECONCILE_WARMSLOT_H

#include <stddef.h>

#include <cjson/cJSON.h>

struct sbx_controller;

/* The pool a warm pod is made for. */
struct sbx_warm_for {
	const char *ns, *pool, *pool_uid, *owner; /* owner NULL: none */
	const char *fp;				  /* the pool's template fingerprint */
};

/* Before pod of pool p is created: 1 when it holds a warm slot (one in the
 * cache naming it, one whose pod a Sandbox took taken over, or a new name;
 * its name into slot, slotlen, and its uid into uid, 64 bytes, "" when not
 * known), or when no limit of warm pods applies (slot ""); 0 when every
 * slot of the owner is held (why says whose, naming the limit); -1 when
 * the API cannot be asked now. */
int sbx_warm_slot_take(struct sbx_controller *c, const struct sbx_warm_for *p, const char *pod, char *slot,
		       size_t slotlen, char uid[64], char *why, size_t whylen);

/* Deletes warm slot name of ns (uid "": any), taken for a pod never made. */
void sbx_warm_slot_drop(struct sbx_controller *c, const char *ns, const char *name, const char *uid);

/* The pod of owner (NULL: none) in ns was deleted: the warm slots the cache
 * shows naming it are deleted. */
void sbx_warm_slot_free(struct sbx_controller *c, const char *ns, const char *owner, const char *pod);

/* The warm slots of p's owner, p's and its other pools', whose pod is not
 * a warm member of the slot's pool (members: the cache's pods of p):
 * deleted, once older than a create in flight, when the pod read live is
 * gone, going or finished (a live sandbox pod's slot waits to be taken
 * over); a pod's second slot deleted. Returns the reconcile's result: 0, -1
 * (a read or a delete failed), or the milliseconds until a young slot may
 * go. */
int sbx_warm_slot_collect(struct sbx_controller *c, const struct sbx_warm_for *p, const cJSON *members);

/* 1 when obj (a SandboxClaim labelled with a quota owner) is named as a warm
 * slot of its label's key. */
int sbx_warm_slot_is(const cJSON *obj);

/* A warm slot added (d 1) or deleted (d -1): a freed one sends the owner's
 * pools of its namespace to look again (one may make a pod now). */
void sbx_warm_slot_event(struct sbx_controller *c, const cJSON *obj, int d);

#endif
